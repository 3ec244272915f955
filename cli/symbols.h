/* SPDX-License-Identifier: MIT */
/* symbols.h - offline symbolisation of the profiled process's return addresses: the trace's
 * MODULE records say which file was mapped where, and elfutils' libdwfl reads those files (same
 * machine, or the same paths) to name the function. C++ names are demangled (libstdc++'s
 * __cxa_demangle). Results are cached per address. For the CLI only: never in the process. */
#ifndef SP_SYMBOLS_H
#define SP_SYMBOLS_H

#include <stdint.h>
#include "trace/trace.h"

struct sp_sym;

/* From now on no symboliser opens a file (--no-symbols): addresses are named by module and
 * offset only. Paths that a trace names are otherwise opened only if they are regular files
 * (never a FIFO or a device), read only, and at most 4096 distinct modules are kept (a warning
 * on stderr says when more were dropped). This function can't fail. */
void sp_sym_no_files(void);
/* An empty symboliser. Exits the CLI if memory runs out; otherwise can't fail. */
struct sp_sym *sp_sym_open(void);
/* Adds a module: the executable mapping start..end of the file at path, whose first byte is at
 * file offset offset. Repeats (one per window) are ignored. The file is read at the first lookup
 * after it; a missing or unreadable file only leaves its addresses unnamed. Can't fail. */
void sp_sym_add_module(struct sp_sym *s, const char *path, uint64_t start, uint64_t end, uint64_t offset);
/* Adds every MODULE record of the trace at path. Returns the number of modules read, or -1 if
 * the file can't be read (message in err); a corrupt chunk ends the scan early, not an error. */
int sp_sym_load_trace(struct sp_sym *s, const char *path, char *err, size_t errlen);
/* Return address pc as "function+0xOFF (module)", or "0xPC (module+0xFILEOFF)" when the module
 * is known but the function is not, or "0xPC". Looks up pc - 1 (the call, not what follows it),
 * so OFF is that of pc itself. The string lives as long as s. Can't fail. */
const char *sp_sym_frame(struct sp_sym *s, uint64_t pc);
/* The same frame as a function name only ("function", else "module+0xFILEOFF", else "0xPC"):
 * what flame graphs merge on. The string lives as long as s. Can't fail. */
const char *sp_sym_function(struct sp_sym *s, uint64_t pc);
/* Names Python frames (SP_IS_PYFRAME values of a stack, trace.h) from r's Python frame table, as
 * read so far: sp_sym_frame gives "function (file:line)", sp_sym_function the same with the file
 * shortened (sp_py_short_file). r must outlive s's use; NULL stops it. Without a reader a Python
 * frame is "[python frame N]". Can't fail. */
void sp_sym_use_trace(struct sp_sym *s, const struct sp_trace_reader *r);
/* The Python frame behind stack frame pc: its file, function and line. Returns 0, or -1 if pc is
 * not a Python frame or the trace does not define it. Can't fail. */
int sp_sym_pyframe(const struct sp_sym *s, uint64_t pc, const char **file, const char **func, uint32_t *line);
/* 1 if a Python frame of this file is the user's own code: not the standard library or an
 * installed package, i.e. its path has none of "/site-packages/", "/dist-packages/",
 * "/lib/python3", "/torch/", and it does not start with "<frozen". Can't fail. */
int sp_py_user_file(const char *file);
/* 1 if a Python frame of this file is code that says what a model does: the program's own, or an
 * installed package's (transformers, timm, accelerate), but not torch's (a path with "/torch/"),
 * the standard library's (under "/lib/python3" outside site-packages and dist-packages) or
 * "<frozen ...>". Can't fail. */
int sp_py_model_file(const char *file);
/* The index in pcs (n frames, innermost first) of the innermost Python frame of sp_py_model_file;
 * else of the innermost Python frame; -1 if the stack has no Python frame the trace defines. */
int sp_sym_model_frame(const struct sp_sym *s, const uint64_t *pcs, uint32_t n);
/* The file name (no folder) of the module that holds return address pc, as the trace's MODULE
 * records map it; NULL for an address outside them, a Python frame or a mark. The string lives as
 * long as s. Can't fail. */
const char *sp_sym_module(const struct sp_sym *s, uint64_t pc);
/* 1 if the stack holds SP_FRAME_BACKWARD (trace.h): its work is autograd's backward pass, launched
 * by a thread without Python frames while another was blocked in backward(). Can't fail. */
int sp_stack_backward(const uint64_t *pcs, uint32_t n);
/* The file as frames show it: what follows "site-packages/" or "dist-packages/" (the module's
 * path, as import names it) or "/lib/python3.N/" (the standard library), else the whole path. */
const char *sp_py_short_file(const char *file);
/* The index in pcs (n frames, innermost first) of the innermost Python frame of the user's own
 * code (sp_py_user_file); else of the innermost Python frame, with *user = 0; -1 if the stack has
 * no Python frame the trace defines. Can't fail. */
int sp_sym_user_frame(const struct sp_sym *s, const uint64_t *pcs, uint32_t n, int *user);

/* What names a call site in one line: the frame of sp_sym_user_frame if the stack has Python
 * frames (the line of the program that made the call), else the innermost native frame
 * (sp_sym_frame), "(no stack)" for n = 0. The string lives as long as s. Can't fail. */
const char *sp_sym_site(struct sp_sym *s, const uint64_t *pcs, uint32_t n);

/* Frees s and everything it returned (NULL is fine). This function can't fail. */
void sp_sym_close(struct sp_sym *s);

/* The name to show for a kernel or function name from a trace: demangled if it is an Itanium C++
 * name of at most 4096 characters (as torch.profiler and Nsight show them), else the name itself.
 * A demangled result lives until sp_display_names_free (cached by the name's text); otherwise raw
 * is returned. This function can't fail (out of memory: the raw name). */
const char *sp_display_name(const char *raw);
/* Frees the names sp_display_name returned (for long-running callers: the fuzz harness). */
void sp_display_names_free(void);

#endif
