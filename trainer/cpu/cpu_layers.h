/* cpu_layers.h — the fp32 CPU reference layers (NCHW, batch first): the CPU backend's layers and
 * the one CPU reference of the GPU kernels (kernels/fl_kernels.h), which tests/gpu compare against
 * them (NHWC kernels through host transposes: an [rows][C] tensor is NCHW with H = W = 1); the
 * layers whose backward passes are checked against finite differences (tests/trainer). Host
 * fp16/bf16 conversions are in cpu_half.h.
 *
 * Conventions: x/y are activations [N][C][H][W]; dx/dw/db are gradients that the backward
 * functions ADD to (callers zero them first), so a tensor read by several layers sums its
 * gradients. `P` is the thread pool (NULL = single-threaded); work is split statically, so a
 * given thread count gives bit-identical results run after run. Parameter layouts are those of
 * model.h. No function allocates per sample; scratch comes from the pool. */
#ifndef TF_CPU_LAYERS_H
#define TF_CPU_LAYERS_H

#include <stdint.h>

#include "cpu_pool.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Row-major C = alpha op(A) op(B) + beta C with op = transpose when ta/tb is non-zero;
 * op(A) is M x K, op(B) is K x N. OpenBLAS cblas_sgemm when built with it (the caller pins
 * OpenBLAS to one thread: we parallelise above it), else a blocked C loop. */
void cpu_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);

/* Name of the GEMM in use ("OpenBLAS 0.3.21" or "builtin"). */
const char *cpu_gemm_name(void);

/* Convolution (also used for linear layers: shape (cin,1,1), k = 1, stride 1, pad 0).
 * w: [cout][cin][k][k]; b: [cout] or NULL. */
void cpu_conv_forward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                      const float *x, const float *w, const float *b, float *y);
/* dx may be NULL (input needs no gradient), db may be NULL (no bias). */
void cpu_conv_backward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                       const float *x, const float *w, const float *dy, float *dx, float *dw,
                       float *db);

/* The same with a column cache of N * cin*k*k * Ho*Wo floats (col_cache, or NULL): the forward
 * pass leaves its im2col there and the backward of the SAME batch (same N and pool) reuses it
 * instead of recomputing it, and overwrites it. Results are bit-identical to the uncached calls. */
void cpu_conv_forward_cached(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride,
                             int pad, const float *x, const float *w, const float *b, float *y,
                             float *col_cache);
void cpu_conv_backward_cached(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride,
                              int pad, const float *x, const float *w, const float *dy, float *dx,
                              float *dw, float *db, float *col_cache);

/* Linear: x is [N][cin] (a flattened tensor), w [cout][cin], b [cout] (may be NULL). */
void cpu_linear_forward(cpu_pool *P, int N, int cin, int cout, const float *x, const float *w,
                        const float *b, float *y);
void cpu_linear_backward(cpu_pool *P, int N, int cin, int cout, const float *x, const float *w,
                         const float *dy, float *dx, float *dw, float *db);

/* Batch norm. Training: batch statistics; saves per channel mean and 1/sqrt(var + eps) in
 * save[0..C) and save[C..2C) for the backward; updates running mean/var (run_mean, run_var may be
 * NULL) with `momentum` (PyTorch convention, unbiased running variance).
 * Eval (train == 0): uses run_mean/run_var; save unused. */
void cpu_bn_forward(cpu_pool *P, int N, tf_shape s, int train, float eps, float momentum,
                    const float *x, const float *gamma, const float *beta, float *run_mean,
                    float *run_var, float *save, float *y);
/* Backward of the training-mode forward (uses save). dx, dgamma, dbeta are added to. */
void cpu_bn_backward(cpu_pool *P, int N, tf_shape s, const float *x, const float *gamma,
                     const float *save, const float *dy, float *dx, float *dgamma, float *dbeta);

/* Synchronized batch norm (data parallel, --sync-bn): the batch statistics are those of the
 * union of every rank's batch. `reduce` sums n doubles in place over the ranks (all ranks call
 * these functions for the same layers in the same order with the same N); `world` ranks.
 * scratch: 2*C doubles owned by the caller. Forward (training only) = cpu_bn_forward over the
 * global batch; backward: dgamma/dbeta get this rank's share (the gradient all-reduce averages
 * them), dx uses the global sums, so the result equals one process running the whole batch up to
 * summation order. Returns 0 or the reduce callback's error (outputs then undefined). */
typedef struct cpu_bn_sync {
    int (*reduce)(void *user, double *buf, int64_t n, fl_error *err);
    void *user;
    int world;
    double *scratch;
    fl_error *err;
} cpu_bn_sync;
int cpu_bn_forward_sync(cpu_pool *P, int N, tf_shape s, float eps, float momentum, const float *x,
                        const float *gamma, const float *beta, float *run_mean, float *run_var,
                        float *save, float *y, const cpu_bn_sync *sync);
int cpu_bn_backward_sync(cpu_pool *P, int N, tf_shape s, const float *x, const float *gamma,
                         const float *save, const float *dy, float *dx, float *dgamma, float *dbeta,
                         const cpu_bn_sync *sync);

/* Element-wise over n values. */
void cpu_relu_forward(long n, const float *x, float *y);
void cpu_relu_backward(long n, const float *x, const float *dy, float *dx);
void cpu_gelu_forward(long n, const float *x, float *y);
void cpu_gelu_backward(long n, const float *x, const float *dy, float *dx);
void cpu_add_forward(long n, const float *a, const float *b, float *y);
void cpu_scale_forward(long n, float s, const float *x, float *y);

/* Pools over k x k windows; out shape given. Maxpool records the flat input index (within the
 * sample's channel plane) of each max in `arg` ([N][C][Ho][Wo]) for the backward. */
void cpu_maxpool_forward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                         const float *x, float *y, int32_t *arg);
void cpu_maxpool_backward(cpu_pool *P, int N, tf_shape in, tf_shape out, const int32_t *arg,
                          const float *dy, float *dx);
void cpu_avgpool_forward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                         const float *x, float *y);
void cpu_avgpool_backward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                          const float *dy, float *dx);
void cpu_gap_forward(int N, tf_shape in, const float *x, float *y);
void cpu_gap_backward(int N, tf_shape in, const float *dy, float *dx);

/* Softmax cross-entropy with label smoothing eps over logits [N][K]:
 *   loss_i = -sum_k t_ik log softmax(z_i)_k,  t_ik = (1 - eps) [k == y_i] + eps / K.
 * Returns the summed loss (double); *correct1 / *correct5 (may be NULL) receive top-1/top-5 hits
 * (ties count against the label: a class ranks above the label when its logit is greater, or
 * equal with a smaller index). When dlogits is not NULL it receives grad_scale * (softmax - t)
 * (overwritten, not added). */
double cpu_softmax_xent(int N, int K, const float *logits, const int32_t *labels, float eps,
                        float grad_scale, float *dlogits, uint32_t *correct1, uint32_t *correct5);

/* uint8 NHWC batch -> normalised fp32 NCHW with optional per-sample crop-with-padding and flip
 * (fl_aug_crop_flip(seed, epoch, indices[i] or i, pad, flip, ...)); `hflip_all` mirrors every
 * sample (flip TTA). cpu_input_run with the options below at 0. */
void cpu_input_u8(cpu_pool *P, int N, int H, int W, int C, const uint8_t *img, const float *mean,
                  const float *std, int pad, int flip, uint64_t seed, uint64_t epoch,
                  const uint64_t *indices, int hflip_all, float *x);

/* The input stage with every option of the GPU input kernel (flk_input_u8), whose reference it is;
 * the CPU backend leaves reflect, nhwc and c_out at 0 (cpu_input_u8). GPU flip = 2 (mirror all) is
 * flip = 0, hflip_all = 1 here; the kernel's mean/stddev on the 0..255 scale are 255 x these. */
typedef struct cpu_input_params {
    int N, H, W, C;          /* uint8 NHWC batch; C in 1..4 */
    const float *mean, *std; /* C values each, pixel scale [0, 1]: x = (v / 255 - mean) / std */
    int pad;                 /* random crop with this padding, output stays H x W (0: none) */
    int flip;                /* random horizontal flip */
    int hflip_all;           /* then mirror every sample (flip TTA) */
    uint64_t seed, epoch;    /* keys of fl_aug_crop_flip */
    const uint64_t *indices; /* record index of each sample (the draw's key); NULL: 0..N-1 */
    int reflect;             /* crop padding mirrors the image (pad < H, W) instead of 0 pixels */
    int nhwc;                /* write NHWC instead of NCHW */
    int c_out;               /* channels written (0 or <= C: C); channels C..c_out-1 are 0 */
} cpu_input_params;
/* x: N * max(C, c_out) * H * W floats, overwritten. */
void cpu_input_run(cpu_pool *P, const cpu_input_params *p, const uint8_t *img, float *x);

/* SGD step over n weights: g = grad + wd w; v = momentum v + g; w -= lr (nesterov ? g + momentum v
 * : v). grad is left as it is (the caller clears it). */
void cpu_sgd_step(long n, float *w, const float *grad, float *v, float lr, float momentum, float wd,
                  int nesterov);

/* Exponential moving average: ema = decay ema + (1 - decay) w over n values. */
void cpu_ema_update(long n, float *ema, const float *w, float decay);

#ifdef __cplusplus
}
#endif
#endif
