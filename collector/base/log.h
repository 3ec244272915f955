/* SPDX-License-Identifier: MIT */
/* log.h - the profiled process's only voice: one line to stderr with the "stepprof: " prefix.
 * Never exits. sp_warn_once prints a given call site's message once per process. */
#ifndef SP_LOG_H
#define SP_LOG_H

#include <stdatomic.h>

/* Writes "stepprof: <message>\n" to stderr with one write(2); never allocates. */
void sp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Verbose notes, printed only with STEPPROF_VERBOSE=1 (read once). */
void sp_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define sp_warn_once(...)                           \
	do {                                        \
		static atomic_int sp_once_;         \
		if (!atomic_exchange(&sp_once_, 1)) \
			sp_warn(__VA_ARGS__);       \
	} while (0)

#endif
