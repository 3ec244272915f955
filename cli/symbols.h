/* SPDX-License-Identifier: MIT */
/* symbols.h - offline symbolisation of the profiled process's return addresses: the trace's
 * MODULE records say which file was mapped where, and elfutils' libdwfl reads those files (same
 * machine, or the same paths) to name the function. C++ names are demangled (libstdc++'s
 * __cxa_demangle). Results are cached per address. For the CLI only: never in the process. */
#ifndef SP_SYMBOLS_H
#define SP_SYMBOLS_H

#include <stdint.h>

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
