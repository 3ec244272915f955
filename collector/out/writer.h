/* SPDX-License-Identifier: MIT */
/* writer.h - the writer thread: the only thread that encodes, compresses and writes. It drains
 * the rings, tracks windows (byte cap, drop counts) and closes the file at exit. The
 * application thread only pushes events; it never waits on I/O or compression. */
#ifndef SP_WRITER_H
#define SP_WRITER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "trace/trace.h"

/* Creates the trace file at path (STEM.1.sptrace ... if it exists, warned; see sp_writer_path) and starts
 * the writer thread; window_max_bytes caps a window's encoded bytes (0 none). Returns 0, or -1 warned once:
 * nothing runs and pushes are dropped. */
int sp_writer_start(const char *path, const struct sp_trace_meta *meta, uint64_t window_max_bytes);
/* As sp_writer_start, with phases: a trace per phase, DIR/PHASE/BASE, made at the phase's first window
 * with the THREAD and DEVICE records so far so each reads alone; each window goes to its phase's file.
 * Returns 0, or -1 warned once (nothing running). */
int sp_writer_start_phases(const char *dir, const char *base, int n, const uint32_t *phases,
			   const struct sp_trace_meta *meta, uint64_t window_max_bytes, bool allow_foreign);
/* Creates the output directory dir and missing parents (0750 less umask; dir restored after) and checks it is
 * a directory of the effective user, unless allow_foreign. Returns 0, or -1 with why filled (nothing printed). */
int sp_writer_make_dir(char *dir, bool allow_foreign, char *why, size_t whylen);
/* Why the last sp_writer_start failed (its file could not be created: path and error), "" if it
 * did not. This function can't fail. */
const char *sp_writer_failure(void);
/* The path of the file the last sp_writer_start created. This function can't fail. */
const char *sp_writer_path(void);
/* Asks the writer to compress and write what it holds now (e.g. at a window's end) without
 * waiting for it. Safe on any thread. This function can't fail. */
void sp_writer_kick(void);
/* Drains every ring, writes the final chunk and closes the file; joins the thread. A file whose
 * write failed, or that was removed while it was written, gets one more line: what it lost (which
 * windows, which steps). Idempotent. Returns 0, or -1 if the file could not be completed (warned). */
int sp_writer_stop(void);
/* 1 while the writer thread runs. */
int sp_writer_running(void);

#define SP_RESCUE_FINAL 1 /* the process is about to die: also the windows held back, then the files are
			   * closed and the thread ends */
#define SP_RESCUE_GPU 2   /* the process is sound (SIGTERM, SIGINT): also fetch the GPU records
			   * (sp_writer_set_rescue's hook) */
/* For a signal handler (async-signal-safe): asks the writer to write the rings now (how: SP_RESCUE_*), once
 * per process, waiting at most wait_ms. Returns 1 written, 0 no writer thread here, -1 not answered in time
 * or called on the writer thread. */
int sp_writer_rescue(int how, unsigned wait_ms);
/* Sets what SP_RESCUE_GPU runs on the writer thread (the collector's CUPTI flush), NULL none. Set it
 * before the writer starts. This function can't fail. */
void sp_writer_set_rescue(void (*fn)(void));
/* Starts a stepprof thread with every signal blocked (the program's handlers never run on it).
 * Returns pthread_create's result. */
int sp_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/* Sets a hook the writer thread runs at the start of every pass, before draining the rings
 * (the collector flushes CUPTI buffers and decides window ends there); NULL removes it. Takes
 * effect from the next pass. This function can't fail. */
void sp_writer_set_tick(void (*fn)(void *ctx), void *ctx);
/* Sets a hook the writer thread shows every event it drains from the rings, before it is written
 * (the collector counts a window's launches there, off the launch path); NULL removes it. Takes
 * effect from the next pass. This function can't fail. */
void sp_writer_set_seen(void (*fn)(const struct sp_event *ev));
/* Sets the idle wait between passes (0: the default, 2 ms); a kick or a stop still wakes the
 * thread at once. The collector lengthens it once nothing more can be recorded. Can't fail. */
void sp_writer_set_pass_ns(uint64_t ns);
/* Only from inside the tick: adds ev to the stream after everything drained so far (it is a
 * push into the writer thread's own ring, drained in the same pass). Returns 0, or -1 if that
 * ring was full (counted as a ring drop). */
int sp_writer_emit(const struct sp_event *ev);

#endif
