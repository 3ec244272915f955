/* SPDX-License-Identifier: MIT */
/* resolve.h - finding the real definition behind one of our hooks. */
#ifndef SP_RESOLVE_H
#define SP_RESOLVE_H

/* The next definition of name after this library: RTLD_NEXT, else the first loaded of libs (RTLD_LOCAL loads
 * hide them from RTLD_NEXT), else any loaded object but this one. Returns NULL if none. Never loads a library. */
void *sp_resolve(const char *name, const char *const *libs);

/* This thread's own lookups begin (on = 1) or end (0), nested: meanwhile dlsym is the real one
 * for it, never a trampoline or one of this library's own definitions (procaddr.c), so that a
 * hook resolving its real function cannot be handed itself. This function can't fail. */
void sp_procaddr_raw(int on);

/* A driver function stepprof calls itself (cuFuncGetName, cuKernelGetName: CUDA 12.3+;
 * cuCtxGetDevice), asked of the driver's cuGetProcAddress once (else its exported symbol) and
 * kept in *slot; NULL if none. Any thread. This function can't fail. */
void *sp_procaddr_driver_fn(_Atomic(void *) *slot, const char *sym);

#endif
