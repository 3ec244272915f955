/* SPDX-License-Identifier: MIT */
/* export.c - the exporter table and the output stream all exporters write through: a buffer
 * in front of stdio or zlib's gzip stream (compressed as it goes, never held whole), plus the
 * JSON string and time formatting every text format needs. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "export.h"

#define OUT_BUF (256 * 1024)

struct sp_out {
	FILE *f;                /* plain output, or NULL */
	int borrowed;           /* f is the caller's (sp_out_stream): flushed, not closed */
	gzFile gz;              /* gzip output, or NULL */
	char *path, *tmp;       /* target and temporary name; NULL for stdout */
	int err;                /* a write failed */
	size_t n;               /* bytes in buf */
	char buf[OUT_BUF];
};

static const struct sp_export_ops *const exporters[] = { &sp_export_chrome };

static void out_flush(struct sp_out *o)
{
	if (!o->n || o->err)
		goto done;
	if (o->gz)
		o->err = gzwrite(o->gz, o->buf, (unsigned)o->n) != (int)o->n;
	else
		o->err = fwrite(o->buf, 1, o->n, o->f) != o->n;
done:
	o->n = 0;
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
	struct sp_out *o = calloc(1, sizeof(*o));
	if (!o)
		sp_oom();
	o->f = f;
	o->borrowed = 1;
	return o;
}

struct sp_out *sp_out_open(const char *path, char *err, size_t errlen)
{
	struct sp_out *o = calloc(1, sizeof(*o));
	size_t len = strlen(path);

	if (!o) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (!strcmp(path, "-")) {
		o->f = stdout;
		return o;
	}
	o->path = strdup(path);
	if (!o->path || asprintf(&o->tmp, "%s.tmp", path) < 0) {
		snprintf(err, errlen, "out of memory");
		free(o->path);
		free(o);
		return NULL;
	}
	if (len > 3 && !strcmp(path + len - 3, ".gz"))
		o->gz = gzopen(o->tmp, "wbe");
	else
		o->f = fopen(o->tmp, "we");
	if (!o->gz && !o->f) {
		snprintf(err, errlen, "%s: %s", o->tmp, strerror(errno ? errno : ENOMEM));
		free(o->tmp);
		free(o->path);
		free(o);
		return NULL;
	}
	return o;
}

void sp_out_write(struct sp_out *o, const void *p, size_t n)
{
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

/* Writes the decimal digits of v. Can't fail. */
void sp_out_u64(struct sp_out *o, uint64_t v)
{
	char b[24], *p = b + sizeof(b);

	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	sp_out_write(o, p, (size_t)(b + sizeof(b) - p));
}

void sp_out_i64(struct sp_out *o, int64_t v)
{
	if (v < 0)
		sp_out_write(o, "-", 1);
	sp_out_u64(o, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

void sp_out_us(struct sp_out *o, int64_t ns)
{
	uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	unsigned f = (unsigned)(a % 1000);
	char frac[4] = { '.', (char)('0' + f / 100), (char)('0' + f / 10 % 10), (char)('0' + f % 10) };

	if (ns < 0)
		sp_out_write(o, "-", 1);
	sp_out_u64(o, a / 1000);
	sp_out_write(o, frac, 4);
}

int sp_out_close(struct sp_out *o, int keep)
{
	int rc;

	out_flush(o);
	if (o->gz)
		o->err |= gzclose(o->gz) != Z_OK;
	else if (o->f == stdout || o->borrowed)
		o->err |= fflush(o->f) != 0;
	else
		o->err |= fclose(o->f) != 0;
	if (o->tmp) {
		if (o->err)
			fprintf(stderr, "stepprof: writing %s failed\n", o->tmp);
		else if (keep && rename(o->tmp, o->path)) {
			fprintf(stderr, "stepprof: %s: %s\n", o->path, strerror(errno));
			o->err = 1;
		}
		if (o->err || !keep)
			unlink(o->tmp);
	}
	rc = o->err ? -1 : 0;
	free(o->tmp);
	free(o->path);
	free(o);
	return rc;
}
