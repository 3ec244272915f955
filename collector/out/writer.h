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

/* Creates the trace file at path and starts the writer thread (all signals blocked). The file
 * is always new: if path exists (a re-run with the same host and pid, or a link someone put
 * there), STEM.1.sptrace, STEM.2.sptrace ... is created instead, with a warning; see
 * sp_writer_path. window_max_bytes caps encoded bytes per window (0 = no cap). Returns 0, or -1
 * after warning once on stderr ("stepprof: ..."): then nothing is running and pushes are dropped. */
int sp_writer_start(const char *path, const struct sp_trace_meta *meta, uint64_t window_max_bytes);
/* As sp_writer_start, for a process with phases ([phase.NAME] sections): a trace per phase,
 * DIR/PHASE/BASE (phases[i] is the interned name of phase i, the name the WINDOW records of its
 * windows carry; activity.c marks a GPU record with i + 1 in tid). A phase's folder and file are
 * made at its first window (a phase that records nothing has neither), on the writer thread, with
 * the THREAD and DEVICE records seen so far, so each file reads alone. Each window goes to its
 * phase's file (WINDOW records and a DROPPED record with a name: by that name), with the CPU events
 * from its begin until the next window of any phase begins, the GPU records of its launches, and
 * the allocations alive at its start. Returns 0, or -1 after warning once (nothing running). */
int sp_writer_start_phases(const char *dir, const char *base, int n, const uint32_t *phases,
			   const struct sp_trace_meta *meta, uint64_t window_max_bytes, bool allow_foreign);
/* Creates the output directory dir and any missing parent (mode 0750 less the umask; dir is
 * modified in place while doing so, and restored) and checks that it is a directory owned by
 * the effective user, unless allow_foreign ([profile] allow_foreign_dir). Returns 0, or -1 with
 * why (whylen bytes) saying what failed, path and error (nothing printed: the caller says it once;
 * then nothing should be written there). */
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
/* For a signal handler (async-signal-safe: atomics, getpid and nanosleep): asks the writer thread
 * to write what the rings hold at once (how: SP_RESCUE_* bits), without its tick, and waits at most
 * wait_ms for it. The thread's next pass does it (a pass is at most 100 ms away). Once per process:
 * a later call only waits for the first one's. Returns 1 written, 0 no writer thread here (none
 * started, stopped, or a fork child), -1 not answered in time (the thread waits on a lock the
 * signalled thread holds) or called on the writer thread. */
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
