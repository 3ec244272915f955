/* SPDX-License-Identifier: MIT */
/* resolve.h - finding the real definition behind one of our hooks. */
#ifndef SP_RESOLVE_H
#define SP_RESOLVE_H

/* The next definition of name after this library: RTLD_NEXT when its library is in the global
 * scope, else from the first of libs (NULL-terminated sonames) that is already loaded - torch
 * loads libnccl and libcupti as dependencies of a library that Python dlopen'ed RTLD_LOCAL, where
 * RTLD_NEXT cannot see them; last, any loaded object but this library that defines it (a wheel's
 * renamed copy, libcudart-HASH.so.12). Returns NULL if none has it. Never loads a library. */
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
