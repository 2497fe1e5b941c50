/* test_layer_grads.c — every CPU layer's backward against central finite differences of
 * L = sum(r * forward(x)) for a fixed random r, computed in double. The tolerance is scaled for
 * fp32 forward passes: |analytic - numeric| <= TOL * max(0.5, |analytic|, |numeric|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_layers.h"
#include "fl_check.h"

static uint64_t g_rng = 12345;
static float frand(void) /* uniform in [-1, 1) */
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) * 2.0f - 1.0f;
}

static void fill(float *p, long n, float scale)
{
    for (long i = 0; i < n; i++)
        p[i] = frand() * scale;
}

/* A layer under test: forward writes y from the current inputs. */
typedef struct lt {
    const char *name;
    void (*fwd)(struct lt *t, float *y);
    long ny;
    int N;
    tf_shape in, out;
    int k, stride, pad;
    float *x, *x2, *w, *b, *gamma, *beta, *save;
    int32_t *arg;
    int32_t *labels;
    float eps;
    cpu_pool *P;
} lt;

static double objective(lt *t, const float *r, float *y)
{
    t->fwd(t, y);
    double s = 0.0;
    for (long i = 0; i < t->ny; i++)
        s += (double)r[i] * y[i];
    return s;
}

/* compare analytic gradient ga of array v (n elements) with finite differences */
static void check(lt *t, const char *what, float *v, long n, const float *ga, const float *r,
                  float h)
{
    float *y = malloc(sizeof(float) * (size_t)t->ny);
    double worst = 0.0;
    long worst_i = -1;
    for (long i = 0; i < n; i++) {
        float keep = v[i];
        v[i] = keep + h;
        double lp = objective(t, r, y);
        v[i] = keep - h;
        double lm = objective(t, r, y);
        v[i] = keep;
        double num = (lp - lm) / (2.0 * h);
        double err = fabs(num - ga[i]) / fmax(0.5, fmax(fabs(num), fabs(ga[i])));
        if (err > worst) {
            worst = err;
            worst_i = i;
        }
    }
    /* fp32 forward, h ~ 1e-2: rounding error ~ eps32 * |L| / h plus O(h^2) curvature */
    const double TOL = 5e-3;
    if (worst > TOL) {
        EXPECTF(0, "%s d%s: worst relative error %.3g at %ld (tol %.1g)", t->name, what, worst,
                worst_i, TOL);
    } else {
        printf("ok   %-28s d%-6s %ld elems, worst rel err %.2g\n", t->name, what, n, worst);
    }
    free(y);
}

/* ---- forward adaptors ---- */
static void f_conv(lt *t, float *y)
{
    cpu_conv_forward(t->P, t->N, t->in, t->out, t->k, t->stride, t->pad, t->x, t->w, t->b, y);
}
static void f_linear(lt *t, float *y)
{
    cpu_linear_forward(t->P, t->N, t->in.c, t->out.c, t->x, t->w, t->b, y);
}
static void f_bn(lt *t, float *y)
{
    cpu_bn_forward(t->P, t->N, t->in, 1, t->eps, 0.1f, t->x, t->gamma, t->beta, NULL, NULL, t->save,
                   y);
}
static void f_relu(lt *t, float *y) { cpu_relu_forward(t->ny, t->x, y); }
static void f_gelu(lt *t, float *y) { cpu_gelu_forward(t->ny, t->x, y); }
static void f_maxpool(lt *t, float *y)
{
    cpu_maxpool_forward(t->P, t->N, t->in, t->out, t->k, t->stride, t->pad, t->x, y, t->arg);
}
static void f_avgpool(lt *t, float *y)
{
    cpu_avgpool_forward(t->P, t->N, t->in, t->out, t->k, t->stride, t->pad, t->x, y);
}
static void f_gap(lt *t, float *y) { cpu_gap_forward(t->N, t->in, t->x, y); }
static void f_add(lt *t, float *y) { cpu_add_forward(t->ny, t->x, t->x2, y); }
static void f_xent(lt *t, float *y)
{
    /* y[0] = summed loss; r is 1 */
    y[0] = (float)cpu_softmax_xent(t->N, t->in.c, t->x, t->labels, t->eps, 0.0f, NULL, NULL, NULL);
}

static long sz(tf_shape s, int N) { return (long)N * s.c * s.h * s.w; }

static void test_conv(cpu_pool *P, int N, int C, int H, int W, int Co, int k, int st, int pad,
                      int bias, const char *name)
{
    lt t = {.name = name,
            .fwd = f_conv,
            .N = N,
            .in = {C, H, W},
            .k = k,
            .stride = st,
            .pad = pad,
            .P = P};
    t.out = (tf_shape){Co, (H + 2 * pad - k) / st + 1, (W + 2 * pad - k) / st + 1};
    t.ny = sz(t.out, N);
    long nx = sz(t.in, N), nw = (long)Co * C * k * k;
    t.x = malloc(4 * nx);
    t.w = malloc(4 * nw);
    t.b = bias ? malloc(4 * Co) : NULL;
    float *r = malloc(4 * t.ny), *dx = calloc(nx, 4), *dw = calloc(nw, 4), *db = calloc(Co, 4);
    fill(t.x, nx, 1);
    fill(t.w, nw, 0.5f);
    if (bias)
        fill(t.b, Co, 0.5f);
    fill(r, t.ny, 1);
    cpu_conv_backward(P, N, t.in, t.out, k, st, pad, t.x, t.w, r, dx, dw, bias ? db : NULL);
    check(&t, "x", t.x, nx, dx, r, 1e-2f);
    check(&t, "w", t.w, nw, dw, r, 1e-2f);
    if (bias)
        check(&t, "b", t.b, Co, db, r, 1e-2f);
    free(t.x);
    free(t.w);
    free(t.b);
    free(r);
    free(dx);
    free(dw);
    free(db);
}

/* the column-cached convolution must give the same bits as the plain one (big enough for
 * several chunks per thread, 1x1 included) */
static void test_conv_cache(cpu_pool *P, int N, int C, int H, int Co, int k, int st, int pad)
{
    tf_shape in = {C, H, H}, out = {Co, (H + 2 * pad - k) / st + 1, (H + 2 * pad - k) / st + 1};
    long nx = (long)N * C * H * H, ny = (long)N * Co * out.h * out.w, nw = (long)Co * C * k * k;
    float *x = malloc(4 * nx), *w = malloc(4 * nw), *b = malloc(4 * Co), *dy = malloc(4 * ny);
    float *y1 = malloc(4 * ny), *y2 = malloc(4 * ny), *dx1 = calloc(nx, 4), *dx2 = calloc(nx, 4);
    float *dw1 = calloc(nw, 4), *dw2 = calloc(nw, 4), *db1 = calloc(Co, 4), *db2 = calloc(Co, 4);
    float *cache = malloc(4 * (size_t)N * C * k * k * out.h * out.w);
    fill(x, nx, 1);
    fill(w, nw, 0.3f);
    fill(b, Co, 0.3f);
    fill(dy, ny, 1);
    cpu_conv_forward(P, N, in, out, k, st, pad, x, w, b, y1);
    cpu_conv_forward_cached(P, N, in, out, k, st, pad, x, w, b, y2, cache);
    cpu_conv_backward(P, N, in, out, k, st, pad, x, w, dy, dx1, dw1, db1);
    cpu_conv_backward_cached(P, N, in, out, k, st, pad, x, w, dy, dx2, dw2, db2, cache);
    int same = !memcmp(y1, y2, 4 * ny) && !memcmp(dx1, dx2, 4 * nx) && !memcmp(dw1, dw2, 4 * nw) &&
               !memcmp(db1, db2, 4 * Co);
    if (!same) {
        EXPECTF(0, "cached conv %dx%d k%d s%d differs from the plain one", H, H, k, st);
    } else {
        printf("ok   cached conv N=%d %dx%dx%d k%d s%d p%d: bit-identical to the plain one\n", N, C,
               H, H, k, st, pad);
    }
    free(x);
    free(w);
    free(b);
    free(dy);
    free(y1);
    free(y2);
    free(dx1);
    free(dx2);
    free(dw1);
    free(dw2);
    free(db1);
    free(db2);
    free(cache);
}

int main(void)
{
    cpu_pool *P1 = cpu_pool_create(1), *P2 = cpu_pool_create(2);
    test_conv_cache(P2, 37, 16, 28, 24, 3, 1, 1);
    test_conv_cache(P2, 9, 8, 9, 6, 1, 1, 0);
    test_conv_cache(P1, 5, 4, 11, 5, 3, 2, 1);
    test_conv(P1, 2, 3, 5, 6, 4, 3, 1, 1, 1, "conv3x3 s1 p1 bias");
    test_conv(P2, 3, 2, 7, 7, 3, 3, 2, 1, 0, "conv3x3 s2 p1 (2 threads)");
    test_conv(P2, 2, 3, 6, 5, 2, 1, 2, 0, 0, "conv1x1 s2");
    test_conv(P1, 1, 4, 4, 4, 5, 1, 1, 0, 1, "conv1x1 s1 (direct GEMM)");
    test_conv(P1, 2, 1, 9, 9, 2, 7, 2, 3, 0, "conv7x7 s2 p3");

    { /* linear */
        int N = 3, ci = 7, co = 4;
        lt t = {.name = "linear",
                .fwd = f_linear,
                .N = N,
                .in = {ci, 1, 1},
                .out = {co, 1, 1},
                .P = P2,
                .ny = N * co};
        t.x = malloc(4 * N * ci);
        t.w = malloc(4 * ci * co);
        t.b = malloc(4 * co);
        float *r = malloc(4 * N * co), *dx = calloc(N * ci, 4), *dw = calloc(ci * co, 4),
              *db = calloc(co, 4);
        fill(t.x, N * ci, 1);
        fill(t.w, ci * co, 0.5f);
        fill(t.b, co, 0.5f);
        fill(r, N * co, 1);
        cpu_linear_backward(P2, N, ci, co, t.x, t.w, r, dx, dw, db);
        check(&t, "x", t.x, N * ci, dx, r, 1e-2f);
        check(&t, "w", t.w, ci * co, dw, r, 1e-2f);
        check(&t, "b", t.b, co, db, r, 1e-2f);
        free(t.x);
        free(t.w);
        free(t.b);
        free(r);
        free(dx);
        free(dw);
        free(db);
    }
    { /* batch norm, train mode */
        int N = 4;
        tf_shape s = {3, 3, 2};
        lt t = {.name = "batchnorm (train)",
                .fwd = f_bn,
                .N = N,
                .in = s,
                .out = s,
                .P = P2,
                .eps = 1e-5f};
        long n = sz(s, N);
        t.ny = n;
        t.x = malloc(4 * n);
        t.gamma = malloc(12);
        t.beta = malloc(12);
        t.save = malloc(24);
        float *r = malloc(4 * n), *dx = calloc(n, 4), *dg = calloc(3, 4), *dbt = calloc(3, 4);
        fill(t.x, n, 2);
        fill(t.gamma, 3, 1);
        fill(t.beta, 3, 1);
        fill(r, n, 1);
        f_bn(&t, dx); /* fills save; dx is reset below */
        memset(dx, 0, 4 * n);
        cpu_bn_backward(P2, N, s, t.x, t.gamma, t.save, r, dx, dg, dbt);
        check(&t, "x", t.x, n, dx, r, 1e-2f);
        check(&t, "gamma", t.gamma, 3, dg, r, 1e-2f);
        check(&t, "beta", t.beta, 3, dbt, r, 1e-2f);
        free(t.x);
        free(t.gamma);
        free(t.beta);
        free(t.save);
        free(r);
        free(dx);
        free(dg);
        free(dbt);
    }
    { /* relu, gelu: inputs kept away from relu's kink */
        long n = 40;
        lt t = {.N = 1, .ny = n};
        t.x = malloc(4 * n);
        float *r = malloc(4 * n), *dx = calloc(n, 4);
        fill(t.x, n, 2);
        for (long i = 0; i < n; i++)
            if (fabsf(t.x[i]) < 0.05f)
                t.x[i] = 0.3f;
        fill(r, n, 1);
        t.name = "relu";
        t.fwd = f_relu;
        cpu_relu_backward(n, t.x, r, dx);
        check(&t, "x", t.x, n, dx, r, 1e-2f);
        memset(dx, 0, 4 * n);
        t.name = "gelu";
        t.fwd = f_gelu;
        cpu_gelu_backward(n, t.x, r, dx);
        check(&t, "x", t.x, n, dx, r, 1e-2f);
        free(t.x);
        free(r);
        free(dx);
    }
    { /* pools and GAP; maxpool inputs are distinct so the argmax is stable under +-h */
        int N = 2;
        tf_shape in = {3, 6, 5};
        long n = sz(in, N);
        lt t = {.N = N, .in = in, .P = P2};
        t.x = malloc(4 * n);
        for (long i = 0; i < n; i++)
            t.x[i] = (float)((i * 37) % n) * 0.05f - 2.0f;
        float *r = malloc(4 * n), *dx = calloc(n, 4);
        t.arg = malloc(4 * n);
        fill(r, n, 1);
        static const struct {
            const char *name;
            int k, pad;
            tf_shape out;
        } mp[2] = {{"maxpool 3x3 s2 p1", 3, 1, {3, 3, 3}}, {"maxpool 2x2 s2", 2, 0, {3, 3, 2}}};
        t.fwd = f_maxpool;
        t.stride = 2;
        for (int c = 0; c < 2; c++) {
            t.name = mp[c].name;
            t.k = mp[c].k;
            t.pad = mp[c].pad;
            t.out = mp[c].out;
            t.ny = sz(t.out, N);
            f_maxpool(&t, dx); /* fills t.arg, the argmax the backward reads */
            memset(dx, 0, 4 * n);
            cpu_maxpool_backward(P2, N, in, t.out, t.arg, r, dx);
            check(&t, "x", t.x, n, dx, r, 1e-2f);
            memset(dx, 0, 4 * n);
        }
        t.name = "avgpool 3x3 s2 p1";
        t.fwd = f_avgpool;
        t.k = 3;
        t.pad = 1;
        t.out = (tf_shape){3, 3, 3};
        t.ny = sz(t.out, N);
        cpu_avgpool_backward(P2, N, in, t.out, 3, 2, 1, r, dx);
        check(&t, "x", t.x, n, dx, r, 1e-2f);
        memset(dx, 0, 4 * n);
        t.name = "global avg pool";
        t.fwd = f_gap;
        t.out = (tf_shape){3, 1, 1};
        t.ny = sz(t.out, N);
        cpu_gap_backward(N, in, r, dx);
        check(&t, "x", t.x, n, dx, r, 1e-2f);
        /* residual add: gradient flows to both inputs */
        memset(dx, 0, 4 * n);
        t.name = "residual add";
        t.fwd = f_add;
        t.ny = n;
        t.x2 = malloc(4 * n);
        fill(t.x2, n, 1);
        float *dx2 = calloc(n, 4);
        for (long i = 0; i < n; i++) {
            dx[i] += r[i];
            dx2[i] += r[i];
        }
        check(&t, "a", t.x, n, dx, r, 1e-2f);
        check(&t, "b", t.x2, n, dx2, r, 1e-2f);
        free(t.x);
        free(t.x2);
        free(dx2);
        free(r);
        free(dx);
        free(t.arg);
    }
    { /* softmax cross-entropy with label smoothing */
        int N = 5, K = 7;
        int32_t labels[5] = {0, 3, 6, 2, 3};
        lt t = {.name = "softmax CE, smoothing 0.1",
                .fwd = f_xent,
                .N = N,
                .in = {K, 1, 1},
                .ny = 1,
                .labels = labels,
                .eps = 0.1f};
        t.x = malloc(4 * N * K);
        fill(t.x, N * K, 3);
        float r = 1.0f, *dz = malloc(4 * N * K);
        cpu_softmax_xent(N, K, t.x, labels, 0.1f, 1.0f, dz, NULL, NULL);
        check(&t, "logits", t.x, N * K, dz, &r, 1e-2f);
        /* exact value: uniform logits give log K whatever the smoothing */
        memset(t.x, 0, 4 * N * K);
        double l = cpu_softmax_xent(N, K, t.x, labels, 0.1f, 0.0f, NULL, NULL, NULL);
        if (fabs(l / N - log(K)) > 1e-6) {
            EXPECTF(0, "uniform logits loss %.9f != log K %.9f", l / N, log(K));
        }
        /* top-k counting */
        float z[2 * 7] = {0, 5, 1, 2, 3, 4, 6,  /* label 0 ranks last -> not in top 5 */
                          9, 1, 2, 3, 4, 5, 6}; /* label 0 ranks first */
        int32_t lab[2] = {0, 0};
        uint32_t c1, c5;
        cpu_softmax_xent(2, 7, z, lab, 0.0f, 0.0f, NULL, &c1, &c5);
        if (c1 != 1 || c5 != 1) {
            EXPECTF(0, "top-k counts %u %u (want 1 1)", c1, c5);
        }
        free(t.x);
        free(dz);
    }
    cpu_pool_free(P1);
    cpu_pool_free(P2);
    printf(fl_check_failures ? "FAILED\n" : "all layer gradients match finite differences\n");
    return fl_check_status();
}
