/* SPDX-License-Identifier: MIT */
/* symbols.c - see symbols.h. Modules are kept in a table of their own (for the "module+0xoff"
 * fallback) and reported to one libdwfl session at their load bias, worked out from the file's
 * program headers (libelf): the PT_LOAD segment that holds the mapping's file offset says which
 * ELF address the mapping's first byte has. Names are cached in an open-addressing table. */
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/trace.h"
#include "cli.h"
#include "symbols.h"
#include "windows.h"

/* libstdc++'s demangler (cxxabi.h is C++ only). Returns a malloc'ed name, or NULL. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct module {
	char *path;
	const char *base;       /* file name part of path */
	uint64_t start, end, offset;
	int state;              /* 0 not reported yet, 1 reported to dwfl, -1 its file could not be used */
};

struct entry {    /* one cached address */
	uint64_t pc;            /* 0 = empty slot */
	char *frame;            /* sp_sym_frame's text */
	char *func;             /* sp_sym_function's text */
};

#define MAX_MODULES 4096        /* distinct modules kept; more are not symbolised (said once) */

/* Set by sp_sym_no_files (--no-symbols): no path from a trace is opened. */
static int no_files;

struct sp_sym {
	Dwfl *dwfl;             /* NULL if libdwfl could not start: only fallbacks then */
	struct module *mod;
	size_t nmod;
	int full;               /* modules refused past MAX_MODULES (said once) */
	int pending;            /* modules added since the last report to dwfl */
	const struct sp_trace_reader *r; /* names Python frames, NULL none */
	struct entry *tab;      /* cache, power-of-two size */
	size_t cap, n;
	char zero[8];           /* the text for pc 0 */
};

/* Separate debug information only from the build-id tree (/usr/lib/debug/.build-id), never from a
 * file the module's .gnu_debuglink names: the modules come from a trace, which may be hostile. */
static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_build_id_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
	va_list ap;
	char *p;
	va_start(ap, fmt);
	if (vasprintf(&p, fmt, ap) < 0)
		sp_oom();
	va_end(ap);
	return p;
}

/* Opens path (named by a trace: hostile) for reading only if it is a regular file: checked before
 * the open, so that a device is never opened (opening one can have side effects), and again on the
 * descriptor, which is opened non-blocking so that a FIFO swapped in between cannot hang us.
 * Returns the descriptor (blocking again, close-on-exec), or -1. */
static int open_regular(const char *path)
{
	struct stat a, b;
	if (no_files || stat(path, &a) < 0 || !S_ISREG(a.st_mode))
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1;
	if (fstat(fd, &b) < 0 || !S_ISREG(b.st_mode) || fcntl(fd, F_SETFL, 0) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The load bias of module m read from fd (its file; left open) (runtime address minus ELF
 * address). Returns 0 with *bias set, or -1 if the file isn't ELF or no PT_LOAD segment holds
 * the mapping's offset. */
static int load_bias(int fd, const struct module *m, GElf_Addr *bias)
{
	int rc = -1;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	size_t n;

	if (e && gelf_getehdr(e, &eh) && eh.e_type == ET_EXEC) {
		*bias = 0;
		rc = 0;
	} else if (e && gelf_getehdr(e, &eh) && elf_getphdrnum(e, &n) == 0) {
		for (size_t i = 0; i < n && rc < 0; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && m->offset >= ph.p_offset &&
			    m->offset < ph.p_offset + ph.p_filesz) {
				*bias = m->start - (ph.p_vaddr + (m->offset - ph.p_offset));
				rc = 0;
			}
		}
	}
	if (e)
		elf_end(e);
	return rc;
}

/* Reports the modules added since the last call to dwfl. A module whose file is unusable, or
 * that overlaps one reported before (the address was reused), is marked unusable. Can't fail. */
static void report_pending(struct sp_sym *s)
{
	s->pending = 0;
	if (!s->dwfl)
		return;
	dwfl_report_begin_add(s->dwfl);
	for (size_t i = 0; i < s->nmod; i++) {
		struct module *m = &s->mod[i];
		GElf_Addr bias;
		if (m->state)
			continue;
		m->state = -1;
		int fd = open_regular(m->path);
		/* on success dwfl keeps fd (and closes it at dwfl_end) */
		if (fd >= 0 && load_bias(fd, m, &bias) == 0 &&
		    dwfl_report_elf(s->dwfl, m->base, m->path, fd, bias, true))
			m->state = 1;
		else if (fd >= 0)
			close(fd);
	}
	dwfl_report_end(s->dwfl, NULL, NULL);
}

/* The module whose mapping holds pc, or NULL. */
static const struct module *module_of(const struct sp_sym *s, uint64_t pc)
{
	for (size_t i = 0; i < s->nmod; i++)
		if (pc >= s->mod[i].start && pc < s->mod[i].end)
			return &s->mod[i];
	return NULL;
}

/* Fills e (pc set) with its texts. Exits the CLI if memory runs out; otherwise can't fail. */
static void resolve(struct sp_sym *s, struct entry *e)
{
	const char *file, *func;
	uint32_t line;
	if (SP_IS_MARK(e->pc)) { /* not an address: what the frames outer to it are */
		e->func = sp_xstrdup(e->pc == SP_FRAME_BACKWARD ? "[backward]" : "[mark]");
		e->frame = sp_xstrdup(e->pc == SP_FRAME_BACKWARD
					      ? "[backward: the Python frames outward are the thread's in backward()]"
					      : "[mark]");
		return;
	}
	if (SP_IS_PYFRAME(e->pc)) {
		if (sp_sym_pyframe(s, e->pc, &file, &func, &line) == 0) {
			e->func = xprintf("%s (%s:%u)", func, sp_py_short_file(file), line);
			e->frame = xprintf("%s (%s:%u)", func, file, line);
		} else {
			e->func = xprintf("[python frame %u]", SP_PYFRAME_ID(e->pc));
			e->frame = sp_xstrdup(e->func);
		}
		return;
	}
	const struct module *m = module_of(s, e->pc);
	Dwfl_Module *dm = m && m->state > 0 ? dwfl_addrmodule(s->dwfl, e->pc - 1) : NULL;
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *name = dm ? dwfl_module_addrinfo(dm, e->pc - 1, &off, &sym, NULL, NULL, NULL) : NULL;

	if (name && *name) {
		int status = -1;
		char *plain = name[0] == '_' && name[1] == 'Z' ? __cxa_demangle(name, NULL, NULL, &status) : NULL;
		e->func = plain && !status ? plain : sp_xstrdup(name);
		if (e->func != plain)
			free(plain);
		e->frame = xprintf("%s+0x%" PRIx64 " (%s)", e->func, (uint64_t)off + 1, m->base);
	} else if (m) {
		uint64_t foff = e->pc - m->start + m->offset;
		e->func = xprintf("%s+0x%" PRIx64, m->base, foff);
		e->frame = xprintf("0x%" PRIx64 " (%s)", e->pc, e->func);
	} else {
		e->func = xprintf("0x%" PRIx64, e->pc);
		e->frame = sp_xstrdup(e->func);
	}
}

/* The cache entry of pc (> 0), resolved on first use. Exits if memory runs out. */
static const struct entry *lookup(struct sp_sym *s, uint64_t pc)
{
	if (s->pending)
		report_pending(s);
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct entry *t = calloc(cap, sizeof(*t));
		if (!t)
			sp_oom();
		for (size_t i = 0; i < s->cap; i++)
			if (s->tab[i].pc) {
				size_t j = (size_t)(s->tab[i].pc * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
				while (t[j].pc)
					j = (j + 1) & (cap - 1);
				t[j] = s->tab[i];
			}
		free(s->tab);
		s->tab = t;
		s->cap = cap;
	}
	size_t i = (size_t)(pc * 0x9e3779b97f4a7c15ull >> 20) & (s->cap - 1);
	while (s->tab[i].pc && s->tab[i].pc != pc)
		i = (i + 1) & (s->cap - 1);
	if (!s->tab[i].pc) {
		s->tab[i].pc = pc;
		s->n++;
		resolve(s, &s->tab[i]);
	}
	return &s->tab[i];
}

/* ---- exported ---- */

void sp_sym_no_files(void)
{
	no_files = 1;
}

struct sp_sym *sp_sym_open(void)
{
	struct sp_sym *s = calloc(1, sizeof(*s));
	if (!s)
		sp_oom();
	elf_version(EV_CURRENT);
	unsetenv("DEBUGINFOD_URLS"); /* local files only: no downloads (or network waits) from libdwfl */
	s->dwfl = dwfl_begin(&callbacks);
	strcpy(s->zero, "0x0");
	return s;
}

void sp_sym_add_module(struct sp_sym *s, const char *path, uint64_t start, uint64_t end, uint64_t offset)
{
	for (size_t i = 0; i < s->nmod; i++)
		if (s->mod[i].start == start && s->mod[i].end == end && s->mod[i].offset == offset &&
		    !strcmp(s->mod[i].path, path))
			return;
	if (s->nmod == MAX_MODULES) {
		if (!s->full++)
			fprintf(stderr,
				"stepprof: the trace maps more than %d distinct modules; addresses in the "
				"others are not symbolised\n",
				MAX_MODULES);
		return;
	}
	s->mod = sp_xrealloc(s->mod, (s->nmod + 1) * sizeof(*s->mod));
	struct module *m = &s->mod[s->nmod++];
	m->path = sp_xstrdup(path);
	m->base = strrchr(m->path, '/') ? strrchr(m->path, '/') + 1 : m->path;
	m->start = start;
	m->end = end;
	m->offset = offset;
	m->state = 0;
	s->pending = 1;
}

int sp_sym_load_trace(struct sp_sym *s, const char *path, char *err, size_t errlen)
{
	struct sp_trace_reader *r = sp_trace_open(path, err, errlen);
	struct sp_event ev;
	int n = 0;

	if (!r)
		return -1;
	while (sp_trace_next(r, &ev) == 1) {
		sp_cli_progress(r);
		if (ev.kind == SP_EV_MODULE) {
			sp_sym_add_module(s, sp_trace_string(r, ev.name), ev.u.module.start, ev.u.module.end,
					  ev.u.module.offset);
			n++;
		}
	}
	sp_trace_close_reader(r);
	return n;
}

const char *sp_sym_frame(struct sp_sym *s, uint64_t pc)
{
	return pc ? lookup(s, pc)->frame : s->zero;
}

const char *sp_sym_function(struct sp_sym *s, uint64_t pc)
{
	return pc ? lookup(s, pc)->func : s->zero;
}

void sp_sym_use_trace(struct sp_sym *s, const struct sp_trace_reader *r)
{
	s->r = r;
}

int sp_sym_pyframe(const struct sp_sym *s, uint64_t pc, const char **file, const char **func, uint32_t *line)
{
	if (!SP_IS_PYFRAME(pc) || !s->r)
		return -1;
	return sp_trace_pyframe(s->r, SP_PYFRAME_ID(pc), file, func, line);
}

int sp_py_user_file(const char *file)
{
	static const char *const lib[] = { "/site-packages/", "/dist-packages/", "/lib/python3", "/torch/" };
	if (!strncmp(file, "<frozen", 7))
		return 0;
	for (size_t i = 0; i < sizeof(lib) / sizeof(lib[0]); i++)
		if (strstr(file, lib[i]))
			return 0;
	return 1;
}

int sp_py_model_file(const char *file)
{
	const char *std = strstr(file, "/lib/python3");
	if (!strncmp(file, "<frozen", 7) || strstr(file, "/torch/"))
		return 0;
	return !std || strstr(std, "/site-packages/") || strstr(std, "/dist-packages/");
}

int sp_sym_model_frame(const struct sp_sym *s, const uint64_t *pcs, uint32_t n)
{
	const char *file, *func;
	uint32_t line;
	int first = -1;
	for (uint32_t i = 0; i < n; i++) {
		if (sp_sym_pyframe(s, pcs[i], &file, &func, &line))
			continue;
		if (sp_py_model_file(file))
			return (int)i;
		if (first < 0)
			first = (int)i;
	}
	return first;
}

const char *sp_sym_module(const struct sp_sym *s, uint64_t pc)
{
	const struct module *m = pc && !SP_IS_PYFRAME(pc) && !SP_IS_MARK(pc) ? module_of(s, pc - 1) : NULL;
	return m ? m->base : NULL;
}

int sp_stack_backward(const uint64_t *pcs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (pcs[i] == SP_FRAME_BACKWARD)
			return 1;
	return 0;
}

const char *sp_py_short_file(const char *file)
{
	const char *p;
	if ((p = strstr(file, "site-packages/")) || (p = strstr(file, "dist-packages/")))
		return p + 14;
	if ((p = strstr(file, "/lib/python3.")) && (p = strchr(p + 13, '/')))
		return p + 1;
	return file;
}

int sp_sym_user_frame(const struct sp_sym *s, const uint64_t *pcs, uint32_t n, int *user)
{
	const char *file, *func;
	uint32_t line;
	int first = -1;
	*user = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (sp_sym_pyframe(s, pcs[i], &file, &func, &line))
			continue;
		if (sp_py_user_file(file)) {
			*user = 1;
			return (int)i;
		}
		if (first < 0)
			first = (int)i;
	}
	return first;
}

const char *sp_sym_site(struct sp_sym *s, const uint64_t *pcs, uint32_t n)
{
	int user, k = n ? sp_sym_user_frame(s, pcs, n, &user) : -1;
	return !n ? "(no stack)" : sp_sym_frame(s, pcs[k < 0 ? 0 : k]);
}

void sp_sym_close(struct sp_sym *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->cap; i++)
		if (s->tab[i].pc) {
			free(s->tab[i].frame);
			free(s->tab[i].func);
		}
	for (size_t i = 0; i < s->nmod; i++)
		free(s->mod[i].path);
	if (s->dwfl)
		dwfl_end(s->dwfl);
	free(s->tab);
	free(s->mod);
	free(s);
}

/* Open-addressing cache: raw name (by content: the same address may hold another name once a
 * reader is closed) -> demangled copy, or NULL when the name is shown as it is. */
#define DEMANGLE_MAX 4096       /* longer names are shown raw: demangling hostile text costs */
static struct {
	char **raw;             /* copies of the names */
	char **shown;
	size_t cap, used;
} D;

static size_t name_hash(const char *s)
{
	size_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

void sp_display_names_free(void)
{
	for (size_t i = 0; i < D.cap; i++) {
		free(D.raw[i]);
		free(D.shown[i]);
	}
	free(D.raw);
	free(D.shown);
	memset(&D, 0, sizeof(D));
}

const char *sp_display_name(const char *raw)
{
	if (!raw || raw[0] != '_' || raw[1] != 'Z' || strnlen(raw, DEMANGLE_MAX + 1) > DEMANGLE_MAX)
		return raw;
	if ((D.used + 1) * 2 > D.cap) {
		size_t cap = D.cap ? D.cap * 2 : 1024;
		char **r = calloc(cap, sizeof(*r)), **v = calloc(cap, sizeof(*v));
		if (!r || !v) {
			free(r);
			free(v);
			return raw;
		}
		for (size_t i = 0; i < D.cap; i++)
			if (D.raw[i])
				for (size_t h = name_hash(D.raw[i]) % cap;; h = (h + 1) % cap)
					if (!r[h]) {
						r[h] = D.raw[i];
						v[h] = D.shown[i];
						break;
					}
		free(D.raw);
		free(D.shown);
		D.raw = r;
		D.shown = v;
		D.cap = cap;
	}
	size_t h = name_hash(raw) % D.cap;
	for (; D.raw[h]; h = (h + 1) % D.cap)
		if (!strcmp(D.raw[h], raw))
			return D.shown[h] ? D.shown[h] : raw;
	int status = 0;
	char *plain = __cxa_demangle(raw, NULL, NULL, &status), *copy = strdup(raw);
	if (!copy) {
		free(plain);
		return raw;
	}
	if (status != 0) {
		free(plain);
		plain = NULL;
	}
	D.raw[h] = copy;
	D.shown[h] = plain;
	D.used++;
	return plain ? plain : raw;
}
