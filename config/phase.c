/* SPDX-License-Identifier: MIT */
/* phase.c - [phase.NAME] sections: a table of their keys (marker and schedule keys under their
 * own names), parsing through config.c's sp_cfg_set on a scratch configuration (so values, ranges
 * and messages are those of [marker] and [schedule]), the checks between phases and the printer.
 * Runs inside the profiled process: never prints or exits; problems become sp_cfg_errors lines. */
#include <ctype.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include "config.h"
#include "phase.h"

/* The keys of a [phase.NAME] section: the section config.c parses each with, and its name there. */
static const struct {
	const char *section, *name;
} pkeys[SP_PHASE_NKEYS] = {
	{ "marker", "kind" },
	{ "marker", "pattern" },
	{ "marker", "every" },
	{ "schedule", "skip_first" },
	{ "schedule", "skip_first_wait" },
	{ "schedule", "wait" },
	{ "schedule", "warmup" },
	{ "schedule", "active" },
	{ "schedule", "repeat" },
	{ "schedule", "profiling_frequency" },
};
enum { PK_KIND, PK_PATTERN, PK_EVERY };

/* A configuration to parse one phase's values in (static: the configuration is loaded by one
 * thread at a time, and it is too large for a small stack). */
static struct sp_config scratch;

/* Appends one formatted message to errs (sp_cfg_error). Returns 1. */
__attribute__((format(printf, 2, 3))) static int perr(struct sp_cfg_errors *errs, const char *fmt, ...)
{
	char msg[sizeof(errs->msg[0])];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return sp_cfg_error(errs, msg);
}

/* "ORIGIN:LINE", "ORIGIN" or "built-in defaults" into buf. Can't fail. */
static const char *where(char *buf, size_t len, const char *origin, int line)
{
	if (!*origin)
		origin = "built-in defaults";
	snprintf(buf, len, line > 0 ? "%s:%d" : "%s", origin, line);
	return buf;
}

static int pkey_index(const char *key)
{
	for (int i = 0; i < SP_PHASE_NKEYS; i++)
		if (!strcasecmp(key, pkeys[i].name))
			return i;
	return -1;
}

/* 1 if name is a valid phase name: 1..31 of [A-Za-z0-9_-]. */
static int good_name(const char *name)
{
	size_t n = strlen(name);
	return n >= 1 && n < SP_PHASE_NAME &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789_-") == n;
}

/* Copies a phase's marker and schedule into scratch (over the built-in defaults) or back. */
static void to_scratch(const struct sp_phase *p)
{
	sp_cfg_defaults(&scratch);
	scratch.schedule = p->schedule;
	scratch.marker_kind = (enum sp_marker_kind)p->marker_kind;
	memcpy(scratch.marker_pattern, p->marker_pattern, sizeof(scratch.marker_pattern));
	scratch.marker_every = p->marker_every;
}

static void from_scratch(struct sp_phase *p)
{
	p->schedule = scratch.schedule;
	p->marker_kind = (int)scratch.marker_kind;
	memcpy(p->marker_pattern, scratch.marker_pattern, sizeof(p->marker_pattern));
	p->marker_every = scratch.marker_every;
}

/* The phase named name, created with the built-in defaults if new; NULL if the table is full. */
static struct sp_phase *get_phase(struct sp_config *cfg, const char *name)
{
	struct sp_phases *ph = &cfg->phases;
	for (int i = 0; i < ph->n; i++)
		if (!strcasecmp(ph->p[i].name, name))
			return &ph->p[i];
	if (ph->n == SP_MAX_PHASES)
		return NULL;
	struct sp_phase *p = &ph->p[ph->n++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	sp_cfg_defaults(&scratch);
	from_scratch(p);
	return p;
}

int sp_phase_is_section(const char *section)
{
	return !strncasecmp(section, "phase.", 6);
}

/* Returns 0 or 1 (one error added); the phase keeps its old value on error. */
int sp_phase_set(struct sp_config *cfg, const char *section, const char *key, const char *value, const char *origin,
		 int line, struct sp_cfg_errors *errs)
{
	char w[300], msg[sizeof(errs->msg[0])];
	const char *name = section + 6;
	int k = pkey_index(key);
	struct sp_phase *p;
	struct sp_cfg_errors one = { 0 };

	where(w, sizeof(w), origin ? origin : "", line);
	if (!good_name(name))
		return perr(errs,
			    "%s: [%s]: bad phase name '%.40s' (allowed: [phase.NAME], NAME of 1 to %d letters, "
			    "digits, '_' or '-')",
			    w, section, name, SP_PHASE_NAME - 1);
	if (k < 0)
		return perr(errs,
			    "%s: [%s] %s: unknown key (allowed: kind, pattern, every, skip_first, "
			    "skip_first_wait, wait, warmup, active, repeat, profiling_frequency)",
			    w, section, key);
	if (!(p = get_phase(cfg, name)))
		return perr(errs, "%s: [%s]: too many phases (allowed: at most %d [phase.NAME] sections)", w, section,
			    SP_MAX_PHASES);
	if (!p->first[0] && !p->first_line) {
		snprintf(p->first, sizeof(p->first), "%s", origin ? origin : "");
		p->first_line = line;
	}
	if (line > 0 && p->seen[k])
		return perr(errs, "%s: [%s] %s: set twice, first at line %d (allowed: once per file)", w, section,
			    pkeys[k].name, p->seen[k]);
	to_scratch(p);
	if (sp_cfg_set(&scratch, pkeys[k].section, pkeys[k].name, value, origin, line, &one) == 0) {
		from_scratch(p);
		snprintf(p->origin[k].name, sizeof(p->origin[k].name), "%s", origin ? origin : "");
		p->origin[k].line = line;
		if (line > 0)
			p->seen[k] = line;
		return 0;
	}
	/* config.c's message names [marker] or [schedule]: name the phase's section instead */
	const char *tag = strstr(one.msg[0], "] ");
	snprintf(msg, sizeof(msg), "%s", one.msg[0]);
	if (tag && (tag = strchr(one.msg[0], '[')))
		snprintf(msg, sizeof(msg), "%.*s[%s] %s", (int)(tag - one.msg[0]), one.msg[0], section,
			 strstr(tag, "] ") + 2);
	return perr(errs, "%s", msg);
}

/* This function can't fail. */
void sp_phase_new_file(struct sp_config *cfg)
{
	for (int i = 0; i < cfg->phases.n; i++)
		memset(cfg->phases.p[i].seen, 0, sizeof(cfg->phases.p[i].seen));
}

/* Where key k of p was set, or where the phase was first set for a key left at its default. */
static const char *blame(char *buf, size_t len, const struct sp_phase *p, int k)
{
	if (k >= 0 && p->origin[k].name[0])
		return where(buf, len, p->origin[k].name, p->origin[k].line);
	return where(buf, len, p->first, p->first_line);
}

/* Returns the number of errors added. */
int sp_phase_finish(struct sp_config *cfg, struct sp_cfg_errors *errs)
{
	struct sp_phases *ph = &cfg->phases;
	char err[256], w[300], name[32], why[300];
	int n = 0, autos = 0;

	if (!ph->n)
		return 0;
	/* the plain sections would be silently ignored beside phases: refuse them */
	for (int i = 0; i < SP_PHASE_NKEYS; i++) {
		const struct sp_cfg_origin *o = sp_cfg_origin_of(cfg, pkeys[i].section, pkeys[i].name);
		if (o && o->name[0])
			n += perr(errs,
				  "%s: [%s] %s: not used with [phase.NAME] sections (allowed: the key in each "
				  "phase's section)",
				  where(w, sizeof(w), o->name, o->line), pkeys[i].section, pkeys[i].name);
	}
	for (int i = 0; i < ph->n; i++) {
		struct sp_phase *p = &ph->p[i];
		const char *key;
		if (sp_schedule_finish(&p->schedule, err, sizeof(err)) < 0) {
			snprintf(name, sizeof(name), "%.*s", (int)strcspn(err, ":"), err);
			int k = pkey_index(name);
			n += perr(errs, "%s: [phase.%s] %s", blame(w, sizeof(w), p, k), p->name, err);
		}
		if (sp_marker_check(p->marker_kind, p->marker_pattern, "", &key, why, sizeof why))
			n += perr(errs, "%s: [phase.%s] %s: %s",
				  blame(w, sizeof(w), p, key[0] == 'k' ? PK_KIND : PK_PATTERN), p->name, key, why);
		/* phases take turns where a step begins; an optimizer step is where one ends */
		if (p->marker_kind == SP_MARK_OPTIMIZER)
			n += perr(errs,
				  "%s: [phase.%s] kind: optimizer in a phase (allowed: kind = python with the "
				  "function of the phase's step, such as __main__:train_step: phases take turns "
				  "where their steps begin, and an optimizer step is where one ends)",
				  blame(w, sizeof(w), p, PK_KIND), p->name);
		if (p->marker_kind == SP_MARK_AUTO && ++autos == 2)
			n += perr(errs,
				  "%s: [phase.%s] kind: a second phase with kind = auto (allowed: at most one "
				  "phase finds its steps automatically; give the others an explicit marker)",
				  blame(w, sizeof(w), p, PK_KIND), p->name);
	}
	return n;
}

/* This function can't fail. */
void sp_phase_print(const struct sp_config *cfg, FILE *f)
{
	for (int i = 0; i < cfg->phases.n; i++) {
		const struct sp_phase *p = &cfg->phases.p[i];
		const struct sp_schedule *s = &p->schedule;
		fprintf(f, "\n[phase.%s]\nkind = %s\npattern = \"%s\"\nevery = %d\n", p->name,
			sp_marker_kind_name((enum sp_marker_kind)p->marker_kind), p->marker_pattern, p->marker_every);
		fprintf(f,
			"skip_first = %lld\nskip_first_wait = %s\nwait = %lld\nwarmup = %lld\nactive = %lld\n"
			"repeat = %lld\nprofiling_frequency = %lld\n",
			(long long)s->skip_first, s->skip_first_wait ? "true" : "false", (long long)s->wait,
			(long long)s->warmup, (long long)s->active, (long long)s->repeat, (long long)s->frequency);
	}
}

/* This function can't fail. */
const struct sp_phase *sp_phase_find(const struct sp_config *cfg, const char *name)
{
	for (int i = 0; i < cfg->phases.n; i++)
		if (!strcasecmp(cfg->phases.p[i].name, name))
			return &cfg->phases.p[i];
	return NULL;
}
