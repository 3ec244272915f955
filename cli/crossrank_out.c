/* SPDX-License-Identifier: MIT */
/* crossrank_out.c - what the cross-rank analysis tells (see crossrank.h): the per-rank table and
 * the verdict in words, the JSON object, and the queries of report and convert --merge-ranks
 * (a kernel's wait, the wait and transfer slices, the straggler, a trace's waits). Reads the
 * analysis that crossrank.c built; changes nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"
#include "commstats.h"
#include "crossrank_impl.h"

void sp_xrank_print(const struct sp_xrank *a, FILE *out)
{
	char l[24], t[8][32];
	size_t rows = a->n;

	fprintf(out,
		"\nArrivals: %llu collectives in %zu traces (paired across ranks by communicator and sequence "
		"number: %llu, %llu of them with every rank of the communicator traced)\n",
		(unsigned long long)a->groups, a->n, (unsigned long long)a->paired, (unsigned long long)a->complete);
	fprintf(out, "Per rank, medians per step; CPU on peers = CPU blocked in a synchronising call (.item(), a "
		     "sync) while a peer had not arrived;\n"
		     "Last = share of collectives it reached last (GPU: NCCL kernel start; CPU: the NCCL call)\n");
	fprintf(out, "%-6s %6s %12s %12s %13s %14s %12s %12s %10s %9s %9s\n", "Rank", "Steps", "Median step",
		"Compute", "Exposed comm", "Wait for peers", "CPU on peers", "Host stall", "Copies", "Last GPU",
		"Last CPU");
	size_t *o = sp_xrealloc(NULL, (a->n + 1) * sizeof(*o));
	memcpy(o, a->order, a->n * sizeof(*o));
	if (a->n > MAX_ROWS) { /* the ranks most often last, then by rank */
		rows = MAX_ROWS;
		for (size_t i = 0; i < rows; i++)
			for (size_t j = i + 1; j < a->n; j++)
				if (share(&a->r[o[j]]) > share(&a->r[o[i]])) {
					size_t x = o[i];
					o[i] = o[j];
					o[j] = x;
				}
	}
	for (size_t i = 0; i < rows; i++) {
		const struct rk *k = &a->r[o[i]];
		fprintf(out, "%-6s %6zu %12s %12s %13s %14s %12s %12s %10s %8.0f%% %8.0f%%\n",
			label(a, o[i], l, sizeof(l)), k->st.n, sp_fmt_ns(t[0], 32, k->med[M_STEP]),
			sp_fmt_ns(t[1], 32, k->med[M_COMPUTE]), sp_fmt_ns(t[2], 32, k->med[M_EXPOSED]),
			sp_fmt_ns(t[3], 32, k->med[M_WAIT]), sp_fmt_ns(t[6], 32, k->med[M_CPUWAIT]),
			sp_fmt_ns(t[4], 32, k->med[M_STALL]), sp_fmt_ns(t[5], 32, k->med[M_COPY]), 100 * share(k),
			k->cpu_decisive ? 100.0 * (double)k->last_cpu / (double)k->cpu_decisive : 0.0);
	}
	if (rows < a->n)
		fprintf(out, "... %zu more ranks (the %d most often last are shown; --json lists every rank)\n",
			a->n - rows, MAX_ROWS);
	free(o);
	fprintf(out, "\n%s\n", a->verdict);
	for (int i = 0; i < a->nnotes; i++)
		fprintf(out, "- %s\n", a->notes[i]);
}

static void json_meds(struct sp_out *x, const uint64_t *m)
{
	sp_out_printf(x,
		      "{\"step\":%llu,\"compute\":%llu,\"exposed_comm\":%llu,\"wait\":%llu,\"host_stall\":%llu,"
		      "\"copy\":%llu,\"transfer\":%llu,\"nccl\":%llu,\"cpu_wait\":%llu}",
		      (unsigned long long)m[M_STEP], (unsigned long long)m[M_COMPUTE], (unsigned long long)m[M_EXPOSED],
		      (unsigned long long)m[M_WAIT], (unsigned long long)m[M_STALL], (unsigned long long)m[M_COPY],
		      (unsigned long long)m[M_XFER], (unsigned long long)m[M_NCCL], (unsigned long long)m[M_CPUWAIT]);
}

static const char *clock_name(int c)
{
	return c == CLK_COLLECTIVES ? "collectives" : c == CLK_ANCHORS ? "anchors" : "anchors_unchecked";
}

/* Every collective with its calls: arrivals on the common clock (ns after the collective's first
 * arrival on the GPU, or on the CPU), waits and transfers. */
static void json_arrivals(const struct sp_xrank *a, struct sp_out *x)
{
	char l[24];
	sp_out_puts(x, ",\"arrivals\":[");
	for (size_t i = 0, first = 1; i < a->nc; first = 0) {
		size_t j = i, last = i;
		int64_t g0 = INT64_MAX, c0 = INT64_MAX;
		while (j < a->nc && a->c[j].comm == a->c[i].comm && a->c[j].seq == a->c[i].seq)
			j++;
		for (size_t k = i; k < j; k++) {
			const struct coll *c = &a->c[k];
			int64_t off = a->r[c->trace].off, g = sub((int64_t)c->ks, off), cpu = sub((int64_t)c->cpu, off);
			if (c->ke && g < g0)
				g0 = g;
			if (cpu < c0)
				c0 = cpu;
			if (c->ke &&
			    (!a->c[last].ke || sub(g, sub((int64_t)a->c[last].ks, a->r[a->c[last].trace].off)) > 0))
				last = k;
		}
		sp_out_printf(x, "%s{\"comm\":\"0x%016llx\",\"seq\":%llu,\"op\":\"%s\",\"comm_size\":%d,\"calls\":[",
			      first ? "" : ",", (unsigned long long)a->c[i].comm, (unsigned long long)a->c[i].seq,
			      sp_nccl_op_name(a->c[i].op), a->c[i].comm_size);
		for (size_t k = i; k < j; k++) {
			const struct coll *c = &a->c[k];
			const struct rk *r = &a->r[c->trace];
			int64_t off = r->off;
			sp_out_printf(x, "%s{\"trace\":\"%s\",\"step\":", k > i ? "," : "",
				      label(a, c->trace, l, sizeof(l)));
			if (c->step >= 0)
				sp_out_printf(x, "%lld", (long long)r->st.st[c->step].number);
			else
				sp_out_puts(x, "null");
			sp_out_printf(x, ",\"cpu_arrival_ns\":%lld", (long long)sub(sub((int64_t)c->cpu, off), c0));
			if (c->ke)
				sp_out_printf(x, ",\"gpu_arrival_ns\":%lld,\"kernel_ns\":%llu",
					      (long long)sub(sub((int64_t)c->ks, off), g0),
					      (unsigned long long)(c->ke > c->ks ? c->ke - c->ks : 0));
			else
				sp_out_puts(x, ",\"gpu_arrival_ns\":null,\"kernel_ns\":null");
			if (c->inferred)
				sp_out_printf(x, ",\"inferred_arrival_ns\":%lld,\"wait_ns\":%llu,\"transfer_ns\":null,"
						 "\"last\":false}",
					      (long long)sub(c->inferred, g0 == INT64_MAX ? c->inferred : g0),
					      (unsigned long long)c->wait);
			else if (c->paired)
				sp_out_printf(x, ",\"wait_ns\":%llu,\"transfer_ns\":%llu,\"last\":%s}",
					      (unsigned long long)c->wait,
					      (unsigned long long)((c->ke > c->ks ? c->ke - c->ks : 0) - c->wait),
					      k == last ? "true" : "false");
			else
				sp_out_puts(x, ",\"wait_ns\":null,\"transfer_ns\":null,\"last\":null}");
		}
		sp_out_puts(x, "]}");
		i = j;
	}
	sp_out_puts(x, "]");
}

/* Trace k's "per_step" array (after a comma). */
static void json_steps(struct sp_out *x, const struct rk *k)
{
	sp_out_puts(x, ",\"per_step\":[");
	for (size_t i = 0; i < k->st.n; i++) {
		const struct sp_step_stat *s = &k->st.st[i];
		uint64_t comp = s->kernel_ns > s->nccl_ns ? s->kernel_ns - s->nccl_ns : 0;
		uint64_t stall = s->stall - (k->peeridle[i] < s->stall ? k->peeridle[i] : s->stall);
		sp_out_printf(x,
			      "%s{\"step\":%lld,\"window\":%u,\"duration_ns\":%llu,\"compute_ns\":%llu,"
			      "\"exposed_comm_ns\":%llu,\"wait_ns\":%llu,\"host_stall_ns\":%llu,\"copy_ns\":%llu,"
			      "\"transfer_ns\":%llu,\"nccl_ns\":%llu,\"cpu_wait_ns\":%llu,\"peer_idle_ns\":%llu}",
			      i ? "," : "", (long long)s->number, s->window, (unsigned long long)sp_step_ns(s),
			      (unsigned long long)comp, (unsigned long long)k->exposed[i],
			      (unsigned long long)k->wait[i], (unsigned long long)stall,
			      (unsigned long long)s->copy_ns, (unsigned long long)k->xfer[i],
			      (unsigned long long)s->nccl_ns, (unsigned long long)k->cpuwait[i],
			      (unsigned long long)k->peeridle[i]);
	}
}

void sp_xrank_json(const struct sp_xrank *a, FILE *out, int arrivals)
{
	struct sp_out *x = sp_out_stream(out);
	char l[24];

	sp_out_printf(x, "{\"schema_version\":%d,\"traces\":[", SP_XRANK_SCHEMA);
	for (size_t q = 0; q < a->n; q++) {
		const struct rk *k = &a->r[a->order[q]];
		sp_out_puts(x, q ? ",{\"path\":" : "{\"path\":");
		sp_out_json_str(x, k->path);
		sp_out_printf(x, ",\"label\":\"%s\",\"rank\":%d,\"pid\":%d,\"world_size\":%d,\"host\":",
			      label(a, a->order[q], l, sizeof(l)), k->rank, k->pid, k->world);
		sp_out_json_str(x, k->host);
		if (k->cut_has_window)
			sp_out_printf(x, ",\"cut\":{\"window\":%u,\"at_step\":%lld}", k->cut_window,
				      (long long)k->cut_step);
		else
			sp_out_puts(x, k->cut ? ",\"cut\":{\"window\":null,\"at_step\":null}" : ",\"cut\":null");
		sp_out_printf(x,
			      ",\"steps\":%zu,\"collectives\":%llu,\"collectives_without_kernel\":%llu,"
			      "\"clock\":{\"method\":\"%s\",\"offset_ns\":%lld,\"collective_estimate_ns\":%lld,"
			      "\"deviation_ns\":%lld,\"collectives_used\":%zu},"
			      "\"last_arrivals\":{\"gpu\":%llu,\"cpu\":%llu,\"decisive_gpu\":%llu,\"decisive_cpu\":%"
			      "llu,"
			      "\"share_gpu\":%.4f},\"median_ns\":",
			      k->st.n, (unsigned long long)k->ncoll, (unsigned long long)k->unlinked,
			      clock_name(k->clock), (long long)k->off, (long long)k->est, (long long)k->spread, k->nest,
			      (unsigned long long)k->last_gpu, (unsigned long long)k->last_cpu,
			      (unsigned long long)k->decisive, (unsigned long long)k->cpu_decisive, share(k));
		json_meds(x, k->med);
		sp_out_printf(x, ",\"untimed_gpu_records\":{\"nccl\":%llu,\"other\":%llu},\"inferred_arrivals\":%llu",
			      (unsigned long long)k->untimed_nccl, (unsigned long long)k->untimed_other,
			      (unsigned long long)k->inferred);
		json_steps(x, k);
		sp_out_puts(x, "]}");
	}
	sp_out_printf(x,
		      "],\"coverage\":{\"traced\":%zu,\"world_size\":%d,\"subset\":%s},"
		      "\"collectives\":{\"total\":%llu,\"paired\":%llu,\"complete\":%llu,\"decisive\":%llu,"
		      "\"inferred\":%llu},\"confidence\":{\"level\":\"%s\",\"reasons\":[",
		      a->n, a->world, a->world > 0 && (size_t)a->world > a->n ? "true" : "false",
		      (unsigned long long)a->groups, (unsigned long long)a->paired, (unsigned long long)a->complete,
		      (unsigned long long)a->decisive, (unsigned long long)a->inferred, conf_names[a->conf]);
	for (int i = 0; i < a->nconf; i++) {
		sp_out_puts(x, i ? "," : "");
		sp_out_json_str(x, a->conf_why[i]);
	}
	sp_out_puts(x, "]},");
	if (a->straggler >= 0) {
		const struct rk *k = &a->r[a->straggler];
		sp_out_printf(x, "\"straggler\":{\"rank\":%d,\"cause\":\"%s\",\"wait_ms_per_step\":%.3f},", k->rank,
			      cause_names[a->cause], (double)a->wait_others / 1e6);
		sp_out_printf(x,
			      "\"straggler_detail\":{\"label\":\"%s\",\"last_share\":%.4f,\"next_share\":%.4f,"
			      "\"wait_share\":%.4f,\"marginal\":%s,"
			      "\"cause_explained\":%s,\"excess_ms_per_step\":{\"host\":%.3f,\"compute\":%.3f,"
			      "\"communication\":%.3f}},",
			      label(a, (size_t)a->straggler, l, sizeof(l)), a->share, a->second, a->wait_share,
			      a->marginal ? "true" : "false", a->explained ? "true" : "false",
			      (double)a->excess[0] / 1e6, (double)a->excess[1] / 1e6, (double)a->excess[2] / 1e6);
	} else {
		sp_out_puts(x, "\"straggler\":null,\"straggler_detail\":null,");
	}
	sp_out_printf(x, "\"untraced_rank_later\":%s,\"median_step_ns\":%llu,\"verdict\":",
		      a->untraced_later ? "true" : "false", (unsigned long long)a->step_med);
	sp_out_json_str(x, a->verdict);
	sp_out_puts(x, ",\"notes\":[");
	for (int i = 0; i < a->nnotes; i++) {
		sp_out_puts(x, i ? "," : "");
		sp_out_json_str(x, a->notes[i]);
	}
	sp_out_puts(x, "]");
	if (arrivals)
		json_arrivals(a, x);
	sp_out_puts(x, "}\n");
	sp_out_close(x, 1);
}

int sp_xrank_kernel_wait(const struct sp_xrank *a, int64_t key, uint64_t ks, uint64_t *wait)
{
	struct wl k = { .key = key, .ks = ks };
	const struct wl *f = a->nwl ? bsearch(&k, a->wl, a->nwl, sizeof(*a->wl), cmp_wl) : NULL;
	if (!f)
		return 0;
	*wait = f->wait;
	return 1;
}

int sp_xrank_wait_slices(const struct sp_xrank *a, struct sp_out *o, int64_t key, const struct sp_event *e, int64_t pid,
			 uint64_t tid, int64_t ts)
{
	uint64_t wait, dur = e->end > e->start ? e->end - e->start : 0;
	if (!sp_xrank_kernel_wait(a, key, e->start, &wait))
		return 0;
	wait = wait > dur ? dur : wait;
	sp_out_printf(o,
		      ",\n{\"ph\":\"X\",\"cat\":\"nccl_wait\",\"name\":\"wait for peers\",\"pid\":%lld,"
		      "\"tid\":%llu,\"ts\":",
		      (long long)pid, (unsigned long long)tid);
	sp_out_us(o, ts);
	sp_out_puts(o, ",\"dur\":");
	sp_out_us(o, (int64_t)wait);
	sp_out_printf(o, ",\"args\":{\"wait (us)\":%.3f}}", (double)wait / 1e3);
	sp_out_printf(o,
		      ",\n{\"ph\":\"X\",\"cat\":\"nccl_transfer\",\"name\":\"transfer\",\"pid\":%lld,"
		      "\"tid\":%llu,\"ts\":",
		      (long long)pid, (unsigned long long)tid);
	sp_out_us(o, ts + (int64_t)wait);
	sp_out_puts(o, ",\"dur\":");
	sp_out_us(o, (int64_t)(dur - wait));
	sp_out_printf(o, ",\"args\":{\"transfer (us)\":%.3f}}", (double)(dur - wait) / 1e3);
	return 2;
}

int sp_xrank_straggler(const struct sp_xrank *a, const char **cause)
{
	*cause = a->straggler >= 0 ? cause_names[a->cause] : NULL;
	return a->straggler >= 0 ? a->r[a->straggler].rank : -1;
}

void sp_xrank_waits(const struct sp_xrank *a, size_t i, struct sp_xrank_wait *w)
{
	const struct rk *k = &a->r[i];
	*w = (struct sp_xrank_wait){ .wait_step_ns = k->med[M_WAIT],
				     .transfer_step_ns = k->med[M_XFER],
				     .steps = k->st.n };
	for (size_t j = 0; j < k->st.n; j++) {
		w->wait_ns += k->wait[j];
		w->transfer_ns += k->xfer[j];
	}
}

const char *sp_xrank_verdict(const struct sp_xrank *a)
{
	return a->verdict;
}
