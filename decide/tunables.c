/* SPDX-License-Identifier: MIT */
/* tunables.c - the detector's tunables table (tunables.h): the defaults the library runs and the
 * NAME=VALUE setter the replay uses. Pure: no I/O, no global state that changes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tunables.h"

const struct sp_det_tune sp_det_tune_default = {
#define SP_DET_TUNE_DEFAULT(name, def, lo, hi, stage, why, test) .name = (def),
	SP_DET_TUNABLES(SP_DET_TUNE_DEFAULT)
#undef SP_DET_TUNE_DEFAULT
};

const struct sp_det_tunable sp_det_tunables[] = {
#define SP_DET_TUNE_ROW(name, def, lo, hi, stage, why, test) \
	{ #name, stage, why, test, offsetof(struct sp_det_tune, name), (def), (lo), (hi) },
	SP_DET_TUNABLES(SP_DET_TUNE_ROW)
#undef SP_DET_TUNE_ROW
};

const size_t sp_det_ntunables = sizeof sp_det_tunables / sizeof *sp_det_tunables;

/* Every name, comma-separated, into buf. This function can't fail (it truncates). */
static void list_names(char *buf, size_t n)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = 0; i < sp_det_ntunables && o + 1 < n; i++)
		o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", sp_det_tunables[i].name);
}

int sp_det_tune_set(struct sp_det_tune *t, const char *assign, char *err, size_t errlen)
{
	const char *eq = strchr(assign, '=');
	size_t len = eq ? (size_t)(eq - assign) : strlen(assign);
	for (size_t i = 0; i < sp_det_ntunables; i++) {
		const struct sp_det_tunable *u = &sp_det_tunables[i];
		if (strlen(u->name) != len || strncmp(u->name, assign, len))
			continue;
		char *end;
		errno = 0;
		unsigned long long v = eq && eq[1] >= '0' && eq[1] <= '9' ? strtoull(eq + 1, &end, 10) : 0;
		if (!eq || eq[1] < '0' || eq[1] > '9' || *end || errno || v < u->min || v > u->max) {
			snprintf(err, errlen, "%s wants a whole number from %llu to %llu (default %llu)", u->name,
				 (unsigned long long)u->min, (unsigned long long)u->max, (unsigned long long)u->def);
			return -1;
		}
		memcpy((char *)t + u->off, &(uint64_t){ v }, sizeof(uint64_t));
		return 0;
	}
	char names[2048];
	list_names(names, sizeof names);
	snprintf(err, errlen, "unknown tunable '%.*s' (known: %s)", (int)(len < 64 ? len : 64), assign, names);
	return -1;
}
