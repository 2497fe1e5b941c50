/* dist_none.c — the communicator of dist.h for builds without MPI: always one process; a launch
 * that asks for more (mpirun, srun, WORLD_SIZE > 1) is refused with a clear error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"

int tf_dist_have_mpi(void) { return 0; }

int tf_dist_init(int *argc, char ***argv, tf_dist *d, fl_error *err)
{
    (void)argc;
    (void)argv;
    int rc = tf_dist_from_env(d, err);
    if (rc < 0)
        return rc;
    if (d->world > 1) {
        int w = d->world;
        d->world = 1;
        d->rank = 0;
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "launched as one of %d processes (%s), but this trainfast was built "
                            "without MPI: install libopenmpi-dev and rebuild for data-parallel "
                            "training",
                            w, d->launcher);
    }
    return 0;
}

int tf_dist_allreduce_f32(const tf_dist *d, float *buf, size_t n, size_t bucket, fl_error *err)
{
    (void)d, (void)buf, (void)n, (void)bucket, (void)err;
    return 0;
}

int tf_dist_allreduce_f64(const tf_dist *d, double *buf, size_t n, int op, fl_error *err)
{
    (void)d, (void)buf, (void)n, (void)op, (void)err;
    return 0;
}

int tf_dist_bcast(const tf_dist *d, void *buf, size_t bytes, int root, fl_error *err)
{
    (void)d, (void)buf, (void)bytes, (void)root, (void)err;
    return 0;
}

int tf_dist_barrier(const tf_dist *d, fl_error *err)
{
    (void)d, (void)err;
    return 0;
}

void tf_dist_abort(const tf_dist *d, int code)
{
    (void)d;
    fflush(stdout);
    fflush(stderr);
    exit(code);
}

void tf_dist_finalize(tf_dist *d) { d->mpi = 0; }

int tf_dist_grad_allreduce(void *user, float *buf, int64_t n, fl_error *err)
{
    (void)user, (void)buf, (void)n, (void)err;
    return 0;
}

int tf_dist_bn_allreduce(void *user, double *buf, int64_t n, fl_error *err)
{
    (void)user, (void)buf, (void)n, (void)err;
    return 0;
}

double tf_dist_timeout(void) { return 0; }
