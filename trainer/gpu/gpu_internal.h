/* gpu_internal.h — the GPU backend's private state shared by its translation units
 * (gpu_backend.c: life cycle, step, eval, state; gpu_conv.c: cuDNN convolutions; gpu_linear.c:
 * cuBLAS linear layers). Everything is NHWC in the compute type (fp32/fp16/bf16); master weights,
 * optimizer state, gradients of parameters and BN statistics are fp32. */
#ifndef TF_GPU_INTERNAL_H
#define TF_GPU_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "backend.h"
#include "fl_kernels.h"
#include "gpu_check.h"
#include "gpu_cublas.h"

/* Convolution algorithms chosen for one batch size (two cached: train and eval sizes). */
/* Upper bound for the cuDNN workspace; the allocation is the largest any chosen algorithm needs. */
#define GPU_WS_LIMIT ((size_t)512 << 20)

typedef struct gpu_conv_plan {
    int n;     /* batch size this plan is for; 0 = empty */
    size_t ws; /* workspace bytes the three algorithms need */
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
} gpu_conv_plan;

typedef struct gpu_layer {
    /* TF_CONV */
    cudnnFilterDescriptor_t wdesc;
    cudnnConvolutionDescriptor_t cdesc;
    gpu_conv_plan plans[2];
    int next_plan;
    /* TF_CONV / TF_LINEAR: compute-type copy of the weight (conv: OHWI, linear: [cout][cin]) */
    void *wc;
    int cin_pad; /* TF_CONV: input channels as stored (the network input may be zero-padded) */
    /* TF_BN: batch statistics of the last training forward (fp32, c each) */
    float *save_mean, *save_invstd;
    int fuse_relu;  /* TF_BN followed by a TF_RELU reading only its output: one fused kernel */
    int fused_away; /* TF_RELU done by the BN before it */
} gpu_layer;

/* Device copy of the per-step scalars, read back in one copy per step. */
typedef struct gpu_readback {
    float loss_sum;
    int found_inf;
    long long counts[2];
} gpu_readback;

struct tf_backend {
    const tf_model_spec *spec;
    tf_train_config cfg;
    flk_dtype dt; /* compute/storage type of activations and weight copies */
    cudnnDataType_t cudnn_dt;
    cudaDataType_t blas_dt;
    size_t esize; /* bytes per activation element */
    int max_batch;
    int in_cpad; /* channels of act[0]: in_c rounded up for tensor cores when only
                    convolutions read the input (zero channels, zero weights) */
    char devname[160];
    size_t dev_mem;
    int cc_major, cc_minor;

    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    cudnnTensorDescriptor_t xdesc, ydesc; /* re-set for each conv call */

    gpu_layer *L;             /* spec->n_layers */
    void **act, **grad;       /* per tensor: max_batch × size × esize; grad[0] unused */
    int *ginit;               /* per tensor during backward: gradient written yet */
    void *scratch, *scratch2; /* each max tensor bytes: summing gradients, linear transposes */
    void *wgrad;              /* compute-type filter gradient of one conv (largest) */
    void *ws;                 /* cuDNN workspace, sized once in create */
    size_t ws_bytes;
    void *bn_ws;
    size_t bn_ws_bytes;

    float *params, *mom, *gacc, *gmicro, *stats, *ema_p, *ema_s; /* flat fp32 */
    uint8_t *in_u8;                                              /* input staging (host mode) */
    int32_t *labels;
    uint64_t *indices;
    float *loss;       /* per-sample loss */
    gpu_readback *drb; /* device */
    gpu_readback *hrb; /* pinned host */
    cudaEvent_t ev_h2d0, ev_h2d1;

    void *comm;     /* ncclComm_t when data-parallel (gpu_dist.h), else NULL */
    int comm_owned; /* comm was made by gpu_attach_comm: destroy frees it */

    uint64_t step, micro_step;
    uint32_t accum_count, good_steps;
    float loss_scale;
    uint64_t skipped_steps;
};

/* gpu_conv.c */
int gpu_conv_setup(tf_backend *b, int li, fl_error *err); /* descriptors */
int gpu_conv_plan_for(tf_backend *b, int li, int n, size_t ws_limit, size_t *ws_need,
                      gpu_conv_plan **out, fl_error *err);
int gpu_conv_forward(tf_backend *b, int li, int n, const float *P, fl_error *err);
int gpu_conv_backward(tf_backend *b, int li, int n, fl_error *err);
void gpu_conv_teardown(gpu_layer *G);

/* gpu_linear.c */
int gpu_linear_forward(tf_backend *b, int li, int n, const float *P, fl_error *err);
int gpu_linear_backward(tf_backend *b, int li, int n, fl_error *err);

/* gpu_backend.c: grow the cuDNN workspace to at least `bytes` (rare: a new batch size whose
 * algorithms need more than the full batch's did). */
int gpu_ensure_ws(tf_backend *b, size_t bytes, fl_error *err);

/* gpu_nccl.c: average gacc across ranks (no-op without a communicator) */
int gpu_allreduce_grads(tf_backend *b, fl_error *err);

/* gpu_nccl.c: tf_backend_ops.attach_comm (backend.h) */
int gpu_attach_comm(tf_backend *b, const tf_comm *c, char *note, size_t cap, fl_error *err);

/* gpu_backend.c: where the gradient of tensor t goes (grad[t] or scratch), then fold it in. */
void *gpu_dx_begin(tf_backend *b, int t);
int gpu_dx_end(tf_backend *b, int t, void *dx, int n, fl_error *err);

static inline size_t gpu_tensor_elems(const tf_backend *b, int t, int n)
{
    return (size_t)n * (size_t)tf_shape_size(b->spec->tensors[t]);
}

#endif
