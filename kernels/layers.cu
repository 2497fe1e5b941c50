/* layers.cu — NHWC layer kernels the GPU backend runs itself: batch norm (train/eval/backward, with
 * a fused ReLU), ReLU/GELU, residual add, max/avg pool, global average pool, linear bias, gradient
 * accumulation into fp32. Deterministic: reductions use a fixed partition and no float atomics.
 * CPU references: the CPU backend's layers (trainer/cpu/cpu_layers.h, NCHW). */
#include "kcommon.cuh"

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

/* ---- activations ------------------------------------------------------------------------------
 */

/* tanh-approximation GELU with 0.5·(1 + tanh u) written as σ(2u) = 1/(1 + e^(−2u)) and
 * 1 − tanh²u as 4·σ(2u)·σ(−2u): the same function, but no cancellation in 1 + tanh u for x < 0
 * (through tanhf, fp32 GELU at x ≈ −3 and its gradient near saturation were off by far more than
 * a few units of fp32 roundoff relative to the double reference). */
__device__ __forceinline__ float gelu_f(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    float u = k * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}
__device__ __forceinline__ float gelu_grad(float x)
{
    const float k = 0.7978845608028654f;
    float u = k * (x + 0.044715f * x * x * x);
    float sp = 1.0f / (1.0f + expf(-2.0f * u)), sn = 1.0f / (1.0f + expf(2.0f * u)); /* σ(±2u) */
    return sp + 2.0f * x * sp * sn * k * (1.0f + 3.0f * 0.044715f * x * x);
}

template <typename T> __global__ void act_fwd_kernel(int act, const T *x, T *y, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float v = flk_ld(&x[i]);
        v = act == FLK_ACT_RELU ? fmaxf(v, 0.0f) : act == FLK_ACT_GELU ? gelu_f(v) : v;
        flk_st(&y[i], v);
    }
}

template <typename T>
__global__ void act_bwd_kernel(int act, const T *x, const T *dy, T *dx, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float v = flk_ld(&x[i]), g = flk_ld(&dy[i]);
        g = act == FLK_ACT_RELU   ? (v > 0.0f ? g : 0.0f)
            : act == FLK_ACT_GELU ? g * gelu_grad(v)
                                  : g;
        flk_st(&dx[i], g);
    }
}

extern "C" cudaError_t flk_act_forward(flk_act act, const void *x, void *y, flk_dtype dt, size_t n,
                                       cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(act_fwd_kernel<T>, bl, th, stream, act, (const T *)x, (T *)y, n));
    return cudaGetLastError();
}

extern "C" cudaError_t flk_act_backward(flk_act act, const void *x, const void *dy, void *dx,
                                        flk_dtype dt, size_t n, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(act_bwd_kernel<T>, bl, th, stream, act, (const T *)x, (const T *)dy,
                            (T *)dx, n));
    return cudaGetLastError();
}

template <typename T> __global__ void add_kernel(const T *a, const T *b, T *y, size_t n)
{
    GRID_STRIDE(i, n) flk_st(&y[i], flk_ld(&a[i]) + flk_ld(&b[i]));
}

extern "C" cudaError_t flk_add(const void *a, const void *b, void *y, flk_dtype dt, size_t n,
                               cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(add_kernel<T>, bl, th, stream, (const T *)a, (const T *)b, (T *)y, n));
    return cudaGetLastError();
}

template <typename T>
__global__ void accum_kernel(const T *g, float *acc, size_t n, float scale, float beta)
{
    GRID_STRIDE(i, n)
    {
        float prev = beta != 0.0f ? beta * acc[i] : 0.0f; /* beta 0 ignores NaN garbage in acc */
        acc[i] = prev + scale * flk_ld(&g[i]);
    }
}

extern "C" cudaError_t flk_accum_grad(const void *g, flk_dtype dt, float *acc, size_t n,
                                      float scale, float beta, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(accum_kernel<T>, bl, th, stream, (const T *)g, acc, n, scale, beta));
    return cudaGetLastError();
}

template <typename T> __global__ void scale_kernel(const T *x, T *y, size_t n, float s)
{
    GRID_STRIDE(i, n) flk_st(&y[i], s * flk_ld(&x[i]));
}

extern "C" cudaError_t flk_scale(const void *x, void *y, flk_dtype dt, size_t n, float s,
                                 cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T, FLK_LAUNCH(scale_kernel<T>, bl, th, stream, (const T *)x, (T *)y, n, s));
    return cudaGetLastError();
}

/* ---- layout changes
 * ------------------------------------------------------------------------------ One thread per
 * destination element; these run once per step on weights (small) or on the flattened input of a
 * linear layer, so simple indexing beats a tiled transpose in code size. */

template <typename T>
__global__ void filter_to_ohwi_kernel(const float *src, T *dst, int o, int ci, int kk, int cp)
{
    size_t n = (size_t)o * cp * kk;
    GRID_STRIDE(d, n)
    { /* d indexes OHWI: ((oo * kk + r) * cp + c) */
        int c = (int)(d % cp);
        size_t rest = d / cp;
        int r = (int)(rest % kk), oo = (int)(rest / kk);
        flk_st(&dst[d], c < ci ? src[((size_t)oo * ci + c) * kk + r] : 0.0f);
    }
}

template <typename T>
__global__ void filter_grad_kernel(const T *g, float *acc, int o, int ci, int kk, int cp,
                                   float scale, float beta)
{
    size_t n = (size_t)o * ci * kk;
    GRID_STRIDE(d, n)
    { /* d indexes OIHW: ((oo * ci + c) * kk + r) */
        int r = (int)(d % kk);
        size_t rest = d / kk;
        int c = (int)(rest % ci), oo = (int)(rest / ci);
        float v = scale * flk_ld(&g[((size_t)oo * kk + r) * cp + c]);
        acc[d] = (beta != 0.0f ? beta * acc[d] : 0.0f) + v;
    }
}

extern "C" cudaError_t flk_filter_to_ohwi(const float *w_oihw, void *dst, flk_dtype dt, int o,
                                          int i, int kh, int kw, int ipad, cudaStream_t stream)
{
    if (ipad < i)
        return cudaErrorInvalidValue;
    size_t n = (size_t)o * ipad * kh * kw;
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(filter_to_ohwi_kernel<T>, bl, th, stream, w_oihw, (T *)dst, o, i,
                            kh * kw, ipad));
    return cudaGetLastError();
}

extern "C" cudaError_t flk_filter_grad_from_ohwi(const void *g_ohwi, flk_dtype dt, float *acc_oihw,
                                                 int o, int i, int kh, int kw, int ipad,
                                                 float scale, float beta, cudaStream_t stream)
{
    if (ipad < i)
        return cudaErrorInvalidValue;
    size_t n = (size_t)o * i * kh * kw;
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(filter_grad_kernel<T>, bl, th, stream, (const T *)g_ohwi, acc_oihw, o,
                            i, kh * kw, ipad, scale, beta));
    return cudaGetLastError();
}

template <typename T>
__global__ void transpose_chw_kernel(const T *src, T *dst, int n, int c, int hw, int to_nchw)
{
    size_t total = (size_t)n * c * hw;
    GRID_STRIDE(d, total)
    {
        size_t b = d / ((size_t)c * hw);
        size_t r = d % ((size_t)c * hw);
        size_t s;
        if (to_nchw) { /* d = (b, ch, p) reads (b, p, ch) */
            int ch = (int)(r / hw), p = (int)(r % hw);
            s = (b * hw + p) * c + ch;
        } else { /* d = (b, p, ch) reads (b, ch, p) */
            int p = (int)(r / c), ch = (int)(r % c);
            s = (b * c + ch) * hw + p;
        }
        dst[d] = src[s];
    }
}

extern "C" cudaError_t flk_transpose_chw(const void *src, void *dst, flk_dtype dt, int n, int c,
                                         int h, int w, int to_nchw, cudaStream_t stream)
{
    size_t total = (size_t)n * c * h * w;
    if (total == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(total, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(transpose_chw_kernel<T>, bl, th, stream, (const T *)src, (T *)dst, n, c,
                            h * w, to_nchw));
    return cudaGetLastError();
}

/* ---- linear bias -------------------------------------------------------------------------------
 */

template <typename T> __global__ void bias_add_kernel(T *y, const float *bias, int rows, int cols)
{
    size_t n = (size_t)rows * cols;
    GRID_STRIDE(i, n) flk_st(&y[i], flk_ld(&y[i]) + bias[i % cols]);
}

template <typename T>
__global__ void bias_bwd_kernel(const T *dy, float *dbias, int rows, int cols, float beta)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    float s = 0.0f;
    for (int r = 0; r < rows; r++)
        s += flk_ld(&dy[(size_t)r * cols + j]);
    dbias[j] = (beta != 0.0f ? beta * dbias[j] : 0.0f) + s;
}

extern "C" cudaError_t flk_bias_add(void *y, flk_dtype dt, const float *bias, int rows, int cols,
                                    cudaStream_t stream)
{
    size_t n = (size_t)rows * cols;
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T, FLK_LAUNCH(bias_add_kernel<T>, bl, th, stream, (T *)y, bias, rows, cols));
    return cudaGetLastError();
}

extern "C" cudaError_t flk_bias_backward(const void *dy, flk_dtype dt, float *dbias, int rows,
                                         int cols, float beta, cudaStream_t stream)
{
    if (cols <= 0)
        return cudaSuccess;
    unsigned th = 128, bl = (unsigned)((cols + th - 1) / th);
    FLK_DISPATCH(
        dt, T,
        FLK_LAUNCH(bias_bwd_kernel<T>, bl, th, stream, (const T *)dy, dbias, rows, cols, beta));
    return cudaGetLastError();
}

/* ---- batch norm ---------------------------------------------------------------------------------
 * Three passes, all deterministic: (1) per (row-block, channel) partial sums with 32 channels × 8
 * rows per thread block, (2) one thread per channel folds the partials in double and writes the
 * per-channel coefficients, (3) an elementwise pass applies them. Workspace layout (floats):
 * [2][RB][c] partials, then [4][c] coefficients. */

#define BN_TX 32
#define BN_TY 8

static int bn_row_blocks(int rows)
{
    int rb = rows / (BN_TY * 32); /* each thread folds at least ~32 rows */
    if (rb < 1)
        rb = 1;
    if (rb > 128)
        rb = 128;
    return rb;
}

extern "C" size_t flk_bn_ws_bytes(int rows, int c)
{
    return ((size_t)2 * bn_row_blocks(rows) * c + (size_t)4 * c) * sizeof(float);
}

/* mode 0 (forward): sums of d and d², d = x − x[row 0] (shifted by one sample of the channel, so
 * E[d²] − E[d]² does not cancel when |mean| ≫ std: unshifted fp32 sums of x² gave invstd 1e-3 off
 * at mean 100, std 1). mode 1 (backward): sums of g and g·xhat, where g = dy masked by y > 0 when
 * relu is set and xhat = (x − mean)·invstd. */
template <typename T>
__global__ void bn_partial_kernel(int mode, const T *__restrict__ x, const T *__restrict__ y,
                                  const T *__restrict__ dy, int rows, int c, int relu,
                                  const float *__restrict__ mean, const float *__restrict__ invstd,
                                  float *__restrict__ part)
{
    __shared__ float s0[BN_TY][BN_TX], s1[BN_TY][BN_TX];
    int ch = blockIdx.x * BN_TX + threadIdx.x;
    float a = 0.0f, b = 0.0f;
    if (ch < c) {
        float m = mode ? mean[ch] : flk_ld(&x[ch]), is = mode ? invstd[ch] : 0.0f;
        for (int r = blockIdx.y * BN_TY + threadIdx.y; r < rows; r += gridDim.y * BN_TY) {
            size_t i = (size_t)r * c + ch;
            float xv = flk_ld(&x[i]);
            if (mode == 0) {
                float d = xv - m;
                a += d;
                b += d * d;
            } else {
                float g = flk_ld(&dy[i]);
                if (relu && !(flk_ld(&y[i]) > 0.0f))
                    g = 0.0f;
                a += g;
                b += g * (xv - m) * is;
            }
        }
    }
    s0[threadIdx.y][threadIdx.x] = a;
    s1[threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && ch < c) {
        for (int k = 1; k < BN_TY; k++) {
            a += s0[k][threadIdx.x];
            b += s1[k][threadIdx.x];
        }
        part[(size_t)blockIdx.y * c + ch] = a;
        part[((size_t)gridDim.y + blockIdx.y) * c + ch] = b;
    }
}

/* Forward finalize: coef[0] = scale, coef[1] = shift (y = x·scale + shift, rounded as the CPU
 * backend rounds them). x: for the shift of the partial sums. */
template <typename T>
__global__ void bn_fwd_finalize(const T *x, const float *part, int rb, int rows, int c,
                                const float *gamma, const float *beta, float *running_mean,
                                float *running_var, float momentum, float eps, float *save_mean,
                                float *save_invstd, float *coef)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    double s = 0.0, ss = 0.0;
    for (int k = 0; k < rb; k++) {
        s += part[(size_t)k * c + ch];
        ss += part[((size_t)rb + k) * c + ch];
    }
    double md = s / rows, var = ss / rows - md * md, mean = (double)flk_ld(&x[ch]) + md;
    if (var < 0.0)
        var = 0.0;
    float invstd = (float)(1.0 / sqrt(var + (double)eps));
    if (running_mean)
        running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * (float)mean;
    if (running_var) {
        double unbiased = rows > 1 ? var * rows / (rows - 1) : var;
        running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * (float)unbiased;
    }
    if (save_mean)
        save_mean[ch] = (float)mean;
    if (save_invstd)
        save_invstd[ch] = invstd;
    float g = gamma ? gamma[ch] : 1.0f, bb = beta ? beta[ch] : 0.0f;
    float a = g * invstd;
    coef[ch] = a;
    coef[c + ch] = bb - (float)mean * a;
}

template <typename T>
__global__ void bn_apply_kernel(const T *x, T *y, size_t n, int c, const float *scale,
                                const float *shift, int relu)
{
    GRID_STRIDE(i, n)
    {
        int ch = (int)(i % c);
        float v = flk_ld(&x[i]) * scale[ch] + shift[ch];
        if (relu == FLK_ACT_RELU)
            v = fmaxf(v, 0.0f);
        else if (relu == FLK_ACT_GELU)
            v = gelu_f(v);
        flk_st(&y[i], v);
    }
}

static cudaError_t bn_check(int rows, int c, flk_act act)
{
    if (rows < 1 || c < 1)
        return cudaErrorInvalidValue;
    if (act != FLK_ACT_NONE && act != FLK_ACT_RELU && act != FLK_ACT_GELU)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

extern "C" cudaError_t flk_bn_forward_train(const void *x, void *y, flk_dtype dt, int rows, int c,
                                            const float *gamma, const float *beta,
                                            float *running_mean, float *running_var, float momentum,
                                            float eps, float *save_mean, float *save_invstd,
                                            flk_act act, void *ws, cudaStream_t stream)
{
    cudaError_t e = bn_check(rows, c, act);
    if (e != cudaSuccess)
        return e;
    int rb = bn_row_blocks(rows);
    float *part = (float *)ws, *coef = part + (size_t)2 * rb * c;
    dim3 pb(BN_TX, BN_TY), pg((c + BN_TX - 1) / BN_TX, rb);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(bn_partial_kernel<T>, pg, pb, stream, 0, (const T *)x,
                            (const T *)nullptr, (const T *)nullptr, rows, c, 0, nullptr, nullptr,
                            part));
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(bn_fwd_finalize<T>, (c + 127) / 128, 128, stream, (const T *)x, part,
                            rb, rows, c, gamma, beta, running_mean, running_var, momentum, eps,
                            save_mean, save_invstd, coef));
    size_t n = (size_t)rows * c;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(bn_apply_kernel<T>, bl, th, stream, (const T *)x, (T *)y, n, c, coef,
                            coef + c, (int)act));
    return cudaGetLastError();
}

/* Eval: the coefficients are computed per element from the running stats (c is small; no ws). */
template <typename T>
__global__ void bn_eval_kernel(const T *x, T *y, size_t n, int c, const float *gamma,
                               const float *beta, const float *rm, const float *rv, float eps,
                               int act)
{
    GRID_STRIDE(i, n)
    {
        int ch = (int)(i % c);
        float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
        float v = (flk_ld(&x[i]) - rm[ch]) * rsqrtf(rv[ch] + eps) * g + b;
        if (act == FLK_ACT_RELU)
            v = fmaxf(v, 0.0f);
        else if (act == FLK_ACT_GELU)
            v = gelu_f(v);
        flk_st(&y[i], v);
    }
}

extern "C" cudaError_t flk_bn_forward_eval(const void *x, void *y, flk_dtype dt, int rows, int c,
                                           const float *gamma, const float *beta,
                                           const float *running_mean, const float *running_var,
                                           float eps, flk_act act, cudaStream_t stream)
{
    cudaError_t e = bn_check(rows, c, act);
    if (e != cudaSuccess)
        return e;
    size_t n = (size_t)rows * c;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(bn_eval_kernel<T>, bl, th, stream, (const T *)x, (T *)y, n, c, gamma,
                            beta, running_mean, running_var, eps, (int)act));
    return cudaGetLastError();
}

/* Backward finalize: coef[0] = gamma·invstd, coef[1] = mean(g), coef[2] = mean(g·xhat). */
__global__ void bn_bwd_finalize(const float *part, int rb, int rows, int c, const float *gamma,
                                const float *save_invstd, float *dgamma, float *dbeta,
                                float beta_acc, float *coef)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    double s = 0.0, sx = 0.0;
    for (int k = 0; k < rb; k++) {
        s += part[(size_t)k * c + ch];
        sx += part[((size_t)rb + k) * c + ch];
    }
    if (dbeta)
        dbeta[ch] = (beta_acc != 0.0f ? beta_acc * dbeta[ch] : 0.0f) + (float)s;
    if (dgamma)
        dgamma[ch] = (beta_acc != 0.0f ? beta_acc * dgamma[ch] : 0.0f) + (float)sx;
    float g = gamma ? gamma[ch] : 1.0f;
    coef[ch] = g * save_invstd[ch];
    coef[c + ch] = (float)(s / rows);
    coef[2 * c + ch] = (float)(sx / rows);
}

template <typename T>
__global__ void bn_bwd_apply(const T *x, const T *y, const T *dy, T *dx, size_t n, int c, int relu,
                             const float *mean, const float *invstd, const float *coef)
{
    GRID_STRIDE(i, n)
    {
        int ch = (int)(i % c);
        float g = flk_ld(&dy[i]);
        if (relu && !(flk_ld(&y[i]) > 0.0f))
            g = 0.0f;
        float xhat = (flk_ld(&x[i]) - mean[ch]) * invstd[ch];
        flk_st(&dx[i], coef[ch] * (g - coef[c + ch] - xhat * coef[2 * c + ch]));
    }
}

extern "C" cudaError_t flk_bn_backward(const void *x, const void *y, const void *dy, void *dx,
                                       flk_dtype dt, int rows, int c, const float *gamma,
                                       const float *save_mean, const float *save_invstd,
                                       float *dgamma, float *dbeta, float beta_acc, flk_act act,
                                       void *ws, cudaStream_t stream)
{
    cudaError_t e = bn_check(rows, c, act);
    if (e != cudaSuccess)
        return e;
    if (act == FLK_ACT_GELU)
        return cudaErrorInvalidValue; /* only ReLU is fused in backward */
    int relu = act == FLK_ACT_RELU;
    if (relu && !y)
        return cudaErrorInvalidValue;
    int rb = bn_row_blocks(rows);
    float *part = (float *)ws, *coef = part + (size_t)2 * rb * c;
    dim3 pb(BN_TX, BN_TY), pg((c + BN_TX - 1) / BN_TX, rb);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(bn_partial_kernel<T>, pg, pb, stream, 1, (const T *)x, (const T *)y,
                            (const T *)dy, rows, c, relu, save_mean, save_invstd, part));
    FLK_LAUNCH(bn_bwd_finalize, (c + 127) / 128, 128, stream, part, rb, rows, c, gamma, save_invstd,
               dgamma, dbeta, beta_acc, coef);
    size_t n = (size_t)rows * c;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(bn_bwd_apply<T>, bl, th, stream, (const T *)x, (const T *)y,
                            (const T *)dy, (T *)dx, n, c, relu, save_mean, save_invstd, coef));
    return cudaGetLastError();
}

/* ---- pooling ------------------------------------------------------------------------------------
 */

extern "C" void flk_pool_out_dims(const flk_pool_params *p, int *oh, int *ow)
{
    *oh = (p->h + 2 * p->pad - p->k) / p->stride + 1;
    *ow = (p->w + 2 * p->pad - p->k) / p->stride + 1;
}

struct pool_k {
    int n, h, w, c, k, s, pad, oh, ow, avg;
};

template <typename T> __global__ void pool_fwd_kernel(pool_k p, const T *x, T *y)
{
    size_t total = (size_t)p.n * p.oh * p.ow * p.c;
    GRID_STRIDE(i, total)
    {
        size_t r = i;
        int ch = (int)(r % p.c);
        r /= p.c;
        int ox = (int)(r % p.ow);
        r /= p.ow;
        int oy = (int)(r % p.oh);
        r /= p.oh;
        int b = (int)r;
        float acc = p.avg ? 0.0f : -INFINITY;
        for (int ky = 0; ky < p.k; ky++) {
            int iy = oy * p.s - p.pad + ky;
            if (iy < 0 || iy >= p.h)
                continue;
            for (int kx = 0; kx < p.k; kx++) {
                int ix = ox * p.s - p.pad + kx;
                if (ix < 0 || ix >= p.w)
                    continue;
                float v = flk_ld(&x[(((size_t)b * p.h + iy) * p.w + ix) * p.c + ch]);
                acc = p.avg ? acc + v : fmaxf(acc, v);
            }
        }
        flk_st(&y[i], p.avg ? acc / (float)(p.k * p.k) : acc);
    }
}

/* Gather form (one thread per input element, looping over the outputs whose window covers it):
 * deterministic and needs no atomics or zeroing. Max pool recomputes each window's first maximum.
 */
template <typename T> __global__ void pool_bwd_kernel(pool_k p, const T *x, const T *dy, T *dx)
{
    size_t total = (size_t)p.n * p.h * p.w * p.c;
    GRID_STRIDE(i, total)
    {
        size_t r = i;
        int ch = (int)(r % p.c);
        r /= p.c;
        int ix = (int)(r % p.w);
        r /= p.w;
        int iy = (int)(r % p.h);
        r /= p.h;
        int b = (int)r;
        int oy0 = iy + p.pad - p.k + 1, ox0 = ix + p.pad - p.k + 1;
        oy0 = oy0 <= 0 ? 0 : (oy0 + p.s - 1) / p.s;
        ox0 = ox0 <= 0 ? 0 : (ox0 + p.s - 1) / p.s;
        int oy1 = min((iy + p.pad) / p.s, p.oh - 1), ox1 = min((ix + p.pad) / p.s, p.ow - 1);
        float g = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                float d = flk_ld(&dy[(((size_t)b * p.oh + oy) * p.ow + ox) * p.c + ch]);
                if (p.avg) {
                    g += d;
                    continue;
                }
                /* first maximum of this output's window, row-major */
                float best = -INFINITY;
                int by = -1, bx = -1;
                for (int ky = 0; ky < p.k; ky++) {
                    int yy = oy * p.s - p.pad + ky;
                    if (yy < 0 || yy >= p.h)
                        continue;
                    for (int kx = 0; kx < p.k; kx++) {
                        int xx = ox * p.s - p.pad + kx;
                        if (xx < 0 || xx >= p.w)
                            continue;
                        float v = flk_ld(&x[(((size_t)b * p.h + yy) * p.w + xx) * p.c + ch]);
                        if (v > best || by < 0) {
                            best = v;
                            by = yy;
                            bx = xx;
                        }
                    }
                }
                if (by == iy && bx == ix)
                    g += d;
            }
        flk_st(&dx[i], p.avg ? g / (float)(p.k * p.k) : g);
    }
}

static int pool_setup(const flk_pool_params *p, pool_k *k)
{
    if (!p || p->n < 0 || p->h < 1 || p->w < 1 || p->c < 1 || p->k < 1 || p->stride < 1 ||
        p->pad < 0 || 2 * p->pad > p->k || p->h + 2 * p->pad < p->k || p->w + 2 * p->pad < p->k)
        return -1;
    k->n = p->n;
    k->h = p->h;
    k->w = p->w;
    k->c = p->c;
    k->k = p->k;
    k->s = p->stride;
    k->pad = p->pad;
    k->avg = p->kind == FLK_POOL_AVG;
    flk_pool_out_dims(p, &k->oh, &k->ow);
    return 0;
}

extern "C" cudaError_t flk_pool_forward(const flk_pool_params *p, const void *x, void *y,
                                        flk_dtype dt, cudaStream_t stream)
{
    pool_k k;
    if (pool_setup(p, &k))
        return cudaErrorInvalidValue;
    size_t total = (size_t)k.n * k.oh * k.ow * k.c;
    if (total == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(total, th);
    FLK_DISPATCH(dt, T, FLK_LAUNCH(pool_fwd_kernel<T>, bl, th, stream, k, (const T *)x, (T *)y));
    return cudaGetLastError();
}

extern "C" cudaError_t flk_pool_backward(const flk_pool_params *p, const void *x, const void *dy,
                                         void *dx, flk_dtype dt, cudaStream_t stream)
{
    pool_k k;
    if (pool_setup(p, &k))
        return cudaErrorInvalidValue;
    size_t total = (size_t)k.n * k.h * k.w * k.c;
    if (total == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(total, th);
    FLK_DISPATCH(
        dt, T,
        FLK_LAUNCH(pool_bwd_kernel<T>, bl, th, stream, k, (const T *)x, (const T *)dy, (T *)dx));
    return cudaGetLastError();
}

/* ---- global average pool ------------------------------------------------------------------------
 */

template <typename T> __global__ void gap_fwd_kernel(const T *x, T *y, int n, int hw, int c)
{
    size_t total = (size_t)n * c;
    GRID_STRIDE(i, total)
    {
        int ch = (int)(i % c), b = (int)(i / c);
        const T *base = x + (size_t)b * hw * c + ch;
        float s = 0.0f;
        for (int p = 0; p < hw; p++)
            s += flk_ld(&base[(size_t)p * c]);
        flk_st(&y[i], s / (float)hw);
    }
}

template <typename T> __global__ void gap_bwd_kernel(const T *dy, T *dx, int n, int hw, int c)
{
    size_t total = (size_t)n * hw * c;
    GRID_STRIDE(i, total)
    {
        int ch = (int)(i % c);
        size_t b = i / ((size_t)hw * c);
        flk_st(&dx[i], flk_ld(&dy[b * c + ch]) / (float)hw);
    }
}

extern "C" cudaError_t flk_gap_forward(const void *x, void *y, flk_dtype dt, int n, int hw, int c,
                                       cudaStream_t stream)
{
    if (n < 0 || hw < 1 || c < 1)
        return cudaErrorInvalidValue;
    size_t total = (size_t)n * c;
    if (total == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(total, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(gap_fwd_kernel<T>, bl, th, stream, (const T *)x, (T *)y, n, hw, c));
    return cudaGetLastError();
}

extern "C" cudaError_t flk_gap_backward(const void *dy, void *dx, flk_dtype dt, int n, int hw,
                                        int c, cudaStream_t stream)
{
    if (n < 0 || hw < 1 || c < 1)
        return cudaErrorInvalidValue;
    size_t total = (size_t)n * hw * c;
    if (total == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(total, th);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(gap_bwd_kernel<T>, bl, th, stream, (const T *)dy, (T *)dx, n, hw, c));
    return cudaGetLastError();
}
