/* dist_mpi.c — the communicator of dist.h over MPI (OpenMPI from Debian): MPI_Init only when a
 * launcher started the process, MPI_ERRORS_RETURN on MPI_COMM_WORLD, bucketed MPI_Allreduce for
 * gradients, MPI_Abort as the job-wide failure path. */
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist.h"
#include "fl_clock.h"

/* ---- collective watchdog ---------------------------------------------------------------------
 * OpenMPI has no timeout on a collective: a peer that hangs (not dies: stuck I/O, SIGSTOP, a
 * deadlocked library) would keep every other rank waiting forever. Each collective records when
 * it started; a thread checks once a second and, past the timeout, prints which collective
 * waited how long and _exit()s this rank with status 1, which makes mpirun/srun end the job. */
static atomic_llong g_wait_since_ms; /* 0: not in a collective */
static _Atomic(const char *) g_wait_what;
static double g_timeout_s;
static int g_rank = -1, g_world = 1;

static long long now_ms(void) { return (long long)(fl_now_s() * 1000.0); }

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        sleep(1);
        long long t0 = atomic_load(&g_wait_since_ms);
        if (t0 && (double)(now_ms() - t0) / 1000.0 > g_timeout_s) {
            const char *what = atomic_load(&g_wait_what);
            char msg[512];
            int n = snprintf(msg, sizeof msg,
                             "trainfast: error: rank %d of %d: %s has waited %.0f s for the other "
                             "ranks (timeout %g s, TRAINFAST_DIST_TIMEOUT): a rank is hung or "
                             "gone; ending this rank so the launcher stops the job\n",
                             g_rank, g_world, what ? what : "a collective",
                             (double)(now_ms() - t0) / 1000.0, g_timeout_s);
            if (n > 0 && write(2, msg, (size_t)(n < (int)sizeof msg ? n : (int)sizeof msg - 1)))
                (void)0;
            _exit(1);
        }
    }
    return NULL;
}

static void wait_begin(const char *what)
{
    atomic_store(&g_wait_what, what);
    atomic_store(&g_wait_since_ms, now_ms());
}

static void wait_end(void) { atomic_store(&g_wait_since_ms, 0); }

double tf_dist_timeout(void)
{
    const char *v = getenv("TRAINFAST_DIST_TIMEOUT");
    double t = v && *v ? strtod(v, NULL) : 1800.0;
    return t > 0 ? t : 0;
}

int tf_dist_have_mpi(void) { return 1; }

static int mpi_fail(fl_error *err, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return fl_error_set(err, -EIO, "%s failed: %s (another rank probably failed or was killed)",
                        what, msg);
}

int tf_dist_init(int *argc, char ***argv, tf_dist *d, fl_error *err)
{
    int launched = tf_dist_from_env(d, err);
    if (launched < 0)
        return launched;
    if (!launched) {
        if (d->world > 1) {
            int w = d->world;
            char l[32];
            snprintf(l, sizeof l, "%s", d->launcher);
            d->world = 1;
            d->rank = 0;
            return fl_error_set(err, FL_E_UNSUPPORTED,
                                "%s says world size %d, but no MPI launcher started this process: "
                                "trainfast's collectives run over MPI; launch with `mpirun -np %d "
                                "trainfast train ...`, `srun --mpi=pmix ...`, or `trainfast train "
                                "--nproc %d ...` (torchrun's MASTER_ADDR/MASTER_PORT rendezvous is "
                                "not supported)",
                                strcmp(l, "srun") ? "WORLD_SIZE" : "SLURM_NTASKS", w, w, w);
        }
        return 0; /* a single process: no MPI at all */
    }
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int rc = MPI_Init(argc, argv);
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, "MPI_Init");
    }
    d->mpi = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (strcmp(d->launcher, "single") && (d->rank != rank || d->world != world)) {
        int er = d->rank, ew = d->world;
        d->rank = rank;
        d->world = world;
        return fl_error_set(err, FL_E_INVALID,
                            "the %s variables say rank %d of %d but MPI says rank %d of %d: "
                            "mixed launchers?",
                            d->launcher, er, ew, rank, world);
    }
    d->rank = rank;
    d->world = world;
    g_rank = rank;
    g_world = world;
    g_timeout_s = tf_dist_timeout();
    if (world > 1 && g_timeout_s > 0) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, watchdog, NULL) != 0)
            g_timeout_s = 0; /* no watchdog: the launcher's own handling remains */
        pthread_attr_destroy(&at);
    }
    /* the node-local rank from MPI itself (launchers that set no LOCAL variable) */
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &d->local_rank);
        MPI_Comm_size(node, &d->local_world);
        MPI_Comm_free(&node);
    }
    if (!strcmp(d->launcher, "single") || !strcmp(d->launcher, "torchrun-env"))
        snprintf(d->launcher, sizeof d->launcher, "mpirun");
    return 0;
}

int tf_dist_allreduce_f32(const tf_dist *d, float *buf, size_t n, size_t bucket, fl_error *err)
{
    if (!d->mpi || d->world <= 1)
        return 0;
    if (bucket == 0)
        bucket = (size_t)4 << 20;
    for (size_t off = 0; off < n; off += bucket) {
        size_t len = n - off < bucket ? n - off : bucket;
        wait_begin("MPI_Allreduce (gradients)");
        int rc =
            MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)len, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        wait_end();
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, "MPI_Allreduce (gradients)");
    }
    return 0;
}

int tf_dist_allreduce_f64(const tf_dist *d, double *buf, size_t n, int op, fl_error *err)
{
    if (!d->mpi || d->world <= 1)
        return 0;
    wait_begin("MPI_Allreduce");
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, op ? MPI_MAX : MPI_SUM,
                           MPI_COMM_WORLD);
    wait_end();
    return rc == MPI_SUCCESS ? 0 : mpi_fail(err, rc, "MPI_Allreduce");
}

int tf_dist_bcast(const tf_dist *d, void *buf, size_t bytes, int root, fl_error *err)
{
    if (!d->mpi || d->world <= 1)
        return 0;
    const size_t chunk = (size_t)1 << 30;
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t len = bytes - off < chunk ? bytes - off : chunk;
        wait_begin("MPI_Bcast");
        int rc = MPI_Bcast((char *)buf + off, (int)len, MPI_BYTE, root, MPI_COMM_WORLD);
        wait_end();
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, "MPI_Bcast");
    }
    return 0;
}

int tf_dist_barrier(const tf_dist *d, fl_error *err)
{
    if (!d->mpi || d->world <= 1)
        return 0;
    wait_begin("MPI_Barrier");
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    wait_end();
    return rc == MPI_SUCCESS ? 0 : mpi_fail(err, rc, "MPI_Barrier");
}

void tf_dist_abort(const tf_dist *d, int code)
{
    fflush(stdout);
    fflush(stderr);
    if (d && d->mpi && d->world > 1)
        MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

void tf_dist_finalize(tf_dist *d)
{
    if (d->mpi) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin)
            MPI_Finalize();
        d->mpi = 0;
    }
}

int tf_dist_grad_allreduce(void *user, float *buf, int64_t n, fl_error *err)
{
    return tf_dist_allreduce_f32((const tf_dist *)user, buf, (size_t)n, 0, err);
}

int tf_dist_bn_allreduce(void *user, double *buf, int64_t n, fl_error *err)
{
    return tf_dist_allreduce_f64((const tf_dist *)user, buf, (size_t)n, 0, err);
}
