/* gpu_nccl.c — NCCL gradient averaging for the CUDA backend (gpu_dist.h) and its attach_comm
 * (backend.h): the backend sets up and owns its NCCL communicator. Compiled with FL_HAVE_NCCL when
 * CMake finds nccl.h and libnccl; otherwise the same functions report FL_E_UNSUPPORTED, so
 * callers need no #ifdef. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gpu_dist.h"
#include "gpu_internal.h"

#ifdef FL_HAVE_NCCL
#include <nccl.h>

#define GPU_NCCL(call)                                                                             \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess)                                                                     \
            return fl_error_set(err, FL_E_CUDA, "%s:%d: %s: NCCL %s%s", __FILE__, __LINE__, #call, \
                                ncclGetErrorString(r_),                                            \
                                r_ == ncclSystemError ? " (hint: NCCL_DEBUG=INFO shows why)"       \
                                                      : "");                                       \
    } while (0)

int tf_gpu_nccl_available(int *version)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess)
        return 0;
    if (version)
        *version = v;
    return 1;
}

int tf_gpu_set_comm(tf_backend *b, void *comm, fl_error *err)
{
    (void)err;
    b->comm = comm;
    return 0;
}

int tf_gpu_comm_init_single(int device, void **comm, fl_error *err)
{
    ncclComm_t c = NULL;
    GPU_NCCL(ncclCommInitAll(&c, 1, &device));
    *comm = c;
    return 0;
}

_Static_assert(sizeof(ncclUniqueId) == TF_NCCL_ID_BYTES, "TF_NCCL_ID_BYTES != NCCL's id size");

int tf_gpu_nccl_unique_id(void *id, fl_error *err)
{
    ncclUniqueId u;
    GPU_NCCL(ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
    return 0;
}

int tf_gpu_comm_init_rank(int device, int rank, int world, const void *id, void **comm,
                          fl_error *err)
{
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    if (cudaSetDevice(device) != cudaSuccess)
        return fl_error_set(err, FL_E_CUDA, "cudaSetDevice(%d) failed for rank %d", device, rank);
    ncclComm_t c = NULL;
    GPU_NCCL(ncclCommInitRank(&c, world, u, rank));
    *comm = c;
    return 0;
}

void tf_gpu_comm_destroy(void *comm)
{
    if (comm)
        ncclCommDestroy((ncclComm_t)comm);
}

int gpu_allreduce_grads(tf_backend *b, fl_error *err)
{
    if (!b->comm)
        return 0;
    size_t n = (size_t)b->spec->param_count;
    GPU_NCCL(
        ncclAllReduce(b->gacc, b->gacc, n, ncclFloat, ncclAvg, (ncclComm_t)b->comm, b->stream));
    return 0;
}

#else /* no NCCL in this build */

int tf_gpu_nccl_available(int *version)
{
    if (version)
        *version = 0;
    return 0;
}

int tf_gpu_set_comm(tf_backend *b, void *comm, fl_error *err)
{
    (void)b;
    if (!comm)
        return 0;
    return fl_error_set(err, FL_E_UNSUPPORTED,
                        "this build has no NCCL (nccl.h/libnccl not found "
                        "at configure time): data-parallel GPU training is unavailable");
}

int tf_gpu_comm_init_single(int device, void **comm, fl_error *err)
{
    (void)device;
    *comm = NULL;
    return fl_error_set(err, FL_E_UNSUPPORTED, "this build has no NCCL");
}

int tf_gpu_nccl_unique_id(void *id, fl_error *err)
{
    (void)id;
    return fl_error_set(err, FL_E_UNSUPPORTED,
                        "this build has no NCCL: data-parallel GPU "
                        "training is unavailable");
}

int tf_gpu_comm_init_rank(int device, int rank, int world, const void *id, void **comm,
                          fl_error *err)
{
    (void)device, (void)rank, (void)world, (void)id;
    *comm = NULL;
    return fl_error_set(err, FL_E_UNSUPPORTED, "this build has no NCCL");
}

void tf_gpu_comm_destroy(void *comm) { (void)comm; }

int gpu_allreduce_grads(tf_backend *b, fl_error *err)
{
    (void)b;
    (void)err;
    return 0;
}
#endif

/* tf_backend_ops.attach_comm: a communicator of the job's world on this backend's device. With
 * world > 1, rank 0 makes NCCL's unique id and comm->bcast hands it to every rank (each rank
 * takes part in the broadcast even when its own step failed, so no rank waits for ever). */
int gpu_attach_comm(tf_backend *b, const tf_comm *c, char *note, size_t cap, fl_error *err)
{
    if (note && cap)
        note[0] = 0;
    void *comm = NULL;
    int rc = 0;
    if (c->world <= 1) {
        rc = tf_gpu_comm_init_single(b->cfg.device, &comm, err);
    } else {
        unsigned char id[TF_NCCL_ID_BYTES];
        memset(id, 0, sizeof id);
        if (c->rank == 0)
            rc = tf_gpu_nccl_unique_id(id, err);
        if (c->bcast(c->user, id, sizeof id, 0, err) == 0 && rc == 0)
            rc = tf_gpu_comm_init_rank(b->cfg.device, c->rank, c->world, id, &comm, err);
        else if (rc == 0)
            rc = -EIO;
    }
    if (rc == 0)
        rc = tf_gpu_set_comm(b, comm, err);
    if (rc) {
        tf_gpu_comm_destroy(comm);
        return fl_error_prefix(err, "NCCL");
    }
    b->comm_owned = 1;
    if (note && cap)
        snprintf(note, cap, "gradients averaged over %d GPU process(es) with NCCL", c->world);
    return 0;
}
