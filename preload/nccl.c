/* SPDX-License-Identifier: MIT */
/* nccl.c - NCCL hooks (LD_PRELOAD interposition: libtorch_cuda imports these unversioned).
 * Each wrapper resolves the real function once, describes the call and forwards it; what to
 * record, the sequence numbers and the marker live in the collector. In a process the collector
 * is not profiling, a wrapper costs one resolved-pointer call and one flag test. */
#include <dlfcn.h>
#include <nccl.h>
#include <stddef.h>
#include "collector/collector.h"
#include "trace/event.h"
#include "resolve.h"

#define SP_EXPORT __attribute__((visibility("default")))

static const char *const nccl_libs[] = { "libnccl.so.2", "libnccl.so", NULL };

/* Resolves real_<fn> on first use (NCCL may be dlopen'ed late). */
#define REAL(fn)                                                          \
	static __typeof__(fn) *real_##fn;                                 \
	if (!real_##fn)                                                   \
		real_##fn = (__typeof__(fn) *)sp_resolve(#fn, nccl_libs); \
	if (!real_##fn)                                                   \
	return ncclSystemError

/* A collective or point-to-point call: describe, forward, report. */
#define CALL(fn, op_, count_, dtype_, redop_, peer_, comm_, stream_, args)                                 \
	REAL(fn);                                                                                          \
	if (!sp_collector_nccl_active())                                                                   \
		return real_##fn args;                                                                     \
	struct sp_nccl_call c = { #fn, op_, count_, (int)(dtype_), (int)(redop_), peer_, comm_, stream_ }; \
	uint64_t t0 = sp_collector_nccl_begin(&c);                                                         \
	ncclResult_t r = real_##fn args;                                                                   \
	sp_collector_nccl_end(&c, t0, (int)r);                                                             \
	return r

SP_EXPORT ncclResult_t ncclAllReduce(const void *s, void *r_, size_t n, ncclDataType_t t, ncclRedOp_t op,
				     ncclComm_t comm, cudaStream_t st)
{
	CALL(ncclAllReduce, SP_NCCL_ALLREDUCE, n, t, op, -1, comm, st, (s, r_, n, t, op, comm, st));
}

SP_EXPORT ncclResult_t ncclAllGather(const void *s, void *r_, size_t n, ncclDataType_t t, ncclComm_t comm,
				     cudaStream_t st)
{
	CALL(ncclAllGather, SP_NCCL_ALLGATHER, n, t, -1, -1, comm, st, (s, r_, n, t, comm, st));
}

SP_EXPORT ncclResult_t ncclReduceScatter(const void *s, void *r_, size_t n, ncclDataType_t t, ncclRedOp_t op,
					 ncclComm_t comm, cudaStream_t st)
{
	CALL(ncclReduceScatter, SP_NCCL_REDUCESCATTER, n, t, op, -1, comm, st, (s, r_, n, t, op, comm, st));
}

SP_EXPORT ncclResult_t ncclBroadcast(const void *s, void *r_, size_t n, ncclDataType_t t, int root, ncclComm_t comm,
				     cudaStream_t st)
{
	CALL(ncclBroadcast, SP_NCCL_BROADCAST, n, t, -1, root, comm, st, (s, r_, n, t, root, comm, st));
}

SP_EXPORT ncclResult_t ncclBcast(void *b, size_t n, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t st)
{
	CALL(ncclBcast, SP_NCCL_BROADCAST, n, t, -1, root, comm, st, (b, n, t, root, comm, st));
}

SP_EXPORT ncclResult_t ncclReduce(const void *s, void *r_, size_t n, ncclDataType_t t, ncclRedOp_t op, int root,
				  ncclComm_t comm, cudaStream_t st)
{
	CALL(ncclReduce, SP_NCCL_REDUCE, n, t, op, root, comm, st, (s, r_, n, t, op, root, comm, st));
}

SP_EXPORT ncclResult_t ncclAlltoAll(const void *s, void *r_, size_t n, ncclDataType_t t, ncclComm_t comm,
				    cudaStream_t st)
{
	CALL(ncclAlltoAll, SP_NCCL_ALLTOALL, n, t, -1, -1, comm, st, (s, r_, n, t, comm, st));
}

SP_EXPORT ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t st)
{
	CALL(ncclSend, SP_NCCL_SEND, n, t, -1, peer, comm, st, (s, n, t, peer, comm, st));
}

SP_EXPORT ncclResult_t ncclRecv(void *r_, size_t n, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t st)
{
	CALL(ncclRecv, SP_NCCL_RECV, n, t, -1, peer, comm, st, (r_, n, t, peer, comm, st));
}

SP_EXPORT ncclResult_t ncclGroupStart(void)
{
	CALL(ncclGroupStart, SP_NCCL_GROUP_START, 0, 0, -1, -1, NULL, NULL, ());
}

SP_EXPORT ncclResult_t ncclGroupEnd(void)
{
	CALL(ncclGroupEnd, SP_NCCL_GROUP_END, 0, 0, -1, -1, NULL, NULL, ());
}

/* ---- communicator life ---- */

SP_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	REAL(ncclCommInitRank);
	ncclResult_t r = real_ncclCommInitRank(comm, nranks, id, rank);
	if (r == ncclSuccess && comm)
		sp_collector_comm(SP_COMM_INIT, *comm, id.internal, sizeof id.internal, rank, nranks, NULL);
	return r;
}

SP_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
					      ncclConfig_t *config)
{
	REAL(ncclCommInitRankConfig);
	ncclResult_t r = real_ncclCommInitRankConfig(comm, nranks, id, rank, config);
	if ((r == ncclSuccess || r == ncclInProgress) && comm)
		sp_collector_comm(SP_COMM_INIT, *comm, id.internal, sizeof id.internal, rank, nranks, NULL);
	return r;
}

SP_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid, ncclUniqueId *ids,
						ncclConfig_t *config)
{
	REAL(ncclCommInitRankScalable);
	ncclResult_t r = real_ncclCommInitRankScalable(comm, nranks, rank, nid, ids, config);
	if ((r == ncclSuccess || r == ncclInProgress) && comm && ids && nid > 0)
		sp_collector_comm(SP_COMM_INIT, *comm, ids[0].internal, sizeof ids[0].internal, rank, nranks, NULL);
	return r;
}

SP_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
	REAL(ncclCommSplit);
	ncclResult_t r = real_ncclCommSplit(comm, color, key, newcomm, config);
	if ((r == ncclSuccess || r == ncclInProgress) && newcomm && *newcomm) {
		int c[2] = { color, 0 };
		sp_collector_comm(SP_COMM_SPLIT, *newcomm, c, sizeof c, -1, -1, comm);
	}
	return r;
}

SP_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	REAL(ncclCommDestroy);
	sp_collector_comm(SP_COMM_DESTROY, comm, NULL, 0, -1, -1, NULL);
	return real_ncclCommDestroy(comm);
}

SP_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	REAL(ncclCommAbort);
	sp_collector_comm(SP_COMM_ABORT, comm, NULL, 0, -1, -1, NULL);
	return real_ncclCommAbort(comm);
}
