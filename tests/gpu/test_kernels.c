/* test_kernels.c — every CUDA kernel of kernels/ against its CPU reference, the CPU backend's layer
 * (trainer/cpu/cpu_layers.h, NCHW, through the host adapters below for the NHWC kernels), in fp32,
 * fp16 and bf16 with a tolerance scaled by the precision's unit roundoff. Without a GPU only the
 * host-side checks run (fp16/bf16 conversions, loss-scale logic), then the test exits 77 with a
 * "no GPU" line. The augmentation draw needs no check here: the kernel and the CPU backend call
 * the same fl_aug_crop_flip (common/fl_aug_rng.h; pinned by tests/loader/test_loader_order). */
#include "gpu_test.h"

#include "backend.h"
#include "cpu_layers.h"

static const flk_dtype DTS[3] = {FLK_F32, FLK_F16, FLK_BF16};

/* ---- host-only checks --------------------------------------------------------------------------
 */

static void check_host(void)
{
    /* conversions: exact values, rounding to nearest even, overflow, subnormals */
    EXPECTF(cpu_f16_to_f32(cpu_f32_to_f16(1.0f)) == 1.0f, "fp16 1.0");
    EXPECTF(cpu_f32_to_f16(65504.0f) == 0x7BFF, "fp16 max");
    EXPECTF(cpu_f32_to_f16(1e6f) == 0x7C00, "fp16 overflow to inf");
    EXPECTF(cpu_f16_to_f32(cpu_f32_to_f16(ldexpf(1.0f, -24))) == ldexpf(1.0f, -24),
            "fp16 min subnormal");
    EXPECTF(cpu_f32_to_f16(1.0f + ldexpf(1.0f, -11)) == 0x3C00, "fp16 tie to even (down)");
    EXPECTF(cpu_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3C02, "fp16 tie to even (up)");
    EXPECTF(cpu_f32_to_bf16(1.0f + ldexpf(1.0f, -8)) == 0x3F80, "bf16 tie to even (down)");
    EXPECTF(cpu_bf16_to_f32(cpu_f32_to_bf16(3.0f)) == 3.0f, "bf16 3.0");
    /* dynamic loss scale: halve on overflow, double after the window, clamp */
    float s = 65536.0f;
    int good = 0;
    EXPECTF(flk_loss_scale_update(&s, &good, 1, 3) == 1 && s == 32768.0f && good == 0, "halve");
    flk_loss_scale_update(&s, &good, 0, 3);
    flk_loss_scale_update(&s, &good, 0, 3);
    EXPECTF(s == 32768.0f && good == 2, "no growth before the window");
    flk_loss_scale_update(&s, &good, 0, 3);
    EXPECTF(s == 65536.0f && good == 0, "growth after the window");
    s = 1.0f;
    flk_loss_scale_update(&s, &good, 1, 3);
    EXPECTF(s == 1.0f, "scale never below 1");
}

/* ---- the CPU reference of each kernel: the CPU backend's layer, in the kernel's layout
 * ------------ */

/* flk_input_u8: its mean/stddev are on the 0..255 scale (stddev 0 means 1), flip 2 mirrors all */
static void ref_input(const uint8_t *img, float *dst, const flk_input_params *p,
                      const uint64_t *idx)
{
    float mean[4], sd[4];
    for (int c = 0; c < p->c; c++) {
        mean[c] = p->mean[c] / 255.0f;
        sd[c] = (p->stddev[c] != 0.0f ? p->stddev[c] : 1.0f) / 255.0f;
    }
    cpu_input_params q = {.N = p->n,
                          .H = p->h,
                          .W = p->w,
                          .C = p->c,
                          .mean = mean,
                          .std = sd,
                          .pad = p->pad,
                          .flip = p->flip == 1,
                          .hflip_all = p->flip == 2,
                          .seed = p->seed,
                          .epoch = p->epoch,
                          .indices = idx,
                          .reflect = p->pad_mode == FLK_PAD_REFLECT,
                          .nhwc = !p->nchw,
                          .c_out = p->c_out};
    cpu_input_run(NULL, &q, img, dst);
}

static void ref_act_forward(flk_act act, const float *x, float *y, size_t n)
{
    if (act == FLK_ACT_RELU)
        cpu_relu_forward((long)n, x, y);
    else if (act == FLK_ACT_GELU)
        cpu_gelu_forward((long)n, x, y);
    else
        memcpy(y, x, n * sizeof(float));
}

static void ref_act_backward(flk_act act, const float *x, const float *dy, float *dx, size_t n)
{
    memset(dx, 0, n * sizeof(float)); /* the CPU backward adds */
    if (act == FLK_ACT_RELU)
        cpu_relu_backward((long)n, x, dy, dx);
    else if (act == FLK_ACT_GELU)
        cpu_gelu_backward((long)n, x, dy, dx);
    else
        memcpy(dx, dy, n * sizeof(float));
}

/* flk_bias_backward sums dy [rows][cols] over the rows: the CPU backend's bias gradient is the one
 * its linear layer computes (x and w zero: only db matters) */
static void ref_bias_backward(const float *dy, float *dbias, int rows, int cols)
{
    float *zx = calloc((size_t)rows, sizeof(float)), *zw = calloc((size_t)cols, sizeof(float)),
          *dw = calloc((size_t)cols, sizeof(float));
    memset(dbias, 0, (size_t)cols * sizeof(float));
    cpu_linear_backward(NULL, rows, 1, cols, zx, zw, dy, NULL, dw, dbias);
    free(zx);
    free(zw);
    free(dw);
}

/* NHWC batch norm over [rows][c] = NCHW with N = rows, H = W = 1; the fused ReLU applied after.
 * save: mean in [0, c), 1/sqrt(var + eps) in [c, 2c). */
static void ref_bn_forward_train(const float *x, float *y, int rows, int c, const float *gamma,
                                 const float *beta, float *rm, float *rv, float momentum, float eps,
                                 float *save, flk_act act)
{
    tf_shape s = {c, 1, 1};
    cpu_bn_forward(NULL, rows, s, 1, eps, momentum, x, gamma, beta, rm, rv, save, y);
    if (act == FLK_ACT_RELU)
        cpu_relu_forward((long)rows * c, y, y);
    EXPECTF(act == FLK_ACT_NONE || act == FLK_ACT_RELU,
            "ref_bn_forward_train: fused %d not referenced", (int)act);
}

/* y: the forward output (with a fused ReLU, its zeros mask dy) */
static void ref_bn_backward(const float *x, const float *y, const float *dy, float *dx, int rows,
                            int c, const float *gamma, const float *save, float *dgamma,
                            float *dbeta, flk_act act)
{
    size_t n = (size_t)rows * c;
    tf_shape s = {c, 1, 1};
    float *g = calloc(n, sizeof(float));
    if (act == FLK_ACT_RELU)
        cpu_relu_backward((long)n, y, dy, g);
    else
        memcpy(g, dy, n * sizeof(float));
    memset(dx, 0, n * sizeof(float));
    memset(dgamma, 0, (size_t)c * sizeof(float));
    memset(dbeta, 0, (size_t)c * sizeof(float));
    cpu_bn_backward(NULL, rows, s, x, gamma, save, g, dx, dgamma, dbeta);
    free(g);
}

/* NHWC pools through NCHW; the max pool's backward reruns its forward for the argmax */
static void ref_pool(const flk_pool_params *p, const float *x, const float *dy, float *y, float *dx)
{
    int oh, ow;
    flk_pool_out_dims(p, &oh, &ow);
    tf_shape si = {p->c, p->h, p->w}, so = {p->c, oh, ow};
    size_t ni = (size_t)p->n * p->c * p->h * p->w, no = (size_t)p->n * p->c * oh * ow;
    float *xc = gt_to_nchw(x, p->n, p->c, p->h, p->w), *yc = malloc(no * 4 + 4),
          *dxc = calloc(ni + 1, 4);
    int32_t *arg = malloc(no * 4 + 4);
    if (p->kind == FLK_POOL_MAX)
        cpu_maxpool_forward(NULL, p->n, si, so, p->k, p->stride, p->pad, xc, yc, arg);
    else
        cpu_avgpool_forward(NULL, p->n, si, so, p->k, p->stride, p->pad, xc, yc);
    if (y)
        gt_transpose_chw(yc, y, p->n, p->c, oh, ow, 0);
    if (dx) {
        float *dyc = gt_to_nchw(dy, p->n, p->c, oh, ow);
        if (p->kind == FLK_POOL_MAX)
            cpu_maxpool_backward(NULL, p->n, si, so, arg, dyc, dxc);
        else
            cpu_avgpool_backward(NULL, p->n, si, so, p->k, p->stride, p->pad, dyc, dxc);
        gt_transpose_chw(dxc, dx, p->n, p->c, p->h, p->w, 0);
        free(dyc);
    }
    free(xc);
    free(yc);
    free(dxc);
    free(arg);
}

/* global average pool of NHWC [n][hw][c] = NCHW (c, hw, 1) after a transpose; y is [n][c] in both
 */
static void ref_gap_forward(const float *x, float *y, int n, int hw, int c)
{
    tf_shape s = {c, hw, 1};
    float *xc = gt_to_nchw(x, n, c, hw, 1);
    cpu_gap_forward(n, s, xc, y);
    free(xc);
}
static void ref_gap_backward(const float *dy, float *dx, int n, int hw, int c)
{
    tf_shape s = {c, hw, 1};
    float *dxc = calloc((size_t)n * hw * c + 1, sizeof(float));
    cpu_gap_backward(n, s, dy, dxc);
    gt_transpose_chw(dxc, dx, n, c, hw, 1, 0);
    free(dxc);
}

/* per-row loss (the CPU layer returns the sum: one row at a time); counts[0..1] += top-1/top-5 */
static void ref_xent(const float *z, const int32_t *labels, int n, int k, float eps,
                     float grad_scale, float *loss, float *dlogits, long long *counts)
{
    for (int r = 0; r < n; r++) {
        uint32_t c1 = 0, c5 = 0;
        loss[r] = (float)cpu_softmax_xent(1, k, z + (size_t)r * k, labels + r, eps, grad_scale,
                                          dlogits ? dlogits + (size_t)r * k : NULL, &c1, &c5);
        counts[0] += c1;
        counts[1] += c5;
    }
}

/* flk_filter_to_ohwi: a permutation with no CPU layer (the CPU backend keeps OIHW): its index
 * formula */
static void ref_filter_to_ohwi(const float *w, float *dst, int o, int ci, int kh, int kw, int ipad)
{
    int kk = kh * kw;
    for (int a = 0; a < o; a++)
        for (int c = 0; c < ipad; c++)
            for (int r = 0; r < kk; r++)
                dst[((size_t)a * kk + r) * ipad + c] =
                    c < ci ? w[((size_t)a * ci + c) * kk + r] : 0.0f;
}

/* ---- kernels
 * ------------------------------------------------------------------------------------- */

static void test_input(flk_dtype dt)
{
    int n = 6, h = 7, w = 9, c = 3;
    size_t total = (size_t)n * h * w * c;
    uint8_t *img = malloc(total);
    uint64_t idx[6] = {3, 99, 1000, 7, 12345678901ull, 0};
    for (size_t i = 0; i < total; i++)
        img[i] = (uint8_t)(gt_uniform() * 256);
    uint8_t *dimg = gt_alloc(total);
    uint64_t *didx = gt_alloc(sizeof idx);
    GT_CUDA(cudaMemcpy(dimg, img, total, cudaMemcpyHostToDevice));
    GT_CUDA(cudaMemcpy(didx, idx, sizeof idx, cudaMemcpyHostToDevice));
    void *dout = gt_alloc(total * 4 * 3);
    float *want = malloc(total * 4 * 3);
    for (int v = 0; v < 10; v++) {
        flk_input_params p = {
            n, h,  w, c, {125.3f, 122.9f, 113.8f, 0}, {63.0f, 62.1f, 66.7f, 1}, 0, 0, FLK_PAD_ZERO,
            0, 42, 3};
        p.nchw = v & 1;
        p.pad = (v & 2) ? 2 : 0;
        p.pad_mode = (v & 4) ? FLK_PAD_REFLECT : FLK_PAD_ZERO;
        p.flip = v == 7 ? 2 : (v >> 1) & 1;
        if (v >= 8)
            p.c_out = 8; /* zero channel padding, NHWC (8) and NCHW (9) */
        size_t tot = (size_t)n * h * w * (p.c_out ? p.c_out : c);
        const uint64_t *hi = (v & 1) ? idx : NULL;
        GT_CUDA(flk_input_u8(dimg, dout, dt, &p, (v & 1) ? didx : NULL, 0));
        ref_input(img, want, &p, hi);
        gt_round(want, dt, tot);
        float *got = gt_download(dout, tot, dt);
        char what[64];
        snprintf(what, sizeof what, "input_u8 variant %d", v);
        gt_close(what, got, want, tot, dt, 4.0, 1.0);
        free(got);
    }
    free(img);
    free(want);
    cudaFree(dimg);
    cudaFree(didx);
    cudaFree(dout);
}

static void test_elementwise(flk_dtype dt)
{
    size_t n = 10007;
    float *x = gt_randn_array(n, 2.0f, 0.0f), *g = gt_randn_array(n, 1.0f, 0.0f);
    gt_round(x, dt, n);
    gt_round(g, dt, n);
    void *dx = gt_upload(x, n, dt), *dg = gt_upload(g, n, dt), *dy = gt_alloc(n * 4);
    float *want = malloc(n * 4), *got;
    for (int a = FLK_ACT_RELU; a <= FLK_ACT_GELU; a++) {
        GT_CUDA(flk_act_forward((flk_act)a, dx, dy, dt, n, 0));
        ref_act_forward((flk_act)a, x, want, n);
        gt_round(want, dt, n);
        got = gt_download(dy, n, dt);
        /* scale: the data's magnitude (x ~ 2·N(0,1)); with 1e-3 the fp32 rounding of GELU's
         * O(1) intermediate terms, e.g. at its gradient's zero near x = −0.75, fails any float
         * kernel. GELU 2, as in test_gpu_layers: the reference is the CPU layer's own fp32 tanhf
         * (not a double), and near tanh's saturation its GELU' and the kernel's expf differ by a
         * few 1e-7 absolute (host emulation of the kernel: 0.48 of the limit at scale 1, 0.24 at 2)
         */
        const double sc = a == FLK_ACT_GELU ? 2.0 : 1.0;
        gt_close(a == FLK_ACT_RELU ? "relu forward" : "gelu forward", got, want, n, dt, 4.0, sc);
        free(got);
        GT_CUDA(flk_act_backward((flk_act)a, dx, dg, dy, dt, n, 0));
        ref_act_backward((flk_act)a, x, g, want, n);
        gt_round(want, dt, n);
        got = gt_download(dy, n, dt);
        gt_close(a == FLK_ACT_RELU ? "relu backward" : "gelu backward", got, want, n, dt, 4.0, sc);
        free(got);
    }
    GT_CUDA(flk_add(dx, dg, dy, dt, n, 0));
    cpu_add_forward((long)n, x, g, want);
    gt_round(want, dt, n);
    got = gt_download(dy, n, dt);
    gt_close("add", got, want, n, dt, 4.0, 1e-6);
    free(got);
    GT_CUDA(flk_scale(dx, dy, dt, n, 0.37f, 0));
    cpu_scale_forward((long)n, 0.37f, x, want);
    gt_round(want, dt, n);
    got = gt_download(dy, n, dt);
    gt_close("scale", got, want, n, dt, 4.0, 1e-6);
    free(got);
    /* accumulate into fp32: overwrite then add */
    float *dacc = gt_alloc(n * 4);
    GT_CUDA(flk_accum_grad(dx, dt, dacc, n, 0.5f, 0.0f, 0));
    GT_CUDA(flk_accum_grad(dg, dt, dacc, n, 2.0f, 1.0f, 0));
    for (size_t i = 0; i < n; i++)
        want[i] = 0.5f * x[i] + 2.0f * g[i];
    got = gt_download(dacc, n, FLK_F32);
    gt_close("accum_grad", got, want, n, FLK_F32, 4.0, 1.0);
    free(got);
    /* cast dt -> fp32 is exact; fp32 -> dt rounds like the host */
    GT_CUDA(flk_cast(dx, dt, dacc, FLK_F32, n, 0));
    got = gt_download(dacc, n, FLK_F32);
    gt_close("cast to fp32", got, x, n, FLK_F32, 0.0, 0.0);
    free(got);
    float *xf = gt_randn_array(n, 3.0f, 0.0f);
    float *dxf = gt_upload(xf, n, FLK_F32);
    GT_CUDA(flk_cast(dxf, FLK_F32, dy, dt, n, 0));
    memcpy(want, xf, n * 4);
    gt_round(want, dt, n);
    got = gt_download(dy, n, dt);
    gt_close("cast from fp32", got, want, n, dt, 0.0, 0.0);
    free(got);
    free(x);
    free(g);
    free(xf);
    free(want);
    cudaFree(dx);
    cudaFree(dg);
    cudaFree(dy);
    cudaFree(dacc);
    cudaFree(dxf);
}

static void test_layout(flk_dtype dt)
{
    int o = 5, ci = 3, k = 3, n = 4, c = 6, h = 3, w = 5;
    size_t nf = (size_t)o * ci * k * k, na = (size_t)n * c * h * w, nfp = (size_t)o * 8 * k * k;
    float *wt = gt_randn_array(nf, 1.0f, 0.0f), *want = malloc(na * 4 + nfp * 4), *got;
    float *dw = gt_upload(wt, nf, FLK_F32);
    void *dpk = gt_alloc(nfp * 4);
    float *dacc = gt_alloc(nf * 4);
    for (int ip = ci; ip <= 8; ip += 8 - ci) { /* unpadded, then input channels padded to 8 */
        size_t np = (size_t)o * ip * k * k;
        GT_CUDA(flk_filter_to_ohwi(dw, dpk, dt, o, ci, k, k, ip, 0));
        ref_filter_to_ohwi(wt, want, o, ci, k, k, ip);
        gt_round(want, dt, np);
        got = gt_download(dpk, np, dt);
        gt_close(ip == ci ? "filter_to_ohwi" : "filter_to_ohwi padded", got, want, np, dt, 0.0,
                 0.0);
        free(got);
        /* and back: the gradient path must invert the permutation exactly */
        GT_CUDA(flk_filter_grad_from_ohwi(dpk, dt, dacc, o, ci, k, k, ip, 1.0f, 0.0f, 0));
        memcpy(want, wt, nf * 4);
        gt_round(want, dt, nf);
        got = gt_download(dacc, nf, FLK_F32);
        gt_close(ip == ci ? "filter_grad_from_ohwi" : "filter_grad_from_ohwi padded", got, want, nf,
                 FLK_F32, 0.0, 0.0);
        free(got);
    }
    float *x = gt_randn_array(na, 1.0f, 0.0f);
    gt_round(x, dt, na);
    void *dx = gt_upload(x, na, dt), *dy = gt_alloc(na * 4), *dz = gt_alloc(na * 4);
    GT_CUDA(flk_transpose_chw(dx, dy, dt, n, c, h, w, 1, 0));
    gt_transpose_chw(x, want, n, c, h, w, 1);
    got = gt_download(dy, na, dt);
    gt_close("transpose to nchw", got, want, na, dt, 0.0, 0.0);
    free(got);
    GT_CUDA(flk_transpose_chw(dy, dz, dt, n, c, h, w, 0, 0));
    got = gt_download(dz, na, dt);
    gt_close("transpose round trip", got, x, na, dt, 0.0, 0.0);
    free(got);
    free(wt);
    free(want);
    free(x);
    cudaFree(dw);
    cudaFree(dpk);
    cudaFree(dacc);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dz);
}

static void test_bias(flk_dtype dt)
{
    int rows = 300, cols = 37;
    size_t n = (size_t)rows * cols;
    float *y = gt_randn_array(n, 1.0f, 0.0f), *b = gt_randn_array(cols, 1.0f, 0.0f),
          *want = malloc(n * 4);
    gt_round(y, dt, n);
    void *dy = gt_upload(y, n, dt);
    float *db = gt_upload(b, cols, FLK_F32), *dg = gt_alloc(cols * 4);
    GT_CUDA(flk_bias_add(dy, dt, db, rows, cols, 0));
    for (size_t i = 0; i < n; i++)
        want[i] = y[i] + b[i % cols];
    gt_round(want, dt, n);
    float *got = gt_download(dy, n, dt);
    gt_close("bias_add", got, want, n, dt, 4.0, 1e-6);
    free(got);
    GT_CUDA(flk_bias_backward(dy, dt, dg, rows, cols, 0.0f, 0));
    float *dyh = gt_download(dy, n, dt);
    ref_bias_backward(dyh, want, rows, cols);
    got = gt_download(dg, cols, FLK_F32);
    gt_close("bias_backward", got, want, cols, FLK_F32, 64.0 * rows, 1.0);
    free(got);
    free(dyh);
    free(y);
    free(b);
    free(want);
    cudaFree(dy);
    cudaFree(db);
    cudaFree(dg);
}

/* "<what> (x mean M)": names the case of a batch-norm check */
static const char *bn_what(const char *what, float mean)
{
    static char buf[96];
    snprintf(buf, sizeof buf, "%s (x mean %g)", what, mean);
    return buf;
}

/* x ~ N(mean, sd²) per channel. `sc`, the slack of the outputs, is 1 + |mean|/sd: y = x·a + (beta −
 * mean·a) in fp32, the CPU layer's formula and the kernel's, loses |mean|/sd units of roundoff in
 * both. The statistics themselves (save_mean, save_invstd) must stay within 64 units whatever the
 * mean: a one-pass E[x²] − E[x]² in fp32 gave invstd 1e-3 off at mean 100, sd 1. */
static void test_bn(flk_dtype dt, float sd, float mean)
{
    int rows = 2 * 9 * 11 + 5000, c = 40; /* rows not a multiple of the block tile */
    size_t n = (size_t)rows * c;
    double sc = 1.0 + fabs(mean) / sd;
    float *x = gt_randn_array(n, sd, mean), *dyv = gt_randn_array(n, 1.0f, 0.0f);
    gt_round(x, dt, n);
    gt_round(dyv, dt, n);
    float *gam = gt_randn_array(c, 0.3f, 1.0f), *bet = gt_randn_array(c, 0.3f, 0.0f);
    float *rm = calloc(c, 4), *rv = malloc(c * 4), *save = malloc(2 * c * 4);
    float *sm = save, *si = save + c; /* the CPU layer's save: mean, then 1/sqrt(var + eps) */
    float *dgam = malloc(c * 4), *dbet = malloc(c * 4);
    for (int i = 0; i < c; i++)
        rv[i] = 1.0f;
    void *dx = gt_upload(x, n, dt), *ddy = gt_upload(dyv, n, dt), *dy = gt_alloc(n * 4),
         *ddx = gt_alloc(n * 4);
    float *dgm = gt_upload(gam, c, FLK_F32), *dbt = gt_upload(bet, c, FLK_F32);
    float *drm = gt_upload(rm, c, FLK_F32), *drv = gt_upload(rv, c, FLK_F32);
    float *dsm = gt_alloc(c * 4), *dsi = gt_alloc(c * 4), *ddg = gt_alloc(c * 4),
          *ddb = gt_alloc(c * 4);
    void *ws = gt_alloc(flk_bn_ws_bytes(rows, c));
    float *want = malloc(n * 4), *got;
    for (int fused = 0; fused < 2; fused++) {
        flk_act act = fused ? FLK_ACT_RELU : FLK_ACT_NONE;
        GT_CUDA(flk_bn_forward_train(dx, dy, dt, rows, c, dgm, dbt, drm, drv, 0.1f, 1e-5f, dsm, dsi,
                                     act, ws, 0));
        ref_bn_forward_train(x, want, rows, c, gam, bet, rm, rv, 0.1f, 1e-5f, save, act);
        gt_round(want, dt, n);
        got = gt_download(dy, n, dt);
        gt_close(bn_what(fused ? "bn+relu forward" : "bn forward", mean), got, want, n, dt, 4.0,
                 sc);
        float *y = got; /* the backward mask must use the GPU's own output */
        got = gt_download(dsm, c, FLK_F32);
        gt_close(bn_what("bn save_mean", mean), got, sm, c, FLK_F32, 64.0, 1.0);
        free(got);
        got = gt_download(dsi, c, FLK_F32);
        gt_close(bn_what("bn save_invstd", mean), got, si, c, FLK_F32, 64.0, 0.0);
        free(got);
        got = gt_download(drm, c, FLK_F32);
        gt_close(bn_what("bn running_mean", mean), got, rm, c, FLK_F32, 64.0, 1.0);
        free(got);
        got = gt_download(drv, c, FLK_F32);
        gt_close(bn_what("bn running_var", mean), got, rv, c, FLK_F32, 64.0, 0.0);
        free(got);
        GT_CUDA(flk_bn_backward(dx, dy, ddy, ddx, dt, rows, c, dgm, dsm, dsi, ddg, ddb, 0.0f, act,
                                ws, 0));
        ref_bn_backward(x, y, dyv, want, rows, c, gam, save, dgam, dbet, act);
        gt_round(want, dt, n);
        got = gt_download(ddx, n, dt);
        gt_close(bn_what(fused ? "bn+relu backward dx" : "bn backward dx", mean), got, want, n, dt,
                 8.0, sc);
        free(got);
        got = gt_download(ddg, c, FLK_F32);
        gt_close(bn_what("bn dgamma", mean), got, dgam, c, FLK_F32, 64.0 * rows * sc, 10.0);
        free(got);
        got = gt_download(ddb, c, FLK_F32);
        gt_close(bn_what("bn dbeta", mean), got, dbet, c, FLK_F32, 64.0 * rows, 10.0);
        free(got);
        free(y);
    }
    /* eval with the running statistics */
    GT_CUDA(flk_bn_forward_eval(dx, dy, dt, rows, c, dgm, dbt, drm, drv, 1e-5f, FLK_ACT_NONE, 0));
    tf_shape sh = {c, 1, 1};
    cpu_bn_forward(NULL, rows, sh, 0, 1e-5f, 0.1f, x, gam, bet, rm, rv, NULL, want);
    gt_round(want, dt, n);
    got = gt_download(dy, n, dt);
    gt_close(bn_what("bn eval", mean), got, want, n, dt, 4.0, sc);
    free(got);
    free(x);
    free(dyv);
    free(gam);
    free(bet);
    free(rm);
    free(rv);
    free(save);
    free(dgam);
    free(dbet);
    free(want);
    cudaFree(dx);
    cudaFree(ddy);
    cudaFree(dy);
    cudaFree(ddx);
    cudaFree(dgm);
    cudaFree(dbt);
    cudaFree(drm);
    cudaFree(drv);
    cudaFree(dsm);
    cudaFree(dsi);
    cudaFree(ddg);
    cudaFree(ddb);
    cudaFree(ws);
}

static void test_pool(flk_dtype dt)
{
    flk_pool_params cases[3] = {{3, 8, 10, 5, 2, 2, 0, FLK_POOL_MAX},
                                {3, 9, 9, 4, 3, 2, 1, FLK_POOL_MAX},
                                {2, 8, 6, 7, 2, 2, 0, FLK_POOL_AVG}};
    for (int t = 0; t < 3; t++) {
        flk_pool_params p = cases[t];
        int oh, ow;
        flk_pool_out_dims(&p, &oh, &ow);
        size_t ni = (size_t)p.n * p.h * p.w * p.c, no = (size_t)p.n * oh * ow * p.c;
        float *x = gt_randn_array(ni, 1.0f, 0.0f), *dyv = gt_randn_array(no, 1.0f, 0.0f);
        gt_round(x, dt, ni);
        gt_round(dyv, dt, no);
        void *dx = gt_upload(x, ni, dt), *ddy = gt_upload(dyv, no, dt), *dy = gt_alloc(no * 4),
             *ddx = gt_alloc(ni * 4);
        float *want = malloc(ni * 4), *got;
        GT_CUDA(flk_pool_forward(&p, dx, dy, dt, 0));
        ref_pool(&p, x, NULL, want, NULL);
        gt_round(want, dt, no);
        got = gt_download(dy, no, dt);
        gt_close(p.kind == FLK_POOL_MAX ? "maxpool forward" : "avgpool forward", got, want, no, dt,
                 4.0, 1.0);
        free(got);
        GT_CUDA(flk_pool_backward(&p, dx, ddy, ddx, dt, 0));
        ref_pool(&p, x, dyv, NULL, want);
        gt_round(want, dt, ni);
        got = gt_download(ddx, ni, dt);
        gt_close(p.kind == FLK_POOL_MAX ? "maxpool backward" : "avgpool backward", got, want, ni,
                 dt, 4.0, 1.0);
        free(got);
        free(x);
        free(dyv);
        free(want);
        cudaFree(dx);
        cudaFree(ddy);
        cudaFree(dy);
        cudaFree(ddx);
    }
    /* global average pool */
    int n = 5, hw = 49, c = 33;
    size_t ni = (size_t)n * hw * c, no = (size_t)n * c;
    float *x = gt_randn_array(ni, 1.0f, 0.5f), *want = malloc(ni * 4), *got;
    gt_round(x, dt, ni);
    void *dx = gt_upload(x, ni, dt), *dy = gt_alloc(no * 4), *ddx = gt_alloc(ni * 4);
    GT_CUDA(flk_gap_forward(dx, dy, dt, n, hw, c, 0));
    ref_gap_forward(x, want, n, hw, c);
    gt_round(want, dt, no);
    got = gt_download(dy, no, dt);
    gt_close("gap forward", got, want, no, dt, 4.0, 1.0);
    GT_CUDA(flk_gap_backward(dy, ddx, dt, n, hw, c, 0));
    ref_gap_backward(got, want, n, hw, c); /* from the GPU's own forward output */
    gt_round(want, dt, ni);
    free(got);
    got = gt_download(ddx, ni, dt);
    gt_close("gap backward", got, want, ni, dt, 4.0, 1e-3);
    free(got);
    free(x);
    free(want);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(ddx);
}

static void test_xent(flk_dtype dt)
{
    int shapes[2][2] = {{37, 10}, {129, 100}};
    for (int s = 0; s < 2; s++) {
        int n = shapes[s][0], k = shapes[s][1];
        size_t nk = (size_t)n * k;
        float *z = gt_randn_array(nk, 3.0f, 0.0f), *loss = malloc(n * 4), *dl = malloc(nk * 4);
        gt_round(z, dt, nk);
        int32_t *lab = malloc(n * 4);
        for (int i = 0; i < n; i++)
            lab[i] = (int32_t)(gt_uniform() * k);
        z[(size_t)1 * k + lab[1]] = 50.0f; /* a sure top-1 hit */
        void *dz = gt_upload(z, nk, dt), *ddl = gt_alloc(nk * 4);
        int32_t *dlab = gt_alloc(n * 4);
        GT_CUDA(cudaMemcpy(dlab, lab, n * 4, cudaMemcpyHostToDevice));
        float *dloss = gt_alloc(n * 4), *dsum = gt_alloc(4);
        long long *dcnt = gt_alloc(16), cnt[2] = {0, 0}, gcnt[2];
        float gs = 1.0f / n;
        GT_CUDA(flk_xent_forward_backward(dz, dt, dlab, n, k, 0.1f, gs, dloss, ddl, dcnt, 0));
        ref_xent(z, lab, n, k, 0.1f, gs, loss, dl, cnt);
        float *got = gt_download(dloss, n, FLK_F32);
        gt_close("xent loss", got, loss, n, FLK_F32, 64.0 * k, 1.0);
        free(got);
        gt_round(dl, dt, nk);
        got = gt_download(ddl, nk, dt);
        gt_close("xent dlogits", got, dl, nk, dt, 4.0, 1.0 / n);
        free(got);
        GT_CUDA(cudaMemcpy(gcnt, dcnt, 16, cudaMemcpyDeviceToHost));
        EXPECTF(gcnt[0] == cnt[0] && gcnt[1] == cnt[1], "xent counts gpu %lld/%lld ref %lld/%lld",
                gcnt[0], gcnt[1], cnt[0], cnt[1]);
        EXPECTF(cnt[0] >= 1, "the planted top-1 hit was not counted");
        GT_CUDA(flk_sum(dloss, n, dsum, 0));
        double want = 0;
        for (int i = 0; i < n; i++)
            want += loss[i];
        float fw = (float)want;
        got = gt_download(dsum, 1, FLK_F32);
        gt_close("sum", got, &fw, 1, FLK_F32, 64.0 * n, 1.0);
        free(got);
        free(z);
        free(loss);
        free(dl);
        free(lab);
        cudaFree(dz);
        cudaFree(ddl);
        cudaFree(dlab);
        cudaFree(dloss);
        cudaFree(dsum);
        cudaFree(dcnt);
    }
}

static void test_optim(flk_dtype dt)
{
    size_t n = 5003;
    float *w = gt_randn_array(n, 1.0f, 0.0f), *g = gt_randn_array(n, 0.1f, 0.0f),
          *v = gt_randn_array(n, 0.1f, 0.0f);
    float *dw = gt_upload(w, n, FLK_F32), *dg = gt_upload(g, n, FLK_F32),
          *dv = gt_upload(v, n, FLK_F32);
    void *dcopy = gt_alloc(n * 4);
    int *dskip = gt_alloc(4), one = 1;
    for (int nest = 0; nest < 2; nest++) {
        GT_CUDA(flk_sgd_step(dw, dg, dv, n, 0.05f, 0.9f, 5e-4f, nest, dcopy, dt, dskip, 0));
        cpu_sgd_step((long)n, w, g, v, 0.05f, 0.9f, 5e-4f, nest);
        float *got = gt_download(dw, n, FLK_F32);
        gt_close("sgd weights", got, w, n, FLK_F32, 8.0, 1.0);
        free(got);
        got = gt_download(dv, n, FLK_F32);
        gt_close("sgd momentum", got, v, n, FLK_F32, 8.0, 1.0);
        free(got);
        float *wr = malloc(n * 4);
        memcpy(wr, w, n * 4);
        gt_round(wr, dt, n);
        got = gt_download(dcopy, n, dt);
        gt_close("sgd half copy", got, wr, n, dt, 4.0, 1e-3);
        free(got);
        free(wr);
    }
    /* a skipped step changes nothing */
    GT_CUDA(cudaMemcpy(dskip, &one, 4, cudaMemcpyHostToDevice));
    GT_CUDA(flk_sgd_step(dw, dg, dv, n, 0.05f, 0.9f, 5e-4f, 1, dcopy, dt, dskip, 0));
    float *got = gt_download(dw, n, FLK_F32);
    gt_close("sgd skipped", got, w, n, FLK_F32, 8.0, 1.0);
    free(got);
    /* unscale + inf check */
    int found = 0, *dfound = gt_alloc(4);
    GT_CUDA(flk_unscale_check(dg, n, 0.5f, dfound, 0));
    GT_CUDA(cudaMemcpy(&found, dfound, 4, cudaMemcpyDeviceToHost));
    EXPECTF(found == 0, "finite gradients flagged");
    for (size_t i = 0; i < n; i++)
        g[i] *= 0.5f;
    got = gt_download(dg, n, FLK_F32);
    gt_close("unscale", got, g, n, FLK_F32, 1.0, 1e-6);
    free(got);
    float inf = INFINITY;
    GT_CUDA(cudaMemcpy(dg + 4321, &inf, 4, cudaMemcpyHostToDevice));
    GT_CUDA(flk_unscale_check(dg, n, 0.5f, dfound, 0));
    GT_CUDA(cudaMemcpy(&found, dfound, 4, cudaMemcpyDeviceToHost));
    EXPECTF(found == 1, "an inf gradient was not flagged");
    /* EMA */
    float *ema = gt_randn_array(n, 1.0f, 0.0f), *dema = gt_upload(ema, n, FLK_F32);
    GT_CUDA(flk_ema_update(dema, dw, n, 0.99f, NULL, 0));
    cpu_ema_update((long)n, ema, w, 0.99f);
    got = gt_download(dema, n, FLK_F32);
    gt_close("ema", got, ema, n, FLK_F32, 8.0, 1.0);
    free(got);
    free(w);
    free(g);
    free(v);
    free(ema);
    cudaFree(dw);
    cudaFree(dg);
    cudaFree(dv);
    cudaFree(dcopy);
    cudaFree(dskip);
    cudaFree(dfound);
    cudaFree(dema);
}

/* ---- --bench: time the per-step kernels at the Fashion-MNIST fastcnn sizes
 * ------------------------ */

typedef struct bench_t {
    cudaEvent_t a, b;
} bench_t;

static void bench_report(const char *what, bench_t *t, int reps, double bytes)
{
    float ms = 0;
    GT_CUDA(cudaEventSynchronize(t->b));
    GT_CUDA(cudaEventElapsedTime(&ms, t->a, t->b));
    double us = 1000.0 * ms / reps;
    printf("  %-44s %9.1f us  %8.1f GB/s\n", what, us, bytes / (us * 1e-6) / 1e9);
}

#define BENCH(what, bytes, call)                                                                   \
    do {                                                                                           \
        GT_CUDA(call); /* warm-up */                                                               \
        GT_CUDA(cudaEventRecord(t.a, 0));                                                          \
        for (int r_ = 0; r_ < reps; r_++)                                                          \
            GT_CUDA(call);                                                                         \
        GT_CUDA(cudaEventRecord(t.b, 0));                                                          \
        bench_report(what, &t, reps, (double)(bytes));                                             \
    } while (0)

static void bench(void)
{
    const int reps = 50, n = 512, c = 64, hw = 28, ph = 14;
    const flk_dtype dt = FLK_BF16;
    bench_t t;
    GT_CUDA(cudaEventCreate(&t.a));
    GT_CUDA(cudaEventCreate(&t.b));
    printf("test_kernels --bench (bf16, batch %d, fastcnn block 1: %dx%d input, %d channels)\n", n,
           hw, hw, c);
    size_t in_elems = (size_t)n * hw * hw;
    uint8_t *u8 = gt_alloc(in_elems);
    void *x8 = gt_alloc(in_elems * 8 * 2);
    flk_input_params ip = {n, hw, hw, 1, {127.5f}, {63.75f}, 0, 2, FLK_PAD_ZERO, 1, 1, 2, 8};
    BENCH("input u8 -> bf16 NHWC (crop+flip, 1->8 ch)", in_elems + in_elems * 8 * 2,
          flk_input_u8(u8, x8, dt, &ip, NULL, 0));
    size_t big = (size_t)n * hw * hw * c, small = (size_t)n * ph * ph * c;
    void *a = gt_alloc(big * 2), *p = gt_alloc(small * 2), *q = gt_alloc(small * 2),
         *g = gt_alloc(big * 2);
    flk_pool_params pp = {n, hw, hw, c, 2, 2, 0, FLK_POOL_MAX};
    BENCH("maxpool 2x2 forward", (big + small) * 2, flk_pool_forward(&pp, a, p, dt, 0));
    BENCH("maxpool 2x2 backward (gather)", (2 * big + small) * 2,
          flk_pool_backward(&pp, a, p, g, dt, 0));
    int rows = n * ph * ph;
    float *gam = gt_alloc(c * 4), *bet = gt_alloc(c * 4), *rm = gt_alloc(c * 4),
          *rv = gt_alloc(c * 4);
    float *sm = gt_alloc(c * 4), *si = gt_alloc(c * 4), *dg = gt_alloc(c * 4),
          *db = gt_alloc(c * 4);
    void *ws = gt_alloc(flk_bn_ws_bytes(rows, c));
    BENCH("BN+ReLU forward (train)", 3 * small * 2,
          flk_bn_forward_train(p, q, dt, rows, c, gam, bet, rm, rv, 0.1f, 1e-5f, sm, si,
                               FLK_ACT_RELU, ws, 0));
    BENCH("BN+ReLU backward", 6 * small * 2,
          flk_bn_backward(p, q, q, p, dt, rows, c, gam, sm, si, dg, db, 0.0f, FLK_ACT_RELU, ws, 0));
    BENCH("GAP forward (7x7x256)", (size_t)n * 49 * 256 * 2,
          flk_gap_forward(a, p, dt, n, 49, 256, 0));
    float *loss = gt_alloc(n * 4);
    int32_t *lab = gt_alloc(n * 4);
    long long *cnt = gt_alloc(16);
    BENCH("softmax CE fwd+bwd (10 classes)", (size_t)n * 10 * 4,
          flk_xent_forward_backward(a, dt, lab, n, 10, 0.1f, 1.0f / n, loss, g, cnt, 0));
    size_t P = 1200000;
    float *w = gt_alloc(P * 4), *gr = gt_alloc(P * 4), *v = gt_alloc(P * 4);
    BENCH("SGD Nesterov step (1.2 M params)", P * 4 * 5,
          flk_sgd_step(w, gr, v, P, 0.1f, 0.9f, 5e-4f, 1, NULL, FLK_F32, NULL, 0));
    BENCH("filter pack OIHW->OHWI bf16 (256x128x3x3)", (size_t)256 * 128 * 9 * 6,
          flk_filter_to_ohwi(w, g, dt, 256, 128, 3, 3, 128, 0));
    void *frees[] = {u8, x8, a,  p,  q,    g,   gam, bet, rm, rv, sm,
                     si, dg, db, ws, loss, lab, cnt, w,   gr, v};
    for (size_t i = 0; i < sizeof frees / sizeof frees[0]; i++)
        cudaFree(frees[i]);
}

int main(int argc, char **argv)
{
    int do_bench = argc > 1 && !strcmp(argv[1], "--bench");
    check_host();
    if (fl_check_failures) {
        fprintf(stderr, "test_kernels: %d host-side failures\n", fl_check_failures);
        return 1;
    }
    gt_require_gpu("test_kernels");
    if (do_bench) {
        bench();
        return 0;
    }
    for (int d = 0; d < 3; d++) {
        flk_dtype dt = DTS[d];
        test_input(dt);
        test_elementwise(dt);
        test_layout(dt);
        test_bias(dt);
        test_bn(dt, 1.5f, 0.7f);
        test_bn(dt, 1.0f, 100.0f); /* |mean| ≫ sd: the variance must not cancel */
        test_pool(dt);
        test_xent(dt);
        test_optim(dt);
        printf("test_kernels: %s done (%d failures so far)\n", flk_dtype_name(dt),
               fl_check_failures);
    }
    GT_CUDA(cudaDeviceSynchronize());
    if (fl_check_failures) {
        fprintf(stderr, "test_kernels: %d failures\n", fl_check_failures);
        return 1;
    }
    printf("test_kernels: all kernels match the CPU reference\n");
    return 0;
}
