/* dist_env.c — rank/world discovery from the launchers' environment variables (OpenMPI's mpirun,
 * Slurm's srun, torchrun), shared by the MPI and the single-process communicator. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist.h"

/* -1: unset; -2: malformed (error set); else the value */
static long env_int(const char *name, fl_error *err)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return -1;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0 || x > (1L << 30)) {
        fl_error_set(err, FL_E_INVALID,
                     "environment variable %s='%s' is not a non-negative integer", name, v);
        return -2;
    }
    return x;
}

int tf_dist_from_env(tf_dist *d, fl_error *err)
{
    memset(d, 0, sizeof *d);
    d->world = d->local_world = 1;
    snprintf(d->launcher, sizeof d->launcher, "single");
    static const struct {
        const char *rank, *world, *local, *local_world, *name;
    } src[] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "OMPI_COMM_WORLD_LOCAL_SIZE", "mpirun"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "srun"},
        {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun-env"},
    };
    for (size_t i = 0; i < sizeof src / sizeof src[0]; i++) {
        long r = env_int(src[i].rank, err), w = env_int(src[i].world, err);
        if (r == -2 || w == -2)
            return FL_E_INVALID;
        if (w < 0)
            continue;
        if (r < 0)
            r = 0;
        if (w == 0 || r >= w)
            return fl_error_set(err, FL_E_INVALID, "%s=%ld is out of range for %s=%ld", src[i].rank,
                                r, src[i].world, w);
        long lr = env_int(src[i].local, err), lw = env_int(src[i].local_world, err);
        if (lr == -2 || lw == -2)
            return FL_E_INVALID;
        d->rank = (int)r;
        d->world = (int)w;
        d->local_rank = lr >= 0 ? (int)lr : 0;
        d->local_world = lw > 0 ? (int)lw : 1;
        snprintf(d->launcher, sizeof d->launcher, "%s", src[i].name);
        break;
    }
    const char *mpi_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof mpi_vars / sizeof mpi_vars[0]; i++)
        if (getenv(mpi_vars[i]))
            return 1;
    return 0;
}

int tf_threads_per_rank(int online, int affinity, int local_ranks)
{
    if (online < 1)
        online = 1;
    if (affinity < 1 || affinity > online)
        affinity = online;
    if (local_ranks <= 1)
        return affinity;
    if (affinity < online && affinity <= online / local_ranks)
        return affinity; /* bound by the launcher to a share of the node: all of it is ours */
    int t = affinity / local_ranks;
    return t >= 1 ? t : 1;
}

int tf_dist_default_threads(const tf_dist *d)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int affinity = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        affinity = CPU_COUNT(&set);
    int local = d ? d->local_world : 1;
    if (local <= 1) { /* MPICH/Hydra say it only here */
        const char *v = getenv("MPI_LOCALNRANKS");
        long n = v ? strtol(v, NULL, 10) : 0;
        if (n > 1 && n <= 4096)
            local = (int)n;
    }
    return tf_threads_per_rank(online > 0 ? (int)online : 1, affinity, local);
}
