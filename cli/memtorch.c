/* SPDX-License-Identifier: MIT */
/* memtorch.c - `stepprof memory`'s second view of a window: PyTorch's caching allocator at the
 * window's end, from the summary the collector wrote beside its snapshot ([activities]
 * torch_memory: TRACE-without-.sptrace.wN.memory_summary.txt), set against the driver's level. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "format.h"
#include "memtl.h"

#define TOP_MAX 10 /* the largest live blocks the summary lists */

struct summary {
	unsigned long long allocated, reserved, segments, blocks;
	unsigned long long top_size[TOP_MAX];
	char top_where[TOP_MAX][320];
	int ntop;
};

/* Reads path (a file of hostile text: bounded lines, unknown lines skipped). Returns 0, or -1 (no
 * such file, or not a summary). Can't fail otherwise. */
static int read_summary(const char *path, struct summary *s)
{
	char line[512];
	int have = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	memset(s, 0, sizeof *s);
	if (!fgets(line, sizeof line, f) || strcmp(line, "stepprof-torch-memory 1\n")) {
		fclose(f);
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		int used = 0;
		if (sscanf(line, "allocated %llu", &s->allocated) == 1)
			have |= 1;
		else if (sscanf(line, "reserved %llu", &s->reserved) == 1)
			have |= 2;
		else if (sscanf(line, "segments %llu", &s->segments) == 1 || sscanf(line, "blocks %llu", &s->blocks) == 1)
			continue;
		else if (s->ntop < TOP_MAX && sscanf(line, "top %llu %n", &s->top_size[s->ntop], &used) == 1 && used) {
			line[strcspn(line, "\n")] = 0;
			snprintf(s->top_where[s->ntop], sizeof s->top_where[0], "%s", line + used);
			for (char *c = s->top_where[s->ntop]; *c; c++)
				if ((unsigned char)*c < 0x20)
					*c = '?';
			s->ntop++;
		}
	}
	fclose(f);
	return have == 3 ? 0 : -1;
}

void sp_memtl_torch_view(const struct sp_memtl *w, const char *trace, FILE *out)
{
	char path[4200], b[3][32];
	struct summary s;
	size_t len = strlen(trace), ext = strlen(".sptrace");
	if (len > ext && !strcmp(trace + len - ext, ".sptrace"))
		len -= ext;
	int k = snprintf(path, sizeof path, "%.*s.w%u.memory_summary.txt", (int)len, trace, w->id);
	if (k <= 0 || (size_t)k >= sizeof path || read_summary(path, &s) < 0)
		return;
	fprintf(out, "  PyTorch's caching allocator at the window's end (%s): %s in %llu live block%s (tensors), %s "
		     "reserved in %llu segment%s, of which %s cached free for torch's reuse\n",
		path, sp_memtl_bytes(b[0], 32, s.allocated), s.blocks, s.blocks == 1 ? "" : "s",
		sp_memtl_bytes(b[1], 32, s.reserved), s.segments, s.segments == 1 ? "" : "s",
		sp_memtl_bytes(b[2], 32, s.reserved > s.allocated ? s.reserved - s.allocated : 0));
	const struct sp_memtl_series *gpu = NULL;
	int gpus = 0;
	for (size_t i = 0; i < w->ns; i++)
		if (w->s[i].device != SP_NO_DEVICE && w->s[i].n) {
			gpu = &w->s[i];
			gpus++;
		}
	if (gpus == 1) {
		uint64_t end = gpu->pt[gpu->n - 1].live;
		fprintf(out, "    the driver's view at the window's end: %s in device allocations; %s of them outside "
			     "torch's reserve (other libraries' workspaces and buffers: cuBLAS, cuDNN, NCCL, or memory "
			     "torch never allocated)%s\n",
			sp_memtl_bytes(b[0], 32, end),
			sp_memtl_bytes(b[1], 32, end > s.reserved ? end - s.reserved : 0),
			end < s.reserved ? "; the driver saw less than torch reserves: allocations made before stepprof "
					   "tracked device memory" : "");
	} else {
		fprintf(out, "    the driver's view: %s\n",
			gpus ? "several GPUs (torch's figures are of every device together)" : "no device memory records in this window");
	}
	if (s.ntop)
		fprintf(out, "    largest live blocks (innermost frame outside torch; '?': allocated before the "
			     "window, no stack):\n");
	for (int i = 0; i < s.ntop; i++)
		fprintf(out, "      %10s  %s\n", sp_memtl_bytes(b[0], 32, s.top_size[i]), s.top_where[i]);
}
