/* test_dist_env.c — the communicator's launch discovery (trainer/dist/dist.h) without a launcher:
 * Slurm / torchrun / OpenMPI variables give rank, world and local rank; malformed or
 * inconsistent values are errors naming the variable; a world > 1 without an MPI launcher is
 * refused with a message that says how to launch; world 1 runs as a plain process (no MPI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist.h"
#include "fl_check.h"

static void clear_env(void)
{
    const char *v[] = {"OMPI_COMM_WORLD_RANK",
                       "OMPI_COMM_WORLD_SIZE",
                       "OMPI_COMM_WORLD_LOCAL_RANK",
                       "OMPI_COMM_WORLD_LOCAL_SIZE",
                       "SLURM_PROCID",
                       "SLURM_NTASKS",
                       "SLURM_LOCALID",
                       "SLURM_NTASKS_PER_NODE",
                       "RANK",
                       "WORLD_SIZE",
                       "LOCAL_RANK",
                       "LOCAL_WORLD_SIZE",
                       "PMIX_RANK",
                       "PMI_RANK",
                       "PMI_SIZE"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        unsetenv(v[i]);
}

int main(void)
{
    tf_dist d;
    fl_error err;
    clear_env();
    /* nothing set: one process */
    EXPECTF(tf_dist_from_env(&d, &err) == 0, "plain: launched");
    EXPECTF(d.rank == 0 && d.world == 1 && d.local_rank == 0 && !strcmp(d.launcher, "single"),
            "plain: %d/%d %s", d.rank, d.world, d.launcher);
    EXPECTF(tf_dist_init(NULL, NULL, &d, &err) == 0 && d.world == 1 && !d.mpi, "plain init: %s",
            err.msg);
    float f[3] = {1, 2, 3};
    EXPECTF(tf_dist_allreduce_f32(&d, f, 3, 2, &err) == 0 && f[2] == 3.0f, "world 1 allreduce");
    tf_dist_finalize(&d);

    /* Slurm without --mpi */
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_LOCALID", "1", 1);
    EXPECTF(tf_dist_from_env(&d, &err) == 0, "slurm: launched");
    EXPECTF(d.rank == 3 && d.world == 8 && d.local_rank == 1 && !strcmp(d.launcher, "srun"),
            "slurm: %d/%d local %d %s", d.rank, d.world, d.local_rank, d.launcher);
    int rc = tf_dist_init(NULL, NULL, &d, &err);
    EXPECTF(rc == FL_E_UNSUPPORTED &&
                (tf_dist_have_mpi()
                     ? strstr(err.msg, "SLURM_NTASKS") && strstr(err.msg, "--mpi=pmix")
                     : strstr(err.msg, "built without MPI") != NULL),
            "slurm world 8 without MPI: rc %d %s", rc, err.msg);
    EXPECTF(d.world == 1 && d.rank == 0, "after a refused init the process is single");
    clear_env();

    /* torchrun variables */
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    EXPECTF(tf_dist_from_env(&d, &err) == 0 && d.rank == 1 && d.world == 2 && d.local_rank == 1 &&
                !strcmp(d.launcher, "torchrun-env"),
            "torchrun: %d/%d %s", d.rank, d.world, d.launcher);
    rc = tf_dist_init(NULL, NULL, &d, &err);
    EXPECTF(rc == FL_E_UNSUPPORTED &&
                (tf_dist_have_mpi() ? strstr(err.msg, "WORLD_SIZE") && strstr(err.msg, "mpirun")
                                    : strstr(err.msg, "built without MPI") != NULL),
            "torchrun world 2: rc %d %s", rc, err.msg);
    setenv("WORLD_SIZE", "1", 1);
    setenv("RANK", "0", 1);
    EXPECTF(tf_dist_init(NULL, NULL, &d, &err) == 0 && d.world == 1 && !d.mpi,
            "torchrun world 1: %s", err.msg);
    tf_dist_finalize(&d);
    /* malformed / inconsistent */
    setenv("WORLD_SIZE", "two", 1);
    rc = tf_dist_from_env(&d, &err);
    EXPECTF(rc == FL_E_INVALID && strstr(err.msg, "WORLD_SIZE='two'"), "malformed: %s", err.msg);
    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", "2", 1);
    rc = tf_dist_from_env(&d, &err);
    EXPECTF(rc == FL_E_INVALID && strstr(err.msg, "RANK=2"), "rank >= world: %s", err.msg);
    clear_env();

    /* an MPI launcher's variables are recognised as such */
    setenv("PMIX_RANK", "0", 1);
    EXPECTF(tf_dist_from_env(&d, &err) == 1, "PMIX_RANK: MPI launch not recognised");
    clear_env();

    /* compute threads per rank: the node's cores shared by its local ranks */
    static const int th[][4] = {/* online, affinity, local ranks -> threads */
                                {2, 2, 1, 2},
                                {2, 2, 2, 1},
                                {2, 2, 4, 1},
                                {8, 8, 2, 4},
                                {8, 8, 3, 2},
                                {64, 64, 8, 8}, /* a launcher bound each rank: */
                                {8, 2, 4, 2},
                                {8, 1, 8, 1},
                                /* a narrow cpuset for the whole job reads as a binding too */
                                {64, 16, 2, 16},
                                {64, 48, 2, 24},
                                {2, 0, 1, 2},
                                {0, 0, 1, 1}};
    for (size_t i = 0; i < sizeof th / sizeof th[0]; i++)
        EXPECTF(tf_threads_per_rank(th[i][0], th[i][1], th[i][2]) == th[i][3],
                "threads: online %d affinity %d local %d: %d, want %d", th[i][0], th[i][1],
                th[i][2], tf_threads_per_rank(th[i][0], th[i][1], th[i][2]), th[i][3]);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    EXPECTF(tf_dist_from_env(&d, &err) == 1 &&
                tf_dist_default_threads(&d) <= (online > 1 ? online / 2 : 1),
            "mpirun, 2 local ranks: %d threads on %ld CPUs", tf_dist_default_threads(&d), online);
    clear_env();
    setenv("MPI_LOCALNRANKS", "4096", 1);
    EXPECTF(tf_dist_from_env(&d, &err) == 0 && tf_dist_default_threads(&d) == 1,
            "MPI_LOCALNRANKS 4096: %d threads", tf_dist_default_threads(&d));
    unsetenv("MPI_LOCALNRANKS");
    if (fl_check_status())
        return 1;
    printf("PASS\n");
    return 0;
}
