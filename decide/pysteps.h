/* SPDX-License-Identifier: MIT */
/* pysteps.h - a PyTorch program's iterations from its optimizer steps: optimizer step() and GradScaler
 * update() events in, step ends out; several optimizers per iteration make one step (docs/STEPS.md,
 * "PyTorch optimizer steps"). Pure, so the library and `stepprof autostep` decide the same. */
#ifndef SP_PYSTEPS_H
#define SP_PYSTEPS_H

#include <stddef.h>
#include <stdint.h>

#define SP_PYSTEPS_MAX_CYCLE 32   /* longest cycle of optimizer steps learned (one iteration's) */
#define SP_PYSTEPS_CONFIRM \
	8  /* a cycle is confirmed by this many events in a row that repeat it,
			       * two whole copies at least: a WGAN critic's 5 steps before the
			       * generator's first are no cycle of one optimizer */
#define SP_PYSTEPS_HIST 64    /* optimizer events remembered: two copies of the longest cycle */

/* What ends a step now. */
enum sp_pysteps_rule {
	SP_PYRULE_FIRST = 0, /* no cycle confirmed: each step() of the anchor optimizer (the first
			       * one stepped, or after a change the first after the last end) */
	SP_PYRULE_CYCLE,     /* the confirmed cycle's ending optimizer */
	SP_PYRULE_SCALER,    /* a GradScaler's update() (one per iteration, skipped steps too) */
};

/* Bits returned for one event. */
#define SP_PYSTEPS_END 0x1u    /* a step ends at this event */
#define SP_PYSTEPS_RULE 0x2u   /* the rule changed at this event (how says the new one) */
#define SP_PYSTEPS_BROKEN 0x4u /* ... because the confirmed cycle stopped repeating: learning again */
#define SP_PYSTEPS_MERGED \
	0x8u /* ... and the new rule's end here was left out: the old rule had
				* ended a step inside this iteration already (no step of a few
				* calls at the change) */

/* How steps end now: what the trace's step records and `stepprof report` say. */
struct sp_pysteps_how {
	int rule;            /* enum sp_pysteps_rule */
	uint32_t end;        /* the event that ends a step: the optimizer's (anchor or cycle's) or the scaler's id */
	uint32_t period;     /* optimizer steps in the confirmed cycle, 0 none */
	uint32_t optimizers; /* distinct optimizers in it, 0 none */
	uint32_t changes;    /* rule changes so far */
	uint32_t breaks;     /* confirmed cycles that stopped repeating */
};

struct sp_pysteps {
	uint32_t hist[SP_PYSTEPS_HIST]; /* optimizer ids by event index mod SP_PYSTEPS_HIST */
	uint64_t n; /* optimizer events so far */
	uint64_t from;                  /* event index where the cycle's program order starts */
	uint64_t learn_from;            /* ... where learning started (the anchor's event after a change) */
	uint64_t last_end;              /* 1 + index of the last optimizer event the optimizer rule
					 * ended a step at (0: none) */
	uint32_t anchor;                /* the FIRST rule's optimizer */
	uint32_t cycle[SP_PYSTEPS_MAX_CYCLE]; /* the confirmed cycle by position, in program order */
	uint32_t end_pos;               /* position of the step that ends a step */
	int fresh; /* the cycle was just confirmed: its first end may merge */
	int scaler_on;                  /* the SCALER rule holds */
	uint32_t scaler;                /* ... for this scaler (the first whose update came) */
	unsigned opt_ends;              /* optimizer-rule ends since that scaler's last update: a
					 * second one drops the SCALER rule (no update any more) */
	int opt_ended;                  /* an optimizer event ended a step since the last update */
	struct sp_pysteps_how how;
};

/* Sets p up: nothing seen. This function can't fail. */
void sp_pysteps_init(struct sp_pysteps *p);
/* An optimizer's step() returned; id names the optimizer object (non-zero, distinct per object).
 * Returns SP_PYSTEPS_* bits. This function can't fail. */
unsigned sp_pysteps_optim(struct sp_pysteps *p, uint32_t id);
/* A GradScaler's update() begins; id names the scaler (non-zero). Returns SP_PYSTEPS_* bits.
 * This function can't fail. */
unsigned sp_pysteps_scaler(struct sp_pysteps *p, uint32_t id);
/* How steps end (h; end: the name of h->end) in one phrase ("each step ends when Adam#2's step()
 * returns ...") into buf. Returns buf. This function can't fail. */
const char *sp_pysteps_say(const struct sp_pysteps_how *h, const char *end, char *buf, size_t n);

#endif
