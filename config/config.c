/* SPDX-License-Identifier: MIT */
/* config.c - the effective configuration: one table of every key (section, name, type, range,
 * default), the INI reader (inih), STEPPROF_<SECTION>_<KEY> overrides, the cross-key checks and
 * the printer. Runs inside the profiled process: it never prints or exits; every problem
 * becomes one "ORIGIN[:LINE]: [section] key: problem (allowed: ...)" line in sp_cfg_errors. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <ini.h>
#include "config.h"
#include "config_impl.h"
#include "run.h"

static const char *const kind_names[] = { "auto",           "kernel",    "api",    "nccl", "nvtx",
					  "profiler_range", "optimizer", "python", NULL };
#define NKINDS (sizeof(kind_names) / sizeof(kind_names[0]) - 1)
static const char *const detach_names[] = { "auto", "always", "never", NULL };
static const char *const learn_names[] = { "cupti", "hooks", "auto", NULL };

#define FIELD(m) offsetof(struct sp_config, m), sizeof(((struct sp_config *)0)->m)
#define SCHED(m, min, def) { "schedule", #m, K_INT, FIELD(schedule.m), min, SP_SCHEDULE_MAX, def }
#define ACT(m, def) { "activities", #m, K_BOOL, FIELD(m), 0, 1, def }
#define KIB 1024LL
#define MIB (1024 * KIB)
#define GIB (1024 * MIB)
#define TIB (1024 * GIB)

static const struct key keys[] = {
	{ "profile", "enabled", K_BOOL, FIELD(enabled), 0, 1, "true" },
	{ "profile", "output", K_OUTPUT, FIELD(output), 0, 0, "stepprof-traces/{run}" },
	{ "profile", "allow_foreign_dir", K_BOOL, FIELD(allow_foreign_dir), 0, 1, "false" },
	{ "ranks", "ranks", K_RANKS, FIELD(ranks_text), 0, 0, "0" },
	SCHED(skip_first, 0, "0"),
	{ "schedule", "skip_first_wait", K_BOOL, FIELD(schedule.skip_first_wait), 0, 1, "0" },
	SCHED(wait, 0, "10"),
	SCHED(warmup, 0, "1"),
	SCHED(active, 1, "3"),
	SCHED(repeat, 0, "1"),
	{ "schedule", "profiling_frequency", K_INT, FIELD(schedule.frequency), 0, SP_SCHEDULE_MAX, "0" },
	{ "marker", "kind", K_CHOICE, FIELD(marker_kind), 0, 0, "auto" },
	{ "marker", "pattern", K_STR, FIELD(marker_pattern), 0, 0, "" },
	{ "marker", "every", K_INT, FIELD(marker_every), 1, SP_SCHEDULE_MAX, "1" },
	{ "marker", "learn", K_CHOICE, FIELD(marker_learn), 0, 0, "auto" },
	ACT(kernels, "true"),
	ACT(memcpy, "true"),
	ACT(memset, "true"),
	ACT(sync, "false"),
	ACT(runtime_api, "true"),
	ACT(driver_api, "true"),
	ACT(nccl, "true"),
	ACT(nvtx, "true"),
	ACT(device_memory, "true"),
	ACT(host_malloc, "false"),
	{ "activities", "host_malloc_min", K_SIZE, FIELD(host_malloc_min), 0, GIB, "64K" },
	{ "activities", "stacks", K_STACKS, FIELD(stacks), 0, 3, "false" },
	{ "activities", "stack_depth", K_INT, FIELD(stack_depth), 1, 128, "32" },
	ACT(kernel_shapes, "true"),
	ACT(ops, SP_OPS_DEFAULT),
	ACT(modules, SP_OPS_DEFAULT),
	ACT(torch_memory, "false"),
	{ "activities", "torch_memory_entries", K_INT, FIELD(torch_memory_entries), 1, 100000000, "100000" },
	{ "limits", "window_max_bytes", K_SIZE, FIELD(window_max_bytes), 0, TIB, "256M" },
	{ "limits", "ring_events", K_SIZE, FIELD(ring_events), 64, 16 * MIB, "65536" },
	{ "limits", "cupti_buffer_bytes", K_SIZE, FIELD(cupti_buffer_bytes), 64 * KIB, 256 * MIB, "8M" },
	{ "cupti", "library", K_STR, FIELD(cupti_library), 0, 0, "" },
	{ "cupti", "detach_between", K_CHOICE, FIELD(detach_between), 0, 0, "auto" },
	{ "cupti", "graph_detach", K_BOOL, FIELD(graph_detach), 0, 1, "true" },
	{ "ondemand", "trigger", K_BOOL, FIELD(ondemand_trigger), 0, 1, "true" },
	{ "ondemand", "poll_ms", K_INT, FIELD(ondemand_poll_ms), 20, 60000, "500" },
	{ "ondemand", "delay_ms", K_INT, FIELD(ondemand_delay_ms), 0, SP_ONDEMAND_MAX_MS, "0" },
	{ "ondemand", "duration_ms", K_INT, FIELD(ondemand_duration_ms), 0, SP_ONDEMAND_MAX_MS, "0" },
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* The names of a K_CHOICE key's values (NULL-terminated; the field is an enum of them). */
static const struct {
	size_t off;
	const char *const *names;
} choice_tables[] = {
	{ offsetof(struct sp_config, marker_kind), kind_names },
	{ offsetof(struct sp_config, detach_between), detach_names },
	{ offsetof(struct sp_config, marker_learn), learn_names },
};

/* This function can't fail: every K_CHOICE key has a table. */
static const char *const *choices(const struct key *k)
{
	for (size_t i = 0; i < sizeof(choice_tables) / sizeof(choice_tables[0]); i++)
		if (choice_tables[i].off == k->off)
			return choice_tables[i].names;
	return kind_names; /* not reached */
}
_Static_assert(NKEYS == SP_CFG_NKEYS, "SP_CFG_NKEYS in config.h must count the keys table");

static const char *const sections[] = { "profile",    "ranks",  "schedule", "marker",
					"activities", "limits", "cupti",    "ondemand" };
#define NSECTIONS (sizeof(sections) / sizeof(sections[0]))

/* `stacks` values by mask (SP_STACKS_*); a boolean's true means native, as before Python frames */
static const char *const stacks_names[] = { "false", "native", "python", "both" };

/* Limits of the INI reader (docs/CONFIG.md): enforced while reading, before anything is kept. */
#define MAX_FILE_BYTES (1 << 20)        /* a larger file is refused at this byte */
#define LINE_MAX_TEXT (INI_MAX_LINE - 1) /* characters of a line that inih reads whole */
#define PRINT_LINE_MAX (INI_MAX_LINE - 3) /* sp_cfg_print's longest line: inih wants "\r\n\0" after it */

/* STEPPROF_* variables that are not STEPPROF_<SECTION>_<KEY> settings; any other is an error. */
static const char *const env_other[] = { "STEPPROF_CONFIG",
					 "STEPPROF_RANK",
					 "STEPPROF_WORLD_SIZE",
					 "STEPPROF_VERBOSE",
					 "STEPPROF_CHAINED_INJECTION",
					 "STEPPROF_RUN_ID",
					 "STEPPROF_RECORD_TOKENS",
					 "STEPPROF_RECORD_TRUTH",
					 "STEPPROF_TEST_CLOCK_OFFSET_NS", "STEPPROF_TEST_NAME_PID",
					 "STEPPROF_TEST_PYBRIDGE_DELAY_US",
					 "STEPPROF_NO_PROGRESS",
					 "STEPPROF_PROGRESS_AFTER" };
#define NENV_OTHER (sizeof(env_other) / sizeof(env_other[0]))

/* Appends one formatted message to errs (counted even when errs is full). Returns 1. */
__attribute__((format(printf, 2, 3))) static int add_error(struct sp_cfg_errors *errs, const char *fmt, ...)
{
	va_list ap;
	if (errs->count < SP_CFG_MAX_ERRORS) {
		va_start(ap, fmt);
		vsnprintf(errs->msg[errs->count], sizeof(errs->msg[0]), fmt, ap);
		va_end(ap);
	}
	errs->count++;
	return 1;
}

/* "ORIGIN:LINE" or "ORIGIN" into buf; "built-in defaults" for an empty origin. Can't fail. */
static const char *where(char *buf, size_t len, const char *origin, int line)
{
	if (!origin || !*origin)
		origin = "built-in defaults";
	if (line > 0)
		snprintf(buf, len, "%s:%d", origin, line);
	else
		snprintf(buf, len, "%s", origin);
	return buf;
}

static bool known_section(const char *s)
{
	if (sp_phase_is_section(s))
		return true; /* phase.c checks the name */
	for (size_t i = 0; i < NSECTIONS; i++)
		if (!strcasecmp(s, sections[i]))
			return true;
	return false;
}

/* The key's index in keys[], or -1. */
static int find_key(const char *section, const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcasecmp(section, keys[i].section) && !strcasecmp(name, keys[i].name))
			return (int)i;
	return -1;
}

/* Comma-separated list of the sections, or of the keys of one section, into buf. */
static const char *list_names(char *buf, size_t len, const char *section)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < (section ? NKEYS : NSECTIONS); i++) {
		const char *name = section ? keys[i].name : sections[i];
		if (section && strcasecmp(section, keys[i].section))
			continue;
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? ", " : "", name);
	}
	return buf;
}

/* Strict decimal integer with optional sign. Returns 0, -1 (malformed) or -2 (overflow). */
static int parse_int64(const char *s, int64_t *out)
{
	char *end;
	const char *d = s + (*s == '-' || *s == '+');

	if (!isdigit((unsigned char)*d))
		return -1;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (*end)
		return -1;
	if (errno == ERANGE)
		return -2;
	*out = v;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" }, *const no[] = { "false", "no", "off", "0" };

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(s, yes[i]) || !strcasecmp(s, no[i])) {
			*out = !strcasecmp(s, yes[i]);
			return 0;
		}
	}
	return -1;
}

/* Stores an integer of the field's width. Can't fail (ranges are checked before). */
static void store(struct sp_config *cfg, const struct key *k, int64_t v)
{
	char *p = (char *)cfg + k->off;

	if (k->size == sizeof(bool))
		*(bool *)p = v != 0;
	else if (k->size == sizeof(int32_t))
		*(int32_t *)p = (int32_t)v;
	else
		*(int64_t *)p = v;
}

static int64_t load(const struct sp_config *cfg, const struct key *k)
{
	const char *p = (const char *)cfg + k->off;

	if (k->size == sizeof(bool))
		return *(const bool *)p;
	if (k->size == sizeof(int32_t))
		return *(const int32_t *)p;
	return *(const int64_t *)p;
}

/* A [ranks] ranks value: a rank set, kept as typed for printing back. Returns 0, or -1 with the
 * problem in problem; cfg is unchanged then. */
static int set_ranks(struct sp_config *cfg, const struct key *k, const char *v, char *problem, size_t plen)
{
	char *field = (char *)cfg + k->off;
	struct sp_rankset set;
	char err[128];
	if (strlen(v) >= k->size || strlen(k->name) + 3 + strlen(v) > PRINT_LINE_MAX) {
		snprintf(problem, plen,
			 "too long: %zu characters (at most %zu, so that the line '%s = ...' "
			 "fits in an INI line)",
			 strlen(v), PRINT_LINE_MAX - 3 - strlen(k->name), k->name);
		return -1;
	}
	/* a rank set is digits, commas, dashes and blanks, or "all": anything else (a ';' that an
	 * INI reader would take for a comment when the value is printed back) is refused here */
	if (strspn(v, "0123456789,- \t") != strlen(v) && strcasecmp(v + strspn(v, " \t"), "all") &&
	    sp_rankset_parse(v, &set, err, sizeof(err)) == 0) {
		snprintf(problem, plen, "bad rank set '%.80s': only ranks, ranges, commas and 'all'", v);
		return -1;
	}
	if (sp_rankset_parse(v, &set, err, sizeof(err)) < 0) {
		snprintf(problem, plen, "%s", err);
		return -1;
	}
	cfg->ranks = set;
	strcpy(field, v);
	return 0;
}

/* A text or output template value, without its double quotes if it has them. Returns 0, or -1
 * with the problem in problem; cfg is unchanged then. */
static int set_text(struct sp_config *cfg, const struct key *k, const char *v, char *problem, size_t plen)
{
	char *field = (char *)cfg + k->off;
	size_t n = strlen(v);
	if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
		v++;
		n -= 2;
	}
	if (n >= k->size || strlen(k->name) + 5 + n > PRINT_LINE_MAX) {
		snprintf(problem, plen,
			 "too long: %zu characters (at most %zu, so that the line '%s = \"...\"' "
			 "fits in an INI line)",
			 n, PRINT_LINE_MAX - 5 - strlen(k->name), k->name);
		return -1;
	}
	for (size_t j = 0; j < n; j++) {
		if (iscntrl((unsigned char)v[j])) {
			snprintf(problem, plen, "contains a control character");
			return -1;
		}
		if (v[j] == ';' && j > 0 && isspace((unsigned char)v[j - 1])) {
			snprintf(problem, plen, "contains ' ;', which an INI file takes for a comment");
			return -1;
		}
	}
	char text[SP_CFG_PATH];
	memcpy(text, v, n);
	text[n] = '\0';
	if (k->type == K_OUTPUT && !n) {
		snprintf(problem, plen, "empty");
		return -1;
	}
	if (k->type == K_OUTPUT && sp_cfg_check_template(text, problem, plen) < 0)
		return -1;
	memcpy(field, text, n + 1);
	return 0;
}

/* Parses v (already trimmed) into the key's field. Returns 0, or -1 with the problem in
 * problem; cfg is unchanged then. */
static int set_value(struct sp_config *cfg, const struct key *k, const char *v, char *problem, size_t plen)
{
	char *field = (char *)cfg + k->off;
	int64_t i = 0;
	uint64_t u;
	bool b;
	int rc;

	switch (k->type) {
	case K_BOOL:
		if (parse_bool(v, &b) < 0) {
			snprintf(problem, plen, "not a boolean: '%.80s'", v);
			return -1;
		}
		store(cfg, k, b);
		return 0;
	case K_INT:
		if ((rc = parse_int64(v, &i)) == -1) {
			snprintf(problem, plen, "not an integer: '%.80s'", v);
			return -1;
		}
		if (rc < 0 || i < k->min || i > k->max) {
			snprintf(problem, plen, "out of range: '%.80s'", v);
			return -1;
		}
		store(cfg, k, i);
		return 0;
	case K_SIZE:
		if (sp_parse_size(v, &u) < 0) {
			snprintf(problem, plen, "not a size: '%.80s'", v);
			return -1;
		}
		if (u < (uint64_t)k->min || u > (uint64_t)k->max) {
			snprintf(problem, plen, "out of range: '%.80s'", v);
			return -1;
		}
		if (k->size == sizeof(uint32_t))
			*(uint32_t *)field = (uint32_t)u;
		else
			*(uint64_t *)field = u;
		return 0;
	case K_STACKS:
		for (int n = 0; n < 4; n++)
			if (!strcasecmp(v, stacks_names[n])) {
				store(cfg, k, n);
				return 0;
			}
		if (parse_bool(v, &b) == 0) {
			store(cfg, k, b ? SP_STACKS_NATIVE : 0);
			return 0;
		}
		snprintf(problem, plen, "not native, python, both or a boolean: '%.80s'", v);
		return -1;
	case K_CHOICE:
		for (size_t n = 0; choices(k)[n]; n++) {
			if (!strcasecmp(v, choices(k)[n])) {
				store(cfg, k, (int64_t)n);
				return 0;
			}
		}
		snprintf(problem, plen, "unknown %s: '%.80s'",
			 k->off == offsetof(struct sp_config, marker_kind) ? "marker kind" : "value", v);
		return -1;
	case K_RANKS:
		return set_ranks(cfg, k, v, problem, plen);
	case K_STR:
	case K_OUTPUT:
		return set_text(cfg, k, v, problem, plen);
	}
	return -1;
}

/* Copies s without leading and trailing white space into buf. Returns -1 if it does not fit. */
static int trim(const char *s, char *buf, size_t len)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (n >= len)
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return 0;
}

/* Returns 0 or 1 (one error added); cfg keeps its old value on error. */
int sp_cfg_set(struct sp_config *cfg, const char *section, const char *key, const char *value, const char *origin,
	       int line, struct sp_cfg_errors *errs)
{
	char w[300], list[256], problem[200], v[SP_CFG_PATH + 8];
	int i = find_key(section, key);

	if (sp_phase_is_section(section))
		return sp_phase_set(cfg, section, key, value, origin, line, errs);
	where(w, sizeof(w), origin, line);
	if (!known_section(section))
		return add_error(errs, "%s: [%s] %s: unknown section (allowed: %s)", w, section, key,
				 list_names(list, sizeof(list), NULL));
	if (i < 0)
		return add_error(errs, "%s: [%s] %s: unknown key (allowed: %s)", w, section, key,
				 list_names(list, sizeof(list), section));
	const struct key *k = &keys[i];
	if (trim(value, v, sizeof(v)) < 0) {
		snprintf(problem, sizeof(problem), "too long: %zu characters", strlen(value));
	} else if (set_value(cfg, k, v, problem, sizeof(problem)) == 0) {
		snprintf(cfg->origin[i].name, sizeof(cfg->origin[i].name), "%s", origin ? origin : "");
		cfg->origin[i].line = line;
		return 0;
	}
	return add_error(errs, "%s: [%s] %s: %s (allowed: %s)", w, k->section, k->name, problem,
			 sp_cfg_key_allowed(k, list, sizeof(list)));
}

/* This function can't fail. */
void sp_cfg_defaults(struct sp_config *cfg)
{
	struct sp_cfg_errors errs = { 0 };

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NKEYS; i++)
		sp_cfg_set(cfg, keys[i].section, keys[i].name, keys[i].def, "", 0, &errs);
	/* errs stays empty: test_config.c checks that every default parses */
}

/* ---- the INI file, through inih ---- */

/* State of one file read. inih gets lines from ini_read (which numbers them and finds the
 * syntax errors inih would only report once) and keys through ini_key. */
struct ini_ctx {
	struct sp_config *cfg;
	struct sp_cfg_errors *errs;
	const char *path;
	FILE *f;
	char buf[LINE_MAX_TEXT + 2]; /* the current line, NUL-terminated */
	size_t bytes;           /* bytes read so far (at most MAX_FILE_BYTES + 1) */
	bool too_big;           /* the file is over MAX_FILE_BYTES: reading stopped */
	int line;               /* number of the line inih is working on */
	int first_bad;          /* first line reported as a syntax error, 0 if none */
	bool cont;              /* that line continues the previous value (inih multi-line) */
	bool has_prev;          /* inih has a previous key, so an indented line is a continuation */
	bool bad_section;       /* the current section is unknown: its keys are not reported again */
	int seen[SP_CFG_NKEYS]; /* line where each key was first set in this file, 0 = not yet */
};

__attribute__((format(printf, 2, 3))) static int syntax_error(struct ini_ctx *c, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!c->first_bad)
		c->first_bad = c->line;
	return add_error(c->errs, "%s:%d: %s", c->path, c->line, msg);
}

/* inih's find_chars_or_comment: the first of chars, or an inline ';' after white space. */
static char *find_or_comment(char *s, const char *chars)
{
	bool was_space = false;

	while (*s && !strchr(chars, *s) && !(was_space && *s == ';')) {
		was_space = isspace((unsigned char)*s);
		s++;
	}
	return s;
}

/* Classifies the line in c->buf the way inih's ini_parse_stream will, and reports what inih
 * would call an error. Keeps c->has_prev and c->bad_section in step with inih. */
static void classify(struct ini_ctx *c)
{
	char *line = c->buf, *start = line, *end;
	char list[128];

	if (c->line == 1 && !strncmp(start, "\xEF\xBB\xBF", 3))
		start += 3;
	end = start + strlen(start);
	while (end > start && isspace((unsigned char)end[-1]))
		*--end = '\0';
	while (isspace((unsigned char)*start))
		start++;
	c->cont = false;
	if (!*start || *start == ';' || *start == '#')
		return;
	if (c->has_prev && start > line) {
		c->cont = true;
		syntax_error(c, "indented line continues the previous value; multi-line values are not "
				"supported (remove the indentation)");
		return;
	}
	if (*start == '[') {
		end = find_or_comment(start + 1, "]");
		if (*end != ']') {
			syntax_error(c, "section header without ']': '%s'", start);
			return;
		}
		*end = '\0';
		char name[64];
		if (trim(start + 1, name, sizeof(name)) < 0)
			name[0] = '\0';
		c->has_prev = false;
		c->bad_section = !known_section(name);
		if (c->bad_section)
			add_error(c->errs, "%s:%d: [%s]: unknown section (allowed: %s)", c->path, c->line, start + 1,
				  list_names(list, sizeof(list), NULL));
		return;
	}
	if (!*find_or_comment(start, "=:")) {
		syntax_error(c, "expected 'key = value', '[section]' or a comment: '%s'", start);
		return;
	}
	c->has_prev = true;
}

/* inih's reader: one line per call, at most num - 1 characters. Reads byte by byte into a
 * fixed buffer, so that neither a long line nor a large file is ever held: a line over the
 * limit, a NUL byte or a carriage return other than that of a CRLF ending is an error at its
 * line (the line is skipped), and the file ends, with an error, at byte MAX_FILE_BYTES + 1.
 * Returns str, or NULL at the end of the file (or on a read error, which ferror reports
 * afterwards). */
static char *ini_read(char *str, int num, void *stream)
{
	struct ini_ctx *c = stream;
	size_t n = 0, max = (size_t)num - 1 < LINE_MAX_TEXT ? (size_t)num - 1 : LINE_MAX_TEXT;
	bool nul = false, cr = false, any = false;
	int ch;

	if (c->too_big)
		return NULL;
	while ((ch = getc(c->f)) != EOF) {
		any = true;
		if (++c->bytes > MAX_FILE_BYTES) {
			c->too_big = true;
			add_error(c->errs,
				  "%s:%d: the file is larger than %d bytes (allowed: a configuration file "
				  "of at most 1 MiB)",
				  c->path, c->line + 1, MAX_FILE_BYTES);
			return NULL;
		}
		if (ch == '\n')
			break;
		if (ch == '\r') {
			int next = getc(c->f);
			if (next == '\n') {
				c->bytes++;
				break;
			}
			if (next != EOF)
				ungetc(next, c->f);
			cr = true;
		}
		nul |= ch == 0;
		if (n <= max)
			c->buf[n++] = (char)ch;
	}
	if (!any)
		return NULL;
	c->line++;
	c->buf[n < sizeof(c->buf) ? n : sizeof(c->buf) - 1] = '\0';
	str[0] = '\0';
	c->cont = false;
	if (nul)
		syntax_error(c, "NUL byte in the line (allowed: text)");
	else if (cr)
		syntax_error(c, "carriage return inside the line: CR-only line endings? (allowed: LF or CRLF "
				"line endings)");
	else if (n > max)
		syntax_error(c, "line longer than %zu characters (inih's limit)", max);
	else {
		memcpy(str, c->buf, n + 1);
		classify(c);
	}
	return str;
}

/* inih's handler: one key. Always returns 1 (keep going): errors are collected instead. */
static int ini_key(void *user, const char *section, const char *name, const char *value)
{
	struct ini_ctx *c = user;
	char sec[64];
	int i;

	if (c->cont || c->bad_section)
		return 1;
	if (trim(section, sec, sizeof(sec)) < 0)
		sec[0] = '\0'; /* not reached: classify() marks a section this long unknown */
	section = sec;
	i = find_key(section, name);
	if (!*section) {
		add_error(c->errs,
			  "%s:%d: %s: key outside any [section] (allowed: a key after its "
			  "[section] line)",
			  c->path, c->line, name);
		return 1;
	}
	if (i >= 0 && c->seen[i]) {
		add_error(c->errs, "%s:%d: [%s] %s: set twice, first at line %d (allowed: once per file)", c->path,
			  c->line, keys[i].section, keys[i].name, c->seen[i]);
		return 1;
	}
	if (i >= 0)
		c->seen[i] = c->line;
	sp_cfg_set(c->cfg, section, name, value, c->path, c->line, c->errs);
	return 1;
}

/* Returns the number of errors added; cfg keeps every valid setting. */
int sp_cfg_load_file(struct sp_config *cfg, const char *path, struct sp_cfg_errors *errs)
{
	struct ini_ctx c = { .cfg = cfg, .errs = errs, .path = path };
	int before = errs->count, rc;
	struct stat st;

	snprintf(cfg->source, sizeof(cfg->source), "%s", path);
	sp_phase_new_file(cfg);
	/* only a regular file: checked before the open (a device is never opened) and on the
	 * descriptor, opened non-blocking (a FIFO swapped in cannot hang the process) */
	if (stat(path, &st) < 0)
		return add_error(errs, "%s: cannot open: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return add_error(errs, "%s: is a directory, not an INI file", path);
	if (!S_ISREG(st.st_mode))
		return add_error(errs, "%s: not a regular file (a FIFO, socket or device is refused)", path);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return add_error(errs, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || fcntl(fd, F_SETFL, 0) < 0 || !(c.f = fdopen(fd, "r"))) {
		close(fd);
		return add_error(errs, "%s: not a regular file (a FIFO, socket or device is refused)", path);
	}
	rc = ini_parse_stream(ini_read, &c, ini_key, &c);
	if (ferror(c.f))
		add_error(errs, "%s: read error", path);
	else if (rc == -2)
		add_error(errs, "%s: out of memory while parsing", path);
	else if (rc > 0 && rc != c.first_bad) /* inih saw an error that classify() did not */
		add_error(errs, "%s:%d: syntax error", path, rc);
	fclose(c.f);
	return errs->count - before;
}

/* Returns the number of errors added. */
int sp_cfg_load_env(struct sp_config *cfg, char **envp, struct sp_cfg_errors *errs)
{
	extern char **environ;
	int before = errs->count;

	for (char **e = envp ? envp : environ; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		char var[128], section[32], key[64], list[256];
		bool known = false;
		if (strncmp(*e, "STEPPROF_", 9) || !eq)
			continue;
		snprintf(var, sizeof(var), "%.*s", (int)(eq - *e) < 127 ? (int)(eq - *e) : 127, *e);
		for (size_t i = 0; i < NENV_OTHER; i++)
			known |= !strcmp(var, env_other[i]);
		if (known)
			continue;
		if ((size_t)(eq - *e) >= sizeof(var)) {
			add_error(errs,
				  "%.100s...: unknown variable: name too long (allowed: STEPPROF_<SECTION>_<KEY>)",
				  var);
			continue;
		}
		for (size_t s = 0; s <= NSECTIONS; s++) {
			if (s == NSECTIONS) { /* a misspelt section or variable: never ignored */
				add_error(errs,
					  "%s: unknown variable (allowed: STEPPROF_<SECTION>_<KEY> with a section "
					  "of %s, or STEPPROF_CONFIG, STEPPROF_RANK, STEPPROF_WORLD_SIZE, "
					  "STEPPROF_VERBOSE)",
					  var, list_names(list, sizeof(list), NULL));
				break;
			}
			size_t n = strlen(sections[s]);
			if (strncasecmp(var + 9, sections[s], n) || var[9 + n] != '_')
				continue;
			snprintf(section, sizeof(section), "%s", sections[s]);
			snprintf(key, sizeof(key), "%s", var + 10 + n);
			for (char *p = key; *p; p++)
				*p = (char)tolower((unsigned char)*p);
			sp_cfg_set(cfg, section, key, eq + 1, var, 0, errs);
			break;
		}
	}
	return errs->count - before;
}

/* Returns the number of errors added (0 or more); cfg->schedule is unchanged if it is bad. */
int sp_cfg_finish(struct sp_config *cfg, struct sp_cfg_errors *errs)
{
	char err[256], w[300], name[32], why[300];
	const char *key;
	int n = 0;
	const struct sp_cfg_origin *o;

	if (sp_schedule_finish(&cfg->schedule, err, sizeof(err)) < 0) {
		/* err is "key: problem (allowed: ...)": blame where that key was set */
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(err, ":"), err);
		int i = find_key("schedule", name);
		o = i < 0 ? &(struct sp_cfg_origin){ "", 0 } : &cfg->origin[i];
		n += add_error(errs, "%s: [schedule] %s", where(w, sizeof(w), o->name, o->line), err);
	}
	if (sp_marker_check(cfg->marker_kind, cfg->marker_pattern, "[marker] ", &key, why, sizeof why)) {
		o = &cfg->origin[find_key("marker", key)];
		n += add_error(errs, "%s: [marker] %s: %s", where(w, sizeof(w), o->name, o->line), key, why);
	}
	return n + sp_phase_finish(cfg, errs);
}

/* Resets errs. Returns the number of errors. */
int sp_cfg_load(struct sp_config *cfg, const char *path, struct sp_cfg_errors *errs)
{
	errs->count = 0;
	sp_cfg_defaults(cfg);
	if (!path || !*path)
		path = getenv("STEPPROF_CONFIG");
	if (path && *path)
		sp_cfg_load_file(cfg, path, errs);
	sp_cfg_load_env(cfg, NULL, errs);
	sp_cfg_finish(cfg, errs);
	return errs->count;
}

/* Returns NULL for an unknown key. */
const struct sp_cfg_origin *sp_cfg_origin_of(const struct sp_config *cfg, const char *section, const char *key)
{
	int i = find_key(section, key);
	return i < 0 ? NULL : &cfg->origin[i];
}

/* Returns 1. */
int sp_cfg_error(struct sp_cfg_errors *errs, const char *msg)
{
	return add_error(errs, "%s", msg);
}

const char *sp_marker_kind_name(enum sp_marker_kind k)
{
	return (unsigned)k < NKINDS ? kind_names[k] : "?";
}

/* ---- for config_print.c (config_impl.h) ---- */

const struct key *sp_cfg_key(size_t i)
{
	return i < NKEYS ? &keys[i] : NULL;
}

int64_t sp_cfg_key_load(const struct sp_config *cfg, const struct key *k)
{
	return load(cfg, k);
}

const char *sp_cfg_key_choice(const struct key *k, int64_t v)
{
	return k->type == K_STACKS ? stacks_names[v & 3] : choices(k)[v];
}
