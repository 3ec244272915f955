/* SPDX-License-Identifier: MIT */
/* config.h - the effective configuration: built-in defaults, then one INI file (inih), then
 * STEPPROF_<SECTION>_<KEY> environment overrides. Loading never exits or prints: errors are
 * collected with file, line, key and what is allowed, and the caller decides (the CLI prints
 * and exits 2; the profiled process warns once and stays inert). */
#ifndef SP_CONFIG_H
#define SP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "schedule.h"
#include "ranks.h"
#include "phase.h"

enum sp_marker_kind {
	SP_MARK_AUTO = 0,       /* find the iteration period from the launch stream */
	SP_MARK_KERNEL,         /* kernel name glob */
	SP_MARK_API,            /* CUDA runtime or driver API function name (glob) */
	SP_MARK_NCCL,           /* NCCL call name (glob), e.g. ncclAllReduce */
	SP_MARK_NVTX,           /* NVTX range name (glob) */
	SP_MARK_PROFILER_RANGE, /* each cudaProfilerStart..cudaProfilerStop range is one step */
	SP_MARK_OPTIMIZER,      /* a PyTorch program's optimizer steps (collector/pybridge/, decide/pysteps.h) */
	SP_MARK_PYTHON,         /* each call of a Python function, pattern module:qualname */
};

/* [activities] stacks: which call stacks are captured (a mask) */
enum { SP_STACKS_NATIVE = 1, SP_STACKS_PYTHON = 2, SP_STACKS_BOTH = 3 };

/* [cupti] detach_between: what happens to CUPTI between two windows of a repeating schedule
 * (after the last window stepprof always detaches; decide/life.h). */
enum sp_detach_policy {
	SP_DETACH_AUTO = 0,     /* detach and re-attach, unless the program uses CUDA graphs */
	SP_DETACH_ALWAYS,       /* detach and re-attach between every two windows */
	SP_DETACH_NEVER,        /* stay subscribed (activity kinds off) between windows */
};

/* [marker] learn: what automatic detection learns from before it locks (collector/hold/hooklearn.h). */
enum sp_learn_policy {
	SP_LEARN_CUPTI = 0, /* CUPTI's callbacks, subscribed from the start */
	SP_LEARN_HOOKS,     /* the preload's hooks, not subscribed until CUPTI is needed */
	SP_LEARN_AUTO,      /* hooks unless something needs CUPTI from the start (device_memory...) */
};

#define SP_CFG_PATH 1024
#define SP_CFG_PATTERN 256
#define SP_ONDEMAND_MAX_MS 604800000 /* [ondemand] delay_ms and duration_ms: at most a week */
#define SP_CFG_NKEYS 43         /* keys in the table of config.c (docs/CONFIG.md lists them) */

/* Where a key got its value: for error messages about contradictions and for `stepprof check`. */
struct sp_cfg_origin {
	char name[256];         /* INI path, variable name or "command line"; "" = built-in default */
	int line;               /* line in the INI file, 0 if not from a file */
};

/* [activities] ops and modules' default, one switch for both: "false" records torch operators and
 * module paths only when asked, since a program that starts its own torch.profiler while the
 * emission is on gets torch's RuntimeError; "true" records them with no setting (docs/CONFIG.md). */
#ifndef SP_OPS_DEFAULT
#define SP_OPS_DEFAULT "false"
#endif

struct sp_config {
	/* [profile] */
	bool enabled;                   /* master switch */
	char output[SP_CFG_PATH]; /* output directory template: {run} {host} {pid} {rank} {date} {time} {jobid} */
	bool allow_foreign_dir; /* write into an output directory owned by another user */
	/* [ranks] */
	char ranks_text[256]; /* as written: "0", "0,1", "0-3,8", "all" */
	struct sp_rankset ranks; /* parsed */
	/* [schedule] */
	struct sp_schedule schedule; /* finalised: profiling_frequency already applied */
	/* [marker] */
	enum sp_marker_kind marker_kind;
	char marker_pattern[SP_CFG_PATTERN]; /* glob; empty for auto and profiler_range */
	int marker_every; /* every N-th occurrence is a step boundary, >= 1 */
	enum sp_learn_policy marker_learn; /* where automatic detection learns (collector/hold/hooklearn.h) */
	/* [activities] */
	bool kernels, memcpy, memset, sync;
	bool runtime_api, driver_api; /* launch, copy, sync, stream/event and allocation calls */
	bool nccl, nvtx;
	bool device_memory;
	bool host_malloc;
	uint64_t host_malloc_min; /* bytes: smaller host allocations are not recorded */
	int stacks; /* SP_STACKS_* mask: 0 off, native, python or both */
	int stack_depth; /* frames, 1..128 (native and Python each) */
	bool kernel_shapes; /* grid, block, registers, shared memory */
	bool ops; /* torch operators (name, input shapes, sequence number) in windows: the Python bridge */
	bool modules; /* nn.Module paths in windows (torch's global module hooks) */
	bool torch_memory; /* torch's allocator history per window, its snapshot beside the trace */
	int torch_memory_entries; /* the history's bound (max_entries), 1..1e8 */
	/* [limits] */
	uint64_t window_max_bytes; /* encoded bytes per window, 0 = unlimited */
	uint32_t ring_events; /* slots per thread ring */
	uint64_t cupti_buffer_bytes; /* size of each CUPTI activity buffer */
	/* [cupti] */
	char cupti_library[SP_CFG_PATH]; /* explicit libcupti path; empty = the loaded one, else search */
	enum sp_detach_policy detach_between; /* CUPTI between windows (after the last: always detached) */
	int graph_detach;      /* detach with the program's CUDA graphs alive, made safe (docs/CONFIG.md) */
	/* [phase.NAME] sections (phase.h): with any, they replace [marker] and [schedule] */
	struct sp_phases phases;
	/* [ondemand] (docs/CONFIG.md) */
	bool ondemand_trigger; /* poll the output directory for `stepprof trigger` requests */
	int ondemand_poll_ms; /* how often (one stat() of each control file per poll) */
	int ondemand_delay_ms; /* time range: starts this long after CUDA initialises */
	int ondemand_duration_ms; /* ... and lasts this long (0 = to the end); both 0: no range */
	/* where it came from */
	char source[SP_CFG_PATH]; /* the INI file read, or "" for built-in defaults */
	struct sp_cfg_origin origin[SP_CFG_NKEYS]; /* per key, in the order of docs/CONFIG.md */
};

#define SP_CFG_MAX_ERRORS 64
struct sp_cfg_errors {
	int count; /* errors collected (may exceed SP_CFG_MAX_ERRORS; extra not kept) */
	char msg[SP_CFG_MAX_ERRORS][320];
};

/* Why automatic detection learns with CUPTI rather than from the hooks in this configuration
 * ([marker] learn, docs/CONFIG.md), or NULL: it learns from the hooks (unless the process records
 * its tokens). This function can't fail. */
const char *sp_cfg_learn_cupti_why(const struct sp_config *c);
/* Fills cfg with the built-in defaults. This function can't fail. */
void sp_cfg_defaults(struct sp_config *cfg);
/* Reads the INI file at path over cfg. Unknown sections or keys, malformed or out-of-range
 * values are appended to errs as "PATH:LINE: [section] key: problem (allowed: ...)".
 * Returns the number of errors added (0 = all good); cfg keeps every valid setting. */
int sp_cfg_load_file(struct sp_config *cfg, const char *path, struct sp_cfg_errors *errs);
/* Applies one setting; origin and line name it in errors (line 0 = not from a file).
 * Returns 0 or 1 (one error added). */
int sp_cfg_set(struct sp_config *cfg, const char *section, const char *key, const char *value, const char *origin,
	       int line, struct sp_cfg_errors *errs);
/* Applies every STEPPROF_<SECTION>_<KEY> variable of envp (NULL = environ). Variables that are
 * not keys (STEPPROF_CONFIG, STEPPROF_RANK...) are ignored. Returns errors added. */
int sp_cfg_load_env(struct sp_config *cfg, char **envp, struct sp_cfg_errors *errs);
/* Checks cross-key rules (warmup + active <= profiling_frequency, ...) and applies
 * profiling_frequency. Call once after all settings. Returns errors added. */
int sp_cfg_finish(struct sp_config *cfg, struct sp_cfg_errors *errs);
/* The whole sequence the library and the CLI use: defaults, file (path, else $STEPPROF_CONFIG,
 * else none), environment, finish. Returns the number of errors. */
int sp_cfg_load(struct sp_config *cfg, const char *path, struct sp_cfg_errors *errs);
/* Writes the effective configuration as a valid INI file to f. This function can't fail. */
void sp_cfg_print(const struct sp_config *cfg, FILE *f);
/* Writes every error of errs, one per line, and a line counting those not kept (for the CLI;
 * never called in the profiled process). This function can't fail. */
void sp_cfg_print_errors(const struct sp_cfg_errors *errs, FILE *f);
/* Expands the output template for this process into out. A placeholder's value is one safe path
 * component whatever the environment holds ('/' and control characters become '_', so does a
 * leading '.', an empty value is "_"): the expansion never leaves the configured directory.
 * Returns 0, or -1 if it does not fit or names an unknown placeholder. */
int sp_cfg_expand(const char *tmpl, const struct sp_rank_info *ri, char *out, size_t outlen);
/* As sp_cfg_expand; note (notelen bytes, none if 0) is "" or a line that says which placeholder's
 * value was changed to make it safe, for the caller to say once. */
int sp_cfg_expand_note(const char *tmpl, const struct sp_rank_info *ri, char *out, size_t outlen, char *note,
		       size_t notelen);
/* Parses sizes like 512, 64K, 256M, 2G (powers of 1024). Returns 0 or -1. */
int sp_parse_size(const char *s, uint64_t *out);
const char *sp_marker_kind_name(enum sp_marker_kind k);
/* marker.c: 0 if pattern suits marker kind, else 1 with the key to blame in *key ("kind" or
 * "pattern") and the problem in buf, as it follows "[section] KEY: " (keypre: how the allowed
 * setting is named, "[marker] " or ""). This function can't fail. */
int sp_marker_check(int kind, const char *pattern, const char *keypre, const char **key, char *buf, size_t n);
/* What marker kind optimizer or python does, in one sentence for `stepprof check` and
 * `stepprof schedule`, into buf; NULL for the other kinds. Can't fail. */
const char *sp_marker_explain(int kind, const char *pattern, char *buf, size_t n);
/* 1 if pattern is module:qualname (dotted ASCII identifiers on both sides of one ':'). */
int sp_marker_python_pattern(const char *pattern);
/* Appends msg to errs (counted even when errs is full: for config/phase.c). Returns 1. */
int sp_cfg_error(struct sp_cfg_errors *errs, const char *msg);
/* Where key was set (name "" = built-in default), or NULL for an unknown key. Can't fail. */
const struct sp_cfg_origin *sp_cfg_origin_of(const struct sp_config *cfg, const char *section, const char *key);

#endif
