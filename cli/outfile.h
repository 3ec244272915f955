/* SPDX-License-Identifier: MIT */
/* outfile.h - how the CLI creates an output file it names from the user's -o (or next to a
 * trace): written under an unpredictable temporary name beside it (mkstemp: a new file, never
 * a link someone planted, never another user's file), then renamed over the final name only
 * once complete, so a reader never sees half a file and a failed write leaves nothing. */
#ifndef SP_OUTFILE_H
#define SP_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

/* Creates a new temporary file beside path ("PATH.XXXXXX"), with the mode a plain creat would
 * give (0666 less the umask), open for writing and close-on-exec. Returns its descriptor with
 * *tmp its malloc'ed name, or -1 (*tmp NULL) with a message in err. */
int sp_outfile_create(const char *path, char **tmp, char *err, size_t errlen);
/* The same as a stdio stream. Returns NULL (*tmp NULL) with a message in err on failure. */
FILE *sp_outfile_fopen(const char *path, char **tmp, char *err, size_t errlen);
/* Finishes a file of sp_outfile_create: renames tmp to path if ok (atomic; a link at path is
 * replaced, never followed), else removes tmp; frees tmp (NULL: nothing to do, returns 0).
 * Returns 0, or -1 after "stepprof: PATH: reason" on stderr when the rename failed. */
int sp_outfile_commit(char *tmp, const char *path, int ok);

#endif
