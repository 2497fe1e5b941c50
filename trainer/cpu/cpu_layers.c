/* cpu_layers.c — the fp32 CPU reference for every layer but convolution: batch norm, activations,
 * pools, global average pool, residual add, scale, softmax cross-entropy, the uint8 input stage,
 * and the SGD / EMA updates. Reductions accumulate in double so the reference stays accurate at
 * large batch. */
#include "cpu_layers.h"

#include <math.h>
#include <string.h>

#include "backend.h"
#include "fl_aug_rng.h" /* fl_aug_crop_flip */

/* ---- batch norm: channels are split across threads; each channel is reduced by one thread ---- */
typedef struct bn_job {
    int N;
    tf_shape s;
    int train;
    float eps, momentum;
    const float *x, *gamma, *beta, *dy;
    float *run_mean, *run_var, *save, *y, *dx, *dgamma, *dbeta;
} bn_job;

static void bn_fwd_thread(void *arg, int tid, int nt)
{
    const bn_job *J = arg;
    const int C = J->s.c;
    const long HW = (long)J->s.h * J->s.w, M = HW * J->N;
    long lo, hi;
    cpu_range(C, tid, nt, &lo, &hi);
    for (long c = lo; c < hi; c++) {
        double mean, var;
        if (J->train) {
            double s1 = 0.0, s2 = 0.0;
            for (int n = 0; n < J->N; n++) {
                const float *xp = J->x + ((long)n * C + c) * HW;
                for (long p = 0; p < HW; p++)
                    s1 += xp[p];
            }
            mean = s1 / (double)M;
            for (int n = 0; n < J->N; n++) {
                const float *xp = J->x + ((long)n * C + c) * HW;
                for (long p = 0; p < HW; p++) {
                    double d = xp[p] - mean;
                    s2 += d * d;
                }
            }
            var = s2 / (double)M;
            J->save[c] = (float)mean;
            J->save[C + c] = (float)(1.0 / sqrt(var + J->eps));
            if (J->run_mean) {
                double unb = M > 1 ? var * (double)M / (double)(M - 1) : var;
                J->run_mean[c] = (1.0f - J->momentum) * J->run_mean[c] + J->momentum * (float)mean;
                J->run_var[c] = (1.0f - J->momentum) * J->run_var[c] + J->momentum * (float)unb;
            }
        } else {
            mean = J->run_mean[c];
            var = J->run_var[c];
        }
        float inv = (float)(1.0 / sqrt(var + J->eps));
        float g = J->gamma ? J->gamma[c] : 1.0f, b = J->beta ? J->beta[c] : 0.0f;
        float a = g * inv, off = b - (float)mean * a;
        for (int n = 0; n < J->N; n++) {
            const float *xp = J->x + ((long)n * C + c) * HW;
            float *yp = J->y + ((long)n * C + c) * HW;
            for (long p = 0; p < HW; p++)
                yp[p] = xp[p] * a + off;
        }
    }
}

void cpu_bn_forward(cpu_pool *P, int N, tf_shape s, int train, float eps, float momentum,
                    const float *x, const float *gamma, const float *beta, float *run_mean,
                    float *run_var, float *save, float *y)
{
    bn_job J = {.N = N,
                .s = s,
                .train = train,
                .eps = eps,
                .momentum = momentum,
                .x = x,
                .gamma = gamma,
                .beta = beta,
                .run_mean = run_mean,
                .run_var = run_var,
                .save = save,
                .y = y};
    cpu_pool_run(P, bn_fwd_thread, &J);
}

/* Channel c's backward sums over the batch, sum(dy) and sum(dy * x_hat) in double, added to
 * dgamma/dbeta when present. One loop order for the plain and the synchronized backward, so both
 * give the same bits. */
static void bn_grad_sums(const float *x, const float *dy, const float *save, int N, tf_shape sh,
                         long c, float *dgamma, float *dbeta, double *sdy_out, double *sdyx_out)
{
    const int C = sh.c;
    const long HW = (long)sh.h * sh.w;
    const float mean = save[c], inv = save[C + c];
    double sdy = 0.0, sdyx = 0.0;
    for (int n = 0; n < N; n++) {
        const float *xp = x + ((long)n * C + c) * HW;
        const float *dp = dy + ((long)n * C + c) * HW;
        for (long p = 0; p < HW; p++) {
            sdy += dp[p];
            sdyx += (double)dp[p] * ((xp[p] - mean) * inv);
        }
    }
    if (dgamma)
        dgamma[c] += (float)sdyx;
    if (dbeta)
        dbeta[c] += (float)sdy;
    *sdy_out = sdy;
    *sdyx_out = sdyx;
}

static void bn_bwd_thread(void *arg, int tid, int nt)
{
    const bn_job *J = arg;
    const int C = J->s.c;
    const long HW = (long)J->s.h * J->s.w, M = HW * J->N;
    long lo, hi;
    cpu_range(C, tid, nt, &lo, &hi);
    for (long c = lo; c < hi; c++) {
        const float mean = J->save[c], inv = J->save[C + c];
        double sdy, sdyx;
        bn_grad_sums(J->x, J->dy, J->save, J->N, J->s, c, J->dgamma, J->dbeta, &sdy, &sdyx);
        if (!J->dx)
            continue;
        float g = J->gamma ? J->gamma[c] : 1.0f;
        float k = g * inv / (float)M;
        float mdy = (float)sdy, mdyx = (float)sdyx;
        for (int n = 0; n < J->N; n++) {
            const float *xp = J->x + ((long)n * C + c) * HW;
            const float *dp = J->dy + ((long)n * C + c) * HW;
            float *dxp = J->dx + ((long)n * C + c) * HW;
            for (long p = 0; p < HW; p++) {
                float xh = (xp[p] - mean) * inv;
                dxp[p] += k * ((float)M * dp[p] - mdy - xh * mdyx);
            }
        }
    }
}

void cpu_bn_backward(cpu_pool *P, int N, tf_shape s, const float *x, const float *gamma,
                     const float *save, const float *dy, float *dx, float *dgamma, float *dbeta)
{
    bn_job J = {.N = N,
                .s = s,
                .x = x,
                .gamma = gamma,
                .save = (float *)save,
                .dy = dy,
                .dx = dx,
                .dgamma = dgamma,
                .dbeta = dbeta};
    cpu_pool_run(P, bn_bwd_thread, &J);
}

/* ---- synchronized batch norm: per-channel sums reduced over the ranks between passes --------- */
typedef struct bn_sync_job {
    int N, phase;
    tf_shape s;
    double Mg; /* samples x pixels over all ranks */
    float eps, momentum;
    const float *x, *gamma, *beta, *dy, *save;
    float *run_mean, *run_var, *save_out, *y, *dx, *dgamma, *dbeta;
    double *acc; /* [2C] */
} bn_sync_job;

static void bn_sync_thread(void *arg, int tid, int nt)
{
    const bn_sync_job *J = arg;
    const int C = J->s.c;
    const long HW = (long)J->s.h * J->s.w;
    long lo, hi;
    cpu_range(C, tid, nt, &lo, &hi);
    for (long c = lo; c < hi; c++) {
        if (J->phase == 0) { /* forward: local sum */
            double s1 = 0.0;
            for (int n = 0; n < J->N; n++) {
                const float *xp = J->x + ((long)n * C + c) * HW;
                for (long p = 0; p < HW; p++)
                    s1 += xp[p];
            }
            J->acc[c] = s1;
        } else if (J->phase == 1) { /* forward: local centred sum of squares (global mean) */
            const double mean = J->acc[c] / J->Mg;
            double s2 = 0.0;
            for (int n = 0; n < J->N; n++) {
                const float *xp = J->x + ((long)n * C + c) * HW;
                for (long p = 0; p < HW; p++) {
                    double d = xp[p] - mean;
                    s2 += d * d;
                }
            }
            J->acc[C + c] = s2;
        } else if (J->phase == 2) { /* forward: normalise with the global statistics */
            const double mean = J->acc[c] / J->Mg, var = J->acc[C + c] / J->Mg;
            J->save_out[c] = (float)mean;
            J->save_out[C + c] = (float)(1.0 / sqrt(var + J->eps));
            if (J->run_mean) {
                double unb = J->Mg > 1 ? var * J->Mg / (J->Mg - 1) : var;
                J->run_mean[c] = (1.0f - J->momentum) * J->run_mean[c] + J->momentum * (float)mean;
                J->run_var[c] = (1.0f - J->momentum) * J->run_var[c] + J->momentum * (float)unb;
            }
            float inv = (float)(1.0 / sqrt(var + J->eps));
            float g = J->gamma ? J->gamma[c] : 1.0f, b = J->beta ? J->beta[c] : 0.0f;
            float a = g * inv, off = b - (float)mean * a;
            for (int n = 0; n < J->N; n++) {
                const float *xp = J->x + ((long)n * C + c) * HW;
                float *yp = J->y + ((long)n * C + c) * HW;
                for (long p = 0; p < HW; p++)
                    yp[p] = xp[p] * a + off;
            }
        } else if (J->phase == 3) { /* backward: local sums; this rank's dgamma/dbeta */
            double sdy, sdyx;
            bn_grad_sums(J->x, J->dy, J->save, J->N, J->s, c, J->dgamma, J->dbeta, &sdy, &sdyx);
            J->acc[c] = sdy;
            J->acc[C + c] = sdyx;
        } else { /* backward: dx from the global sums */
            const float mean = J->save[c], inv = J->save[C + c];
            float g = J->gamma ? J->gamma[c] : 1.0f;
            float M = (float)J->Mg;
            float k = g * inv / M;
            float mdy = (float)J->acc[c], mdyx = (float)J->acc[C + c];
            for (int n = 0; n < J->N; n++) {
                const float *xp = J->x + ((long)n * C + c) * HW;
                const float *dp = J->dy + ((long)n * C + c) * HW;
                float *dxp = J->dx + ((long)n * C + c) * HW;
                for (long p = 0; p < HW; p++) {
                    float xh = (xp[p] - mean) * inv;
                    dxp[p] += k * (M * dp[p] - mdy - xh * mdyx);
                }
            }
        }
    }
}

int cpu_bn_forward_sync(cpu_pool *P, int N, tf_shape s, float eps, float momentum, const float *x,
                        const float *gamma, const float *beta, float *run_mean, float *run_var,
                        float *save, float *y, const cpu_bn_sync *sync)
{
    const int C = s.c;
    bn_sync_job J = {.N = N,
                     .s = s,
                     .Mg = (double)N * s.h * s.w * sync->world,
                     .eps = eps,
                     .momentum = momentum,
                     .x = x,
                     .gamma = gamma,
                     .beta = beta,
                     .run_mean = run_mean,
                     .run_var = run_var,
                     .save_out = save,
                     .y = y,
                     .acc = sync->scratch};
    J.phase = 0;
    cpu_pool_run(P, bn_sync_thread, &J);
    int rc = sync->reduce(sync->user, J.acc, C, sync->err);
    if (rc)
        return rc;
    J.phase = 1;
    cpu_pool_run(P, bn_sync_thread, &J);
    rc = sync->reduce(sync->user, J.acc + C, C, sync->err);
    if (rc)
        return rc;
    J.phase = 2;
    cpu_pool_run(P, bn_sync_thread, &J);
    return 0;
}

int cpu_bn_backward_sync(cpu_pool *P, int N, tf_shape s, const float *x, const float *gamma,
                         const float *save, const float *dy, float *dx, float *dgamma, float *dbeta,
                         const cpu_bn_sync *sync)
{
    bn_sync_job J = {.N = N,
                     .s = s,
                     .Mg = (double)N * s.h * s.w * sync->world,
                     .x = x,
                     .gamma = gamma,
                     .save = save,
                     .dy = dy,
                     .dx = dx,
                     .dgamma = dgamma,
                     .dbeta = dbeta,
                     .acc = sync->scratch};
    J.phase = 3;
    cpu_pool_run(P, bn_sync_thread, &J);
    int rc = sync->reduce(sync->user, J.acc, 2 * (int64_t)s.c, sync->err);
    if (rc)
        return rc;
    if (dx) {
        J.phase = 4;
        cpu_pool_run(P, bn_sync_thread, &J);
    }
    return 0;
}

/* ---- element-wise ---------------------------------------------------------------------------- */
void cpu_relu_forward(long n, const float *x, float *y)
{
    for (long i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void cpu_relu_backward(long n, const float *x, const float *dy, float *dx)
{
    for (long i = 0; i < n; i++)
        if (x[i] > 0.0f)
            dx[i] += dy[i];
}

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */

void cpu_gelu_forward(long n, const float *x, float *y)
{
    for (long i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(GELU_C * (v + 0.044715f * v * v * v)));
    }
}

void cpu_gelu_backward(long n, const float *x, const float *dy, float *dx)
{
    for (long i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_C * (v + 0.044715f * v * v * v);
        float t = tanhf(u);
        float du = GELU_C * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] += dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
}

void cpu_add_forward(long n, const float *a, const float *b, float *y)
{
    for (long i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void cpu_scale_forward(long n, float s, const float *x, float *y)
{
    for (long i = 0; i < n; i++)
        y[i] = x[i] * s;
}

/* ---- pools: samples split across threads -------------------------------------------------- */
typedef struct pool_job {
    int N;
    tf_shape in, out;
    int k, stride, pad;
    const float *x, *dy;
    float *y, *dx;
    int32_t *arg;
    const int32_t *carg;
} pool_job;

static void maxpool_fwd_thread(void *a, int tid, int nt)
{
    const pool_job *J = a;
    long lo, hi;
    cpu_range((long)J->N * J->in.c, tid, nt, &lo, &hi);
    const int H = J->in.h, W = J->in.w, Ho = J->out.h, Wo = J->out.w;
    for (long nc = lo; nc < hi; nc++) {
        const float *xp = J->x + nc * H * W;
        float *yp = J->y + nc * Ho * Wo;
        int32_t *ap = J->arg + nc * Ho * Wo;
        if (J->k == 2 && J->stride == 2 && J->pad == 0) {
            /* the common 2x2/2 pool: every window is inside the image; same tie rule (first max
             * in scan order wins) as the general loop */
            for (int oy = 0; oy < Ho; oy++)
                for (int ox = 0; ox < Wo; ox++) {
                    int i0 = 2 * oy * W + 2 * ox;
                    int bi = i0;
                    float best = xp[i0];
                    if (xp[i0 + 1] > best) {
                        best = xp[i0 + 1];
                        bi = i0 + 1;
                    }
                    if (xp[i0 + W] > best) {
                        best = xp[i0 + W];
                        bi = i0 + W;
                    }
                    if (xp[i0 + W + 1] > best) {
                        best = xp[i0 + W + 1];
                        bi = i0 + W + 1;
                    }
                    yp[oy * Wo + ox] = best;
                    ap[oy * Wo + ox] = bi;
                }
            continue;
        }
        for (int oy = 0; oy < Ho; oy++)
            for (int ox = 0; ox < Wo; ox++) {
                float best = -INFINITY;
                int32_t bi = -1;
                for (int ky = 0; ky < J->k; ky++) {
                    int iy = oy * J->stride - J->pad + ky;
                    if (iy < 0 || iy >= H)
                        continue;
                    for (int kx = 0; kx < J->k; kx++) {
                        int ix = ox * J->stride - J->pad + kx;
                        if (ix < 0 || ix >= W)
                            continue;
                        float v = xp[iy * W + ix];
                        if (bi < 0 || v > best) {
                            best = v;
                            bi = iy * W + ix;
                        }
                    }
                }
                yp[oy * Wo + ox] = best;
                ap[oy * Wo + ox] = bi;
            }
    }
}

void cpu_maxpool_forward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                         const float *x, float *y, int32_t *arg)
{
    pool_job J = {.N = N,
                  .in = in,
                  .out = out,
                  .k = k,
                  .stride = stride,
                  .pad = pad,
                  .x = x,
                  .y = y,
                  .arg = arg};
    cpu_pool_run(P, maxpool_fwd_thread, &J);
}

static void maxpool_bwd_thread(void *a, int tid, int nt)
{
    const pool_job *J = a;
    long lo, hi;
    cpu_range((long)J->N * J->in.c, tid, nt, &lo, &hi);
    const long isz = (long)J->in.h * J->in.w, osz = (long)J->out.h * J->out.w;
    for (long nc = lo; nc < hi; nc++)
        for (long o = 0; o < osz; o++) {
            int32_t i = J->carg[nc * osz + o];
            if (i >= 0)
                J->dx[nc * isz + i] += J->dy[nc * osz + o];
        }
}

void cpu_maxpool_backward(cpu_pool *P, int N, tf_shape in, tf_shape out, const int32_t *arg,
                          const float *dy, float *dx)
{
    pool_job J = {.N = N, .in = in, .out = out, .carg = arg, .dy = dy, .dx = dx};
    cpu_pool_run(P, maxpool_bwd_thread, &J);
}

static void avgpool_thread(void *a, int tid, int nt, int backward)
{
    const pool_job *J = a;
    long lo, hi;
    cpu_range((long)J->N * J->in.c, tid, nt, &lo, &hi);
    const int H = J->in.h, W = J->in.w, Ho = J->out.h, Wo = J->out.w;
    const float inv = 1.0f / (float)(J->k * J->k);
    for (long nc = lo; nc < hi; nc++)
        for (int oy = 0; oy < Ho; oy++)
            for (int ox = 0; ox < Wo; ox++) {
                float acc = 0.0f;
                float g = backward ? J->dy[(nc * Ho + oy) * Wo + ox] * inv : 0.0f;
                for (int ky = 0; ky < J->k; ky++) {
                    int iy = oy * J->stride - J->pad + ky;
                    if (iy < 0 || iy >= H)
                        continue;
                    for (int kx = 0; kx < J->k; kx++) {
                        int ix = ox * J->stride - J->pad + kx;
                        if (ix < 0 || ix >= W)
                            continue;
                        if (backward)
                            J->dx[(nc * H + iy) * W + ix] += g;
                        else
                            acc += J->x[(nc * H + iy) * W + ix];
                    }
                }
                if (!backward)
                    J->y[(nc * Ho + oy) * Wo + ox] = acc * inv;
            }
}

static void avgpool_fwd_thread(void *a, int tid, int nt) { avgpool_thread(a, tid, nt, 0); }
static void avgpool_bwd_thread(void *a, int tid, int nt) { avgpool_thread(a, tid, nt, 1); }

void cpu_avgpool_forward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                         const float *x, float *y)
{
    pool_job J = {
        .N = N, .in = in, .out = out, .k = k, .stride = stride, .pad = pad, .x = x, .y = y};
    cpu_pool_run(P, avgpool_fwd_thread, &J);
}

void cpu_avgpool_backward(cpu_pool *P, int N, tf_shape in, tf_shape out, int k, int stride, int pad,
                          const float *dy, float *dx)
{
    pool_job J = {
        .N = N, .in = in, .out = out, .k = k, .stride = stride, .pad = pad, .dy = dy, .dx = dx};
    cpu_pool_run(P, avgpool_bwd_thread, &J);
}

void cpu_gap_forward(int N, tf_shape in, const float *x, float *y)
{
    const long HW = (long)in.h * in.w;
    for (long nc = 0; nc < (long)N * in.c; nc++) {
        double acc = 0.0;
        for (long p = 0; p < HW; p++)
            acc += x[nc * HW + p];
        y[nc] = (float)(acc / (double)HW);
    }
}

void cpu_gap_backward(int N, tf_shape in, const float *dy, float *dx)
{
    const long HW = (long)in.h * in.w;
    for (long nc = 0; nc < (long)N * in.c; nc++) {
        float g = dy[nc] / (float)HW;
        for (long p = 0; p < HW; p++)
            dx[nc * HW + p] += g;
    }
}

/* ---- loss ------------------------------------------------------------------------------------ */
double cpu_softmax_xent(int N, int K, const float *logits, const int32_t *labels, float eps,
                        float grad_scale, float *dlogits, uint32_t *correct1, uint32_t *correct5)
{
    double total = 0.0;
    uint32_t c1 = 0, c5 = 0;
    for (int i = 0; i < N; i++) {
        const float *z = logits + (long)i * K;
        int y = labels[i];
        float mx = z[0];
        for (int k = 1; k < K; k++)
            mx = z[k] > mx ? z[k] : mx;
        double se = 0.0, sz = 0.0;
        for (int k = 0; k < K; k++) {
            se += exp((double)(z[k] - mx));
            sz += z[k];
        }
        double lse = log(se) + mx;
        /* -sum t_k (z_k - lse) with t = (1-eps) onehot + eps/K */
        double loss = (1.0 - eps) * (lse - z[y]) + eps * (lse - sz / K);
        total += loss;
        int rank = 0;
        for (int k = 0; k < K; k++)
            if (z[k] > z[y] || (z[k] == z[y] && k < y))
                rank++;
        c1 += rank < 1;
        c5 += rank < 5;
        if (dlogits) {
            float *d = dlogits + (long)i * K;
            for (int k = 0; k < K; k++) {
                double p = exp((double)(z[k] - lse));
                double t = eps / K + (k == y ? 1.0 - eps : 0.0);
                d[k] = (float)(grad_scale * (p - t));
            }
        }
    }
    if (correct1)
        *correct1 = c1;
    if (correct5)
        *correct5 = c5;
    return total;
}

/* ---- input stage ------------------------------------------------------------------------------
 */
typedef struct input_job {
    cpu_input_params p;
    const uint8_t *img;
    float lut[4][256];
    float *x;
} input_job;

/* Source coordinate along an axis of n for output coordinate o, crop offset d in [0, 2 pad]:
 * -1 for a zero-padded position; reflect mirrors without repeating the edge (numpy 'reflect'). */
static inline int input_src(int o, int d, int pad, int n, int reflect)
{
    int s = o + d - pad;
    if (s < 0)
        return reflect ? -s : -1;
    if (s >= n)
        return reflect ? 2 * (n - 1) - s : -1;
    return s;
}

static void input_thread(void *a, int tid, int nt)
{
    const input_job *J = a;
    const cpu_input_params *p = &J->p;
    long lo, hi;
    cpu_range(p->N, tid, nt, &lo, &hi);
    const int H = p->H, W = p->W, C = p->C, Co = p->c_out > C ? p->c_out : C;
    for (long n = lo; n < hi; n++) {
        int dy = p->pad, dx = p->pad, fl = 0;
        uint64_t idx = p->indices ? p->indices[n] : (uint64_t)n;
        if (p->pad > 0 || p->flip)
            fl_aug_crop_flip(p->seed, p->epoch, idx, p->pad, p->flip, &dy, &dx, &fl);
        fl ^= p->hflip_all;
        const uint8_t *src = J->img + (long)n * H * W * C;
        float *out = J->x + (long)n * Co * H * W;
        /* element (c, y, x) of this sample's output */
        const long cs = p->nhwc ? 1 : (long)H * W, ys = p->nhwc ? (long)W * Co : W,
                   xs = p->nhwc ? Co : 1;
        for (int c = 0; c < Co; c++)
            for (int y = 0; y < H; y++) {
                float *row = out + c * cs + y * ys;
                if (c >= C) { /* c_out padding */
                    for (int x = 0; x < W; x++)
                        row[x * xs] = 0.0f;
                    continue;
                }
                const float *lut = J->lut[c];
                int sy = input_src(y, dy, p->pad, H, p->reflect);
                const uint8_t *srow = sy >= 0 ? src + (long)sy * W * C + c : NULL;
                for (int x = 0; x < W; x++) {
                    int sx = input_src(fl ? W - 1 - x : x, dx, p->pad, W, p->reflect);
                    /* zero padding is a uint8 0 pixel, normalised like any other */
                    row[x * xs] = srow && sx >= 0 ? lut[srow[(long)sx * C]] : lut[0];
                }
            }
    }
}

void cpu_input_run(cpu_pool *P, const cpu_input_params *p, const uint8_t *img, float *x)
{
    input_job L = {.p = *p, .img = img, .x = x};
    for (int c = 0; c < p->C && c < 4; c++)
        for (int v = 0; v < 256; v++)
            L.lut[c][v] = ((float)v / 255.0f - p->mean[c]) / p->std[c];
    cpu_pool_run(P, input_thread, &L);
}

void cpu_input_u8(cpu_pool *P, int N, int H, int W, int C, const uint8_t *img, const float *mean,
                  const float *std, int pad, int flip, uint64_t seed, uint64_t epoch,
                  const uint64_t *indices, int hflip_all, float *x)
{
    cpu_input_params p = {.N = N,
                          .H = H,
                          .W = W,
                          .C = C,
                          .mean = mean,
                          .std = std,
                          .pad = pad,
                          .flip = flip,
                          .hflip_all = hflip_all,
                          .seed = seed,
                          .epoch = epoch,
                          .indices = indices};
    cpu_input_run(P, &p, img, x);
}

/* ---- optimizer ------------------------------------------------------------------------------- */
void cpu_sgd_step(long n, float *w, const float *grad, float *v, float lr, float momentum, float wd,
                  int nesterov)
{
    for (long j = 0; j < n; j++) {
        float g = grad[j] + wd * w[j];
        v[j] = momentum * v[j] + g;
        w[j] -= lr * (nesterov ? g + momentum * v[j] : v[j]);
    }
}

void cpu_ema_update(long n, float *ema, const float *w, float decay)
{
    for (long j = 0; j < n; j++)
        ema[j] = decay * ema[j] + (1.0f - decay) * w[j];
}
