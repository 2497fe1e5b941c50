/* cpu_onednn_bn.c — training batch norm (+ the fused ReLU) of the oneDNN path on host kernels, in
 * the layouts oneDNN picked for the activations (nChw16c, nChw8c, NHWC). Why not oneDNN's own BN:
 * its jitted kernels synchronise their threads with spin barriers between passes, so with a
 * thread descheduled (decode workers, other processes on the cores) its partner burns its time
 * slice spinning, and its sums depend on the thread count. Here each channel is summed over
 * DNN_BN_CHUNKS fixed sample chunks (floats along a row, doubles across rows and chunks, chunks
 * added in order), so the statistics and gradients are the same bits with one thread or many;
 * each pass ends at its OpenMP region's end, a sleeping wait under the passive policy, and a
 * contended object (cpu_dnn_set_serial) runs the passes on the calling thread alone with the
 * same results. Formulas as the reference layers' cpu_bn_forward / cpu_bn_backward. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_onednn_impl.h"

static float *mem_ptr(dnnl_memory_t m)
{
    void *h = NULL;
    dnnl_memory_get_data_handle(m, &h);
    return h;
}

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
#define ACC       4 /* independent accumulators along a row: a sum is not one long add chain */

/* The kernels are built for AVX-512, AVX2 and the baseline (picked at load time; the build
 * targets baseline x86-64, where these loops would run on SSE2) and give the same bits on each:
 * no FMA contraction, every product rounded as written. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BN_CLONES                                                                                  \
    __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#else
#define BN_CLONES
#endif

/* the affine map y = x * a + off of channel c (mean and 1/std in save[c], save[Cp + c]); the
 * forward pass and the backward pass's ReLU mask use this one expression, so they agree */
BN_INLINE void bn_coef(const float *gam, const float *bet, const float *save, int Cp, int c,
                       float *a, float *off)
{
    *a = gam[c] * save[Cp + c];
    *off = bet[c] - save[c] * *a;
}

/* a row's ACC partial sums per lane, added in a fixed order into the running double sums */
BN_INLINE void bn_fold(float a1[ACC][16], float a2[ACC][16], const int W, double *s1, double *s2)
{
    for (int j = 0; j < W; j++) {
        s1[j] += (double)((a1[0][j] + a1[1][j]) + (a1[2][j] + a1[3][j]));
        s2[j] += (double)((a2[0][j] + a2[1][j]) + (a2[2][j] + a2[3][j]));
    }
}

/* forward pass 1 over samples n0..n1 of the group at base: per lane sum and sum of squares */
BN_INLINE void bn_fwd_sums(const dnn_bn_geom *g, const float *x, long base, int n0, int n1,
                           const int W, double *o1, double *o2)
{
    double s1[16] = {0}, s2[16] = {0};
    const long sw = g->s[3];
    for (int n = n0; n < n1; n++)
        for (int h = 0; h < g->H; h++) {
            const float *r = x + base + n * g->s[0] + h * g->s[2];
            float a1[ACC][16] = {{0}}, a2[ACC][16] = {{0}};
            int w = 0;
            for (; w + ACC <= g->Wd; w += ACC)
                for (int q = 0; q < ACC; q++)
                    for (int j = 0; j < W; j++) {
                        const float v = r[(w + q) * sw + j];
                        a1[q][j] += v;
                        a2[q][j] += v * v;
                    }
            for (; w < g->Wd; w++)
                for (int j = 0; j < W; j++) {
                    const float v = r[w * sw + j];
                    a1[0][j] += v;
                    a2[0][j] += v * v;
                }
            bn_fold(a1, a2, W, s1, s2);
        }
    memcpy(o1, s1, sizeof(double) * (size_t)W);
    memcpy(o2, s2, sizeof(double) * (size_t)W);
}

/* forward pass 2: y = x * a + off (ReLU'd when relu), 0 in padded lanes (nv valid of W) */
BN_INLINE void bn_fwd_apply(const dnn_bn_geom *g, const float *x, float *y, long base, int n0,
                            int n1, const int W, const float *a, const float *off, int nv, int relu)
{
    float av[16], ov[16];
    for (int j = 0; j < W; j++) {
        av[j] = j < nv ? a[j] : 0.0f;
        ov[j] = j < nv ? off[j] : 0.0f;
    }
    for (int n = n0; n < n1; n++)
        for (int h = 0; h < g->H; h++) {
            const long r = base + n * g->s[0] + h * g->s[2];
            for (int w = 0; w < g->Wd; w++) {
                const float *xi = x + r + w * g->s[3];
                float *yo = y + r + w * g->s[3];
                for (int j = 0; j < W; j++) {
                    float v = xi[j] * av[j] + ov[j];
                    yo[j] = relu && !(v > 0.0f) ? 0.0f : v;
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
    const long sw = g->s[3];
    for (int n = n0; n < n1; n++)
        for (int h = 0; h < g->H; h++) {
            const long r = base + n * g->s[0] + h * g->s[2];
            const float *xr = x + r, *dr = dy + r;
            float a1[ACC][16] = {{0}}, a2[ACC][16] = {{0}};
            int w = 0;
            for (; w + ACC <= g->Wd; w += ACC)
                for (int q = 0; q < ACC; q++)
                    for (int j = 0; j < W; j++) {
                        const float xv = xr[(w + q) * sw + j];
                        const float d =
                            relu && !(xv * a[j] + off[j] > 0.0f) ? 0.0f : dr[(w + q) * sw + j];
                        a1[q][j] += d;
                        a2[q][j] += d * ((xv - mean[j]) * inv[j]);
                    }
            for (; w < g->Wd; w++)
                for (int j = 0; j < W; j++) {
                    const float xv = xr[w * sw + j];
                    const float d = relu && !(xv * a[j] + off[j] > 0.0f) ? 0.0f : dr[w * sw + j];
                    a1[0][j] += d;
                    a2[0][j] += d * ((xv - mean[j]) * inv[j]);
                }
            bn_fold(a1, a2, W, s1, s2);
        }
    memcpy(o1, s1, sizeof(double) * (size_t)W);
    memcpy(o2, s2, sizeof(double) * (size_t)W);
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
                    const float d = relu && !(xi[j] * a[j] + off[j] > 0.0f) ? 0.0f : di[j];
                    const float xh = (xi[j] - mean[j]) * inv[j];
                    const float v = k[j] * (M * d - mdy[j] - xh * mdyx[j]);
                    o[j] = j < nv ? v : 0.0f;
                }
            }
        }
}

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

/* unit u of (channel groups x NK chunks): its group's first channel, base offset, sample range */
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

/* lane arrays of the group at c0 */
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
              U = Cp / g->W * NK, relu = L->fuse_relu, par = !p->d->serial;
    const double M = (double)N * g->H * g->Wd;
#pragma omp parallel for schedule(static) if (par)
    for (int u = 0; u < U; u++) {
        int c0, n0, n1;
        long base;
        bn_unit(g, N, NK, u, &c0, &base, &n0, &n1);
        double *o1 = part + (long)(u % NK) * Cp + c0, *o2 = o1 + (long)NK * Cp;
        bn_fwd_sums_u(g, x, base, n0, n1, o1, o2);
    }
    bn_combine(part, NK, Cp, C);
    for (int c = 0; c < Cp; c++) {
        if (c >= C) { /* padded channels: their outputs are written as 0 */
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
#pragma omp parallel for schedule(static) if (par)
    for (int u = 0; u < U; u++) {
        int c0, n0, n1;
        long base;
        bn_unit(g, N, NK, u, &c0, &base, &n0, &n1);
        float a[16], off[16], mean[16], inv[16];
        bn_lanes(g, gam, bet, save, c0, a, off, mean, inv);
        const int nv = C - c0 < g->W ? C - c0 : g->W;
        bn_fwd_apply_u(g, x, y, base, n0, n1, a, off, nv, relu);
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
              U = Cp / g->W * NK, relu = L->fuse_relu, par = !p->d->serial;
    const float M = (float)((double)N * g->H * g->Wd);
#pragma omp parallel for schedule(static) if (par)
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
#pragma omp parallel for schedule(static) if (par)
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
