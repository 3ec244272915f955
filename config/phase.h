/* SPDX-License-Identifier: MIT */
/* phase.h - named phases of a configuration: [phase.NAME] sections, each with its own marker and
 * schedule (training and evaluation, an RL framework's forward-only and forward-backward calls).
 * Owns the phase table's parsing, checks and printing; reuses config.c's key parsers through
 * sp_cfg_set, never re-implements them. Like config.c it never prints or exits. docs/CONFIG.md. */
#ifndef SP_PHASE_H
#define SP_PHASE_H

#include <stdio.h>
#include "schedule.h"

#define SP_MAX_PHASES 8         /* [phase.NAME] sections in one configuration */
#define SP_PHASE_NAME 32        /* a phase name's bytes with the NUL: [A-Za-z0-9_-]{1,31} */
#define SP_PHASE_NKEYS 10       /* keys of a [phase.NAME] section (phase.c lists them) */

struct sp_phase {
	char name[SP_PHASE_NAME];     /* as first written; compared without case */
	struct sp_schedule schedule;  /* finalised by sp_phase_finish */
	int marker_kind;              /* enum sp_marker_kind (config.h) */
	char marker_pattern[256];     /* glob; empty for auto and profiler_range */
	int marker_every;             /* >= 1 */
	struct {
		char name[256];       /* INI path or "command line"; "" = built-in default */
		int line;
	} origin[SP_PHASE_NKEYS];     /* per key, in the order of phase.c's table */
	int seen[SP_PHASE_NKEYS];     /* line where the key was set in the file being read, 0 none */
	char first[256];              /* where its first key was set: blamed for a default's problem */
	int first_line;
};

struct sp_phases {
	int n;   /* phases defined; 0 = the plain [marker]/[schedule] case */
	struct sp_phase p[SP_MAX_PHASES];
};

struct sp_config;
struct sp_cfg_errors;

/* 1 if section (trimmed) names a phase: "phase." followed by anything (a bad name is reported
 * by sp_phase_set). This function can't fail. */
int sp_phase_is_section(const char *section);
/* Applies one key of section "phase.NAME" (creating the phase at its first key). Errors name the
 * section as written: "ORIGIN[:LINE]: [phase.NAME] KEY: problem (allowed: ...)". A key set twice
 * in one file is an error when line > 0. Returns 0 or 1 (one error added). */
int sp_phase_set(struct sp_config *cfg, const char *section, const char *key, const char *value, const char *origin,
		 int line, struct sp_cfg_errors *errs);
/* Forgets which keys the file being read has set (call before reading a file). Can't fail. */
void sp_phase_new_file(struct sp_config *cfg);
/* Checks every phase (its schedule and marker as sp_cfg_finish checks [schedule] and [marker])
 * and the rules between phases: at most one phase with kind = auto, and no [schedule] or [marker]
 * key set beside phases (they would be ignored). Applies profiling_frequency. Returns errors added. */
int sp_phase_finish(struct sp_config *cfg, struct sp_cfg_errors *errs);
/* Writes the [phase.NAME] sections as INI text (nothing without phases). Can't fail. */
void sp_phase_print(const struct sp_config *cfg, FILE *f);
/* The phase named name (without case), or NULL. This function can't fail. */
const struct sp_phase *sp_phase_find(const struct sp_config *cfg, const char *name);

#endif
