/* dist.h — trainfast's communicator layer for data-parallel training: who am I (rank, world,
 * local rank, from MPI / Slurm / torchrun-style variables) and the few collectives the training
 * loop needs (bucketed float sum, double sum/max, broadcast, barrier, abort). Implemented over MPI
 * in dist_mpi.c; dist_none.c is the single-process fallback of builds without MPI.
 *
 * What launches are supported (see docs/DISTRIBUTED.md):
 *   - `mpirun -np N trainfast train ...` (OpenMPI; also `trainfast train --nproc N`, which re-execs
 *     itself under mpirun), and `srun --mpi=pmix trainfast train ...` under Slurm: MPI is
 *     initialised and rank/world come from MPI_COMM_WORLD. The launcher's variables
 *     (SLURM_PROCID/SLURM_NTASKS, RANK/WORLD_SIZE) when present must agree with MPI's.
 *   - Environment-only launches (torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or srun
 *     without --mpi) with a world size of 1 run as a single process (no MPI_Init).
 *   - Environment-only launches with a world size > 1 are refused with a clear error: the
 *     collectives run over MPI, and MPI processes cannot join one job from MASTER_ADDR alone.
 *     The local rank is still read (LOCAL_RANK / SLURM_LOCALID) to pick the GPU.
 * Failure policy: MPI_COMM_WORLD uses MPI_ERRORS_RETURN, so a failed collective comes back as an
 * error; the front end then calls tf_dist_abort (MPI_Abort), which makes the launcher end every
 * rank. A rank that dies (kill -9) is detected by mpirun/srun, which tears the job down, so the
 * survivors never hang in a collective. */
#ifndef TF_DIST_H
#define TF_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_dist {
    int rank;          /* 0 .. world-1 */
    int world;         /* processes in the job (1: single process) */
    int local_rank;    /* rank among the processes of this node (GPU choice) */
    int local_world;   /* processes on this node */
    int mpi;           /* 1 when MPI was initialised by tf_dist_init (collectives go over it) */
    char launcher[32]; /* "single", "mpirun", "srun", "torchrun-env" (world 1) */
} tf_dist;

/* 1 when this build has MPI (dist_mpi.c), 0 for dist_none.c. */
int tf_dist_have_mpi(void);

/* Discover rank/world and initialise MPI when a launcher started this process under MPI.
 * argc/argv are passed to MPI_Init (may be NULL). Errors: FL_E_UNSUPPORTED (world > 1 from the
 * environment without an MPI launcher, or a build without MPI launched with world > 1: the message
 * says how to launch), FL_E_INVALID (launcher variables disagree with MPI), -EIO (MPI_Init
 * failed). On error *d describes a single process. */
int tf_dist_init(int *argc, char ***argv, tf_dist *d, fl_error *err);

/* In-place sum over all ranks of n floats, in buckets of at most `bucket` floats (0: 4 Mi floats)
 * so the MPI library never needs a second buffer the size of the whole model. No-op for world 1.
 * Errors: -EIO with MPI's error string. */
int tf_dist_allreduce_f32(const tf_dist *d, float *buf, size_t n, size_t bucket, fl_error *err);

/* In-place sum (op 0) or max (op 1) of n doubles over all ranks (metrics, agreement checks). */
int tf_dist_allreduce_f64(const tf_dist *d, double *buf, size_t n, int op, fl_error *err);

/* Broadcast `bytes` bytes from `root` to every rank (initial weights). */
int tf_dist_bcast(const tf_dist *d, void *buf, size_t bytes, int root, fl_error *err);

/* Wait for every rank. */
int tf_dist_barrier(const tf_dist *d, fl_error *err);

/* End the whole job now with exit status `code` (MPI_Abort when MPI is up, else exit). This is
 * the front end's failure path: call it after printing the error, never from library code. */
void tf_dist_abort(const tf_dist *d, int code);

/* Collective timeout in seconds: TRAINFAST_DIST_TIMEOUT (default 1800; 0 = none). With MPI and
 * world > 1, a watchdog thread ends this rank (exit 1, with a message naming the collective) when
 * one collective waits longer, so a hung peer cannot stall the job forever; the launcher then
 * stops the other ranks. Keep it above the longest rank-0-only phase (evaluation, checkpoint). */
double tf_dist_timeout(void);

/* Finalize MPI (when tf_dist_init started it). */
void tf_dist_finalize(tf_dist *d);

/* What the environment says (dist_env.c, used by both implementations): fills rank/world/
 * local_rank/local_world/launcher from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/
 * SLURM_NTASKS_PER_NODE, RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE or OpenMPI's
 * OMPI_COMM_WORLD_* (world 1 when none is set). Returns 1 when an MPI launcher started the process
 * (OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK set), else 0. Errors (negative): FL_E_INVALID for
 * malformed values (message names the variable). */
int tf_dist_from_env(tf_dist *d, fl_error *err);

/* CPU compute threads a rank takes by default: the node's cores shared by its local ranks
 * (d->local_world, else MPICH's MPI_LOCALNRANKS), at least 1. The cores are this process's
 * CPU affinity mask; a mask no wider than the node's online CPUs divided by the local ranks is
 * taken as this rank's own share (a launcher that binds ranks to cores, e.g. srun) and used
 * whole. Several ranks each running a thread per core would oversubscribe the node
 * (every rank taking every core ran at 0.3-0.8x one process on 2 cores). */
int tf_dist_default_threads(const tf_dist *d);
/* The rule itself: online CPUs, CPUs in the affinity mask, local ranks (tested on its own). */
int tf_threads_per_rank(int online, int affinity, int local_ranks);

/* Adapters for tf_train_config.grad_allreduce / bn_allreduce (sums): user is a const tf_dist *. */
int tf_dist_grad_allreduce(void *user, float *buf, int64_t n, fl_error *err);
int tf_dist_bn_allreduce(void *user, double *buf, int64_t n, fl_error *err);

#ifdef __cplusplus
}
#endif
#endif
