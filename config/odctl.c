/* SPDX-License-Identifier: MIT */
/* odctl.c - on-demand control files (see odctl.h): format, parse, read with checks, write
 * atomically. Every input is hostile: strict line format, bounded sizes, no link followed. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "odctl.h"

#define REQ_MAGIC "stepprof-trigger 1"
#define STATUS_MAGIC "stepprof-status 1"

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t elen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, elen, fmt, ap);
	va_end(ap);
	return -1;
}

#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

/* A name: 1..len-1 characters of [A-Za-z0-9_.-] (a phase, a host). Returns 0 or -1. */
static int copy_name(char *dst, size_t len, const char *v)
{
	size_t n = strlen(v);
	if (!n || n >= len || strspn(v, NAME_CHARS) != n)
		return -1;
	memset(dst, 0, len); /* a key given twice leaves nothing of the first value */
	memcpy(dst, v, n);
	return 0;
}

/* A decimal integer in [lo, hi]. Returns 0 or -1. */
static int to_int(const char *v, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi)
		return -1;
	*out = x;
	return 0;
}

/* Splits text (n bytes) into lines "key value" and calls fn for each after the magic first line.
 * Returns 0, or -1 with the problem in err. */
static int each_line(const char *text, size_t n, const char *magic, int (*fn)(void *, const char *, const char *),
		     void *ctx, char *err, size_t elen)
{
	char line[SP_OD_TEXT + 64];
	size_t i = 0;
	int no = 0;
	if (memchr(text, 0, n))
		return fail(err, elen, "a NUL byte in the file");
	while (i < n) {
		const char *nl = memchr(text + i, '\n', n - i);
		size_t l = nl ? (size_t)(nl - text - i) : n - i;
		if (l >= sizeof line)
			return fail(err, elen, "line %d is too long", no + 1);
		memcpy(line, text + i, l);
		line[l] = 0;
		i += l + 1;
		if (no++ == 0) {
			if (strcmp(line, magic))
				return fail(err, elen,
					    "not a stepprof control file (first line '%.40s', expected '%s')", line,
					    magic);
			continue;
		}
		if (!line[0])
			continue;
		char *sp = strchr(line, ' ');
		const char *val = sp ? sp + 1 : "";
		if (sp)
			*sp = 0;
		if (fn(ctx, line, val) < 0)
			return fail(err, elen, "line %d: bad '%.32s' value '%.40s'", no, line, val);
	}
	if (!no)
		return fail(err, elen, "empty file");
	return 0;
}

static int req_key(void *ctx, const char *k, const char *v)
{
	struct sp_od_req *r = ctx;
	char *end;
	if (!strcmp(k, "id")) {
		errno = 0;
		r->id = strtoull(v, &end, 16);
		return errno || end == v || *end || !r->id || strlen(v) > 16 ? -1 : 0;
	}
	if (!strcmp(k, "steps"))
		return to_int(v, 1, SP_OD_MAX_STEPS, &r->steps);
	if (!strcmp(k, "ms"))
		return to_int(v, 1, SP_OD_MAX_MS, &r->ms);
	if (!strcmp(k, "phase"))
		return copy_name(r->phase, sizeof r->phase, v);
	if (!strcmp(k, "at")) {
		int64_t at;
		if (to_int(v, 1, INT64_MAX, &at) < 0)
			return -1;
		r->at = (uint64_t)at;
		return 0;
	}
	return -1; /* an unknown key: a newer stepprof's request is refused, not half obeyed */
}

int sp_od_req_format(const struct sp_od_req *r, char *buf, size_t len)
{
	int n = snprintf(buf, len, REQ_MAGIC "\nid %016" PRIx64 "\n", r->id);
	if (n >= 0 && (size_t)n < len && r->steps)
		n += snprintf(buf + n, len - n, "steps %" PRId64 "\n", r->steps);
	if (n >= 0 && (size_t)n < len && r->ms)
		n += snprintf(buf + n, len - n, "ms %" PRId64 "\n", r->ms);
	if (n >= 0 && (size_t)n < len && r->phase[0])
		n += snprintf(buf + n, len - n, "phase %s\n", r->phase);
	if (n >= 0 && (size_t)n < len && r->at)
		n += snprintf(buf + n, len - n, "at %" PRIu64 "\n", r->at);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int sp_od_req_parse(const char *text, size_t n, struct sp_od_req *r, char *err, size_t elen)
{
	memset(r, 0, sizeof *r);
	if (each_line(text, n, REQ_MAGIC, req_key, r, err, elen) < 0)
		return -1;
	if (!r->id)
		return fail(err, elen, "no request id");
	if (!r->steps == !r->ms)
		return fail(err, elen, "a request asks for either steps or ms");
	return 0;
}

static int status_key(void *ctx, const char *k, const char *v)
{
	struct sp_od_status *s = ctx;
	int64_t x;
	char *end;
	if (!strcmp(k, "pid") || !strcmp(k, "rank") || !strcmp(k, "poll_ms") || !strcmp(k, "window")) {
		if (to_int(v, !strcmp(k, "rank") ? -1 : 0, INT32_MAX, &x) < 0)
			return -1;
		if (k[0] == 'p' && k[1] == 'i')
			s->pid = (int)x;
		else if (k[0] == 'r')
			s->rank = (int)x;
		else if (k[0] == 'p')
			s->poll_ms = (int)x;
		else
			s->window = (uint32_t)x;
		return 0;
	}
	if (!strcmp(k, "first"))
		return to_int(v, INT64_MIN, INT64_MAX, &s->first);
	if (!strcmp(k, "last"))
		return to_int(v, INT64_MIN, INT64_MAX, &s->last);
	if (!strcmp(k, "host"))
		return copy_name(s->host, sizeof s->host, v);
	if (!strcmp(k, "state"))
		return copy_name(s->state, sizeof s->state, v);
	if (!strcmp(k, "start") || !strcmp(k, "request") || !strcmp(k, "pidns")) {
		errno = 0;
		uint64_t u = strtoull(v, &end, k[0] == 'r' ? 16 : 10);
		if (errno || end == v || *end)
			return -1;
		*(k[0] == 'r' ? &s->request : k[1] == 'i' ? &s->pidns : &s->start) = u;
		return 0;
	}
	if (!strcmp(k, "trace") || !strcmp(k, "note")) {
		char *dst = k[0] == 't' ? s->trace : s->note;
		snprintf(dst, SP_OD_TEXT, "%s", v);
		return 0;
	}
	return 0; /* a newer process's extra keys are ignored: the status is only read for display */
}

int sp_od_status_format(const struct sp_od_status *s, char *buf, size_t len)
{
	int n = snprintf(buf, len,
			 STATUS_MAGIC "\npid %d\nrank %d\nhost %s\nstart %" PRIu64 "\npidns %" PRIu64
				      "\npoll_ms %d\nrequest %016" PRIx64 "\nstate %s\nwindow %u\nfirst %" PRId64
				      "\nlast %" PRId64 "\ntrace %s\nnote %s\n",
			 s->pid, s->rank, s->host, s->start, s->pidns, s->poll_ms, s->request, s->state, s->window,
			 s->first, s->last, s->trace, s->note);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int sp_od_status_parse(const char *text, size_t n, struct sp_od_status *s, char *err, size_t elen)
{
	memset(s, 0, sizeof *s);
	s->rank = -1;
	if (each_line(text, n, STATUS_MAGIC, status_key, s, err, elen) < 0)
		return -1;
	if (s->pid <= 0 || !s->host[0] || !s->state[0])
		return fail(err, elen, "no pid, host or state");
	return 0;
}

ssize_t sp_od_read(const char *path, char *buf, size_t len, char *err, size_t elen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return fail(err, elen, "cannot open %s: %s", path, strerror(errno));
	}
	ssize_t n = -1;
	if (fstat(fd, &st) < 0)
		fail(err, elen, "cannot stat %s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		fail(err, elen, "%s is not a regular file", path);
	else if (st.st_uid != geteuid())
		fail(err, elen, "%s belongs to uid %u, not to this process's uid %u", path, (unsigned)st.st_uid,
		     (unsigned)geteuid());
	else if (st.st_mode & 022)
		fail(err, elen, "%s may be written by other users (mode %03o)", path, (unsigned)(st.st_mode & 0777));
	else if (st.st_size > SP_OD_MAX_BYTES || len <= SP_OD_MAX_BYTES)
		fail(err, elen, "%s is larger than %d bytes", path, SP_OD_MAX_BYTES);
	else {
		n = read(fd, buf, SP_OD_MAX_BYTES + 1);
		if (n < 0)
			fail(err, elen, "cannot read %s: %s", path, strerror(errno));
		else if (n > SP_OD_MAX_BYTES) {
			fail(err, elen, "%s is larger than %d bytes", path, SP_OD_MAX_BYTES);
			n = -1;
		} else
			buf[n] = 0;
	}
	close(fd);
	return n;
}

int sp_od_write(const char *dir, const char *name, const char *text)
{
	char tmp[4096 + 64], dst[4096 + 64];
	if (snprintf(dst, sizeof dst, "%s/%s", dir, name) >= (int)sizeof dst ||
	    snprintf(tmp, sizeof tmp, "%s/.%s.%d.tmp", dir, name, (int)getpid()) >= (int)sizeof tmp) {
		errno = ENAMETOOLONG;
		return -1;
	}
	unlink(tmp); /* a leftover of a killed writer (ours: the directory is 0700) */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	size_t len = strlen(text), off = 0;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;
			close(fd);
			unlink(tmp);
			errno = e;
			return -1;
		}
		off += (size_t)w;
	}
	if (close(fd) < 0 || rename(tmp, dst) < 0) {
		int e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

int sp_od_check_dir(const char *dir, int create, char *err, size_t elen)
{
	struct stat st;
	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
		return fail(err, elen, "cannot create %s: %s", dir, strerror(errno));
	if (lstat(dir, &st) < 0)
		return fail(err, elen, "cannot stat %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return fail(err, elen, "%s is not a directory", dir);
	if (st.st_uid != geteuid())
		return fail(err, elen, "%s belongs to uid %u, not to uid %u: another user could steer the job", dir,
			    (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 022)
		return fail(err, elen, "%s may be written by other users (mode %03o): another user could steer the job",
			    dir, (unsigned)(st.st_mode & 0777));
	return 0;
}

void sp_od_host_name(char *host, size_t len)
{
	if (gethostname(host, len - 1) < 0 || !host[0])
		snprintf(host, len, "host");
	host[len - 1] = 0;
	for (char *p = host; *p; p++)
		if (!strchr(NAME_CHARS, *p))
			*p = '_';
}

uint64_t sp_od_new_id(void)
{
	uint64_t r = 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r)
		r = 0;
	r ^= (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40);
	return r ? r : 1;
}

uint64_t sp_od_proc_start(int pid)
{
	char path[64], buf[1024];
	if (pid)
		snprintf(path, sizeof path, "/proc/%d/stat", pid);
	else
		snprintf(path, sizeof path, "/proc/self/stat");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	if (!p)
		return 0;
	/* after ") ": state is field 3, starttime field 22 */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}
