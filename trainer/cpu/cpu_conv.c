/* cpu_conv.c — convolution and linear layers on CPU: im2col over a chunk of samples + one GEMM.
 * Each thread owns a static range of samples; weight gradients are summed into per-thread
 * partials and reduced in thread order, so results are deterministic for a thread count. */
#include "cpu_layers.h"

#include <string.h>

/* floats of im2col buffer per thread we aim for: big enough for an efficient GEMM, small enough
 * to stay near the caches */
#define COL_BUDGET (1L << 19)

typedef struct conv_job {
    int N;
    tf_shape in, out;
    int k, stride, pad;
    const float *x, *w, *b, *dy;
    float *y, *dx, *dw, *db;
    long wcount; /* cout * cin * k * k */
    cpu_pool *P;
    float *cache; /* optional: the whole batch's im2col, chunk at sample s starts at s * R * P */
} conv_job;

static int chunk_samples(long R, long P, long n)
{
    long nb = COL_BUDGET / (R * P > 0 ? R * P : 1);
    if (nb < 1)
        nb = 1;
    if (nb > n)
        nb = n;
    return (int)(nb > 0 ? nb : 1);
}

/* col[r][j*P + p] for samples s..s+nb */
static void im2col(const conv_job *J, const float *x, int nb, float *col)
{
    const int C = J->in.c, H = J->in.h, W = J->in.w, k = J->k, st = J->stride, pd = J->pad;
    const int Ho = J->out.h, Wo = J->out.w;
    const long P = (long)Ho * Wo, ld = (long)nb * P;
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                float *row = col + ((long)(c * k + ky) * k + kx) * ld;
                for (int j = 0; j < nb; j++) {
                    const float *xp = x + ((long)j * C + c) * H * W;
                    float *o = row + j * P;
                    for (int oy = 0; oy < Ho; oy++) {
                        int iy = oy * st - pd + ky;
                        if (iy < 0 || iy >= H) {
                            memset(o + (long)oy * Wo, 0, sizeof(float) * (size_t)Wo);
                            continue;
                        }
                        const float *xr = xp + (long)iy * W;
                        float *orow = o + (long)oy * Wo;
                        if (st == 1) {
                            /* valid columns form one run: zero the edges, copy the middle */
                            int ix0 = -pd + kx;
                            int lo = ix0 < 0 ? -ix0 : 0;
                            int hi = W - ix0 < Wo ? W - ix0 : Wo;
                            if (hi < lo)
                                hi = lo;
                            for (int ox = 0; ox < lo; ox++)
                                orow[ox] = 0.0f;
                            if (hi > lo)
                                memcpy(orow + lo, xr + ix0 + lo, sizeof(float) * (size_t)(hi - lo));
                            for (int ox = hi; ox < Wo; ox++)
                                orow[ox] = 0.0f;
                        } else {
                            for (int ox = 0; ox < Wo; ox++) {
                                int ix = ox * st - pd + kx;
                                orow[ox] = (ix >= 0 && ix < W) ? xr[ix] : 0.0f;
                            }
                        }
                    }
                }
            }
}

static void col2im_add(const conv_job *J, const float *col, int nb, float *dx)
{
    const int C = J->in.c, H = J->in.h, W = J->in.w, k = J->k, st = J->stride, pd = J->pad;
    const int Ho = J->out.h, Wo = J->out.w;
    const long P = (long)Ho * Wo, ld = (long)nb * P;
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                const float *row = col + ((long)(c * k + ky) * k + kx) * ld;
                for (int j = 0; j < nb; j++) {
                    float *xp = dx + ((long)j * C + c) * H * W;
                    const float *o = row + j * P;
                    for (int oy = 0; oy < Ho; oy++) {
                        int iy = oy * st - pd + ky;
                        if (iy < 0 || iy >= H)
                            continue;
                        float *xr = xp + (long)iy * W;
                        const float *orow = o + (long)oy * Wo;
                        if (st == 1) {
                            int ix0 = -pd + kx;
                            int lo = ix0 < 0 ? -ix0 : 0;
                            int hi = W - ix0 < Wo ? W - ix0 : Wo;
                            float *xd = xr + ix0;
                            for (int ox = lo; ox < hi; ox++)
                                xd[ox] += orow[ox];
                            continue;
                        }
                        for (int ox = 0; ox < Wo; ox++) {
                            int ix = ox * st - pd + kx;
                            if (ix >= 0 && ix < W)
                                xr[ix] += orow[ox];
                        }
                    }
                }
            }
}

static void conv_fwd_thread(void *arg, int tid, int nt)
{
    const conv_job *J = arg;
    long lo, hi;
    cpu_range(J->N, tid, nt, &lo, &hi);
    if (lo >= hi)
        return;
    const int Co = J->out.c;
    const long R = (long)J->in.c * J->k * J->k, P = (long)J->out.h * J->out.w;
    const long isz = tf_shape_size(J->in), osz = tf_shape_size(J->out);
    const int nbmax = chunk_samples(R, P, hi - lo);
    float *col = cpu_pool_scratch(J->P, tid, 0, (size_t)(R * P * nbmax));
    float *tmp = cpu_pool_scratch(J->P, tid, 1, (size_t)(Co * P * nbmax));
    for (long s = lo; s < hi; s += nbmax) {
        int nb = (int)(hi - s < nbmax ? hi - s : nbmax);
        long ld = (long)nb * P;
        if (J->k == 1 && J->stride == 1 && J->pad == 0 && nb == 1 && !J->cache) {
            /* a single sample's [cin][P] already is its column matrix: write straight to y */
            float *y = J->y + s * osz;
            cpu_sgemm(0, 0, Co, (int)P, (int)R, 1.0f, J->w, (int)R, J->x + s * isz, (int)P, 0.0f, y,
                      (int)P);
            if (J->b)
                for (int co = 0; co < Co; co++)
                    for (long p = 0; p < P; p++)
                        y[co * P + p] += J->b[co];
            continue;
        }
        float *c = J->cache ? J->cache + s * R * P : col;
        im2col(J, J->x + s * isz, nb, c);
        cpu_sgemm(0, 0, Co, (int)ld, (int)R, 1.0f, J->w, (int)R, c, (int)ld, 0.0f, tmp, (int)ld);
        for (int j = 0; j < nb; j++)
            for (int co = 0; co < Co; co++) {
                float *y = J->y + (s + j) * osz + co * P;
                const float *t = tmp + co * ld + j * P;
                float bias = J->b ? J->b[co] : 0.0f;
                for (long p = 0; p < P; p++)
                    y[p] = t[p] + bias;
            }
    }
}

void cpu_conv_forward_cached(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride,
                             int pad, const float *x, const float *w, const float *b, float *y,
                             float *col_cache)
{
    conv_job J = {.N = N,
                  .in = in,
                  .out = out,
                  .k = k,
                  .stride = stride,
                  .pad = pad,
                  .x = x,
                  .w = w,
                  .b = b,
                  .y = y,
                  .P = P,
                  .cache = col_cache};
    cpu_pool_run(P, conv_fwd_thread, &J);
}

void cpu_conv_forward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                      const float *x, const float *w, const float *b, float *y)
{
    cpu_conv_forward_cached(P, N, in, out, k, stride, pad, x, w, b, y, NULL);
}

static void conv_bwd_thread(void *arg, int tid, int nt)
{
    const conv_job *J = arg;
    const int Co = J->out.c;
    const long R = (long)J->in.c * J->k * J->k, P = (long)J->out.h * J->out.w;
    const long isz = tf_shape_size(J->in), osz = tf_shape_size(J->out);
    /* per-thread partial dW (Co*R) then db (Co) */
    float *part = cpu_pool_scratch(J->P, tid, 2, (size_t)(Co * R + Co));
    memset(part, 0, sizeof(float) * (size_t)(Co * R + Co));
    long lo, hi;
    cpu_range(J->N, tid, nt, &lo, &hi);
    if (lo < hi) {
        const int nbmax = chunk_samples(R, P, hi - lo);
        float *scr = J->cache ? NULL : cpu_pool_scratch(J->P, tid, 0, (size_t)(R * P * nbmax));
        float *dyc = cpu_pool_scratch(J->P, tid, 1, (size_t)(Co * P * nbmax));
        for (long s = lo; s < hi; s += nbmax) {
            int nb = (int)(hi - s < nbmax ? hi - s : nbmax);
            long ld = (long)nb * P;
            /* with a cache the forward pass left this chunk's columns there (same partition:
             * same N, thread count and chunk size); they are dead after this layer, so the
             * input gradient's columns overwrite them */
            float *col = J->cache ? J->cache + s * R * P : scr;
            for (int j = 0; j < nb; j++)
                for (int co = 0; co < Co; co++)
                    memcpy(dyc + co * ld + j * P, J->dy + (s + j) * osz + co * P,
                           sizeof(float) * (size_t)P);
            if (J->db)
                for (int co = 0; co < Co; co++) {
                    float acc = 0.0f;
                    const float *d = dyc + co * ld;
                    for (long p = 0; p < ld; p++)
                        acc += d[p];
                    part[Co * R + co] += acc;
                }
            if (!J->cache)
                im2col(J, J->x + s * isz, nb, col);
            cpu_sgemm(0, 1, Co, (int)R, (int)ld, 1.0f, dyc, (int)ld, col, (int)ld, 1.0f, part,
                      (int)R);
            if (J->dx) {
                cpu_sgemm(1, 0, (int)R, (int)ld, Co, 1.0f, J->w, (int)R, dyc, (int)ld, 0.0f, col,
                          (int)ld);
                col2im_add(J, col, nb, J->dx + s * isz);
            }
        }
    }
}

typedef struct reduce_job {
    cpu_pool *P;
    long n; /* elements of each partial */
    int slot;
    float *dst; /* first n - nb go to dst, the rest to dst2 */
    long split;
    float *dst2;
} reduce_job;

static void reduce_thread(void *arg, int tid, int nt)
{
    const reduce_job *R = arg;
    long lo, hi;
    cpu_range(R->n, tid, nt, &lo, &hi);
    /* partial buffers of every thread: fetched by asking the pool for the size they already have */
    for (long i = lo; i < hi; i++) {
        float acc = 0.0f;
        for (int t = 0; t < nt; t++)
            acc += cpu_pool_scratch(R->P, t, R->slot, (size_t)R->n)[i];
        if (i < R->split)
            R->dst[i] += acc;
        else if (R->dst2)
            R->dst2[i - R->split] += acc;
    }
}

void cpu_conv_backward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                       const float *x, const float *w, const float *dy, float *dx, float *dw,
                       float *db)
{
    cpu_conv_backward_cached(P, N, in, out, k, stride, pad, x, w, dy, dx, dw, db, NULL);
}

void cpu_conv_backward_cached(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride,
                              int pad, const float *x, const float *w, const float *dy, float *dx,
                              float *dw, float *db, float *col_cache)
{
    conv_job J = {.N = N,
                  .in = in,
                  .out = out,
                  .k = k,
                  .stride = stride,
                  .pad = pad,
                  .x = x,
                  .w = w,
                  .dy = dy,
                  .dx = dx,
                  .dw = dw,
                  .db = db,
                  .P = P,
                  .cache = col_cache};
    cpu_pool_run(P, conv_bwd_thread, &J);
    long R = (long)in.c * k * k;
    reduce_job RJ = {
        .P = P, .n = out.c * R + out.c, .slot = 2, .dst = dw, .split = out.c * R, .dst2 = db};
    cpu_pool_run(P, reduce_thread, &RJ);
}

void cpu_linear_forward(cpu_pool *P, int N, int cin, int cout, const float *x, const float *w,
                        const float *b, float *y)
{
    tf_shape i = {cin, 1, 1}, o = {cout, 1, 1};
    cpu_conv_forward(P, N, i, o, 1, 1, 0, x, w, b, y);
}

void cpu_linear_backward(cpu_pool *P, int N, int cin, int cout, const float *x, const float *w,
                         const float *dy, float *dx, float *dw, float *db)
{
    tf_shape i = {cin, 1, 1}, o = {cout, 1, 1};
    cpu_conv_backward(P, N, i, o, 1, 1, 0, x, w, dy, dx, dw, db);
}
