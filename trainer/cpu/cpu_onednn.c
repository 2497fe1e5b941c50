/* cpu_onednn.c — the oneDNN path of the CPU backend (cpu_onednn.h): the object (engine, stream,
 * arena buffers shared by all plans), the plan cache keyed by (batch size, mode), the runs of a
 * plan's op lists, and the host hooks between primitives (BN running statistics, bias and BN
 * gradients added to the flat gradient, training BN + ReLU forward and backward, the backward of
 * tiling max pools). Plans are built in cpu_onednn_plan.c. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_onednn_impl.h"

int dnn_fail(dnn_plan *p, dnnl_status_t st, const char *what, int line)
{
    const tf_model_spec *s = p->d->spec;
    int l = p->cur_layer;
    char where[64] = "";
    if (l >= 0 && l < s->n_layers)
        snprintf(where, sizeof where, " (layer %d, kind %d)", l, (int)s->layers[l].kind);
    return fl_error_set(p->err, FL_E_UNSUPPORTED,
                        "oneDNN: %.200s failed with status %d at "
                        "cpu_onednn_plan.c:%d%s, model %s batch %d",
                        what, (int)st, line, where, s->name, p->N);
}

/* ---- hooks ---- */

static float *mem_ptr(dnnl_memory_t m)
{
    void *h = NULL;
    dnnl_memory_get_data_handle(m, &h);
    return h;
}

void dnn_hook_bn_stats(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    if (!p->stats)
        return;
    const tf_shape s = p->d->spec->tensors[T->in];
    const double M = (double)p->N * s.h * s.w;
    const float *bm = mem_ptr(p->L[l].mean), *bv = mem_ptr(p->L[l].var), m = T->bn_momentum;
    float *rm = p->stats + T->stat_off, *rv = rm + T->cin;
    for (int c = 0; c < T->cin; c++) { /* as cpu_bn_forward: unbiased running variance */
        double unb = M > 1 ? (double)bv[c] * M / (M - 1) : bv[c];
        rm[c] = (1.0f - m) * rm[c] + m * bm[c];
        rv[c] = (1.0f - m) * rv[c] + m * (float)unb;
    }
}

void dnn_hook_bn_grad(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    const float *ds = mem_ptr(p->L[l].dscale), *dh = mem_ptr(p->L[l].dshift);
    float *gg = p->grad + T->w_off, *gb = p->grad + T->b_off;
    for (int c = 0; c < T->cin; c++) {
        gg[c] += ds[c];
        gb[c] += dh[c];
    }
}

void dnn_hook_bias_grad(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    const float *db = mem_ptr(p->L[l].dbias);
    float *g = p->grad + T->b_off;
    for (int c = 0; c < T->cout; c++)
        g[c] += db[c];
}

/* ---- host batch norm (training): per-channel sums in fixed sample chunks, OpenMP over (channel
 * group, chunk) units. oneDNN's jitted BN synchronises its threads with spin barriers between its
 * passes: with a thread descheduled (decode workers, other processes on the cores) its partner
 * spins, which cost half the CPU time of a fastcnn step at load 3-6 on 2 cores. These kernels end
 * each pass at the OpenMP region's end (a sleeping wait under the passive policy), and each channel
 * is summed in the same order whatever the thread count. Formulas as cpu_bn_forward /
 * cpu_bn_backward (the reference layers), ReLU fused as oneDNN's dnnl_fuse_norm_relu. ---- */

int dnn_bn_geom_of(const dnnl_memory_desc_t *md, dnn_bn_geom *g)
{
    memset(g, 0, sizeof *g);
    if (md->ndims != 4 || md->format_kind != dnnl_blocked || md->data_type != dnnl_f32 ||
        md->offset0 != 0 || md->padded_dims[0] != md->dims[0] ||
        md->padded_dims[2] != md->dims[2] || md->padded_dims[3] != md->dims[3])
        return -1;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    for (int i = 0; i < 4; i++)
        g->s[i] = (long)b->strides[i];
    g->C = (int)md->dims[1];
    g->Cp = (int)md->padded_dims[1];
    g->H = (int)md->dims[2];
    g->Wd = (int)md->dims[3];
    if (b->inner_nblks == 1 && b->inner_idxs[0] == 1 &&
        (b->inner_blks[0] == 16 || b->inner_blks[0] == 8)) {
        g->B = g->W = (int)b->inner_blks[0]; /* one group per block, its lanes contiguous */
    } else if (b->inner_nblks == 0 && b->strides[1] == 1 && g->C % 8 == 0 && g->Cp == g->C) {
        g->B = 1; /* NHWC */
        g->W = g->C % 16 == 0 ? 16 : 8;
    } else {
        return -1;
    }
    return g->Cp % g->W == 0 ? 0 : -1;
}

#define BN_INLINE static inline __attribute__((always_inline))

/* the fused affine map y = x * a + off of channel c (mean and 1/std in save[c], save[Cp + c]);
 * forward and backward use this one expression, so the ReLU mask agrees bit for bit */
BN_INLINE void bn_coef(const float *gam, const float *bet, const float *save, int Cp, int c,
                       float *a, float *off)
{
    *a = gam[c] * save[Cp + c];
    *off = bet[c] - save[c] * *a;
}

/* forward pass 1 over samples n0..n1 of group base: per lane sum and sum of squares (rows in
 * float, added into double) */
BN_INLINE void bn_fwd_sums(const dnn_bn_geom *g, const float *x, long base, int n0, int n1,
                           const int W, double *o1, double *o2)
{
    double s1[16] = {0}, s2[16] = {0};
    for (int n = n0; n < n1; n++)
        for (int h = 0; h < g->H; h++) {
            const float *r = x + base + n * g->s[0] + h * g->s[2];
            float r1[16] = {0}, r2[16] = {0};
            for (int w = 0; w < g->Wd; w++)
                for (int j = 0; j < W; j++) {
                    float v = r[w * g->s[3] + j];
                    r1[j] += v;
                    r2[j] += v * v;
                }
            for (int j = 0; j < W; j++) {
                s1[j] += r1[j];
                s2[j] += r2[j];
            }
        }
    for (int j = 0; j < W; j++) {
        o1[j] = s1[j];
        o2[j] = s2[j];
    }
}

/* forward pass 2: y = x * a + off (ReLU'd when relu), 0 in padded lanes (nv valid of W) */
BN_INLINE void bn_fwd_apply(const dnn_bn_geom *g, const float *x, float *y, long base, int n0,
                            int n1, const int W, const float *a, const float *off, int nv, int relu)
{
    for (int n = n0; n < n1; n++)
        for (int h = 0; h < g->H; h++) {
            const long r = base + n * g->s[0] + h * g->s[2];
            for (int w = 0; w < g->Wd; w++) {
                const float *xi = x + r + w * g->s[3];
                float *yo = y + r + w * g->s[3];
                for (int j = 0; j < W; j++) {
                    float v = xi[j] * a[j] + off[j];
                    v = relu && !(v > 0.0f) ? 0.0f : v;
                    yo[j] = j < nv ? v : 0.0f;
                }
            }
        }
}

/* backward pass 1: per lane sum(dy') and sum(dy' * x_hat), dy' = dy masked by the ReLU */
BN_INLINE void bn_bwd_sums(const dnn_bn_geom *g, const float *x, const float *dy, long base, int n0,
                           int n1, const int W, const float *a, const float *off, const float *mean,
                           const float *inv, int relu, double *o1, double *o2)
{
    double s1[16] = {0}, s2[16] = {0};
    for (int n = n0; n < n1; n++)
        for (int h = 0; h < g->H; h++) {
            const long r = base + n * g->s[0] + h * g->s[2];
            float r1[16] = {0}, r2[16] = {0};
            for (int w = 0; w < g->Wd; w++) {
                const float *xi = x + r + w * g->s[3], *di = dy + r + w * g->s[3];
                for (int j = 0; j < W; j++) {
                    float d = relu && !(xi[j] * a[j] + off[j] > 0.0f) ? 0.0f : di[j];
                    r1[j] += d;
                    r2[j] += d * ((xi[j] - mean[j]) * inv[j]);
                }
            }
            for (int j = 0; j < W; j++) {
                s1[j] += r1[j];
                s2[j] += r2[j];
            }
        }
    for (int j = 0; j < W; j++) {
        o1[j] = s1[j];
        o2[j] = s2[j];
    }
}

/* backward pass 2: dx = k * (M dy' - sum(dy') - x_hat sum(dy' x_hat)), 0 in padded lanes */
BN_INLINE void bn_bwd_apply(const dnn_bn_geom *g, const float *x, const float *dy, float *dx,
                            long base, int n0, int n1, const int W, const float *a,
                            const float *off, const float *mean, const float *inv, const float *k,
                            const float *mdy, const float *mdyx, float M, int nv, int relu)
{
    for (int n = n0; n < n1; n++)
        for (int h = 0; h < g->H; h++) {
            const long r = base + n * g->s[0] + h * g->s[2];
            for (int w = 0; w < g->Wd; w++) {
                const float *xi = x + r + w * g->s[3], *di = dy + r + w * g->s[3];
                float *o = dx + r + w * g->s[3];
                for (int j = 0; j < W; j++) {
                    float d = relu && !(xi[j] * a[j] + off[j] > 0.0f) ? 0.0f : di[j];
                    float xh = (xi[j] - mean[j]) * inv[j];
                    float v = k[j] * (M * d - mdy[j] - xh * mdyx[j]);
                    o[j] = j < nv ? v : 0.0f;
                }
            }
        }
}

/* The kernels of one unit, built for AVX-512, AVX2 and the baseline (chosen at load time: the
 * build targets baseline x86-64, where these loops would run on SSE2). Results are the same bits
 * on every one: no FMA contraction (-ffp-contract=off for these clones is implied: the expressions
 * are evaluated as written, each product rounded). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BN_CLONES                                                                                  \
    __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#else
#define BN_CLONES
#endif

BN_CLONES static void bn_fwd_sums_u(const dnn_bn_geom *g, const float *x, long base, int n0, int n1,
                                    double *o1, double *o2)
{
    if (g->W == 16)
        bn_fwd_sums(g, x, base, n0, n1, 16, o1, o2);
    else
        bn_fwd_sums(g, x, base, n0, n1, 8, o1, o2);
}

BN_CLONES static void bn_fwd_apply_u(const dnn_bn_geom *g, const float *x, float *y, long base,
                                     int n0, int n1, const float *a, const float *off, int nv,
                                     int relu)
{
    if (g->W == 16)
        relu ? bn_fwd_apply(g, x, y, base, n0, n1, 16, a, off, nv, 1)
             : bn_fwd_apply(g, x, y, base, n0, n1, 16, a, off, nv, 0);
    else
        relu ? bn_fwd_apply(g, x, y, base, n0, n1, 8, a, off, nv, 1)
             : bn_fwd_apply(g, x, y, base, n0, n1, 8, a, off, nv, 0);
}

BN_CLONES static void bn_bwd_sums_u(const dnn_bn_geom *g, const float *x, const float *dy,
                                    long base, int n0, int n1, const float *a, const float *off,
                                    const float *mean, const float *inv, int relu, double *o1,
                                    double *o2)
{
    if (g->W == 16)
        relu ? bn_bwd_sums(g, x, dy, base, n0, n1, 16, a, off, mean, inv, 1, o1, o2)
             : bn_bwd_sums(g, x, dy, base, n0, n1, 16, a, off, mean, inv, 0, o1, o2);
    else
        relu ? bn_bwd_sums(g, x, dy, base, n0, n1, 8, a, off, mean, inv, 1, o1, o2)
             : bn_bwd_sums(g, x, dy, base, n0, n1, 8, a, off, mean, inv, 0, o1, o2);
}

BN_CLONES static void bn_bwd_apply_u(const dnn_bn_geom *g, const float *x, const float *dy,
                                     float *dx, long base, int n0, int n1, const float *a,
                                     const float *off, const float *mean, const float *inv,
                                     const float *k, const float *mdy, const float *mdyx, float M,
                                     int nv, int relu)
{
    if (g->W == 16)
        relu ? bn_bwd_apply(g, x, dy, dx, base, n0, n1, 16, a, off, mean, inv, k, mdy, mdyx, M, nv,
                            1)
             : bn_bwd_apply(g, x, dy, dx, base, n0, n1, 16, a, off, mean, inv, k, mdy, mdyx, M, nv,
                            0);
    else
        relu
            ? bn_bwd_apply(g, x, dy, dx, base, n0, n1, 8, a, off, mean, inv, k, mdy, mdyx, M, nv, 1)
            : bn_bwd_apply(g, x, dy, dx, base, n0, n1, 8, a, off, mean, inv, k, mdy, mdyx, M, nv,
                           0);
}

/* unit u of G groups x NK chunks: its group's first channel, base offset, sample range */
static void bn_unit(const dnn_bn_geom *g, int N, int NK, int u, int *c0, long *base, int *n0,
                    int *n1)
{
    const int gi = u / NK, k = u % NK;
    *c0 = gi * g->W;
    *base = (long)(*c0 / g->B) * g->s[1] + *c0 % g->B;
    *n0 = (int)((long)k * N / NK);
    *n1 = (int)((long)(k + 1) * N / NK);
}

/* the chunk sums of part ([2][NK][Cp]) added in chunk order into part's chunk-0 rows */
static void bn_combine(double *part, int NK, int Cp, int C)
{
    for (int c = 0; c < C; c++) {
        double t1 = 0.0, t2 = 0.0;
        for (int k = 0; k < NK; k++) {
            t1 += part[(long)k * Cp + c];
            t2 += part[(long)(NK + k) * Cp + c];
        }
        part[c] = t1;
        part[(long)NK * Cp + c] = t2;
    }
}

void dnn_hook_bn_fwd(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    const dnn_layer *L = &p->L[l];
    const dnn_bn_geom *g = &L->bn_g;
    const float *x = mem_ptr(p->act[T->in]), *gam = p->params + T->w_off,
                *bet = p->params + T->b_off;
    float *y = mem_ptr(p->act[L->out]), *bm = mem_ptr(L->mean), *bv = mem_ptr(L->var),
          *save = mem_ptr(L->bn_save);
    double *part = p->d->bn_part;
    const int N = p->N, NK = N < DNN_BN_CHUNKS ? N : DNN_BN_CHUNKS, Cp = g->Cp, C = g->C,
              U = Cp / g->W * NK, relu = L->fuse_relu;
    const double M = (double)N * g->H * g->Wd;
#pragma omp parallel for schedule(static)
    for (int u = 0; u < U; u++) {
        int c0, n0, n1;
        long base;
        bn_unit(g, N, NK, u, &c0, &base, &n0, &n1);
        double *o1 = part + (long)(u % NK) * Cp + c0, *o2 = o1 + (long)NK * Cp;
        bn_fwd_sums_u(g, x, base, n0, n1, o1, o2);
    }
    bn_combine(part, NK, Cp, C);
    for (int c = 0; c < Cp; c++) {
        if (c >= C) { /* padded channels: a = off = 0 (their outputs are written as 0) */
            save[c] = save[Cp + c] = 0.0f;
            continue;
        }
        double mean = part[c] / M, var = part[(long)NK * Cp + c] / M - mean * mean;
        var = var > 0.0 ? var : 0.0;
        bm[c] = (float)mean;
        bv[c] = (float)var;
        save[c] = (float)mean;
        save[Cp + c] = (float)(1.0 / sqrt(var + T->bn_eps));
    }
#pragma omp parallel for schedule(static)
    for (int u = 0; u < U; u++) {
        int c0, n0, n1;
        long base;
        bn_unit(g, N, NK, u, &c0, &base, &n0, &n1);
        float a[16], off[16];
        const int nv = C - c0 < g->W ? C - c0 : g->W;
        for (int j = 0; j < g->W; j++) {
            if (j < nv)
                bn_coef(gam, bet, save, Cp, c0 + j, &a[j], &off[j]);
            else
                a[j] = off[j] = 0.0f;
        }
        bn_fwd_apply_u(g, x, y, base, n0, n1, a, off, nv, relu);
    }
}

/* lane arrays of group c0 for the backward passes */
static void bn_lanes(const dnn_bn_geom *g, const float *gam, const float *bet, const float *save,
                     int c0, float *a, float *off, float *mean, float *inv)
{
    for (int j = 0; j < g->W; j++) {
        if (c0 + j < g->C) {
            bn_coef(gam, bet, save, g->Cp, c0 + j, &a[j], &off[j]);
            mean[j] = save[c0 + j];
            inv[j] = save[g->Cp + c0 + j];
        } else {
            a[j] = off[j] = mean[j] = inv[j] = 0.0f;
        }
    }
}

void dnn_hook_bn_bwd(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    const dnn_layer *L = &p->L[l];
    const dnn_bn_geom *g = &L->bn_g;
    const float *x = mem_ptr(p->act[T->in]), *dy = mem_ptr(p->dact[L->out]),
                *gam = p->params + T->w_off, *bet = p->params + T->b_off,
                *save = mem_ptr(L->bn_save);
    float *dx = L->bn_dx ? mem_ptr(L->bn_dx) : NULL, *ds = mem_ptr(L->dscale),
          *dh = mem_ptr(L->dshift);
    double *part = p->d->bn_part;
    const int N = p->N, NK = N < DNN_BN_CHUNKS ? N : DNN_BN_CHUNKS, Cp = g->Cp, C = g->C,
              U = Cp / g->W * NK, relu = L->fuse_relu;
    const float M = (float)((double)N * g->H * g->Wd);
#pragma omp parallel for schedule(static)
    for (int u = 0; u < U; u++) {
        int c0, n0, n1;
        long base;
        bn_unit(g, N, NK, u, &c0, &base, &n0, &n1);
        float a[16], off[16], mean[16], inv[16];
        bn_lanes(g, gam, bet, save, c0, a, off, mean, inv);
        double *o1 = part + (long)(u % NK) * Cp + c0, *o2 = o1 + (long)NK * Cp;
        bn_bwd_sums_u(g, x, dy, base, n0, n1, a, off, mean, inv, relu, o1, o2);
    }
    bn_combine(part, NK, Cp, C);
    for (int c = 0; c < C; c++) { /* dgamma = sum(dy' x_hat), dbeta = sum(dy') */
        ds[c] = (float)part[(long)NK * Cp + c];
        dh[c] = (float)part[c];
    }
    if (!dx)
        return;
#pragma omp parallel for schedule(static)
    for (int u = 0; u < U; u++) {
        int c0, n0, n1;
        long base;
        bn_unit(g, N, NK, u, &c0, &base, &n0, &n1);
        float a[16], off[16], mean[16], inv[16], k[16], mdy[16], mdyx[16];
        bn_lanes(g, gam, bet, save, c0, a, off, mean, inv);
        const int nv = C - c0 < g->W ? C - c0 : g->W;
        for (int j = 0; j < g->W; j++) {
            k[j] = j < nv ? gam[c0 + j] * inv[j] / M : 0.0f;
            mdy[j] = j < nv ? (float)part[c0 + j] : 0.0f;
            mdyx[j] = j < nv ? (float)part[(long)NK * Cp + c0 + j] : 0.0f;
        }
        bn_bwd_apply_u(g, x, dy, dx, base, n0, n1, a, off, mean, inv, k, mdy, mdyx, M, nv, relu);
    }
}

/* ---- host max pool (training) for windows that tile the input (window = stride, no padding,
 * sizes divisible): oneDNN's backward zeroes the input gradient and then adds into it, two passes
 * over the largest tensor of a small CNN; here each window writes its input gradient once (the
 * gradient at the first maximum, as the reference layers pick it, 0 elsewhere). ---- */

/* 8 lanes as GCC vector types (one AVX2 register, half an AVX-512 one, two SSE ones). The helpers
 * taking or returning them are always inlined into the clones: no call passes a vector, so the
 * ABI note GCC gives for such functions in the baseline build does not apply. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

BN_INLINE v8f ld8(const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

BN_INLINE void st8(float *p, v8f v) { memcpy(p, &v, sizeof v); }

/* lanes h*8 .. h*8+7 below nv: all ones */
BN_INLINE v8i lanes_valid(int h, int nv)
{
    const v8i iota = {0, 1, 2, 3, 4, 5, 6, 7};
    return iota + h * 8 < nv;
}

/* the input gradient of one group of W lanes over samples n0..n1: each window routes its output
 * gradient to its first input equal to the window's maximum y (which oneDNN's forward computed:
 * the max of the same floats, so exactly one of them), as the reference's first-maximum argmax */
BN_INLINE void pool_bwd_k(const dnn_bn_geom *gi, const dnn_bn_geom *go, const float *x,
                          const float *y, const float *dy, float *dx, long ib, long ob, int n0,
                          int n1, int k, const int W, int nv)
{
    long woff[225]; /* the window's offsets, in window order */
    for (int kh = 0; kh < k; kh++)
        for (int kw = 0; kw < k; kw++)
            woff[kh * k + kw] = kh * gi->s[2] + kw * gi->s[3];
    for (int n = n0; n < n1; n++)
        for (int oh = 0; oh < go->H; oh++)
            for (int ow = 0; ow < go->Wd; ow++) {
                const long o = ob + n * go->s[0] + oh * go->s[2] + ow * go->s[3],
                           i = ib + n * gi->s[0] + (long)oh * k * gi->s[2] +
                               (long)ow * k * gi->s[3];
                for (int h = 0; h < W / 8; h++) {
                    const v8f m = ld8(y + o + 8 * h);
                    const v8i d = (v8i)ld8(dy + o + 8 * h) & lanes_valid(h, nv);
                    v8i free = ~(v8i){0}; /* lanes whose maximum is still to be found */
                    for (int t = 0; t < k * k; t++) {
                        const v8i hit = (ld8(x + i + woff[t] + 8 * h) == m) & free;
                        free &= ~hit;
                        st8(dx + i + woff[t] + 8 * h, (v8f)(d & hit));
                    }
                }
            }
}

BN_CLONES static void pool_bwd_u(const dnn_bn_geom *gi, const dnn_bn_geom *go, const float *x,
                                 const float *y, const float *dy, float *dx, long ib, long ob,
                                 int n0, int n1, int k, int nv)
{
    if (gi->W == 16)
        pool_bwd_k(gi, go, x, y, dy, dx, ib, ob, n0, n1, k, 16, nv);
    else
        pool_bwd_k(gi, go, x, y, dy, dx, ib, ob, n0, n1, k, 8, nv);
}

/* units: channel groups x samples (no reduction: any split gives the same) */
void dnn_hook_pool_bwd(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    const dnn_layer *L = &p->L[l];
    const dnn_bn_geom *gi = &L->bn_g, *go = &L->pool_og;
    const int N = p->N, U = gi->Cp / gi->W * N, k = T->k;
    const float *x = mem_ptr(p->act[T->in]), *y = mem_ptr(p->act[L->out]),
                *dy = mem_ptr(p->dact[L->out]);
    float *dx = mem_ptr(L->pool_dx);
#pragma omp parallel for schedule(static)
    for (int u = 0; u < U; u++) {
        const int gr = u / N, n = u % N, c0 = gr * gi->W;
        const int nv = gi->C - c0 < gi->W ? gi->C - c0 : gi->W;
        const long ib = (long)(c0 / gi->B) * gi->s[1] + c0 % gi->B,
                   ob = (long)(c0 / go->B) * go->s[1] + c0 % go->B;
        pool_bwd_u(gi, go, x, y, dy, dx, ib, ob, n, n + 1, k, nv);
    }
}

/* ---- object ---- */

static void *falloc_bytes(size_t bytes)
{
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 64) ? NULL : p;
}

/* Arena buffers: each tensor's activation and gradient for max_batch samples, channels padded to
 * 16 (the widest fp32 blocking oneDNN uses); a plan whose layout needs more allocates its own. */
static int arena_alloc(cpu_dnn *d)
{
    const tf_model_spec *s = d->spec;
    d->arena = calloc(2 * (size_t)s->n_tensors, sizeof *d->arena);
    d->arena_bytes = calloc(2 * (size_t)s->n_tensors, sizeof *d->arena_bytes);
    d->readers = calloc((size_t)s->n_tensors, sizeof *d->readers);
    if (!d->arena || !d->arena_bytes || !d->readers)
        return -ENOMEM;
    for (int l = 0; l < s->n_layers; l++) {
        d->readers[s->layers[l].in]++;
        if (s->layers[l].in2 >= 0)
            d->readers[s->layers[l].in2]++;
    }
    for (int t = 1; t < s->n_tensors - 1; t++) {
        tf_shape sh = s->tensors[t];
        size_t bytes = sizeof(float) * (size_t)d->max_batch * (size_t)((sh.c + 15) / 16 * 16) *
                       (size_t)sh.h * (size_t)sh.w;
        for (int k = 0; k < 2; k++) {
            d->arena_bytes[2 * t + k] = bytes;
            if (!(d->arena[2 * t + k] = falloc_bytes(bytes)))
                return -ENOMEM;
        }
        if (bytes > d->gscratch_bytes)
            d->gscratch_bytes = bytes;
    }
    d->gscratch = falloc_bytes(d->gscratch_bytes);
    int maxc = 16;
    for (int l = 0; l < s->n_layers; l++)
        if (s->layers[l].kind == TF_BN && s->layers[l].cin > maxc)
            maxc = s->layers[l].cin;
    d->bn_part = calloc(2 * DNN_BN_CHUNKS * (size_t)((maxc + 15) / 16 * 16), sizeof(double));
    if (!d->bn_part)
        return -ENOMEM;
    if (d->bf16) { /* a bf16 copy of the widest gradient (same padding) */
        d->bscratch_bytes = d->gscratch_bytes / 2;
        if (!(d->bscratch = falloc_bytes(d->bscratch_bytes)))
            return -ENOMEM;
    }
    size_t K = (size_t)d->max_batch * (size_t)s->num_classes;
    d->input = falloc_bytes(sizeof(float) * (size_t)d->max_batch * (size_t)s->in_c *
                            (size_t)s->in_h * (size_t)s->in_w);
    d->logits = falloc_bytes(sizeof(float) * K);
    d->dlogits = falloc_bytes(sizeof(float) * K);
    return d->gscratch && d->input && d->logits && d->dlogits ? 0 : -ENOMEM;
}

void cpu_dnn_free(cpu_dnn *d)
{
    if (!d)
        return;
    for (int i = 0; i < DNN_PLANS; i++)
        dnn_plan_free(d->plans[i]);
    if (d->arena)
        for (int t = 0; t < 2 * d->spec->n_tensors; t++)
            free(d->arena[t]);
    free(d->arena);
    free(d->arena_bytes);
    free(d->readers);
    free(d->bn_part);
    free(d->gscratch);
    free(d->bscratch);
    free(d->input);
    free(d->logits);
    free(d->dlogits);
    if (d->stream)
        dnnl_stream_destroy(d->stream);
    if (d->eng)
        dnnl_engine_destroy(d->eng);
    free(d);
}

/* the cached plan for (N, train), built on first use; the least recently used one goes when the
 * cache is full */
static int plan_get(cpu_dnn *d, int N, int train, dnn_plan **out, fl_error *err)
{
    fl_error local;
    if (!err)
        err = &local;
    int slot = 0;
    for (int i = 0; i < DNN_PLANS; i++) {
        dnn_plan *p = d->plans[i];
        if (p && p->N == N && p->train == train) {
            p->last_use = ++d->clock;
            *out = p;
            return 0;
        }
        if (!p || (d->plans[slot] && p->last_use < d->plans[slot]->last_use))
            slot = i;
    }
    dnn_plan *p = NULL;
    int rc = dnn_plan_build(d, N, train, &p, err);
    if (rc)
        return rc;
    if (d->plans[slot] == d->last_train)
        d->last_train = NULL;
    dnn_plan_free(d->plans[slot]);
    d->plans[slot] = p;
    p->last_use = ++d->clock;
    *out = p;
    return 0;
}

static const char *isa_name(dnnl_cpu_isa_t isa);

int cpu_dnn_native_bf16(const char **isa)
{
    dnnl_cpu_isa_t i = dnnl_get_effective_cpu_isa();
    if (isa)
        *isa = isa_name(i);
    /* the ISA values are bit masks, each including the ones below it */
    return (i & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

int cpu_dnn_create(const tf_model_spec *spec, int max_batch, int threads, cpu_dnn **out,
                   fl_error *err)
{
    return cpu_dnn_create_prec(spec, max_batch, threads, 0, out, err);
}

int cpu_dnn_create_prec(const tf_model_spec *spec, int max_batch, int threads, int bf16,
                        cpu_dnn **out, fl_error *err)
{
    *out = NULL;
    const char *isa;
    /* oneDNN 2.6 would run bf16 convolutions below avx512_core_bf16 emulated or on its reference
     * kernels (many times slower than fp32): refuse rather than be silently slow */
    if (bf16 && !cpu_dnn_native_bf16(&isa))
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "--precision bf16 needs a CPU with native bf16 (oneDNN ISA "
                            "avx512_core_bf16 or avx512_core_amx); oneDNN reports %s here: use "
                            "--precision fp32",
                            isa);
    cpu_dnn *d = calloc(1, sizeof *d);
    if (!d)
        return fl_error_set(err, -ENOMEM, "oneDNN: out of memory");
    d->spec = spec;
    d->bf16 = bf16 ? 1 : 0;
    d->max_batch = max_batch;
    /* Grain size, as PyTorch's parallel_for has: a training step under ~1 GMAC (the test
     * models, tiny images) runs each primitive in microseconds, where a second thread's barrier
     * costs more than it saves, and on a loaded machine OpenMP barriers whose partner thread is
     * descheduled spin for milliseconds (seen: 10x the CPU time, 20x the wall time of one thread
     * at load 25 on 2 cores). Decided from the model alone, so a given model and batch always
     * gets the same thread count and the same bit-exact results. */
    d->threads = threads > 0 ? threads : omp_get_num_procs();
    if (tf_model_flops(spec) * 3.0 * max_batch < 1e9)
        d->threads = 1;
    omp_set_num_threads(d->threads);
    if (dnnl_engine_create(&d->eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags) != dnnl_success) {
        cpu_dnn_free(d);
        return fl_error_set(err, FL_E_UNSUPPORTED, "oneDNN: no CPU engine");
    }
    if (arena_alloc(d)) {
        cpu_dnn_free(d);
        return fl_error_set(err, -ENOMEM, "oneDNN: out of memory for %s at batch %d", spec->name,
                            max_batch);
    }
    dnn_plan *p;
    int rc = plan_get(d, max_batch, 1, &p, err);
    if (!rc)
        rc = plan_get(d, max_batch, 0, &p, err);
    if (rc) {
        cpu_dnn_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

float *cpu_dnn_input(cpu_dnn *d) { return d->input; }
float *cpu_dnn_dlogits(cpu_dnn *d) { return d->dlogits; }

/* point the model.h views of a plan at this run's arrays */
static void plan_bind(dnn_plan *p, const float *params, float *stats, float *grad)
{
    const tf_model_spec *s = p->d->spec;
    p->params = params;
    p->stats = stats;
    p->grad = grad;
    for (int l = 0; l < s->n_layers; l++) {
        const tf_layer *T = &s->layers[l];
        dnn_layer *L = &p->L[l];
        if (L->skip)
            continue;
        if (L->w_user)
            dnnl_memory_set_data_handle(L->w_user, (void *)(params + T->w_off));
        if (L->b_user)
            dnnl_memory_set_data_handle(L->b_user, (void *)(params + T->b_off));
        if (L->gw_user && grad)
            dnnl_memory_set_data_handle(L->gw_user, grad + T->w_off);
        if (T->kind == TF_BN && !p->train && stats) {
            dnnl_memory_set_data_handle(L->mean, stats + T->stat_off);
            dnnl_memory_set_data_handle(L->var, stats + T->stat_off + T->cin);
        }
    }
}

static int run_ops(cpu_dnn *d, dnn_plan *p, const dnn_op *ops, int n, fl_error *err)
{
    for (int i = 0; i < n; i++) {
        const dnn_op *o = &ops[i];
        if (!o->prim) {
            o->hook(p, o->layer);
            continue;
        }
        dnnl_status_t st = dnnl_primitive_execute(o->prim, d->stream, o->nargs, o->args);
        if (st != dnnl_success)
            return fl_error_set(err, FL_E_UNSUPPORTED,
                                "oneDNN: execution failed (status %d) in "
                                "layer %d of %s",
                                (int)st, o->layer, d->spec->name);
        if (i + 1 < n && !ops[i + 1].prim)
            dnnl_stream_wait(d->stream);
    }
    dnnl_stream_wait(d->stream);
    return 0;
}

int cpu_dnn_forward(cpu_dnn *d, int N, int train, const float *params, float *stats,
                    const float **logits, fl_error *err)
{
    if (N < 1 || N > d->max_batch)
        return fl_error_set(err, FL_E_INVALID, "oneDNN: batch of %d (sized for 1..%d)", N,
                            d->max_batch);
    dnn_plan *p;
    int rc = plan_get(d, N, train, &p, err);
    if (rc)
        return rc;
    plan_bind(p, params, stats, NULL);
    rc = run_ops(d, p, p->fwd, p->nfwd, err);
    if (train)
        d->last_train = rc ? NULL : p;
    *logits = d->logits;
    return rc;
}

int cpu_dnn_backward(cpu_dnn *d, const float *params, float *grad, fl_error *err)
{
    dnn_plan *p = d->last_train;
    if (!p)
        return fl_error_set(err, FL_E_INVALID, "oneDNN: backward without a training forward");
    plan_bind(p, params, p->stats, grad);
    return run_ops(d, p, p->bwd, p->nbwd, err);
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_sse41: return "sse41";
    default: return "isa ?";
    }
}

void cpu_dnn_describe(cpu_dnn *d, char *buf, size_t cap)
{
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, cap, "oneDNN %d.%d.%d (%s, %d thread%s%s)", v->major, v->minor, v->patch,
             isa_name(dnnl_get_effective_cpu_isa()), d->threads, d->threads == 1 ? "" : "s",
             d->bf16 ? ", bf16 convs" : "");
}
