/* SPDX-License-Identifier: MIT */
/* report_findings.c - the "Findings" of `stepprof report`: what stands out in the aggregated
 * report (idle GPU, slow or differing steps, steps outside training, NCCL share, one dominant
 * kernel, lost records), each as a sentence saying where to look next, and how the steps were
 * found. Reads the report only; prints nothing (report.c prints, as text or JSON). */
#include <stdio.h>
#include <stdlib.h>
#include "cli.h"
#include "config/config.h"
#include "decide/pysteps.h"
#include "report_impl.h"
#include "util.h"

/* How the recorded steps were found (format version 2): one sentence into buf. Returns 0 if the
 * trace does not say (version 1). Can't fail. */
int sp_report_steps_found_by(const struct report *rep, char *buf, size_t len)
{
	const struct sp_steps *s = &rep->steps;
	uint32_t regimes = 0, last_regime = 0, refuted = 0;
	if (!s->n || !s->st[s->n - 1].how.how)
		return 0;
	for (size_t i = 0; i < s->n; i++) {
		regimes += s->st[i].how.regime != last_regime;
		last_regime = s->st[i].how.regime;
		refuted += (s->st[i].how.flags & SP_STEP_REFUTED) != 0;
	}
	const struct sp_step_stat *l = &s->st[s->n - 1];
	static const char late[] = "; found after the schedule's first window would have begun, so the schedule "
				   "started there: its windows hold later steps than its numbers say";
	const char *m = l->marker ? sp_trace_string(rep->r, l->marker) : NULL;
	if (l->how.how - 1 == SP_MARK_OPTIMIZER) {
		/* the STEP record keeps the rule in confidence, the cycle in period and launches */
		struct sp_pysteps_how h = { .rule = (int)l->how.confidence,
					    .period = l->how.period,
					    .optimizers = l->how.launches };
		char say[300];
		snprintf(buf, len, "found by the program's optimizer steps (torch.optim's global post hook%s): %s%s",
			 l->how.flags & SP_STEP_FROM_AUTO ? "; kind = auto took them: the hook fired before any window"
							  : "",
			 sp_pysteps_say(&h, m, say, sizeof say),
			 regimes > 1 ? "; the rule changed inside the recorded steps (STEPPROF_VERBOSE says how)" : "");
		return 1;
	}
	if (l->how.how - 1 == SP_MARK_PYTHON) {
		snprintf(buf, len,
			 "found by the python marker '%.200s' (every %u): a step begins at each call of that "
			 "function",
			 m ? m : "?", l->how.every);
		return 1;
	}
	if (l->how.how - 1 != SP_MARK_AUTO) {
		snprintf(buf, len, "found by the %s marker '%.200s' (every %u)",
			 sp_marker_kind_name((enum sp_marker_kind)(l->how.how - 1)), m ? m : "?", l->how.every);
		return 1;
	}
	snprintf(buf, len,
		 "found automatically: boundary %s '%.200s' (every %u), a period of %u calls with %u "
		 "launches, proven by %u copies; regime %u%s%s%s%s",
		 l->how.flags & SP_STEP_AFTER ? "after" : "before", m ? m : "?", l->how.every, l->how.period,
		 l->how.launches, l->how.confidence, l->how.regime,
		 l->how.relocks ? ", after re-locks (the program's loop changed)" : "",
		 regimes > 1 ? "; the recorded steps span several regimes" : "",
		 refuted ? "; the detector refuted some steps (see the findings)" : "",
		 l->how.flags & SP_STEP_LATE ? late : "");
	return 1;
}

/* Automatic steps recorded in a regime without training evidence while the trace also holds
 * steps of a training regime (SP_STEP_TRAIN): the first regime was taken for the loop before the
 * training one appeared (an evaluation longer than the detector's deferral). One finding into f.
 * Returns 1 if any, else 0. */
static int untrained_steps(const struct sp_steps *s, char *f)
{
	size_t train = 0, other = 0;
	uint32_t treg = 0;
	char *p = f, *end = f + FINDING_LEN;
	if (!s->n || s->st[s->n - 1].how.how - 1 != SP_MARK_AUTO)
		return 0;
	for (size_t i = 0; i < s->n; i++) {
		int t = (s->st[i].how.flags & SP_STEP_TRAIN) != 0;
		train += t;
		other += !t;
		if (t)
			treg = s->st[i].how.regime;
	}
	if (!train || !other)
		return 0;
	p += snprintf(p, end - p,
		      "%zu recorded step%s belong to a regime that launched no backward or optimizer kernel, "
		      "while regime %u (training) did:",
		      other, other == 1 ? "" : "s", treg);
	for (size_t i = 0, ranges = 0; i < s->n && ranges < 6; i++) {
		const struct sp_step_stat *a = &s->st[i];
		if (a->how.flags & SP_STEP_TRAIN)
			continue;
		size_t j = i;
		while (j + 1 < s->n && !(s->st[j + 1].how.flags & SP_STEP_TRAIN) &&
		       s->st[j + 1].how.regime == a->how.regime && s->st[j + 1].number == s->st[j].number + 1)
			j++;
		p += snprintf(p, end > p ? end - p : 0, " step%s %lld%s%.0lld (regime %u);", j > i ? "s" : "",
			      (long long)a->number, j > i ? "-" : "", j > i ? (long long)s->st[j].number : 0,
			      a->how.regime);
		ranges++;
		i = j;
	}
	snprintf(p, end > p ? end - p : 0,
		 " automatic detection took an evaluation or start-up phase for the loop before "
		 "the training loop appeared: those are not training steps (docs/STEPS.md, \"Which regime the schedule "
		 "counts\").");
	return 1;
}

/* Whether a's content is the program's: not the step the process exited in (SP_STEP_AT_EXIT: it
 * holds whatever came after the last iteration, which the step table says). */
static int whole_step(const struct sp_step_stat *a)
{
	return !(a->how.flags & SP_STEP_AT_EXIT);
}

/* Steps whose kernel count differs from the recorded steps' median, or that the detector itself
 * refuted, as one finding into f (ranges of step numbers), for traces that say how their steps
 * were found; the step the process exited in is left out. Returns 1 if any, else 0. */
static int differing_steps(const struct sp_steps *s, char *f)
{
	uint64_t *k, med;
	size_t n = 0, ranges = 0, m = 0, irregular = 0;
	char *p = f, *end = f + FINDING_LEN;
	if (s->n < 3 || !s->st[s->n - 1].how.how)
		return 0; /* a version-1 trace, or one written by a tool that does not say how */
	k = sp_xrealloc(NULL, s->n * sizeof(*k));
	for (size_t i = 0; i < s->n; i++)
		if (whole_step(&s->st[i]))
			k[m++] = s->st[i].kernels;
	if (m < 3) {
		free(k);
		return 0;
	}
	med = sp_median_u64(k, m);
	free(k);
	for (size_t i = 0; i < s->n; i++) {
		int differs = whole_step(&s->st[i]) &&
			      (s->st[i].kernels != med || (s->st[i].how.flags & (SP_STEP_REFUTED | SP_STEP_IRREGULAR)));
		n += differs;
		irregular += differs && (s->st[i].how.flags & SP_STEP_IRREGULAR);
	}
	if (!n)
		return 0;
	p += snprintf(p, end - p, "%zu of %zu recorded steps differ from the others (median %llu kernels):", n, m,
		      (unsigned long long)med);
	for (size_t i = 0; i < s->n && ranges < 6; i++) {
		const struct sp_step_stat *a = &s->st[i];
		if (!whole_step(a) || (a->kernels == med && !(a->how.flags & (SP_STEP_REFUTED | SP_STEP_IRREGULAR))))
			continue;
		size_t j = i;
		while (j + 1 < s->n && whole_step(&s->st[j + 1]) && s->st[j + 1].kernels == a->kernels &&
		       s->st[j + 1].number == s->st[j].number + 1)
			j++;
		p += snprintf(p, end > p ? end - p : 0, " step%s %lld%s%.0lld (%llu kernels%s);", j > i ? "s" : "",
			      (long long)a->number, j > i ? "-" : "", j > i ? (long long)s->st[j].number : 0,
			      (unsigned long long)a->kernels,
			      a->how.flags & SP_STEP_REFUTED     ? ", refuted by the detector"
			      : a->how.flags & SP_STEP_IRREGULAR ? ", irregular: the detector kept its lock"
								 : "");
		ranges++;
		i = j;
	}
	if (irregular == n) /* each one the detector checked and kept: the iteration's occasional extra work */
		snprintf(p, end > p ? end - p : 0,
			 " each is one iteration with a few launches more than the others (occasional extra "
			 "work: a norm logged, an update every few steps), kept by automatic detection.");
	else if (s->st[s->n - 1].how.how - 1 == SP_MARK_AUTO)
		snprintf(p, end > p ? end - p : 0,
			 " automatic detection may have locked on another phase of the "
			 "program (evaluation, warm-up): compare with an explicit [marker] (docs/STEPS.md).");
	else if (s->st[s->n - 1].how.how - 1 == SP_MARK_OPTIMIZER)
		snprintf(p, end > p ? end - p : 0,
			 " these are the program's own steps, one iteration each: a step with more kernels did more "
			 "work (an evaluation pass, a checkpoint, logging).");
	else
		snprintf(p, end > p ? end - p : 0,
			 " the marker may not fall once per iteration, or the program's "
			 "iterations differ.");
	return 1;
}

/* Steps holding an evaluation pass: the program's own steps (an optimizer or python marker) keep
 * one that runs between two optimizer steps inside the step. A step is said to hold one where its
 * kernels exceed the median by a quarter (8 at least), most of the excess is a longer run without
 * a backward or optimizer kernel than the steps' median run, and the steps do launch such
 * kernels (training); the run's excess is the number said. One finding into f; returns 1 if any. */
static int eval_steps(const struct sp_steps *s, char *f)
{
	char *p = f, *end = f + FINDING_LEN;
	size_t m = 0, said = 0;
	if (s->n < 3 ||
	    (s->st[s->n - 1].how.how - 1 != SP_MARK_OPTIMIZER && s->st[s->n - 1].how.how - 1 != SP_MARK_PYTHON))
		return 0;
	uint64_t *k = sp_xrealloc(NULL, 3 * s->n * sizeof(*k)), *run = k + s->n, *tr = run + s->n;
	for (size_t i = 0; i < s->n; i++)
		if (whole_step(&s->st[i])) {
			k[m] = s->st[i].kernels;
			run[m] = s->st[i].plain_run;
			tr[m++] = s->st[i].train_kernels;
		}
	uint64_t mk = m >= 3 ? sp_median_u64(k, m) : 0, mr = m >= 3 ? sp_median_u64(run, m) : 0;
	uint64_t mt = m >= 3 ? sp_median_u64(tr, m) : 0;
	free(k);
	if (m < 3 || !mt)
		return 0;
	for (size_t i = 0; i < s->n && said < 6; i++) {
		const struct sp_step_stat *a = &s->st[i];
		uint64_t extra = a->kernels > mk ? a->kernels - mk : 0,
			 more = a->plain_run > mr ? a->plain_run - mr : 0;
		if (!whole_step(a) || !a->train_kernels || extra < (mk / 4 > 8 ? mk / 4 : 8) || 2 * more < extra)
			continue;
		p += snprintf(p, end > p ? end - p : 0,
			      "%sstep %lld holds an evaluation pass (%llu kernels without "
			      "backward)",
			      said ? "; " : "", (long long)a->number, (unsigned long long)more);
		said++;
	}
	if (!said)
		return 0;
	snprintf(p, end > p ? end - p : 0,
		 ": a stretch of kernels without a backward or optimizer kernel, longer than the other steps' "
		 "(median %llu kernels a step), between two of the program's steps; it stays inside the step, "
		 "which ends where the program's own step ends.",
		 (unsigned long long)mk);
	/* make the sentence start with a capital */
	if (f[0] >= 'a' && f[0] <= 'z')
		f[0] = (char)(f[0] - 'a' + 'A');
	return 1;
}

/* A GPU idle for a median of >= 30% of each step; a step >= 1.5x the median step (3 or more
 * steps). Writes those findings into f[0], f[1]; returns how many. Exits if memory runs out. */
static size_t idle_and_slow_steps(const struct sp_steps *s, char (*f)[FINDING_LEN])
{
	size_t n = 0;
	char t[2][32];

	if (!s->n)
		return 0;
	uint64_t *idle = sp_xrealloc(NULL, s->n * sizeof(*idle)), med = sp_steps_median_ns(s);
	size_t slow = 0;
	for (size_t i = 0; i < s->n; i++) {
		uint64_t d = sp_step_ns(&s->st[i]);
		idle[i] = d ? (d - s->st[i].busy) * 1000000 / d : 0; /* parts per million of the step */
		if (d > sp_step_ns(&s->st[slow]))
			slow = i;
	}
	uint64_t idle_med = sp_median_u64(idle, s->n), longest = sp_step_ns(&s->st[slow]);
	free(idle);
	if (idle_med >= 300000)
		snprintf(f[n++], FINDING_LEN,
			 "The GPU is idle for a median %.1f%% of each step: the host (Python, "
			 "launches, data loading, synchronisation) does not keep it busy. The per-step table "
			 "shows the longest idle stretch of each step; open one step in Perfetto (stepprof "
			 "convert) to see what the CPU does then.",
			 idle_med / 1e4);
	if (s->n >= 3 && med && longest * 2 >= med * 3)
		snprintf(f[n++], FINDING_LEN,
			 "Step %lld took %s, %.1fx the median step (%s): see its row in the "
			 "per-step table.",
			 (long long)s->st[slow].number, sp_fmt_ns(t[0], 32, longest), (double)longest / med,
			 sp_fmt_ns(t[1], 32, med));
	return n;
}

/* Lost records, by cause, with the setting to raise for each. One finding into f; returns 1 if any
 * record was lost. This function can't fail. */
static size_t lost_records(const struct report *rep, char *f)
{
	uint64_t drops = 0;

	for (unsigned i = 0; i < SP_DROP__COUNT; i++)
		drops += rep->dropped[i];
	if (!drops)
		return 0;
	char *p = f, *end = f + FINDING_LEN;
	p += snprintf(p, end - p, "%llu record%s lost:", (unsigned long long)drops,
		      drops == 1 ? " was" : "s were");
	if (rep->dropped[SP_DROP_RING])
		p += snprintf(p, end - p, " %llu to full per-thread rings (raise [limits] ring_events);",
			      (unsigned long long)rep->dropped[SP_DROP_RING]);
	if (rep->dropped[SP_DROP_CUPTI])
		p += snprintf(p, end - p, " %llu by CUPTI (raise [limits] cupti_buffer_bytes);",
			      (unsigned long long)rep->dropped[SP_DROP_CUPTI]);
	if (rep->dropped[SP_DROP_CAP])
		p += snprintf(p, end - p, " %llu to the window byte cap (raise [limits] window_max_bytes);",
			      (unsigned long long)rep->dropped[SP_DROP_CAP]);
	if (rep->dropped[SP_DROP_LATE])
		p += snprintf(p, end - p,
			      " %llu GPU record%s came after its window was written (work still "
			      "running long after the window's last step);",
			      (unsigned long long)rep->dropped[SP_DROP_LATE],
			      rep->dropped[SP_DROP_LATE] == 1 ? "" : "s");
	if (rep->dropped[SP_DROP_MISSING])
		p += snprintf(p, end - p,
			      " %llu kernel%s launched in a window never arrived before the window was written "
			      "(the steps that launched them count fewer kernels);",
			      (unsigned long long)rep->dropped[SP_DROP_MISSING],
			      rep->dropped[SP_DROP_MISSING] == 1 ? "" : "s");
	snprintf(p, end - p, " the tables above miss them.");
	return 1;
}

/* What stands out, in plain words, with where to look next: writes up to FINDINGS_MAX sentences
 * into f and returns how many. Thresholds: GPU idle for a median of >= 30% of each step; a step
 * >= 1.5x the median step (3 or more steps); NCCL kernels >= 30% of kernel time; one kernel name
 * >= 50%; any lost record. Exits if memory runs out. */
size_t sp_report_findings(const struct report *rep, char (*f)[FINDING_LEN])
{
	const struct sp_steps *s = &rep->steps;
	uint64_t total = 0, nccl = 0, top = 0;
	size_t top_id = 0, n = 0;

	for (size_t id = 0; id < rep->kcap; id++) {
		const char *name = rep->k[id].calls ? kname(rep, id) : NULL;
		if (!name)
			continue;
		total += rep->k[id].total;
		nccl += sp_nccl_is_kernel(name) ? rep->k[id].total : 0;
		if (rep->k[id].total > top) {
			top = rep->k[id].total;
			top_id = id;
		}
	}
	n += idle_and_slow_steps(s, f);
	n += differing_steps(s, f[n]);
	if (n < FINDINGS_MAX)
		n += untrained_steps(s, f[n]);
	if (n < FINDINGS_MAX)
		n += eval_steps(s, f[n]);
	struct sp_xrank_wait w = { 0 };
	if (rep->peers && rep->self >= 0)
		sp_xrank_waits(rep->peers, (size_t)rep->self, &w);
	if (total && nccl * 10 >= total * 3 && w.wait_ns + w.transfer_ns)
		snprintf(f[n++], FINDING_LEN,
			 "NCCL kernels take %.1f%% of GPU kernel time, %.1f%% of it waiting for other "
			 "ranks to arrive: %s",
			 100.0 * nccl / total, 100.0 * (double)w.wait_ns / (double)(w.wait_ns + w.transfer_ns),
			 w.wait_ns * 2 > w.transfer_ns
				 ? "see `Waiting for peers` for the rank they wait for and why."
				 : "the transfers themselves dominate: check bus bandwidth in the NCCL table.");
	else if (total && nccl * 10 >= total * 3)
		snprintf(f[n++], FINDING_LEN,
			 "NCCL kernels take %.1f%% of GPU kernel time: check bus bandwidth in the "
			 "NCCL table, and run `stepprof steps` on every rank's trace (or this report with --peers) to "
			 "find "
			 "a rank the others wait for.",
			 100.0 * nccl / total);
	if (total && top * 2 >= total)
		snprintf(f[n++], FINDING_LEN, "One kernel takes %.1f%% of GPU kernel time: %.400s.",
			 100.0 * top / total, sp_display_name(kname(rep, top_id)));
	n += lost_records(rep, f[n]);
	return n;
}
