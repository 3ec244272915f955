/* SPDX-License-Identifier: MIT */
/* odctl.h - the control files of on-demand windows (`stepprof trigger`): their names in the
 * output directory, their text format, and reading them as hostile input (owner, type, size).
 * Shared by the profiled process (collector/ondemand/ondemand.c) and the CLI (cli/trigger.c). Pure file
 * handling: never touches CUPTI or the collector's state. */
#ifndef SP_ODCTL_H
#define SP_ODCTL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SP_OD_DIR ".stepprof"        /* control directory inside the output directory (mode 0700) */
#define SP_OD_JOB "trigger"          /* a request to every process of the job */
#define SP_OD_MAX_BYTES 4096         /* a control file larger than this is refused unread */
#define SP_OD_MAX_STEPS 100000       /* steps one request may ask for */
#define SP_OD_MAX_MS 3600000         /* milliseconds one time-based request may ask for */
#define SP_OD_TEXT 256               /* longest note, path or phase kept from a file */

/* A request (file "trigger", or "trigger.HOST.PID[.TAG]" for one process). */
struct sp_od_req {
	uint64_t id;            /* nonzero, new for each request */
	int64_t steps;          /* record this many whole steps from the next boundary (0: ms) */
	int64_t ms;             /* or: record this many milliseconds from now (0: steps) */
	char phase[64];         /* the phase whose steps count; "" = the process's only one */
	uint64_t at;            /* steps: the first step begins no earlier than this (CLOCK_REALTIME
				 * ns), so that the ranks of a job pick the same step; 0 = at once */
};

/* What a process says about itself (file "HOST.PID.status", "HOST.PID.TAG.status" in a pid
 * namespace: config/run.h sp_name_pid), rewritten when it changes. */
struct sp_od_status {
	int pid;
	int rank;               /* -1 while unknown */
	char host[64];
	uint64_t start;         /* /proc/PID/stat start time (clock ticks): tells a reused pid */
	uint64_t pidns;         /* its pid namespace's inode (0: unknown, a process before it was said):
				 * another than the reader's means pid and start cannot be checked there */
	int poll_ms;            /* how often it looks for requests */
	uint64_t request;       /* the last request it answered, 0 none */
	char state[16];         /* idle, armed, recording, written, refused, exited */
	int64_t first, last;    /* the steps of the window written for it (state written) */
	uint32_t window;        /* that window's id */
	char trace[SP_OD_TEXT]; /* the process's trace file, "" before it has one */
	char note[SP_OD_TEXT];  /* why refused, or what to know about the window */
};

/* Writes the text of r into buf. Returns the length, or -1 if it does not fit. Can't fail otherwise. */
int sp_od_req_format(const struct sp_od_req *r, char *buf, size_t len);
/* Parses a request's text (n bytes, not NUL-terminated). Returns 0, or -1 with the problem in err. */
int sp_od_req_parse(const char *text, size_t n, struct sp_od_req *r, char *err, size_t elen);
/* The same for a status file. */
int sp_od_status_format(const struct sp_od_status *s, char *buf, size_t len);
int sp_od_status_parse(const char *text, size_t n, struct sp_od_status *s, char *err, size_t elen);

/* Reads a control file as hostile input: opened without following a link, it must be a regular
 * file owned by the effective user, writable by no one else, at most SP_OD_MAX_BYTES. Returns the
 * bytes read into buf (NUL-terminated; len > SP_OD_MAX_BYTES), 0 if the file does not exist, or
 * -1 with the problem in err (nothing read). */
ssize_t sp_od_read(const char *path, char *buf, size_t len, char *err, size_t elen);
/* Writes text to dir/name through a new file (mode 0600, O_EXCL) renamed over it: a reader sees
 * the old text or the new, never a part. Returns 0, or -1 with errno set (nothing left behind). */
int sp_od_write(const char *dir, const char *name, const char *text);
/* Checks that dir is a directory owned by the effective user that no one else may write to
 * (mkdir 0700 first if create). Returns 0, or -1 with the problem in err. */
int sp_od_check_dir(const char *dir, int create, char *err, size_t elen);
/* This host's name as control files name it: gethostname with every character outside
 * [A-Za-z0-9_.-] made '_' ("host" if it fails). This function can't fail. */
void sp_od_host_name(char *host, size_t len);
/* A request id: new for each call (time, pid and the kernel's random bytes). Can't fail. */
uint64_t sp_od_new_id(void);
/* The start time of process pid (field 22 of /proc/PID/stat; pid 0: this process, from
 * /proc/self/stat, right in a pid namespace too), 0 if it does not exist. */
uint64_t sp_od_proc_start(int pid);

#endif
