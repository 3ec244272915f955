/* SPDX-License-Identifier: MIT */
/* tokstream.h - a recorded token stream (trace/tokens.h) loaded whole for the CLI: tokens in
 * order, names interned in this process (collector/base/intern.h) so that ids mean what they mean to
 * the step detector, and the statistics `stepprof autostep` prints before it replays. */
#ifndef SP_TOKSTREAM_H
#define SP_TOKSTREAM_H

#include <stdio.h>
#include "trace/tokens.h"

struct sp_tokstream {
	struct sp_tok_header h;
	struct sp_token *tok;   /* name = interned id (sp_intern_lookup) */
	size_t n;
	int truncated;          /* the file ended inside a chunk */
	size_t truth;           /* TRUTH tokens */
};

/* Loads path. Returns 0, or -1 with a message in err (unreadable or damaged; a truncated last
 * chunk is not an error). */
int sp_tokstream_load(struct sp_tokstream *s, const char *path, char *err, size_t errlen);
void sp_tokstream_free(struct sp_tokstream *s);
/* Prints the header and per-kind counts, threads, duration, the most frequent names, and
 * with truth, kernels per true iteration. json: one object's fields (no braces). */
void sp_tokstream_stats(const struct sp_tokstream *s, FILE *out, int json);

/* Writes s as a JSON string (quoted, escaped). This function can't fail. */
void sp_tokstream_json_str(FILE *out, const char *s);

#endif
