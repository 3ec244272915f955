/* SPDX-License-Identifier: MIT */
/* cupti_api.h - CUPTI entry points, resolved at run time from the libcupti the process already
 * holds (torch links one), else from a configured path, the program's pip copy or the CUDA
 * toolkit. Nothing is linked at build time, so an unselected process never loads CUPTI. */
#ifndef SP_CUPTI_API_H
#define SP_CUPTI_API_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <cupti.h>

/* clang-format off */
#define SP_CUPTI_FUNCS(X) \
	X(cuptiSubscribe) \
	X(cuptiUnsubscribe) \
	X(cuptiEnableCallback) \
	X(cuptiEnableDomain) \
	X(cuptiGetCallbackName) \
	X(cuptiGetDeviceId) \
	X(cuptiActivityEnable) \
	X(cuptiActivityDisable) \
	X(cuptiActivityRegisterCallbacks) \
	X(cuptiActivityRegisterTimestampCallback) \
	X(cuptiActivityFlushAll) \
	X(cuptiActivityGetNextRecord) \
	X(cuptiActivityGetNumDroppedRecords) \
	X(cuptiActivitySetAttribute) \
	X(cuptiGetResultString) \
	X(cuptiGetVersion) \
	X(cuptiFinalize)
/* clang-format on */

struct sp_cupti {
#define SP_CUPTI_PTR(fn) __typeof__(fn) *fn;
	SP_CUPTI_FUNCS(SP_CUPTI_PTR)
#undef SP_CUPTI_PTR
	void *handle;            /* dlopen handle */
	char path[1100];         /* the file it came from */
};

extern struct sp_cupti sp_cupti;

/* Finds and binds libcupti (see the header comment); configured is the [cupti] library key or
 * "". Returns 0, or -1 with a reason in why (nothing stays loaded). */
int sp_cupti_load(const char *configured, char *why, size_t whylen);

/* Calls a CUPTI function through the table; on error warns once per call site with file, line
 * and call text, and evaluates to the CUptiResult. Never exits. */
#define SP_CUPTI(call) sp_cupti_check((sp_cupti.call), #call, __FILE__, __LINE__)
CUptiResult sp_cupti_check(CUptiResult r, const char *what, const char *file, int line);

#endif
