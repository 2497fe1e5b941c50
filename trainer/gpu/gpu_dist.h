/* gpu_dist.h — data-parallel hooks of the CUDA backend (the trainer reaches them only through
 * tf_backend_ops.attach_comm; tests/gpu call them directly): with an NCCL communicator attached,
 * every optimizer step first averages the accumulated fp32 gradients across ranks (ncclAllReduce
 * with ncclAvg on the backend's stream), so all ranks apply the same update to identical weights.
 * BatchNorm statistics stay per process (each rank normalizes with its own batch statistics and
 * keeps its own running averages, as PyTorch DDP without SyncBatchNorm). Builds without NCCL keep
 * these functions and return FL_E_UNSUPPORTED. */
#ifndef TF_GPU_DIST_H
#define TF_GPU_DIST_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build has NCCL; its version in *version (e.g. 22805) when not NULL. */
int tf_gpu_nccl_available(int *version);

/* Attach `comm` (an ncclComm_t, owned by the caller, for the backend's device) to the CUDA backend
 * `b`; NULL detaches. Errors: FL_E_UNSUPPORTED (no NCCL in this build). */
int tf_gpu_set_comm(tf_backend *b, void *comm, fl_error *err);

/* A communicator of world size 1 on `device` (ncclCommInitAll): the single-process path, used by
 * the tests to check that the distributed step equals the plain one. Free with
 * tf_gpu_comm_destroy. Errors: FL_E_UNSUPPORTED, FL_E_CUDA (NCCL's message). */
int tf_gpu_comm_init_single(int device, void **comm, fl_error *err);

/* Bytes of an NCCL unique id (NCCL_UNIQUE_ID_BYTES), fixed so callers need not include nccl.h. */
#define TF_NCCL_ID_BYTES 128

/* Multi-process path (gpu_attach_comm in gpu_nccl.c, the backend's attach_comm): rank 0 makes a
 * unique id (ncclGetUniqueId) into id[TF_NCCL_ID_BYTES], broadcasts it through the trainer's
 * communicator (tf_comm.bcast: MPI, dist.h), and every rank calls tf_gpu_comm_init_rank with it
 * (ncclCommInitRank on `device`). Free with tf_gpu_comm_destroy.
 * Errors: FL_E_UNSUPPORTED (no NCCL), FL_E_CUDA (NCCL's message). */
int tf_gpu_nccl_unique_id(void *id, fl_error *err);
int tf_gpu_comm_init_rank(int device, int rank, int world, const void *id, void **comm,
                          fl_error *err);

/* Destroy a communicator made by tf_gpu_comm_init_single or tf_gpu_comm_init_rank. NULL allowed. */
void tf_gpu_comm_destroy(void *comm);

#ifdef __cplusplus
}
#endif
#endif
