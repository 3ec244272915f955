/* SPDX-License-Identifier: MIT */
/* pystack.c - see pystack.h. Reads the calling thread's own frame chain through a per-version layout,
 * never the C API (no GIL held at a launch); the layout is checked before it is trusted and any failed
 * check turns the walker off (docs/ARCHITECTURE.md, Python frames). */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include "trace/trace.h"
#include "collector/base/intern.h"
#include "collector/base/log.h"
#include "pystack.h"

#define NO 0xffffu               /* no such field in this version */
#define CSTACK_OWNER 3           /* FRAME_OWNED_BY_CSTACK (3.12+): the shim frame of an eval call */
#define MAX_PYFRAMES (1u << 20)  /* Python frame ids */
#define FRAME_SLOTS (1u << 21)   /* hash of (file, func, line) -> id */
#define CACHE_SLOTS (1u << 16)   /* hash of (code, instruction) -> id */
#define CACHE_PROBES 16
#define NAME_MAX_BYTES 1024
#define BORROW_FRAMES 256        /* frames of a borrowed walk checked again after it */
#define THREADS_MAX 256          /* thread states looked at for one waiting in backward() */
#define FRAME_HEAD 104           /* bytes of a frame that hold its code, link and instruction */

/* Where the walker reads, per minor version (offsets in bytes; checked on this machine against
 * pyenv's 3.10.13, 3.11.7, 3.12.1, 3.13.0 and Debian's 3.11.2 by tests/e2e/pystack.sh). */
struct layout {
	int minor;
	uint16_t ts_frame;      /* PyThreadState: frame (3.10), cframe (3.11, 3.12), current_frame (3.13) */
	uint16_t cf_current;    /* _PyCFrame.current_frame (3.11, 3.12) */
	uint16_t fr_back, fr_code, fr_trace, fr_lasti, fr_lineno; /* PyFrameObject (3.10) */
	uint16_t if_code, if_prev, if_instr, if_entry, if_owner;  /* _PyInterpreterFrame (3.11+) */
	uint16_t co_filename, co_name, co_firstlineno;            /* PyCodeObject; co_name: co_qualname from 3.11 */
	uint16_t str_ascii, str_compact; /* sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject) */
};

static const struct layout layouts[] = {
	{ 10, 24, NO, 24, 32, 72, 96, 100, NO, NO, NO, NO, NO, 104, 112, 40, 48, 72 },
	{ 11, 56, 8, NO, NO, NO, NO, NO, 32, 48, 56, 68, NO, 112, 128, 72, 48, 72 },
	{ 12, 56, 0, NO, NO, NO, NO, NO, 0, 8, 56, NO, 70, 112, 128, 68, 40, 56 },
	{ 13, 72, NO, NO, NO, NO, NO, NO, 0, 8, 56, NO, 70, 112, 128, 68, 40, 56 },
};

struct pyframe {
	uint32_t file, func, line;
};

typedef void *(*PyInterpreterState_fn)(void);

struct centry {   /* (code, instruction) -> frame id, with what makes the code unique */
	uintptr_t code, file, name;
	int32_t lasti, first;
	uint32_t id;
};

static struct {
	pthread_once_t once;
	const struct layout *layout; /* NULL: no walking (no CPython, or one this file does not know) */
	char version[16];           /* "3.12" */
	atomic_int off;             /* a layout check failed: no more walking */
	int trusted;                /* a walk passed its checks with guarded reads (under lock) */
	int pipe[2];                /* guarded reads until trusted */
	uintptr_t code_type, str_type, frame_type; /* &PyCode_Type, &PyUnicode_Type, &PyFrame_Type */
	uintptr_t code_base;        /* PyCode_Type.tp_basicsize: offset of co_code_adaptive (3.11+) */
	uintptr_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault's text */
	void *(*this_tstate)(void); /* PyGILState_GetThisThreadState: a TSS read */
	int (*is_init)(void);
	int (*finalizing)(void);
	int (*addr2line)(void *code, int addr);
	pthread_mutex_t lock;       /* walks (cache and guarded reads) */
	struct centry *cache;       /* mmap'ed, CACHE_SLOTS */
	PyInterpreterState_fn main_interp; /* PyInterpreterState_Main, else PyInterpreterState_Head */
	void *(*thread_head)(void *interp); /* PyInterpreterState_ThreadHead: a field read */
	int vm_off;                 /* process_vm_readv refused: guarded reads go through the pipe */
	pid_t pid;                  /* this process (a forked child walks nothing) */
	pthread_mutex_t ftlock;     /* frame table inserts */
	struct pyframe *byid;       /* mmap'ed, id -> frame */
	uint32_t *ftab;             /* mmap'ed, FRAME_SLOTS */
	atomic_uint count;          /* frame ids handed out */
} pywalk = { .once = PTHREAD_ONCE_INIT,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.ftlock = PTHREAD_MUTEX_INITIALIZER,
	.pipe = { -1, -1 } };

/* The last walk of another thread's frames (sp_pystack_borrow), reused while every frame it read
 * still holds the same code, link and instruction (the thread is still blocked in that call).
 * Under pywalk.lock. */
static struct {
	uintptr_t ts;               /* the thread state walked, 0 none */
	uintptr_t scan;             /* the one being walked now (the one walked, after) */
	uintptr_t cframe;           /* its _PyCFrame when the walk began (3.11, 3.12; else unused) */
	int nf;                     /* frames read (shim frames included) */
	uintptr_t at[BORROW_FRAMES];   /* their addresses, innermost first */
	uintptr_t key[BORROW_FRAMES][3]; /* what identifies each: code, previous frame, instruction */
	int n;                      /* Python frame ids it gave */
	uint32_t ids[SP_PY_MAX];
} borrowed;

static __thread int guard_reads; /* reading another thread's frames: every read guarded */

static void *sym(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

static void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* In a forked child (a data loader worker: no CUDA there) a lock may have been held at the fork
 * and the cache half written: the child walks no Python frames. Runs in the child after fork. */
static void child_after_fork(void)
{
	pthread_mutex_init(&pywalk.lock, NULL);
	pthread_mutex_init(&pywalk.ftlock, NULL);
	atomic_store(&pywalk.off, 1);
}

/* Finds the interpreter. Leaves pywalk.layout NULL (no walking, silently) in a process without CPython,
 * and warns once for a CPython this walker does not know. */
static void resolve(void)
{
	const char *(*get_version)(void) = (const char *(*)(void))sym("Py_GetVersion");
	void *eval = sym("_PyEval_EvalFrameDefault");
	if (!get_version || !eval)
		return; /* not a Python process */
	const char *v = get_version();
	int major = 0, minor = 0;
	if (!v || sscanf(v, "%d.%d", &major, &minor) != 2)
		return;
	snprintf(pywalk.version, sizeof(pywalk.version), "%d.%d", major, minor);
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (major == 3 && layouts[i].minor == minor)
			pywalk.layout = &layouts[i];
	pywalk.this_tstate = (void *(*)(void))sym("PyGILState_GetThisThreadState");
	pywalk.is_init = (int (*)(void))sym("Py_IsInitialized");
	pywalk.finalizing = (int (*)(void))(sym("Py_IsFinalizing") ? sym("Py_IsFinalizing") : sym("_Py_IsFinalizing"));
	pywalk.addr2line = (int (*)(void *, int))sym("PyCode_Addr2Line");
	pywalk.code_type = (uintptr_t)sym("PyCode_Type");
	pywalk.str_type = (uintptr_t)sym("PyUnicode_Type");
	pywalk.frame_type = (uintptr_t)sym("PyFrame_Type");
	pywalk.main_interp = (PyInterpreterState_fn)(sym("PyInterpreterState_Main") ? sym("PyInterpreterState_Main")
									       : sym("PyInterpreterState_Head"));
	pywalk.thread_head = (void *(*)(void *))sym("PyInterpreterState_ThreadHead");
	pywalk.pid = getpid();
	const char *why = !pywalk.layout                                            ? "only 3.10 to 3.13 are known"
			  : strstr(v, "free-threading")                   ? "a free-threading build"
			  : sym("_Py_RefTotal") || sym("_Py_GetRefTotal") ? "a debug build"
			  : !pywalk.this_tstate || !pywalk.is_init || !pywalk.finalizing || !pywalk.addr2line ||
			  	!pywalk.code_type ||
					  !pywalk.str_type || (minor == 10 && !pywalk.frame_type)
				  ? "a symbol is missing"
				  : NULL;
	if (!why) {
		pywalk.code_base = *(const uintptr_t *)(pywalk.code_type + 32); /* PyTypeObject.tp_basicsize */
		pywalk.cache = map(CACHE_SLOTS * sizeof(*pywalk.cache));
		if (!pywalk.cache || pipe2(pywalk.pipe, O_CLOEXEC | O_NONBLOCK) < 0)
			why = "no memory or no pipe for its first, guarded walk";
	}
	if (!why && pthread_atfork(NULL, NULL, child_after_fork) != 0)
		why = "pthread_atfork failed";
	if (why) {
		sp_warn("Python %s: no Python frames in stacks (%s)", pywalk.version, why);
		pywalk.layout = NULL;
		return;
	}
	Dl_info info;
	const ElfW(Sym) *es = NULL;
	if (dladdr1(eval, &info, (void **)&es, RTLD_DL_SYMENT) && es && es->st_size) {
		pywalk.eval_lo = (uintptr_t)eval;
		pywalk.eval_hi = pywalk.eval_lo + es->st_size;
	}
}

/* Reads n bytes at a into dst: directly once the layout is trusted, else through the pipe, so a
 * bad address fails (EFAULT) instead of faulting. Returns 0 or -1. Under pywalk.lock. */
static int rd(void *dst, uintptr_t a, size_t n)
{
	if (a < 4096)
		return -1;
	if (pywalk.trusted && !guard_reads) {
		memcpy(dst, (const void *)a, n);
		return 0;
	}
	if (guard_reads && !pywalk.vm_off) { /* one system call; the pipe where it is refused (seccomp) */
		struct iovec l = { dst, n }, r = { (void *)a, n };
		ssize_t got = process_vm_readv(pywalk.pid, &l, 1, &r, 1, 0);
		if (got == (ssize_t)n)
			return 0;
		if (got >= 0 || errno == EFAULT)
			return -1;
		pywalk.vm_off = 1;
	}
	return write(pywalk.pipe[1], (const void *)a, n) == (ssize_t)n && read(pywalk.pipe[0], dst,
									       n) == (ssize_t)n ? 0 : -1;
}

/* rd of one pointer, int or byte: a plain load once trusted (the walk's every step). */
#define RD_TYPED(name, type)                                       \
	static inline int name(uintptr_t a, type *v)               \
	{                                                          \
		if (__builtin_expect(pywalk.trusted && !guard_reads, 1) && a >= 4096) { \
			*v = *(const type *)a;                     \
			return 0;                                  \
		}                                                  \
		return rd(v, a, sizeof(*v));                       \
	}
RD_TYPED(rd_ptr, uintptr_t)
RD_TYPED(rd_int, int32_t)
RD_TYPED(rd_u8, uint8_t)

/* 1 if object o has type t (o's ob_type at offset 8), else 0. */
static inline int is_a(uintptr_t o, uintptr_t t)
{
	uintptr_t ty;
	return o && rd_ptr(o + 8, &ty) == 0 && ty == t;
}

/* Appends code point c as UTF-8 to buf (len, at most cap - 1 bytes). */
static void put_utf8(char *buf, size_t *len, size_t cap, uint32_t c)
{
	char t[4];
	size_t n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
	if (n == 1)
		t[0] = (char)c;
	else if (n == 2)
		t[0] = (char)(0xc0 | c >> 6), t[1] = (char)(0x80 | (c & 0x3f));
	else if (n == 3)
		t[0] = (char)(0xe0 | c >> 12), t[1] = (char)(0x80 | (c >> 6 & 0x3f)), t[2] = (char)(0x80 | (c & 0x3f));
	else
		t[0] = (char)(0xf0 | c >> 18), t[1] = (char)(0x80 | (c >> 12 & 0x3f)),
		t[2] = (char)(0x80 | (c >> 6 & 0x3f)), t[3] = (char)(0x80 | (c & 0x3f));
	if (*len + n < cap) {
		memcpy(buf + *len, t, n);
		*len += n;
	}
}

/* The text of str object s as UTF-8 in buf (cap bytes, cut at a character). Returns 0, or -1 if
 * s is not a compact str (only compact strings name code). */
static int str_text(uintptr_t s, char *buf, size_t cap)
{
	int64_t length;
	uint32_t state;
	if (!is_a(s, pywalk.str_type) || rd(&length, s + 16, 8) || rd(&state, s + 32, 4) || length < 0)
		return -1;
	unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
	if (!compact || (kind != 1 && kind != 2 && kind != 4))
		return -1;
	uintptr_t data = s + (ascii ? pywalk.layout->str_ascii : pywalk.layout->str_compact);
	size_t len = 0;
	if (ascii) {
		len = (size_t)length < cap - 1 ? (size_t)length : cap - 1;
		if (rd(buf, data, len))
			return -1;
	} else {
		uint8_t chunk[256];
		size_t total = (size_t)length * kind, done = 0;
		if (total > 4 * cap)
			total = 4 * cap;
		while (done < total) {
			size_t n = total - done < sizeof(chunk) ? total - done : sizeof(chunk);
			if (rd(chunk, data + done, n))
				return -1;
			for (size_t i = 0; i + kind <= n; i += kind) {
				uint32_t c = kind == 1   ? chunk[i]
					     : kind == 2 ? *(uint16_t *)(chunk + i)
							 : *(uint32_t *)(chunk + i);
				put_utf8(buf, &len, cap, c);
			}
			done += n;
		}
	}
	buf[len] = 0;
	return 0;
}

static int top_frame(uintptr_t ts, uintptr_t *f);

/* While borrowing: 1 if the thread being walked still has the innermost frame it had when the
 * walk began (so the code objects its frames name are alive). Under pywalk.lock. */
static int borrow_steady(void)
{
	uintptr_t f;
	return borrowed.nf > 0 && top_frame(borrowed.scan, &f) == 0 && f == borrowed.at[0];
}

/* The frame id of code at instruction lasti, the line given (line >= 0) or computed; cached per (code, lasti)
 * and checked against the code's names. Returns the id, or 0 (*bad set, or table full). Under pywalk.lock. */
static uint32_t frame_id(uintptr_t code, int32_t lasti, int32_t line, int *bad)
{
	const struct layout *L = pywalk.layout;
	uintptr_t file, name;
	int32_t first;
	if (rd_ptr(code + L->co_filename, &file) || rd_ptr(code + L->co_name, &name) ||
	    rd_int(code + L->co_firstlineno, &first)) {
		*bad = 1;
		return 0;
	}
	int given = line >= 0; /* 3.10 while tracing: the frame's own line, not cached */
	uint64_t h = (code ^ (uint64_t)(uint32_t)lasti * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
	struct centry *slot = NULL;
	for (uint32_t k = 0; k < CACHE_PROBES && !given; k++) {
		struct centry *e = &pywalk.cache[((h >> 40) + k) & (CACHE_SLOTS - 1)];
		if (!e->code) {
			slot = e;
			break;
		}
		if (e->code == code && e->lasti == lasti && e->file == file && e->name == name && e->first == first)
			return e->id;
	}
	char fbuf[NAME_MAX_BYTES], nbuf[NAME_MAX_BYTES];
	if (str_text(file, fbuf, sizeof(fbuf)) || str_text(name, nbuf, sizeof(nbuf))) {
		*bad = 1;
		return 0;
	}
	if (guard_reads && !borrow_steady()) { /* its line table is read unguarded: only while it runs */
		*bad = 1;
		return 0;
	}
	if (!given)
		line = pywalk.addr2line((void *)code, lasti < 0 ? -1 : lasti * 2);
	uint32_t id = sp_pyframe_intern(sp_intern(fbuf), sp_intern(nbuf), line < 0 ? 0 : (uint32_t)line);
	if (id && slot) /* a full probe run: not cached, computed again next time */
		*slot = (struct centry){ code, file, name, lasti, first, id };
	return id;
}

/* The innermost frame of thread state ts in *f (0: none). Returns 0, or -1 if unreadable. */
static int top_frame(uintptr_t ts, uintptr_t *f)
{
	const struct layout *L = pywalk.layout;
	uintptr_t cframe;
	*f = 0;
	if (L->cf_current == NO)
		return rd_ptr(ts + L->ts_frame, f);
	return rd_ptr(ts + L->ts_frame, &cframe) || (cframe && rd_ptr(cframe + L->cf_current, f)) ? -1 : 0;
}

/* While borrowing (guard_reads): notes frame f and what identifies it, for the check after the walk
 * (more than BORROW_FRAMES frames: the walk is not checked, and not kept). Under pywalk.lock. */
static inline void remember(uintptr_t f, uintptr_t code, uintptr_t prev, uintptr_t instr)
{
	if (!guard_reads || borrowed.nf > BORROW_FRAMES)
		return;
	if (borrowed.nf == BORROW_FRAMES) {
		borrowed.nf++;
		return;
	}
	borrowed.at[borrowed.nf] = f;
	borrowed.key[borrowed.nf][0] = code;
	borrowed.key[borrowed.nf][1] = prev;
	borrowed.key[borrowed.nf++][2] = instr;
}

/* Walks the frame chain of thread state ts. Returns the count; *bad set if a check failed. */
static int walk(uintptr_t ts, uint32_t *ids, uint8_t *entry, int max, int *bad)
{
	const struct layout *L = pywalk.layout;
	uintptr_t f = 0, code, prev;
	int n = 0;
	if (top_frame(ts, &f))
		return *bad = 1, 0;
	if (L->minor == 10) {
		for (int hops = 0; f && n < max && hops < 4096; hops++) {
			uintptr_t trace;
			int32_t lasti, lineno;
			if (!is_a(f, pywalk.frame_type) || rd_ptr(f + L->fr_code, &code) || !is_a(code,
												  pywalk.code_type) ||
			    rd_ptr(f + L->fr_trace, &trace) || rd_int(f + L->fr_lasti, &lasti) ||
			    rd_int(f + L->fr_lineno, &lineno) || rd_ptr(f + L->fr_back, &prev))
				return *bad = 1, n;
			remember(f, code, prev, (uint32_t)lasti | (uintptr_t)(uint32_t)lineno << 32);
			uint32_t id = frame_id(code, lasti, trace && lineno ? lineno : -1, bad);
			if (*bad)
				return n;
			if (id) {
				ids[n] = id;
				entry[n++] = 1; /* 3.10 runs each Python frame in an eval call of its own */
			}
			f = prev;
		}
		return n;
	}
	for (int hops = 0; f && n < max && hops < 4096; hops++) {
		uint8_t owner = 0, is_entry = 2;
		uintptr_t instr;
		if (rd_ptr(f + L->if_code, &code) || rd_ptr(f + L->if_prev, &prev) || rd_ptr(f + L->if_instr, &instr) ||
		    (L->if_owner != NO && rd_u8(f + L->if_owner, &owner)))
			return *bad = 1, n;
		remember(f, code, prev, instr);
		if (L->if_owner != NO && owner == CSTACK_OWNER) { /* an eval call's shim frame, not Python code */
			f = prev;
			continue;
		}
		if (!is_a(code, pywalk.code_type)) {
			if (L->minor >= 13 && code) { /* 3.13: f_executable may be None etc. for internal frames */
				f = prev;
				continue;
			}
			return *bad = 1, n;
		}
		if (L->if_entry != NO && rd_u8(f + L->if_entry, &is_entry))
			return *bad = 1, n;
		if (L->if_owner != NO) { /* entry: the frame below is an eval call's shim */
			uint8_t pown = CSTACK_OWNER;
			if (prev && rd_u8(prev + L->if_owner, &pown))
				return *bad = 1, n;
			is_entry = pown == CSTACK_OWNER;
		}
		intptr_t units = ((intptr_t)instr - (intptr_t)(code + pywalk.code_base)) / 2;
		uint32_t id = frame_id(code, units < -1 || units > INT32_MAX ? -1 : (int32_t)units, -1, bad);
		if (*bad)
			return n;
		if (id) {
			ids[n] = id;
			entry[n++] = is_entry > 1 ? 2 : is_entry;
		}
		f = prev;
	}
	return n;
}

/* ---- another thread's frames ---- */

/* Reads the n regions remote[i] into local[i] in one process_vm_readv where it is allowed, else
 * through the pipe one at a time. Returns 0, or -1 if any is unreadable. Under pywalk.lock. */
static int rd_many(struct iovec *local, struct iovec *remote, int n)
{
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += local[i].iov_len;
	if (!pywalk.vm_off) {
		ssize_t got = process_vm_readv(pywalk.pid, local, (unsigned long)n, remote, (unsigned long)n, 0);
		if (got >= 0 || errno == EFAULT)
			return got == (ssize_t)total ? 0 : -1;
		pywalk.vm_off = 1; /* refused (seccomp, no such call): the pipe from now on */
	}
	for (int i = 0; i < n; i++)
		if (rd(local[i].iov_base, (uintptr_t)remote[i].iov_base, local[i].iov_len))
			return -1;
	return 0;
}

/* 1 if the borrowed thread's innermost frame and every frame of the borrowed walk still hold what
 * they held (its code, link and instruction): read in one system call. Under pywalk.lock, with
 * guard_reads set. */
static int still_in_place(void)
{
	static uint8_t head[BORROW_FRAMES][FRAME_HEAD];
	static struct iovec local[BORROW_FRAMES + 2], remote[BORROW_FRAMES + 2];
	const struct layout *L = pywalk.layout;
	size_t len = L->minor == 10 ? 104 : 72;
	int nf = borrowed.nf, k = 0, cf = L->cf_current != NO;
	uintptr_t top[2];

	if (nf < 1 || nf > BORROW_FRAMES)
		return 0;
	local[k] = (struct iovec){ &top[0], 8 };
	remote[k++] = (struct iovec){ (void *)(borrowed.scan + L->ts_frame), 8 };
	if (cf) { /* 3.11, 3.12: the thread's C frame, then its current frame */
		local[k] = (struct iovec){ &top[1], 8 };
		remote[k++] = (struct iovec){ (void *)(borrowed.cframe + L->cf_current), 8 };
	}
	for (int i = 0; i < nf; i++, k++) {
		local[k] = (struct iovec){ head[i], len };
		remote[k] = (struct iovec){ (void *)borrowed.at[i], len };
	}
	if (rd_many(local, remote, k) || top[0] != (cf ? borrowed.cframe : borrowed.at[0]) ||
	    (cf && top[1] != borrowed.at[0]))
		return 0;
	for (int i = 0; i < nf; i++) {
		uintptr_t key[3];
		if (L->minor == 10) {
			uint32_t lasti, lineno;
			memcpy(&key[0], head[i] + L->fr_code, 8);
			memcpy(&key[1], head[i] + L->fr_back, 8);
			memcpy(&lasti, head[i] + L->fr_lasti, 4);
			memcpy(&lineno, head[i] + L->fr_lineno, 4);
			key[2] = lasti | (uintptr_t)lineno << 32;
		} else {
			memcpy(&key[0], head[i] + L->if_code, 8);
			memcpy(&key[1], head[i] + L->if_prev, 8);
			memcpy(&key[2], head[i] + L->if_instr, 8);
		}
		if (memcmp(key, borrowed.key[i], sizeof(key)))
			return 0;
	}
	return 1;
}

/* 1 if s (a str object) reads as text equal to want, or ending in want with end set. */
static int str_is(uintptr_t s, const char *want, int end)
{
	char buf[NAME_MAX_BYTES];
	size_t n, w = strlen(want);
	if (str_text(s, buf, sizeof(buf)))
		return 0;
	n = strlen(buf);
	return end ? n >= w && !strcmp(buf + n - w, want) : !strcmp(buf, want);
}

/* If the innermost frame of thread state ts is autograd's entry, blocked in the engine's C call
 * (_engine_run_backward of torch/autograd/graph.py, or backward/grad of torch/autograd/__init__.py,
 * where torch before 2.3 called the engine): its code object in *code and 1; else 0. Guarded reads. */
static int in_backward(uintptr_t ts, uintptr_t *code)
{
	const struct layout *L = pywalk.layout;
	uintptr_t f, file, name;
	if (top_frame(ts, &f) || !f || rd_ptr(f + (L->minor == 10 ? L->fr_code : L->if_code), code) ||
	    !is_a(*code, pywalk.code_type) || rd_ptr(*code + L->co_filename, &file) || rd_ptr(*code + L->co_name,
											      &name))
		return 0;
	if (str_is(file, "/torch/autograd/graph.py", 1))
		return str_is(name, "_engine_run_backward", 0);
	return str_is(file, "/torch/autograd/__init__.py", 1) &&
	       (str_is(name, "backward", 0) || str_is(name, "grad", 0));
}

/* Finds a thread state other than self blocked in backward() and walks it into borrowed (checked
 * after the walk). Returns its frame count, 0 if none. Under pywalk.lock, with guard_reads set. */
static int borrow_walk(uintptr_t self)
{
	uint8_t entry[SP_PY_MAX];
	void *interp = pywalk.main_interp();
	uintptr_t ts = interp ? (uintptr_t)pywalk.thread_head(interp) : 0, next;

	borrowed.ts = 0;
	for (int i = 0; ts && i < THREADS_MAX; i++, ts = next) {
		if (rd_ptr(ts + 8, &next)) /* PyThreadState.next, 3.10 to 3.13 */
			return 0;
		uintptr_t code;
		if (ts == self || !in_backward(ts, &code))
			continue;
		int bad = 0, n;
		borrowed.nf = 0;
		borrowed.scan = ts;
		if (pywalk.layout->cf_current != NO && rd_ptr(ts + pywalk.layout->ts_frame, &borrowed.cframe))
			return 0;
		n = walk(ts, borrowed.ids, entry, SP_PY_MAX, &bad);
		/* the frames read are in place after the walk, and the innermost is the entry seen above
		 * (else it moved on while read, or reads garbage: no frames this time) */
		if (bad || n <= 0 || borrowed.key[0][0] != code || !still_in_place())
			return 0;
		borrowed.ts = ts;
		borrowed.n = n;
		return n;
	}
	return 0;
}

/* ---- exported ---- */

int sp_pystack_walk(uint32_t *ids, uint8_t *entry, int max)
{
	pthread_once(&pywalk.once, resolve);
	if (!pywalk.layout || atomic_load_explicit(&pywalk.off, memory_order_relaxed) || max <= 0)
		return 0;
	if (!pywalk.is_init() || pywalk.finalizing())
		return 0;
	uintptr_t ts = (uintptr_t)pywalk.this_tstate();
	if (!ts)
		return 0; /* a thread that never ran Python */
	int bad = 0, n;
	pthread_mutex_lock(&pywalk.lock);
	n = walk(ts, ids, entry, max, &bad);
	if (!bad && n > 0 && !pywalk.trusted)
		pywalk.trusted = 1; /* the pipe stays: reads of other threads' frames go through it */
	pthread_mutex_unlock(&pywalk.lock);
	if (bad) {
		atomic_store(&pywalk.off, 1);
		sp_warn_once("Python %s: its frames did not read as expected; no more Python frames in stacks",
			     pywalk.version);
		return 0;
	}
	return n;
}

int sp_pystack_borrow(uint32_t *ids, int max)
{
	pthread_once(&pywalk.once, resolve);
	if (!pywalk.layout || atomic_load_explicit(&pywalk.off, memory_order_relaxed) || max <= 0 ||
	    !pywalk.main_interp ||
	    !pywalk.thread_head || !pywalk.is_init() || pywalk.finalizing())
		return 0;
	uintptr_t self = (uintptr_t)pywalk.this_tstate();
	int saved = errno, n = 0;
	pthread_mutex_lock(&pywalk.lock);
	guard_reads = 1;
	if (borrowed.ts && borrowed.ts != self && still_in_place())
		n = borrowed.n; /* still blocked in the same call: the same frames */
	else
		n = borrow_walk(self);
	guard_reads = 0;
	if (n > max)
		n = max;
	memcpy(ids, borrowed.ids, (size_t)(n > 0 ? n : 0) * sizeof(*ids));
	pthread_mutex_unlock(&pywalk.lock);
	errno = saved;
	return n;
}

int sp_pystack_is_eval(uint64_t pc)
{
	return pc > pywalk.eval_lo && pc <= pywalk.eval_hi; /* a return address: the call is just before it */
}

uint32_t sp_pystack_merge(const uint64_t *native, const uint8_t *is_eval, uint32_t nn, const uint32_t *py,
			  const uint8_t *entry, uint32_t np, uint64_t *out, uint32_t max)
{
	uint32_t n = 0, g = 0, evals = 0, seen = 0;
	for (uint32_t i = 0; i < nn; i++)
		evals += is_eval[i] != 0;
	for (uint32_t i = 0; i < nn && n < max; i++) {
		if (!is_eval[i] || g >= np) {
			out[n++] = native[i];
			continue;
		}
		seen++;
		do /* this eval call's frames: up to its entry frame (unknown: one, or all at the last) */
			out[n++] = SP_PYFRAME_TAG | py[g];
		while (++g < np && n < max && (entry[g - 1] == 0 || (entry[g - 1] == 2 && seen == evals)));
	}
	while (g < np && n < max)
		out[n++] = SP_PYFRAME_TAG | py[g++];
	return n;
}

uint32_t sp_pyframe_intern(uint32_t file, uint32_t func, uint32_t line)
{
	if (!atomic_load_explicit(&pywalk.count, memory_order_acquire) && !pywalk.byid) { /* first use: map the table */
		pthread_mutex_lock(&pywalk.ftlock);
		if (!pywalk.byid) {
			pywalk.ftab = map(FRAME_SLOTS * sizeof(*pywalk.ftab));
			pywalk.byid = pywalk.ftab ? map(MAX_PYFRAMES * sizeof(*pywalk.byid)) : NULL;
		}
		pthread_mutex_unlock(&pywalk.ftlock);
		if (!pywalk.byid)
			return 0;
	}
	uint64_t h = ((uint64_t)file * 0x9e3779b97f4a7c15ull ^ func) * 0xff51afd7ed558ccdull ^ line;
	h ^= h >> 31;
	uint32_t id = 0;
	pthread_mutex_lock(&pywalk.ftlock);
	for (uint32_t k = 0; k < FRAME_SLOTS; k++) {
		uint32_t *slot = &pywalk.ftab[(h + k) & (FRAME_SLOTS - 1)];
		if (*slot) {
			const struct pyframe *f = &pywalk.byid[*slot];
			if (f->file == file && f->func == func && f->line == line) {
				id = *slot;
				break;
			}
			continue;
		}
		uint32_t next = atomic_load_explicit(&pywalk.count, memory_order_relaxed) + 1;
		if (next >= MAX_PYFRAMES)
			break;
		pywalk.byid[next] = (struct pyframe){ file, func, line };
		atomic_store_explicit(&pywalk.count, next, memory_order_release);
		*slot = id = next;
		break;
	}
	pthread_mutex_unlock(&pywalk.ftlock);
	return id;
}

int sp_pyframe_lookup(void *ctx, uint32_t id, uint32_t *file, uint32_t *func, uint32_t *line)
{
	if (!id || id > atomic_load_explicit(&pywalk.count, memory_order_acquire))
		return -1;
	*file = pywalk.byid[id].file;
	*func = pywalk.byid[id].func;
	*line = pywalk.byid[id].line;
	return 0;
}

const char *sp_pystack_version(void)
{
	return pywalk.layout ? pywalk.version : NULL;
}
