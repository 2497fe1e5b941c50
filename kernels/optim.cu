/* optim.cu — the optimizer on fp32 master weights (SGD with Nesterov momentum and weight decay,
 * writing the half-precision copies), weight EMA, and fp16 dynamic loss scaling: gradient unscale
 * with an inf/nan flag that skips the step on the device. CPU reference:
 * cpu_sgd_step / cpu_ema_update (trainer/cpu/cpu_layers.h). */
#include "kcommon.cuh"

__global__ void unscale_kernel(float *g, size_t n, float inv_scale, int *found_inf)
{
    int bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = g[i] * inv_scale;
        if (!isfinite(v))
            bad = 1;
        g[i] = v;
    }
    if (__any_sync(0xffffffffu, bad) && threadIdx.x % 32 == 0)
        *found_inf = 1; /* benign race: all write 1 */
}

extern "C" cudaError_t flk_unscale_check(float *g, size_t n, float inv_scale, int *found_inf,
                                         cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_LAUNCH(unscale_kernel, bl, th, stream, g, n, inv_scale, found_inf);
    return cudaGetLastError();
}

template <typename T>
__global__ void sgd_kernel(float *__restrict__ w, const float *__restrict__ grad,
                           float *__restrict__ v, size_t n, float lr, float mom, float wd,
                           int nesterov, T *__restrict__ copy, const int *skip)
{
    if (skip && *skip)
        return;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float wi = w[i];
        float g = grad[i] + wd * wi;
        float vi = mom * v[i] + g;
        v[i] = vi;
        wi -= lr * (nesterov ? g + mom * vi : vi);
        w[i] = wi;
        if (copy)
            flk_st(&copy[i], wi);
    }
}

extern "C" cudaError_t flk_sgd_step(float *w, const float *grad, float *v, size_t n, float lr,
                                    float momentum, float wd, int nesterov, void *copy,
                                    flk_dtype copy_dt, const int *skip, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(copy_dt, T,
                 FLK_LAUNCH(sgd_kernel<T>, bl, th, stream, w, grad, v, n, lr, momentum, wd,
                            nesterov, (T *)copy, skip));
    return cudaGetLastError();
}

__global__ void ema_kernel(float *ema, const float *w, size_t n, float decay, const int *skip)
{
    if (skip && *skip)
        return;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        ema[i] = decay * ema[i] + (1.0f - decay) * w[i];
}

extern "C" cudaError_t flk_ema_update(float *ema, const float *w, size_t n, float decay,
                                      const int *skip, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_LAUNCH(ema_kernel, bl, th, stream, ema, w, n, decay, skip);
    return cudaGetLastError();
}

extern "C" int flk_loss_scale_update(float *scale, int *good_steps, int found_inf,
                                     int growth_interval)
{
    if (found_inf) {
        *scale = *scale * 0.5f < 1.0f ? 1.0f : *scale * 0.5f;
        *good_steps = 0;
        return 1;
    }
    if (++*good_steps >= growth_interval) {
        *good_steps = 0;
        if (*scale * 2.0f <= 16777216.0f)
            *scale *= 2.0f;
    }
    return 0;
}
