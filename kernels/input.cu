/* input.cu — the GPU input stage: uint8 NHWC batch → normalized fp32/fp16/bf16 in NCHW or NHWC with
 * random crop-with-padding and flip keyed by (seed, epoch, record index); plus dtype casts.
 * CPU reference: cpu_input_run (trainer/cpu/cpu_layers.h) / the conversions of cpu_half.h. */
#include "fl_aug_rng.h"
#include "kcommon.cuh"

extern "C" size_t flk_dtype_size(flk_dtype dt) { return dt == FLK_F32 ? 4 : 2; }

extern "C" const char *flk_dtype_name(flk_dtype dt)
{
    switch (dt) {
    case FLK_F32: return "fp32";
    case FLK_F16: return "fp16";
    case FLK_BF16: return "bf16";
    }
    return "?";
}

struct flk_input_k {
    int n, h, w, c, co, nchw, pad, reflect, flip; /* co: channels written (>= c) */
    float scale[4], shift[4];                     /* y = x·scale + shift = (x − mean)/std */
    uint64_t seed, epoch;
};

/* One thread per output element; the sample's crop/flip draw is recomputed per element (three
 * 64-bit mixes: cheaper than a second pass and keeps the kernel stateless). */
template <typename T>
__global__ void input_u8_kernel(const uint8_t *__restrict__ src, T *__restrict__ dst, flk_input_k p,
                                const uint64_t *__restrict__ indices)
{
    size_t total = (size_t)p.n * p.h * p.w * p.co;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int ch, ox, oy, s;
        size_t r = i;
        if (p.nchw) {
            ox = (int)(r % p.w);
            r /= p.w;
            oy = (int)(r % p.h);
            r /= p.h;
            ch = (int)(r % p.co);
            r /= p.co;
        } else {
            ch = (int)(r % p.co);
            r /= p.co;
            ox = (int)(r % p.w);
            r /= p.w;
            oy = (int)(r % p.h);
            r /= p.h;
        }
        s = (int)r;
        if (ch >= p.c) { /* channel padding */
            flk_st(&dst[i], 0.0f);
            continue;
        }
        int dy = 0, dx = 0, fl = 0;
        if (p.pad > 0 || p.flip) {
            uint64_t idx = indices ? indices[s] : (uint64_t)s;
            fl_aug_crop_flip(p.seed, p.epoch, idx, p.pad, p.flip, &dy, &dx, &fl);
            if (p.flip == 2)
                fl = 1;
        }
        int cx = fl ? p.w - 1 - ox : ox;
        int sy = fl_aug_src(oy, dy, p.pad, p.h, p.reflect);
        int sx = fl_aug_src(cx, dx, p.pad, p.w, p.reflect);
        float v = 0.0f; /* zero padding pads with pixel value 0 (before normalization) */
        if (sy >= 0 && sx >= 0)
            v = (float)src[(((size_t)s * p.h + sy) * p.w + sx) * p.c + ch];
        flk_st(&dst[i], v * p.scale[ch] + p.shift[ch]);
    }
}

extern "C" cudaError_t flk_input_u8(const uint8_t *src, void *dst, flk_dtype dt,
                                    const flk_input_params *p, const uint64_t *indices,
                                    cudaStream_t stream)
{
    if (!p || p->c < 1 || p->c > 4 || p->n < 0 || p->h < 1 || p->w < 1 || p->pad < 0 ||
        (p->pad_mode == FLK_PAD_REFLECT && (p->pad >= p->h || p->pad >= p->w)) ||
        (p->c_out != 0 && (p->c_out < p->c || p->c_out > 16)))
        return cudaErrorInvalidValue;
    if (p->n == 0)
        return cudaSuccess;
    flk_input_k k;
    k.n = p->n;
    k.h = p->h;
    k.w = p->w;
    k.c = p->c;
    k.nchw = p->nchw;
    k.pad = p->pad;
    k.co = p->c_out ? p->c_out : p->c;
    k.reflect = p->pad_mode == FLK_PAD_REFLECT;
    k.flip = p->flip;
    k.seed = p->seed;
    k.epoch = p->epoch;
    for (int c = 0; c < 4; c++) {
        float sd = c < p->c && p->stddev[c] != 0.0f ? p->stddev[c] : 1.0f;
        k.scale[c] = 1.0f / sd;
        k.shift[c] = c < p->c ? -p->mean[c] / sd : 0.0f;
    }
    size_t total = (size_t)p->n * p->h * p->w * k.co;
    unsigned th = 256, bl = flk_blocks(total, th);
    FLK_DISPATCH(dt, T, FLK_LAUNCH(input_u8_kernel<T>, bl, th, stream, src, (T *)dst, k, indices));
    return cudaGetLastError();
}

template <typename S, typename D>
__global__ void cast_kernel(const S *__restrict__ src, D *__restrict__ dst, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        flk_st(&dst[i], flk_ld(&src[i]));
}

extern "C" cudaError_t flk_cast(const void *src, flk_dtype src_dt, void *dst, flk_dtype dst_dt,
                                size_t n, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned th = 256, bl = flk_blocks(n, th);
    FLK_DISPATCH(
        src_dt, S,
        FLK_DISPATCH(dst_dt, D,
                     FLK_LAUNCH((cast_kernel<S, D>), bl, th, stream, (const S *)src, (D *)dst, n)));
    return cudaGetLastError();
}
