/* SPDX-License-Identifier: MIT */
/* run.h - the run id: one name shared by every process of one launch (all ranks of a torchrun,
 * srun or mpirun job, or the processes under one `stepprof run`), so that one run writes one
 * folder ({run} in the output template) and readers can tell runs apart (trace header). */
#ifndef SP_RUN_H
#define SP_RUN_H

#include <stddef.h>

#define SP_RUN_ID_MAX 64        /* bytes of a run id with its NUL */
#define SP_RUN_ENV "STEPPROF_RUN_ID"

/* Writes this process's run id into out (len >= 2) and, if how is not NULL, a short phrase
 * naming its source into *how. From the first of: $STEPPROF_RUN_ID (set by `stepprof run` for
 * everything it starts); Slurm (slurm-JOBID[.STEP]); torchrun's rendezvous id
 * (TORCHELASTIC_RUN_ID unless "none"); a PMIx namespace (Open MPI, PRRTE); a launcher without a
 * job id (torchrun without --rdzv-id, MPICH/MVAPICH): DATE-TIME-HOST-PPID from the launcher's
 * start time and pid, shared by the ranks of one node; else this process alone:
 * DATE-TIME-PID from its own start time. Only [A-Za-z0-9._-] are kept (others become '_'), so
 * the id is a safe file name. Reads /proc and the environment; may run inside the profiled
 * process (not on a hot path). This function can't fail: the same process gets the same id. */
void sp_run_id(char *out, size_t len, const char **how);

#define SP_PIDNS_INIT 0xeffffffcull    /* the host's pid namespace (the kernel's PROC_PID_INIT_INO) */
#define SP_NAME_PID_ENV "STEPPROF_TEST_NAME_PID"

/* The inode of this process's pid namespace (/proc/self/ns/pid), 0 if unreadable. Can't fail. */
unsigned long long sp_pidns(void);
/* The pid this process's files are named with, and its tag (len >= 10): "" in the host's pid
 * namespace, where host name and pid tell processes apart; in another (a container per rank:
 * the same pid and host name in two processes) or where the namespace cannot be read, "." and 8
 * hex digits drawn once per process. $STEPPROF_TEST_NAME_PID=N (tests only) names the process N and
 * always gives it a tag. Thread-safe, the same answer in one process. This function can't fail. */
int sp_name_pid(char *tag, size_t len);

#endif
