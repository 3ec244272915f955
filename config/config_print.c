/* SPDX-License-Identifier: MIT */
/* config_print.c - the configuration as text: sp_cfg_print writes the effective configuration
 * as an INI file that reads back to the same values, sp_cfg_print_errors the problems found,
 * sp_cfg_key_allowed what a key accepts, and sizes are parsed and formatted with K/M/G/T
 * suffixes. Prints only to the FILE it is given. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "config.h"
#include "config_impl.h"

/* This function can't fail. */
void sp_cfg_print(const struct sp_config *cfg, FILE *f)
{
	const char *section = NULL;
	char buf[32];

	for (size_t i = 0; sp_cfg_key(i); i++) {
		const struct key *k = sp_cfg_key(i);
		const char *field = (const char *)cfg + k->off;
		if (cfg->phases.n && (!strcmp(k->section, "schedule") || !strcmp(k->section, "marker")))
			continue; /* each phase has its own: sp_phase_print */
		if (!section || strcmp(section, k->section))
			fprintf(f, "%s[%s]\n", section ? "\n" : "", k->section);
		section = k->section;
		fprintf(f, "%s = ", k->name);
		switch (k->type) {
		case K_BOOL:
			fprintf(f, "%s\n", sp_cfg_key_load(cfg, k) ? "true" : "false");
			break;
		case K_INT:
			fprintf(f, "%lld\n", (long long)sp_cfg_key_load(cfg, k));
			break;
		case K_SIZE:
			fprintf(f, "%s\n",
				sp_cfg_format_size(buf, sizeof(buf),
						   k->size == sizeof(uint32_t) ? *(const uint32_t *)field
									       : *(const uint64_t *)field));
			break;
		case K_STR:
		case K_OUTPUT: /* quoted, so that the reader's quote stripping gives it back as is */
			fprintf(f, "\"%s\"\n", field);
			break;
		case K_RANKS:
			fprintf(f, "%s\n", field);
			break;
		case K_CHOICE:
		case K_STACKS:
			fprintf(f, "%s\n", sp_cfg_key_choice(k, sp_cfg_key_load(cfg, k)));
			break;
		}
	}
	sp_phase_print(cfg, f);
}

/* This function can't fail. */
void sp_cfg_print_errors(const struct sp_cfg_errors *errs, FILE *f)
{
	for (int i = 0; i < errs->count && i < SP_CFG_MAX_ERRORS; i++)
		fprintf(f, "%s\n", errs->msg[i]);
	if (errs->count > SP_CFG_MAX_ERRORS)
		fprintf(f, "... and %d more errors\n", errs->count - SP_CFG_MAX_ERRORS);
}

/* Returns 0, or -1 (out unchanged) if s is not a size or overflows. */
int sp_parse_size(const char *s, uint64_t *out)
{
	static const char suffix[] = "KMGT";
	uint64_t v = 0, mul = 1;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++)
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			return -1;
	if (*p) {
		const char *u = strchr(suffix, toupper((unsigned char)*p));
		if (!u || p[1])
			return -1;
		for (long i = 0; i <= u - suffix; i++)
			mul *= 1024;
	}
	if (__builtin_mul_overflow(v, mul, &v))
		return -1;
	*out = v;
	return 0;
}

const char *sp_cfg_format_size(char *buf, size_t len, uint64_t v)
{
	static const char suffix[] = "KMGT";
	int i = -1;

	while (v && i < 3 && v % 1024 == 0) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i < 0 ? "%llu" : "%llu%c", (unsigned long long)v, i < 0 ? 0 : suffix[i]);
	return buf;
}

const char *sp_cfg_key_allowed(const struct key *k, char *buf, size_t len)
{
	char a[16], b[16];

	switch (k->type) {
	case K_BOOL:
		return "true, false, yes, no, on, off, 1, 0";
	case K_INT:
		if (k->max == SP_SCHEDULE_MAX)
			snprintf(buf, len, "integer >= %lld", (long long)k->min);
		else
			snprintf(buf, len, "integer %lld..%lld", (long long)k->min, (long long)k->max);
		return buf;
	case K_SIZE:
		snprintf(buf, len, "size %s..%s, as 512, 64K, 256M, 2G; K, M, G, T are powers of 1024",
			 sp_cfg_format_size(a, sizeof(a), (uint64_t)k->min),
			 sp_cfg_format_size(b, sizeof(b), (uint64_t)k->max));
		return buf;
	case K_STR:
		snprintf(buf, len, "text of at most %zu characters, optionally in double quotes", k->size - 1);
		return buf;
	case K_OUTPUT:
		return "a directory path; placeholders {run} {host} {pid} {rank} {date} {time} {jobid}";
	case K_RANKS:
		return "all, or ranks and ranges like 0 / 0,1 / 0-3,8";
	case K_CHOICE:
		for (size_t n = 0, at = 0; sp_cfg_key_choice(k, (int64_t)n); n++)
			at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s", n ? ", " : "",
					       sp_cfg_key_choice(k, (int64_t)n));
		return buf;
	case K_STACKS:
		return "native, python, both, false (true, yes, on, 1 = native; no, off, 0 = false)";
	}
	return "?";
}
