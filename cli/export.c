/* SPDX-License-Identifier: MIT */
/* export.c - the exporter table and the output stream all exporters write through: a buffer
 * in front of stdio or a gzip stream (compressed as it goes, never held whole: ISA-L's igzip at
 * level 1 on a thread of its own, one buffer compressed while the next fills; a single gzip member,
 * as Perfetto reads no other), plus the JSON string and number formatting every text format needs. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include "export.h"
#include "outfile.h"

#define OUT_BUF (1024 * 1024)
#define GZ_LEVEL 1              /* igzip level 1: 5x zlib level 2's speed on this JSON, 5% larger (BENCHMARKS.md) */

/* gzip compression of the stream's buffers, on a thread of its own when one can be started. */
struct gz {
	FILE *f;                /* the compressed file */
	struct isal_zstream z;  /* raw deflate: the gzip header and trailer are written here */
	uint8_t *zlevel;        /* igzip's work memory for GZ_LEVEL */
	uint32_t crc;           /* CRC-32 of the bytes given so far (computed by the writing side with
	                           ISA-L's: the compressing thread does only deflate) */
	uint64_t size;          /* bytes given so far */
	int err;                /* deflate or a write failed (set by the compressing side) */
	int threaded;           /* th runs */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *job;              /* a buffer to compress, NULL when the thread is idle */
	size_t job_n;
	int finish;             /* after job: end the stream and stop */
	double cpu_s;           /* CPU seconds the thread used, when it has stopped */
	unsigned char zout[256 * 1024];
};

struct sp_out {
	FILE *f;                /* plain output, or NULL */
	int borrowed;           /* f is the caller's (sp_out_stream): flushed, not closed */
	struct gz *gz;          /* gzip output, or NULL */
	char *path, *tmp;       /* target and temporary name; NULL for stdout */
	int err;                /* a write failed */
	size_t n;               /* bytes in buf */
	char *buf, *spare;      /* OUT_BUF each; spare is being compressed while buf fills (gzip) */
};

static const struct sp_export_ops *const exporters[] = { &sp_export_chrome };

/* Deflates n bytes of p into g's file (finishing the stream if finish). Sets g->err on failure. */
static void gz_deflate(struct gz *g, const char *p, size_t n, int finish)
{
	g->z.next_in = (uint8_t *)p;
	g->z.avail_in = (uint32_t)n;
	g->z.end_of_stream = finish;
	do {
		g->z.next_out = g->zout;
		g->z.avail_out = sizeof(g->zout);
		if (isal_deflate(&g->z) != COMP_OK) {
			g->err = 1;
			return;
		}
		size_t k = sizeof(g->zout) - g->z.avail_out;
		if (k && !g->err && fwrite(g->zout, 1, k, g->f) != k)
			g->err = 1;
	} while (g->z.avail_in || g->z.avail_out == 0 || (finish && g->z.internal_state.state != ZSTATE_END));
}

/* CPU seconds of the calling thread so far. Can't fail (0 if the clock is missing). */
static double thread_cpu_s(void)
{
	struct timespec t;
	return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) ? 0 : (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The compressing thread: one job at a time, until the one marked finish. Signals blocked. */
static void *gz_thread(void *arg)
{
	struct gz *g = arg;
	int finish = 0;

	pthread_mutex_lock(&g->mu);
	while (!finish) {
		while (!g->job && !g->finish)
			pthread_cond_wait(&g->cv, &g->mu);
		char *job = g->job;
		size_t n = g->job_n;
		finish = g->finish;
		pthread_mutex_unlock(&g->mu);
		gz_deflate(g, job ? job : "", job ? n : 0, finish);
		pthread_mutex_lock(&g->mu);
		g->job = NULL;
		pthread_cond_broadcast(&g->cv);
	}
	pthread_mutex_unlock(&g->mu);
	g->cpu_s = thread_cpu_s();
	return NULL;
}

/* Waits until g's thread has no job. */
static void gz_wait(struct gz *g)
{
	pthread_mutex_lock(&g->mu);
	while (g->job)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
}

/* Starts gzip output to f (taken over). Returns NULL if memory runs out (f closed). */
static struct gz *gz_open(FILE *f)
{
	struct gz *g = calloc(1, sizeof(*g));
	sigset_t all, old;

	static const unsigned char header[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3 }; /* deflate, no mtime, Unix */

	if (!g || !(g->zlevel = malloc(ISAL_DEF_LVL1_DEFAULT))) {
		free(g);
		fclose(f);
		return NULL;
	}
	isal_deflate_init(&g->z);
	g->z.level = GZ_LEVEL;
	g->z.level_buf = g->zlevel;
	g->z.level_buf_size = ISAL_DEF_LVL1_DEFAULT;
	g->z.gzip_flag = IGZIP_DEFLATE;
	g->f = f;
	g->crc = 0;
	g->err = fwrite(header, 1, sizeof(header), f) != sizeof(header);
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	g->threaded = pthread_create(&g->th, NULL, gz_thread, g) == 0; /* else compressed inline */
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return g;
}

/* Ends the stream, closes the file, frees g. Returns 0 or -1 if anything failed. */
static int gz_close(struct gz *g)
{
	int err;

	if (g->threaded) {
		pthread_mutex_lock(&g->mu);
		while (g->job)
			pthread_cond_wait(&g->cv, &g->mu);
		g->finish = 1;
		pthread_cond_broadcast(&g->cv);
		pthread_mutex_unlock(&g->mu);
		pthread_join(g->th, NULL);
	} else {
		gz_deflate(g, "", 0, 1);
	}
	if (getenv("STEPPROF_CONVERT_STATS")) /* for bench/convert_bench.sh: is the pipeline balanced? */
		fprintf(stderr, "stepprof: cpu: writing thread %.2f s, gzip thread %.2f s%s\n", thread_cpu_s(),
			g->cpu_s, g->threaded ? "" : " (no thread: gzip inline)");
	free(g->zlevel);
	unsigned char trailer[8];
	for (int i = 0; i < 4; i++) {
		trailer[i] = (unsigned char)(g->crc >> (8 * i));
		trailer[4 + i] = (unsigned char)(g->size >> (8 * i));
	}
	err = g->err || fwrite(trailer, 1, sizeof(trailer), g->f) != sizeof(trailer);
	err |= fclose(g->f) != 0;
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g);
	return err ? -1 : 0;
}

static void out_flush(struct sp_out *o)
{
	if (!o->n || o->err)
		goto done;
	if (o->gz) {
		o->gz->crc = crc32_gzip_refl(o->gz->crc, (const unsigned char *)o->buf, o->n);
		o->gz->size += o->n;
	}
	if (o->gz && o->gz->threaded) { /* hand buf over, fill the spare meanwhile */
		char *full = o->buf;
		gz_wait(o->gz);
		o->err = o->gz->err;
		pthread_mutex_lock(&o->gz->mu);
		o->gz->job = full;
		o->gz->job_n = o->n;
		pthread_cond_broadcast(&o->gz->cv);
		pthread_mutex_unlock(&o->gz->mu);
		o->buf = o->spare;
		o->spare = full;
	} else if (o->gz) {
		gz_deflate(o->gz, o->buf, o->n, 0);
		o->err = o->gz->err;
	} else {
		o->err = fwrite(o->buf, 1, o->n, o->f) != o->n;
	}
done:
	o->n = 0;
}

/* A zeroed sp_out with its buffers, or NULL. */
static struct sp_out *out_new(void)
{
	struct sp_out *o = calloc(1, sizeof(*o));

	if (o && (!(o->buf = malloc(OUT_BUF)) || !(o->spare = malloc(OUT_BUF)))) {
		free(o->buf);
		free(o);
		o = NULL;
	}
	return o;
}

static void out_free(struct sp_out *o)
{
	free(o->buf);
	free(o->spare);
	free(o);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if the bytes there are not one. */
static int utf8_len(const unsigned char *s)
{
	unsigned c = s[0], lo = 0x80, hi = 0xbf;
	int len;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (int i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

const struct sp_export_ops *sp_export_find(const char *name)
{
	for (size_t i = 0; i < sizeof(exporters) / sizeof(exporters[0]); i++)
		if (!strcmp(exporters[i]->name, name))
			return exporters[i];
	return NULL;
}

struct sp_out *sp_out_stream(FILE *f)
{
	struct sp_out *o = out_new();
	if (!o)
		sp_oom();
	o->f = f;
	o->borrowed = 1;
	return o;
}

struct sp_out *sp_out_open(const char *path, char *err, size_t errlen)
{
	struct sp_out *o = out_new();
	size_t len = strlen(path);

	if (!o) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (!strcmp(path, "-")) {
		o->f = stdout;
		return o;
	}
	int fd = -1;
	o->path = strdup(path);
	if (!o->path) {
		snprintf(err, errlen, "out of memory");
		out_free(o);
		return NULL;
	}
	/* written under a mkstemp name beside path, renamed over it by sp_out_close (outfile.h) */
	if ((fd = sp_outfile_create(path, &o->tmp, err, errlen)) >= 0) {
		o->f = fdopen(fd, "w");
		int owned = o->f != NULL; /* fd is the stream's now (and gz_open closes it on failure) */
		if (o->f && len > 3 && !strcmp(path + len - 3, ".gz")) {
			errno = ENOMEM;
			o->gz = gz_open(o->f); /* takes f over */
			o->f = NULL;
		}
		if (!o->gz && !o->f) {
			snprintf(err, errlen, "%s: %s", o->tmp, strerror(errno ? errno : ENOMEM));
			if (!owned)
				close(fd);
			sp_outfile_commit(o->tmp, path, 0);
			fd = -1;
		}
	}
	if (fd < 0) {
		free(o->path);
		out_free(o);
		return NULL;
	}
	return o;
}

void sp_out_write(struct sp_out *o, const void *p, size_t n)
{
	if (n < OUT_BUF - o->n) { /* the usual case: it fits */
		memcpy(o->buf + o->n, p, n);
		o->n += n;
		return;
	}
	while (n) {
		size_t k = OUT_BUF - o->n < n ? OUT_BUF - o->n : n;
		memcpy(o->buf + o->n, p, k);
		o->n += k;
		p = (const char *)p + k;
		n -= k;
		if (o->n == OUT_BUF)
			out_flush(o);
	}
}

void sp_out_puts(struct sp_out *o, const char *s)
{
	sp_out_write(o, s, strlen(s));
}

void sp_out_printf(struct sp_out *o, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		o->err = 1;
	} else if ((size_t)n < sizeof(small)) {
		sp_out_write(o, small, (size_t)n);
	} else {
		char *big = sp_xrealloc(NULL, (size_t)n + 1);
		va_start(ap, fmt);
		vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
		sp_out_write(o, big, (size_t)n);
		free(big);
	}
}

void sp_out_json_str(struct sp_out *o, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	const unsigned char *run = p; /* bytes to copy as they are */

	sp_out_write(o, "\"", 1);
	while (*p) {
		int len = utf8_len(p);
		if (len == 1 && *p >= 0x20 && *p != '"' && *p != '\\') {
			p++;
			continue;
		}
		if (len > 1) {
			p += len;
			continue;
		}
		sp_out_write(o, run, (size_t)(p - run));
		if (!len)
			sp_out_puts(o, "\\ufffd");
		else if (*p == '"' || *p == '\\')
			sp_out_printf(o, "\\%c", *p);
		else if (*p == '\n')
			sp_out_puts(o, "\\n");
		else if (*p == '\t')
			sp_out_puts(o, "\\t");
		else if (*p == '\r')
			sp_out_puts(o, "\\r");
		else
			sp_out_printf(o, "\\u%04x", *p);
		run = ++p;
	}
	sp_out_write(o, run, (size_t)(p - run));
	sp_out_write(o, "\"", 1);
}

char *sp_out_room(struct sp_out *o, size_t n)
{
	if (OUT_BUF - o->n < n)
		out_flush(o);
	return o->buf + o->n;
}

void sp_out_done(struct sp_out *o, char *end)
{
	o->n = (size_t)(end - o->buf);
	if (o->n == OUT_BUF)
		out_flush(o);
}

char *sp_put_i64(char *p, int64_t v)
{
	if (v < 0)
		*p++ = '-';
	return sp_put_u64(p, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

char *sp_put_fixed(char *p, double v, int decimals)
{
	static const double scale[] = { 1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9 };
	int d = decimals < 0 ? 0 : decimals > 9 ? 9 : decimals;
	uint64_t q, f;

	/* printf's way for NaN (written as 0) and for numbers whose scaled value is past 2^53, where
	 * the integer arithmetic below would be inexact or overflow */
	if (d != decimals || !(v > -9007199254740992.0 / scale[d] && v < 9007199254740992.0 / scale[d])) {
		int n = snprintf(p, SP_PUT_FIXED_MAX, "%.*f", d, v == v ? v : 0.0);
		return p + (n < 0 ? 0 : n < SP_PUT_FIXED_MAX ? n : SP_PUT_FIXED_MAX - 1);
	}
	if (v < 0) {
		*p++ = '-';
		v = -v;
	}
	q = (uint64_t)(v * scale[decimals] + 0.5);
	f = q % (uint64_t)scale[decimals];
	p = sp_put_u64(p, q / (uint64_t)scale[decimals]);
	if (!decimals)
		return p;
	*p = '.';
	for (int i = decimals; i >= 1; i--, f /= 10)
		p[i] = (char)('0' + f % 10);
	return p + decimals + 1;
}

char *sp_put_us(char *p, int64_t ns)
{
	uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	unsigned f = (unsigned)(a % 1000);

	if (ns < 0)
		*p++ = '-';
	p = sp_put_u64(p, a / 1000);
	p[0] = '.';
	p[1] = (char)('0' + f / 100);
	p[2] = (char)('0' + f / 10 % 10);
	p[3] = (char)('0' + f % 10);
	return p + 4;
}

/* Writes the decimal digits of v. Can't fail. */
void sp_out_u64(struct sp_out *o, uint64_t v)
{
	sp_out_done(o, sp_put_u64(sp_out_room(o, SP_PUT_NUM_MAX), v));
}

void sp_out_i64(struct sp_out *o, int64_t v)
{
	sp_out_done(o, sp_put_i64(sp_out_room(o, SP_PUT_NUM_MAX), v));
}

void sp_out_fixed(struct sp_out *o, double v, int decimals)
{
	sp_out_done(o, sp_put_fixed(sp_out_room(o, SP_PUT_FIXED_MAX), v, decimals));
}

void sp_out_us(struct sp_out *o, int64_t ns)
{
	sp_out_done(o, sp_put_us(sp_out_room(o, SP_PUT_NUM_MAX), ns));
}

int sp_out_close(struct sp_out *o, int keep)
{
	int rc;

	out_flush(o);
	if (o->gz)
		o->err |= gz_close(o->gz) != 0;
	else if (o->f == stdout || o->borrowed)
		o->err |= fflush(o->f) != 0;
	else
		o->err |= fclose(o->f) != 0;
	if (o->tmp) {
		if (o->err)
			fprintf(stderr, "stepprof: writing %s failed\n", o->path);
		o->err |= sp_outfile_commit(o->tmp, o->path, keep && !o->err) < 0;
	}
	rc = o->err ? -1 : 0;
	free(o->path);
	out_free(o);
	return rc;
}
