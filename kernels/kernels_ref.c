/* kernels_ref.c — CPU references of the CUDA kernels (the oracle of tests/gpu): straightforward loops
 * in fp32 with double accumulators, written for clarity, not speed. Also host fp16/bf16 conversions. */
#include "kernels_ref.h"

#include <math.h>
#include <string.h>

#include "fl_aug_rng.h"

uint16_t flk_ref_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xFFu, man = x & 0x7FFFFFu;
    if (exp == 0xFF) return (uint16_t)(sign | 0x7C00u | (man ? 0x200u : 0u));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) { /* half subnormal: value = h · 2^-24 */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry into the exponent is right */
    return (uint16_t)(sign | h);
}

float flk_ref_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, x;
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    if (exp == 31) x = sign | 0x7F800000u | (man << 13);
    else x = sign | ((exp - 15 + 127) << 23) | (man << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t flk_ref_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu)) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float flk_ref_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

void flk_ref_pack(const float *src, void *dst, flk_dtype dt, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (dt == FLK_F32) ((float *)dst)[i] = src[i];
        else if (dt == FLK_F16) ((uint16_t *)dst)[i] = flk_ref_f32_to_f16(src[i]);
        else ((uint16_t *)dst)[i] = flk_ref_f32_to_bf16(src[i]);
    }
}

void flk_ref_unpack(const void *src, flk_dtype dt, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (dt == FLK_F32) dst[i] = ((const float *)src)[i];
        else if (dt == FLK_F16) dst[i] = flk_ref_f16_to_f32(((const uint16_t *)src)[i]);
        else dst[i] = flk_ref_bf16_to_f32(((const uint16_t *)src)[i]);
    }
}

void flk_ref_round(float *x, flk_dtype dt, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (dt == FLK_F16) x[i] = flk_ref_f16_to_f32(flk_ref_f32_to_f16(x[i]));
        else if (dt == FLK_BF16) x[i] = flk_ref_bf16_to_f32(flk_ref_f32_to_bf16(x[i]));
    }
}

double flk_ref_eps(flk_dtype dt) {
    return dt == FLK_F32 ? ldexp(1.0, -24) : dt == FLK_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
}

void flk_ref_input_u8(const uint8_t *src, float *dst, const flk_input_params *p,
                      const uint64_t *indices) {
    int reflect = p->pad_mode == FLK_PAD_REFLECT, co = p->c_out ? p->c_out : p->c;
    memset(dst, 0, sizeof(float) * (size_t)p->n * p->h * p->w * co);
    for (int s = 0; s < p->n; s++) {
        int dy = 0, dx = 0, fl = 0;
        fl_aug_crop_flip(p->seed, p->epoch, indices ? indices[s] : (uint64_t)s, p->pad, p->flip, &dy,
                         &dx, &fl);
        if (p->flip == 2) fl = 1;
        for (int oy = 0; oy < p->h; oy++)
            for (int ox = 0; ox < p->w; ox++)
                for (int ch = 0; ch < p->c; ch++) {
                    int sy = fl_aug_src(oy, dy, p->pad, p->h, reflect);
                    int sx = fl_aug_src(fl ? p->w - 1 - ox : ox, dx, p->pad, p->w, reflect);
                    float v = 0.0f;
                    if (sy >= 0 && sx >= 0) v = src[(((size_t)s * p->h + sy) * p->w + sx) * p->c + ch];
                    float sd = p->stddev[ch] != 0.0f ? p->stddev[ch] : 1.0f;
                    /* the kernel computes v·(1/sd) − mean/sd; do the same for bitwise-close results */
                    float y = v * (1.0f / sd) + (-p->mean[ch] / sd);
                    size_t o = p->nchw ? (((size_t)s * co + ch) * p->h + oy) * p->w + ox
                                       : (((size_t)s * p->h + oy) * p->w + ox) * co + ch;
                    dst[o] = y;
                }
    }
}

static double gelu_d(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

void flk_ref_act_forward(flk_act act, const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = act == FLK_ACT_RELU ? (x[i] > 0 ? x[i] : 0.0f)
               : act == FLK_ACT_GELU ? (float)gelu_d(x[i]) : x[i];
}

void flk_ref_act_backward(flk_act act, const float *x, const float *dy, float *dx, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (act == FLK_ACT_RELU) dx[i] = x[i] > 0 ? dy[i] : 0.0f;
        else if (act == FLK_ACT_GELU) {
            double v = x[i], k = 0.7978845608028654, t = tanh(k * (v + 0.044715 * v * v * v));
            double g = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
            dx[i] = (float)(dy[i] * g);
        } else dx[i] = dy[i];
    }
}

void flk_ref_filter_to_ohwi(const float *w, float *dst, int o, int ci, int kh, int kw, int ipad) {
    int kk = kh * kw;
    for (int a = 0; a < o; a++)
        for (int c = 0; c < ipad; c++)
            for (int r = 0; r < kk; r++)
                dst[((size_t)a * kk + r) * ipad + c] = c < ci ? w[((size_t)a * ci + c) * kk + r] : 0.0f;
}

void flk_ref_transpose_chw(const float *src, float *dst, int n, int c, int h, int w, int to_nchw) {
    int hw = h * w;
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < hw; p++) {
                size_t nchw = ((size_t)b * c + ch) * hw + p, nhwc = ((size_t)b * hw + p) * c + ch;
                if (to_nchw) dst[nchw] = src[nhwc];
                else dst[nhwc] = src[nchw];
            }
}

void flk_ref_bias_backward(const float *dy, float *dbias, int rows, int cols) {
    for (int j = 0; j < cols; j++) {
        double s = 0;
        for (int r = 0; r < rows; r++) s += dy[(size_t)r * cols + j];
        dbias[j] = (float)s;
    }
}

void flk_ref_bn_forward_train(const float *x, float *y, int rows, int c, const float *gamma,
                              const float *beta, float *running_mean, float *running_var,
                              float momentum, float eps, float *save_mean, float *save_invstd,
                              flk_act act) {
    for (int ch = 0; ch < c; ch++) {
        double s = 0, ss = 0;
        for (int r = 0; r < rows; r++) s += x[(size_t)r * c + ch];
        double mean = s / rows;
        for (int r = 0; r < rows; r++) {
            double d = x[(size_t)r * c + ch] - mean;
            ss += d * d;
        }
        double var = ss / rows, invstd = 1.0 / sqrt(var + eps);
        if (running_mean) running_mean[ch] = (float)((1 - momentum) * running_mean[ch] + momentum * mean);
        if (running_var)
            running_var[ch] = (float)((1 - momentum) * running_var[ch] +
                                      momentum * (rows > 1 ? var * rows / (rows - 1) : var));
        save_mean[ch] = (float)mean;
        save_invstd[ch] = (float)invstd;
        double g = gamma ? gamma[ch] : 1.0, b = beta ? beta[ch] : 0.0;
        for (int r = 0; r < rows; r++) {
            double v = (x[(size_t)r * c + ch] - mean) * invstd * g + b;
            if (act == FLK_ACT_RELU) v = v > 0 ? v : 0;
            else if (act == FLK_ACT_GELU) v = gelu_d(v);
            y[(size_t)r * c + ch] = (float)v;
        }
    }
}

void flk_ref_bn_backward(const float *x, const float *y, const float *dy, float *dx, int rows, int c,
                         const float *gamma, const float *save_mean, const float *save_invstd,
                         float *dgamma, float *dbeta, flk_act act) {
    for (int ch = 0; ch < c; ch++) {
        double sg = 0, sgx = 0, m = save_mean[ch], is = save_invstd[ch];
        for (int r = 0; r < rows; r++) {
            size_t i = (size_t)r * c + ch;
            double g = (act == FLK_ACT_RELU && !(y[i] > 0)) ? 0.0 : dy[i];
            sg += g;
            sgx += g * (x[i] - m) * is;
        }
        if (dbeta) dbeta[ch] = (float)sg;
        if (dgamma) dgamma[ch] = (float)sgx;
        double k1 = (gamma ? gamma[ch] : 1.0) * is;
        for (int r = 0; r < rows; r++) {
            size_t i = (size_t)r * c + ch;
            double g = (act == FLK_ACT_RELU && !(y[i] > 0)) ? 0.0 : dy[i];
            double xhat = (x[i] - m) * is;
            dx[i] = (float)(k1 * (g - sg / rows - xhat * sgx / rows));
        }
    }
}

void flk_ref_pool_forward(const flk_pool_params *p, const float *x, float *y) {
    int oh = (p->h + 2 * p->pad - p->k) / p->stride + 1, ow = (p->w + 2 * p->pad - p->k) / p->stride + 1;
    for (int b = 0; b < p->n; b++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int ch = 0; ch < p->c; ch++) {
                    double acc = p->kind == FLK_POOL_AVG ? 0.0 : -INFINITY;
                    for (int ky = 0; ky < p->k; ky++)
                        for (int kx = 0; kx < p->k; kx++) {
                            int iy = oy * p->stride - p->pad + ky, ix = ox * p->stride - p->pad + kx;
                            if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w) continue;
                            double v = x[(((size_t)b * p->h + iy) * p->w + ix) * p->c + ch];
                            if (p->kind == FLK_POOL_AVG) acc += v;
                            else if (v > acc) acc = v;
                        }
                    if (p->kind == FLK_POOL_AVG) acc /= (double)(p->k * p->k);
                    y[(((size_t)b * oh + oy) * ow + ox) * p->c + ch] = (float)acc;
                }
}

void flk_ref_pool_backward(const flk_pool_params *p, const float *x, const float *dy, float *dx) {
    int oh = (p->h + 2 * p->pad - p->k) / p->stride + 1, ow = (p->w + 2 * p->pad - p->k) / p->stride + 1;
    memset(dx, 0, sizeof(float) * (size_t)p->n * p->h * p->w * p->c);
    for (int b = 0; b < p->n; b++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int ch = 0; ch < p->c; ch++) {
                    float d = dy[(((size_t)b * oh + oy) * ow + ox) * p->c + ch];
                    float best = -INFINITY;
                    size_t bi = (size_t)-1;
                    for (int ky = 0; ky < p->k; ky++)
                        for (int kx = 0; kx < p->k; kx++) {
                            int iy = oy * p->stride - p->pad + ky, ix = ox * p->stride - p->pad + kx;
                            if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w) continue;
                            size_t i = (((size_t)b * p->h + iy) * p->w + ix) * p->c + ch;
                            if (p->kind == FLK_POOL_AVG) dx[i] += d / (float)(p->k * p->k);
                            else if (x[i] > best || bi == (size_t)-1) {
                                best = x[i];
                                bi = i;
                            }
                        }
                    if (p->kind == FLK_POOL_MAX && bi != (size_t)-1) dx[bi] += d;
                }
}

void flk_ref_gap_forward(const float *x, float *y, int n, int hw, int c) {
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++) {
            double s = 0;
            for (int p = 0; p < hw; p++) s += x[((size_t)b * hw + p) * c + ch];
            y[(size_t)b * c + ch] = (float)(s / hw);
        }
}

void flk_ref_xent(const float *logits, const int32_t *labels, int n, int k, float eps,
                  float grad_scale, float *loss, float *dlogits, long long *counts) {
    for (int r = 0; r < n; r++) {
        const float *z = logits + (size_t)r * k;
        int y = labels[r], valid = y >= 0 && y < k;
        double m = -INFINITY, se = 0, sz = 0;
        for (int j = 0; j < k; j++) m = z[j] > m ? z[j] : m;
        for (int j = 0; j < k; j++) {
            se += exp(z[j] - m);
            sz += z[j];
        }
        double lse = m + log(se);
        if (!valid) {
            loss[r] = NAN;
            if (dlogits) memset(dlogits + (size_t)r * k, 0, sizeof(float) * (size_t)k);
            continue;
        }
        loss[r] = (float)(lse - (1.0 - eps) * z[y] - eps / k * sz);
        int rank = 0;
        for (int j = 0; j < k; j++) rank += z[j] > z[y] || (z[j] == z[y] && j < y);
        if (counts) {
            counts[0] += rank < 1;
            counts[1] += rank < 5;
        }
        if (dlogits)
            for (int j = 0; j < k; j++) {
                double q = eps / k + (j == y ? 1.0 - eps : 0.0);
                dlogits[(size_t)r * k + j] = (float)(grad_scale * (exp(z[j] - lse) - q));
            }
    }
}

void flk_ref_sgd_step(float *w, const float *grad, float *v, size_t n, float lr, float momentum,
                      float wd, int nesterov) {
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] + wd * w[i];
        v[i] = momentum * v[i] + g;
        w[i] -= lr * (nesterov ? g + momentum * v[i] : v[i]);
    }
}
