/* fl_kernels.h — host-callable launchers for fastload's CUDA kernels (input stage, layers the GPU
 * backend does not hand to cuDNN/cuBLAS, loss, optimizer, mixed-precision helpers).
 * Every kernel has a CPU reference in the CPU backend (trainer/cpu/cpu_layers.h, cpu_half.h);
 * tests/gpu/test_kernels compares them, through host transposes where the kernel is NHWC.
 *
 * Conventions (all launchers):
 * - Pointers are device pointers unless the name says `host`. Element type of `void *` tensors is
 *   given by an flk_dtype argument; statistics, gradients of parameters and master weights are
 * fp32.
 * - Activation tensors are NHWC (channels fastest), the layout the GPU backend uses throughout
 *   (cuDNN's tensor-core convolutions are fastest in NHWC). Only the input stage can also write
 * NCHW.
 * - All math inside kernels is fp32 whatever the storage type; reductions are deterministic (fixed
 *   partition, no atomics on floats), so the same inputs give bit-identical outputs run to run.
 * - Each launcher enqueues on `stream` (a cudaStream_t, 0 = legacy default) and returns
 *   cudaSuccess or the launch error (cudaGetLastError); it never synchronizes unless documented.
 * - Launchers that need scratch take a `flk_ws` (workspace) sized by the matching *_ws_bytes(). */
#ifndef FL_KERNELS_H
#define FL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef FLK_HOST_EMU
#include "flk_cuda_host.h" /* the kernels run on the CPU (kernels/emu, tests/gpu) */
#else
#include <cuda_runtime_api.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Storage type of an activation tensor. */
typedef enum flk_dtype { FLK_F32 = 0, FLK_F16 = 1, FLK_BF16 = 2 } flk_dtype;

/* Bytes per element of `dt`. */
size_t flk_dtype_size(flk_dtype dt);
/* "fp32", "fp16" or "bf16". */
const char *flk_dtype_name(flk_dtype dt);

/* ---- input stage ------------------------------------------------------------------------------
 */

typedef enum flk_pad_mode { FLK_PAD_ZERO = 0, FLK_PAD_REFLECT = 1 } flk_pad_mode;

/* Options of the input stage. Per-sample randomness (crop offset, flip) comes from
 * common/fl_aug_rng.h: fl_aug_crop_flip(seed, epoch, index[i], pad, ...), the same function the CPU
 * backend's input stage calls. */
typedef struct flk_input_params {
    int n, h, w, c;           /* batch and image geometry; c in 1..4 */
    float mean[4], stddev[4]; /* per channel, on the 0..255 scale: y = (x - mean) / std */
    int nchw;                 /* 1: write NCHW, 0: write NHWC */
    int pad;                  /* random crop with padding: 0 = no crop; the output stays h × w */
    flk_pad_mode pad_mode;
    int flip;             /* 1: random horizontal flip with p = 0.5; 2: flip every sample (TTA) */
    uint64_t seed, epoch; /* randomness keys */
    int c_out;            /* channels written (0 = c); channels c..c_out-1 are zero: pads the
                             input to a tensor-core friendly channel count (c_out <= 16) */
} flk_input_params;

/* uint8 NHWC `src` (n × h × w × c) → `dst` of type `dt` (NCHW or NHWC), normalized, with the
 * optional random crop-with-padding and flip. `indices` (device, n values) are the dataset record
 * indices that key the randomness; NULL means sample i uses index i. */
cudaError_t flk_input_u8(const uint8_t *src, void *dst, flk_dtype dt, const flk_input_params *p,
                         const uint64_t *indices, cudaStream_t stream);

/* ---- elementwise ------------------------------------------------------------------------------
 */

/* dst[i] = (type of dst) src[i] for n elements, any pair of types (round to nearest even). */
cudaError_t flk_cast(const void *src, flk_dtype src_dt, void *dst, flk_dtype dst_dt, size_t n,
                     cudaStream_t stream);

typedef enum flk_act { FLK_ACT_NONE = 0, FLK_ACT_RELU = 1, FLK_ACT_GELU = 2 } flk_act;

/* y = act(x), n elements (y may equal x). GELU is the tanh approximation (as PyTorch's
 * approximate='tanh'). */
cudaError_t flk_act_forward(flk_act act, const void *x, void *y, flk_dtype dt, size_t n,
                            cudaStream_t stream);
/* dx = dy * act'(x); for ReLU `x` may be the forward output (same sign pattern). dx may equal dy.
 */
cudaError_t flk_act_backward(flk_act act, const void *x, const void *dy, void *dx, flk_dtype dt,
                             size_t n, cudaStream_t stream);

/* y = a + b (residual add), n elements; y may alias a or b. */
cudaError_t flk_add(const void *a, const void *b, void *y, flk_dtype dt, size_t n,
                    cudaStream_t stream);

/* y = s · x, n elements (y may equal x). */
cudaError_t flk_scale(const void *x, void *y, flk_dtype dt, size_t n, float s, cudaStream_t stream);

/* acc[i] = beta * acc[i] + scale * (float)g[i]: accumulate a half/fp32 gradient into fp32 (beta 0
 * overwrites, 1 accumulates for --accum). */
cudaError_t flk_accum_grad(const void *g, flk_dtype dt, float *acc, size_t n, float scale,
                           float beta, cudaStream_t stream);

/* ---- layout changes ----------------------------------------------------------------------------
 */

/* Convolution weights: fp32 master OIHW [o][i][kh][kw] → dst of type dt in OHWI [o][kh][kw][ipad]
 * (cuDNN's NHWC filter layout, "KRSC"); input channels i..ipad-1 are written as zeros (ipad >= i:
 * the weights of a zero-padded input). */
cudaError_t flk_filter_to_ohwi(const float *w_oihw, void *dst, flk_dtype dt, int o, int i, int kh,
                               int kw, int ipad, cudaStream_t stream);
/* Filter gradient back: acc_oihw = beta·acc_oihw + scale·g_ohwi (permuted; g_ohwi has ipad input
 * channels, the padded ones are ignored), fp32 out. */
cudaError_t flk_filter_grad_from_ohwi(const void *g_ohwi, flk_dtype dt, float *acc_oihw, int o,
                                      int i, int kh, int kw, int ipad, float scale, float beta,
                                      cudaStream_t stream);
/* Per-sample layout change of n samples of (c, h, w): to_nchw 1: NHWC → NCHW, 0: NCHW → NHWC.
 * src and dst must not alias. */
cudaError_t flk_transpose_chw(const void *src, void *dst, flk_dtype dt, int n, int c, int h, int w,
                              int to_nchw, cudaStream_t stream);

/* ---- bias (linear layers) ---------------------------------------------------------------------
 */

/* y[r, j] += bias[j] for r < rows, j < cols (y row-major rows × cols of type dt; bias fp32). */
cudaError_t flk_bias_add(void *y, flk_dtype dt, const float *bias, int rows, int cols,
                         cudaStream_t stream);
/* dbias[j] = beta * dbias[j] + sum_r dy[r, j] (fp32 accumulation, deterministic). */
cudaError_t flk_bias_backward(const void *dy, flk_dtype dt, float *dbias, int rows, int cols,
                              float beta, cudaStream_t stream);

/* ---- batch normalization (NHWC, per channel over n·h·w rows) ----------------------------------
 */

/* Scratch for flk_bn_* (partial sums): bytes needed for `rows` × `c`. */
size_t flk_bn_ws_bytes(int rows, int c);

/* Training forward: per-channel mean/var over rows = n·h·w, y = act(gamma·(x−mean)·invstd + beta).
 * Writes save_mean / save_invstd (fp32, c values; needed by backward) and updates running stats:
 * running = (1−momentum)·running + momentum·batch (running_var uses the unbiased variance, as
 * PyTorch). `gamma` may be NULL (scale fixed at 1, airbench style). `act` FLK_ACT_RELU fuses the
 * ReLU (then backward needs `y`). ws: flk_bn_ws_bytes(rows, c) bytes of device memory. */
cudaError_t flk_bn_forward_train(const void *x, void *y, flk_dtype dt, int rows, int c,
                                 const float *gamma, const float *beta, float *running_mean,
                                 float *running_var, float momentum, float eps, float *save_mean,
                                 float *save_invstd, flk_act act, void *ws, cudaStream_t stream);

/* Inference forward with running statistics. */
cudaError_t flk_bn_forward_eval(const void *x, void *y, flk_dtype dt, int rows, int c,
                                const float *gamma, const float *beta, const float *running_mean,
                                const float *running_var, float eps, flk_act act,
                                cudaStream_t stream);

/* Backward. With act FLK_ACT_RELU, `y` is the forward output and dy is masked by y > 0 first.
 * dgamma/dbeta (fp32, c) are written (beta_acc = 0) or accumulated (beta_acc = 1); dgamma may be
 * NULL when gamma was NULL. dx may alias dy. */
cudaError_t flk_bn_backward(const void *x, const void *y, const void *dy, void *dx, flk_dtype dt,
                            int rows, int c, const float *gamma, const float *save_mean,
                            const float *save_invstd, float *dgamma, float *dbeta, float beta_acc,
                            flk_act act, void *ws, cudaStream_t stream);

/* ---- pooling (NHWC) ---------------------------------------------------------------------------
 */

typedef enum flk_pool { FLK_POOL_MAX = 0, FLK_POOL_AVG = 1 } flk_pool;

typedef struct flk_pool_params {
    int n, h, w, c;     /* input geometry */
    int k, stride, pad; /* window k × k; output (h + 2pad − k)/stride + 1 */
    flk_pool kind;      /* average pool divides by k·k (padding counted, as count_include_pad) */
} flk_pool_params;

/* Output height/width for `p`. */
void flk_pool_out_dims(const flk_pool_params *p, int *oh, int *ow);

cudaError_t flk_pool_forward(const flk_pool_params *p, const void *x, void *y, flk_dtype dt,
                             cudaStream_t stream);
/* dx (zeroed here, then scattered); max pool routes each output gradient to the first maximum of
 * its window (row-major order), recomputed from x. */
cudaError_t flk_pool_backward(const flk_pool_params *p, const void *x, const void *dy, void *dx,
                              flk_dtype dt, cudaStream_t stream);

/* Global average pool: x (n × hw × c) → y (n × c). */
cudaError_t flk_gap_forward(const void *x, void *y, flk_dtype dt, int n, int hw, int c,
                            cudaStream_t stream);
/* dx[n, p, c] = dy[n, c] / hw. */
cudaError_t flk_gap_backward(const void *dy, void *dx, flk_dtype dt, int n, int hw, int c,
                             cudaStream_t stream);

/* ---- loss --------------------------------------------------------------------------------------
 */

/* Softmax cross-entropy with label smoothing eps (target (1−eps)·onehot + eps/k), for n rows of k
 * logits (row-major, type dt). Writes loss[i] (fp32, per sample) and, when dlogits is not NULL,
 * dlogits = grad_scale · (softmax − target) (type dt; pass grad_scale = loss_scale / n for a mean
 * loss). counts (device int64[2], accumulated, not cleared): [0] += top-1 correct, [1] += top-5
 * correct; a sample's rank is #{j: z_j > z_y} + #{j < y: z_j = z_y}. Labels outside [0, k) give
 * loss NaN and zero gradient. May be NULL: counts. */
cudaError_t flk_xent_forward_backward(const void *logits, flk_dtype dt, const int32_t *labels,
                                      int n, int k, float eps, float grad_scale, float *loss,
                                      void *dlogits, long long *counts, cudaStream_t stream);

/* sum of loss[0..n) into *out (device fp32), deterministic. */
cudaError_t flk_sum(const float *x, int n, float *out, cudaStream_t stream);

/* ---- optimizer and mixed precision --------------------------------------------------------------
 */

/* found_inf (device int) is set to 1 (never cleared here) when any of g[0..n) times inv_scale is
 * not finite; g is multiplied by inv_scale in place (gradient unscale for fp16 loss scaling). */
cudaError_t flk_unscale_check(float *g, size_t n, float inv_scale, int *found_inf,
                              cudaStream_t stream);

/* SGD step on fp32 master weights w[0..n) (one parameter tensor or a contiguous run of tensors with
 * the same weight decay), PyTorch semantics:
 *   g = grad + wd·w;  v = momentum·v + g;  step = nesterov ? g + momentum·v : v;  w −= lr·step
 * and when `copy` is not NULL writes copy[i] = (copy_dt) w[i] (the half-precision weights the
 * forward pass uses). When `skip` (device int, may be NULL) is non-zero the kernel changes nothing
 * (a step skipped by the fp16 loss scaler, decided on the device without a host sync). */
cudaError_t flk_sgd_step(float *w, const float *grad, float *v, size_t n, float lr, float momentum,
                         float wd, int nesterov, void *copy, flk_dtype copy_dt, const int *skip,
                         cudaStream_t stream);

/* ema[i] = decay·ema[i] + (1−decay)·w[i], skipped when *skip != 0 (skip may be NULL). */
cudaError_t flk_ema_update(float *ema, const float *w, size_t n, float decay, const int *skip,
                           cudaStream_t stream);

/* Dynamic loss scale (host side, used after reading found_inf): on overflow halve the scale and
 * reset the good-step counter (returns 1: step skipped); otherwise count the step and double the
 * scale after `growth_interval` good steps in a row (returns 0). The scale stays within [1, 2^24].
 */
int flk_loss_scale_update(float *scale, int *good_steps, int found_inf, int growth_interval);

#ifdef __cplusplus
}
#endif
#endif
