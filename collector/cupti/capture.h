/* SPDX-License-Identifier: MIT */
/* capture.h - which CUDA calls go into a stream capture (such a launch makes no kernel record; the graph's
 * replays do), from the begin and end capture calls and graph nodes made on the thread. Never calls the driver. */
#ifndef SP_CUPTI_CAPTURE_H
#define SP_CUPTI_CAPTURE_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <stdatomic.h>
#include <cupti.h>
#include "collector/internal.h"

/* Streams under capture now (capture.c keeps it): 0 keeps a launch's check to this one load. */
extern atomic_int sp_cap_open;

/* 1 if (dom, cbid) begins or ends a stream capture (its callback is then wanted). Can't fail. */
int sp_cap_is_call(CUpti_CallbackDomain dom, CUpti_CallbackId cbid);

/* The exit of a begin or end capture call (ok: it succeeded): its stream enters or leaves the
 * set. Application thread, inside the callback. Can't fail (a full set warns once: launches
 * into the streams it could not hold may then be said missing). */
void sp_cap_call(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, int ok);

/* 1 if the launch (dom, cbid) with parameters cd goes into a stream under capture. Can't fail. */
int sp_cap_stream_in(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd);

/* 1 if the call whose exit this is went into a capture: a graph node was made inside it on this
 * thread, or (only while some stream is under capture) its launch stream is one. Can't fail. */
static inline int sp_cap_into(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd)
{
	if (sp_thr.cap_node)
		return 1;
	if (__builtin_expect(!atomic_load_explicit(&sp_cap_open, memory_order_relaxed), 1))
		return 0;
	return sp_cap_stream_in(dom, cbid, cd);
}

#endif
