/* SPDX-License-Identifier: MIT */
/* tokrec.h - STEPPROF_RECORD_TOKENS=FILE: records the detector's token stream (trace/tokens.h) and
 * STEPPROF_RECORD_TRUTH occurrences, for `stepprof autostep FILE`. Knows nothing of CUPTI; a failure warns once
 * and stops recording. */
#ifndef SP_TOKREC_H
#define SP_TOKREC_H

#include <stddef.h>
#include <stdint.h>

/* Nonzero while recording (read without a lock on hot paths). */
extern volatile int sp_tokrec_on;

/* Reads STEPPROF_RECORD_TOKENS and STEPPROF_RECORD_TRUTH and opens the file ("%p" in the name
 * becomes the pid). Returns 1 if recording, 0 if not asked, -1 after a warning (bad truth spec,
 * file not created). Call once, at injection; registers its own exit handler. */
int sp_tokrec_start(void);
/* The truth's kind (SP_TOK_KERNEL, SP_TOK_API or SP_TOK_NVTX_PUSH) and glob, or 0 / NULL. */
int sp_tokrec_truth_kind(void);
const char *sp_tokrec_truth_pattern(void);
/* Appends one token (kind/flags as in trace/tokens.h, name an interned id or 0). Any thread.
 * This function can't fail (a write failure warns once and stops recording). */
void sp_tokrec_add(uint8_t kind, uint8_t flags, uint32_t name, uint64_t ts, uint32_t tid);
/* The process's command line (arguments joined by spaces, truncated) into buf[n], for the headers
 * of token streams and traces. This function can't fail (an unreadable /proc gives ""). */
void sp_tokrec_cmdline(char *buf, size_t n);
/* Writes what is buffered and closes the file. Idempotent; a fork child never writes. */
void sp_tokrec_stop(void);

#endif
