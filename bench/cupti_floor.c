// SPDX-License-Identifier: MIT
/* cupti_floor.c - the benchmark's "CUPTI floor": a CUDA injection library (loaded with
 * CUDA_INJECTION64_PATH) that only enables CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL and drops every
 * filled buffer unread. What it costs is the least any CUPTI-based profiler pays inside a window.
 * It never exits or aborts the host process; at exit it prints how much CUPTI delivered.
 * Build: gcc -O2 -shared -fPIC -I$CUDA/include cupti_floor.c -o libcuptifloor.so -L$CUDA/lib64 -lcupti */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FLOOR_BUFFER_BYTES (8u << 20)

static struct {
	uint64_t buffers;       /* buffers CUPTI handed back */
	uint64_t bytes;         /* valid record bytes in them (dropped unread) */
} floor_g;

/* runs on a CUPTI thread. On allocation failure hands CUPTI no buffer (it drops records). */
static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = aligned_alloc(8, FLOOR_BUFFER_BYTES);
	*size = *buf ? FLOOR_BUFFER_BYTES : 0;
	*max_records = 0;
}

/* runs on a CUPTI thread. Drops the records. This function can't fail. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buf, size_t size,
				      size_t valid)
{
	(void)ctx, (void)stream_id, (void)size;
	__atomic_add_fetch(&floor_g.buffers, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&floor_g.bytes, valid, __ATOMIC_RELAXED);
	free(buf);
}

/* Flushes what CUPTI still holds and prints the totals. This function can't fail. */
static void report_at_exit(void)
{
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	fprintf(stderr, "cupti_floor: %llu buffers, %llu record bytes dropped\n",
		(unsigned long long)floor_g.buffers, (unsigned long long)floor_g.bytes);
}

/* Called by the CUDA driver at cuInit. On a CUPTI error prints it and returns 0 with nothing
 * enabled (the process runs on unprofiled). */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
	const char *msg = NULL;
	CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r == CUPTI_SUCCESS)
		r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (r != CUPTI_SUCCESS) {
		cuptiGetResultString(r, &msg);
		fprintf(stderr, "cupti_floor: CUPTI error %d: %s\n", (int)r, msg ? msg : "?");
		return 0;
	}
	atexit(report_at_exit);
	fprintf(stderr, "cupti_floor: CONCURRENT_KERNEL enabled\n");
	return 1;
}
