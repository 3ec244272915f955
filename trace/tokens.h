/* SPDX-License-Identifier: MIT */
/* tokens.h - the token stream file format (`STEPPROF_RECORD_TOKENS`): what the step detector saw
 * in a run (kernel launches, synchronising / copying API calls, graph launches, NCCL calls, NVTX
 * ranges, and TRUTH tokens that mark true iteration starts), each with its CPU time and thread.
 * The only module that writes or reads these files. A file is a fixed header followed by chunks,
 * each one zstd frame that decodes on its own, so a file cut at any byte reads up to its last whole
 * chunk. docs/FORMAT.md ("Token streams") is the byte-level description; keep the two in step. */
#ifndef SP_TOKENS_H
#define SP_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#define SP_TOK_MAGIC "SPTOKENS"
#define SP_TOK_VERSION 2       /* written, and the newest read */
#define SP_TOK_MIN_VERSION 1   /* the oldest read */
#define SP_TOK_WRITE_MIN 2     /* the min_version written: version 1 readers refuse kinds 8-11 */

/* Token kinds (a record's low 4 bits). 0 is a name definition, never a token. */
enum sp_tok_kind {
	SP_TOK_KERNEL = 1,  /* a kernel launch: name = kernel (mangled) */
	SP_TOK_API = 2,     /* a synchronising, copying or setting API call: name = function */
	SP_TOK_GRAPH = 3,   /* a CUDA graph launch: name = function (cudaGraphLaunch, cuGraphLaunch) */
	SP_TOK_NCCL = 4,    /* an NCCL call: name = function */
	SP_TOK_NVTX_PUSH = 5, /* nvtxRangePush / nvtxRangeStart (SP_TOKF_RANGE): name = message, 0 if none */
	SP_TOK_NVTX_POP = 6,  /* nvtxRangePop / nvtxRangeEnd (SP_TOKF_RANGE): name 0 */
	SP_TOK_TRUTH = 7,   /* a true iteration starts here; never fed to the detector */
	/* version 2: the Python bridge's events (collector/pybridge/), on the program's thread */
	SP_TOK_PYHOOK = 8,  /* the bridge installed a watch: name = what ("optimizer", "GradScaler.update",
			     * or the python marker's module:qualname) */
	SP_TOK_OPTIM = 9,   /* a torch optimizer's step() returned: name = "Class#k", the k-th optimizer object */
	SP_TOK_SCALER = 10, /* a GradScaler's update() begins: name = "Class#k", the k-th scaler object */
	SP_TOK_PYCALL = 11, /* a watched Python function begins: name = its module:qualname (Optimizer.__init__:
			     * the program made a torch optimizer) */
	SP_TOK_KIND_MAX = 11
};
/* Token flags (a record's high 4 bits). */
#define SP_TOKF_SYNC 0x10 /* the call blocks the host until the GPU catches up */
#define SP_TOKF_DRIVER 0x20 /* a driver API call (else runtime) */
#define SP_TOKF_RANGE 0x40 /* NVTX start/end (not push/pop) */
#define SP_TOKF_CAPTURED 0x10 /* SP_TOK_OPTIM: the step ran inside a CUDA stream capture (a graph holds it) */
/* Never in a file: the caller has matched the token against the marker itself (stepdet.h). */
#define SP_TOKF_MATCHED 0x80

struct sp_token {
	uint64_t ts;     /* CPU time, ns (trace clock) */
	uint32_t name;   /* string id (file-local when read; 0 = none) */
	uint32_t tid;    /* thread id */
	uint8_t kind;    /* enum sp_tok_kind */
	uint8_t flags;   /* SP_TOKF_* */
};

/* What the producer says about itself (the header). */
struct sp_tok_header {
	uint16_t version, min_version;
	uint32_t header_size;
	int32_t pid;
	uint64_t anchor_mono_ns;   /* CLOCK_MONOTONIC and CLOCK_REALTIME read together at open */
	uint64_t anchor_real_ns;
	char stepprof[32];         /* stepprof version that wrote it */
	char host[64];
	char truth[128];           /* STEPPROF_RECORD_TRUTH as given ("" = no truth) */
	char command[512];         /* the program's command line, truncated */
};

/* Short name of a token kind ("kernel", "api", ...; "?" if unknown). This function can't fail. */
const char *sp_tok_kind_name(int kind);

/* ---- writing (in the profiled process: no stdio, never exits) ---- */
struct sp_tok_writer;
/* Creates path (O_CLOEXEC, O_EXCL: an existing file is never touched) and writes the header.
 * Returns the writer, or NULL with a message in err and errno set (EEXIST: the file exists). */
struct sp_tok_writer *sp_tok_create(const char *path, const struct sp_tok_header *h, char *err, size_t errlen);
/* Appends a token; name is the string behind t->name (defined in the file on first use; NULL
 * = "?"). Compresses and writes a chunk when the buffer is full. Returns 0, or -1 on a write or
 * memory failure (the writer is then dead and drops everything). */
int sp_tok_add(struct sp_tok_writer *w, const struct sp_token *t, const char *name);
/* Writes the buffered tokens as a chunk. Returns 0 or -1 as sp_tok_add. */
int sp_tok_flush(struct sp_tok_writer *w);
/* Flushes, closes and frees. Returns 0, or -1 if anything was lost. w may be NULL. */
int sp_tok_close(struct sp_tok_writer *w);

/* ---- reading (CLI; every input is hostile) ---- */
struct sp_tok_reader;
/* Opens and checks the header. Returns the reader, or NULL with a message in err. */
struct sp_tok_reader *sp_tok_open(const char *path, char *err, size_t errlen);
const struct sp_tok_header *sp_tok_get_header(const struct sp_tok_reader *r);
/* The next token into *t. Returns 1, 0 at the end, or -1 on a damaged file (message in err; a
 * truncated last chunk is the end, with a note in sp_tok_truncated). */
int sp_tok_next(struct sp_tok_reader *r, struct sp_token *t, char *err, size_t errlen);
/* The string behind a file-local id, or NULL. The pointer lives as long as the reader. */
const char *sp_tok_name(const struct sp_tok_reader *r, uint32_t id);
/* 1 if the file ended inside a chunk (the producer died mid-write). */
int sp_tok_truncated(const struct sp_tok_reader *r);
void sp_tok_close_reader(struct sp_tok_reader *r);

#endif
