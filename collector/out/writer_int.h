/* SPDX-License-Identifier: MIT */
/* writer_int.h - what the writer's two files share: writer.c (the thread, staging, windows and
 * routing) and tracefile.c (one trace file: making it, writing to it, its failures and what they
 * lost). Only they include it; the writer thread alone touches a struct file. */
#ifndef SP_WRITER_INT_H
#define SP_WRITER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "trace/trace.h"

#define MAX_HELD 8                 /* the collector tracks at most 8 windows (SP_MAX_WINDOWS) */

/* One trace file: the single file of a process, or the file of one phase. */
struct file {
	struct sp_trace_writer *tw;     /* NULL until created (a phase's at its first window) */
	char path[1024];
	uint32_t phase;                 /* interned phase name its windows carry; 0: the single file */
	bool failed;                    /* a create or write failed: its events are discarded */
	bool in_window;
	uint64_t win_bytes;             /* encoded bytes since WINDOW_BEGIN */
	uint64_t win_cap_drops;         /* data events dropped by the cap in this window */
	uint64_t last_begin;            /* phased: start of its latest WINDOW_BEGIN, held or written (routing) */
	struct sp_event held[MAX_HELD]; /* WINDOW_BEGINs that came while a window was open, in order */
	struct sp_event held_end[MAX_HELD]; /* ... the WINDOW_END of each if it came too (kind 0: not yet) */
	int nheld;
	/* what a failure lost, said at stop (window_account) */
	bool made;                      /* the file was created */
	bool gone;                      /* ... and removed (or replaced) while it was written */
	dev_t dev;                      /* the file as created: a window's end checks it is still there */
	ino_t ino;
	int err;                        /* errno of the failure (0 none) */
	bool win_kept;                  /* the open window began in the file before any failure */
	bool cut;                       /* a failure came inside a window: it ends early in the file */
	uint32_t kept, lost;            /* windows begun in the file before the failure, and after it */
	int64_t kept_first, kept_last;  /* ... their steps */
	int64_t lost_first, lost_last;
	int64_t open_first;             /* first step of the window open in the file */
	int64_t cut_first, cut_last;    /* steps of the window the failure cut */
	/* a window open for long: its records reach the file every OPEN_FLUSH_NS all the same (writer.c) */
	uint64_t flushed_at;            /* when the file last grew (or the window opened) */
	uint64_t flushed_bytes;         /* its size then */
};

/* Creates f's trace at path and writes its header (meta). The file is always new: the next free
 * name STEM.1.sptrace ... STEM.99.sptrace is taken if path exists (a planted link, a name another
 * process took). Returns 0, or -1 with why filled (f->tw stays NULL; nothing printed). */
int sp_tf_create(struct file *f, const char *path, const struct sp_trace_meta *meta, char *why, size_t whylen);
/* Writes ev to f, counting its bytes in f's open window. Errors go through sp_tf_fail. */
void sp_tf_write(struct file *f, const struct sp_event *ev);
/* Warns once and discards everything of f from now on. This function can't fail. */
void sp_tf_fail(struct file *f, const char *what, int err);
/* After a window's end: if f's file is no longer at its path (its directory or the file removed,
 * another put in its place), says so once and writes no more to it. This function can't fail. */
void sp_tf_check_there(struct file *f);
/* Counts a window's begin (end: 0) or end (1) in f's account of what a failure lost. */
void sp_tf_account(struct file *f, const struct sp_event *ev, int end);
/* At stop: says what a failure of f lost (the failure itself was said when it came). */
void sp_tf_say_loss(const struct file *f);

#endif
