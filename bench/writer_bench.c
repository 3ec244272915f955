/* SPDX-License-Identifier: MIT */
/* writer_bench.c - what the writer thread spends per kernel and what a kernel costs on disk, without
 * a GPU: a synthetic launch-bound stream (per launch one runtime cudaLaunchKernel record and one
 * kernel record, ~6.6 us apart with a few hundred ns of jitter, as the benchmark's add loop) pushed
 * through the real ring and writer into a trace file. The zstd level is ZSTD_LEVEL (trace/layout.h), so
 * levels compare by building trace_write.c with -DZSTD_LEVEL=N in front of the library:
 *   gcc -O2 -I. -DZSTD_LEVEL=1 -c trace/trace_write.c -o /tmp/trace1.o
 *   gcc -O2 -I. bench/writer_bench.c /tmp/trace1.o build/libspcore.a -lzstd -lunwind -lpthread -o /tmp/wb1
 *   /usr/bin/time -f '%U s user' /tmp/wb1 600000 /tmp/wb1.sptrace
 * Prints kernels, bytes per kernel (whole file) and wall time; the process's user time is almost all
 * the writer's. Exits 1 if the writer cannot start. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "collector/base/clock.h"
#include "trace/event.h"
#include "collector/base/intern.h"
#include "collector/out/ring.h"
#include "collector/out/writer.h"

static uint64_t rng = 88172645463325252ull;

/* A uniform integer in [-a, a]. This function can't fail. */
static int64_t jitter(int a)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (int64_t)(rng % (uint64_t)(2 * a + 1)) - a;
}

/* Pushes ev, waiting for the writer while the ring is full. */
static void push(const struct sp_event *ev)
{
	while (sp_ring_push(ev) < 0)
		;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 600000;
	const char *path = argc > 2 ? argv[2] : "/tmp/writer_bench.sptrace";
	struct sp_trace_meta m = { .pid = 1, .rank = 0, .world_size = 1, .local_rank = 0 };
	uint64_t t0 = sp_now_ns();
	sp_ring_configure(1u << 20);
	if (sp_writer_start(path, &m, 0) < 0)
		return 1;
	uint32_t kname = sp_intern(
		"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, "
		"std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)");
	uint32_t aname = sp_intern("cudaLaunchKernel");
	struct sp_event w = { .kind = SP_EV_WINDOW_BEGIN, .device = SP_NO_DEVICE };
	push(&w);
	uint64_t t = 1000000000ull, g = t + 500000;
	for (int i = 0; i < n; i++) {
		t += (uint64_t)(6600 + jitter(300));
		struct sp_event a = { .kind = SP_EV_API,
				      .device = SP_NO_DEVICE,
				      .tid = 4242,
				      .start = t,
				      .end = t + (uint64_t)(2500 + jitter(400)),
				      .corr = 1000 + 2 * (uint32_t)i,
				      .name = aname };
		a.u.api.cbid = 211;
		push(&a);
		g = (g > t + 4000 ? g : t + 4000) + (uint64_t)jitter(100);
		uint64_t d = (uint64_t)(1400 + jitter(60));
		struct sp_event k = { .kind = SP_EV_KERNEL,
				      .device = 0,
				      .start = g,
				      .end = g + d,
				      .corr = a.corr,
				      .name = kname,
				      .stream = 7,
				      .context = 1 };
		k.u.kernel.grid[0] = k.u.kernel.grid[1] = k.u.kernel.grid[2] = 1;
		k.u.kernel.block[0] = 128, k.u.kernel.block[1] = k.u.kernel.block[2] = 1;
		k.u.kernel.regs = 16;
		g += d;
		push(&k);
	}
	struct sp_event e = { .kind = SP_EV_WINDOW_END, .device = SP_NO_DEVICE, .start = t, .end = t };
	push(&e);
	sp_writer_stop();
	struct stat st;
	if (stat(path, &st) < 0)
		return 1;
	printf("%d kernels, %.2f bytes/kernel, %.0f ms\n", n, (double)st.st_size / n, (double)(sp_now_ns() - t0) / 1e6);
	return 0;
}
