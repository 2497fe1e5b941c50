/* loss.cu — softmax cross-entropy with label smoothing (forward + backward in one pass, fp32 math),
 * top-1/top-5 counts, and a deterministic sum. One warp per sample row.
 * CPU reference: cpu_softmax_xent (trainer/cpu/cpu_layers.h). */
#include "kcommon.cuh"

#define XENT_WARPS 4

template <typename T>
__global__ void xent_kernel(const T *__restrict__ logits, const int32_t *__restrict__ labels, int n,
                            int k, float eps, float gs, float *__restrict__ loss,
                            T *__restrict__ dlogits, unsigned long long *counts)
{
    int row = blockIdx.x * XENT_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= n)
        return; /* whole warps leave together: no block-level sync below */
    const T *z = logits + (size_t)row * k;
    int y = labels[row];
    int valid = y >= 0 && y < k;
    float m = -INFINITY;
    for (int j = lane; j < k; j += 32)
        m = fmaxf(m, flk_ld(&z[j]));
    m = flk_warp_max(m);
    float se = 0.0f, sz = 0.0f;
    for (int j = lane; j < k; j += 32) {
        float v = flk_ld(&z[j]);
        se += expf(v - m);
        sz += v;
    }
    se = flk_warp_sum(se);
    sz = flk_warp_sum(sz);
    float lse = m + logf(se);
    float zy = valid ? flk_ld(&z[y]) : 0.0f;
    float rank = 0.0f;
    if (valid)
        for (int j = lane; j < k; j += 32) {
            float v = flk_ld(&z[j]);
            rank += (v > zy || (v == zy && j < y)) ? 1.0f : 0.0f;
        }
    rank = flk_warp_sum(rank);
    if (lane == 0) {
        loss[row] = valid ? lse - (1.0f - eps) * zy - eps / (float)k * sz : NAN;
        if (counts && valid) {
            if (rank < 1.0f)
                atomicAdd(&counts[0], 1ull);
            if (rank < 5.0f)
                atomicAdd(&counts[1], 1ull);
        }
    }
    if (dlogits) {
        T *d = dlogits + (size_t)row * k;
        for (int j = lane; j < k; j += 32) {
            float g = 0.0f;
            if (valid) {
                float p = expf(flk_ld(&z[j]) - lse);
                float q = eps / (float)k + (j == y ? 1.0f - eps : 0.0f);
                g = gs * (p - q);
            }
            flk_st(&d[j], g);
        }
    }
}

extern "C" cudaError_t flk_xent_forward_backward(const void *logits, flk_dtype dt,
                                                 const int32_t *labels, int n, int k, float eps,
                                                 float grad_scale, float *loss, void *dlogits,
                                                 long long *counts, cudaStream_t stream)
{
    if (n < 0 || k < 1 || !loss)
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    unsigned bl = (unsigned)((n + XENT_WARPS - 1) / XENT_WARPS);
    FLK_DISPATCH(dt, T,
                 FLK_LAUNCH(xent_kernel<T>, bl, 32 * XENT_WARPS, stream, (const T *)logits, labels,
                            n, k, eps, grad_scale, loss, (T *)dlogits,
                            (unsigned long long *)counts));
    return cudaGetLastError();
}

/* One block: fixed strided partition then a fixed tree, so the result is bit-reproducible. */
__global__ void sum_kernel(const float *x, int n, float *out)
{
    __shared__ float sh[32];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += x[i];
    s = flk_warp_sum(s);
    if (threadIdx.x % 32 == 0)
        sh[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < blockDim.x / 32 ? sh[threadIdx.x] : 0.0f;
        s = flk_warp_sum(s);
        if (threadIdx.x == 0)
            *out = s;
    }
}

extern "C" cudaError_t flk_sum(const float *x, int n, float *out, cudaStream_t stream)
{
    if (n < 0)
        return cudaErrorInvalidValue;
    FLK_LAUNCH(sum_kernel, 1, 1024, stream, x, n, out);
    return cudaGetLastError();
}
