/* test_gpu_layers.c — each GPU layer kernel (NHWC, kernels/) against the CPU backend's own layer
 * (trainer/cpu/cpu_layers.h, NCHW: the one CPU reference, also test_kernels') on random data,
 * forward and backward, in fp32, fp16 and bf16, called as the CPU backend calls them: input stage,
 * batch norm (train forward, running stats, backward), ReLU, GELU, max/avg pool, global average
 * pool, softmax cross-entropy with label smoothing. Layouts are converted on the host.
 * (Convolutions and linear layers run in cuDNN/cuBLAS inside the backend: test_gpu_backend checks
 * their gradients.) Exits 77 without a GPU. */
#include "gpu_test.h"

#include "backend.h"
#include "cpu_layers.h"

/* GPU result (NHWC, type dt) as fp32 NCHW */
static float *download_nchw(const void *d, flk_dtype dt, int n, int c, int h, int w)
{
    float *g = gt_download(d, (size_t)n * c * h * w, dt), *o = gt_to_nchw(g, n, c, h, w);
    free(g);
    return o;
}

static void test_input(flk_dtype dt)
{
    int n = 5, h = 12, w = 10, c = 3;
    size_t total = (size_t)n * h * w * c;
    uint8_t *img = malloc(total);
    for (size_t i = 0; i < total; i++)
        img[i] = (uint8_t)(gt_uniform() * 256);
    uint64_t idx[5] = {17, 4, 99, 123456, 8};
    float mean[3] = {0.49f, 0.48f, 0.45f}, sd[3] = {0.25f, 0.24f, 0.26f};
    uint8_t *dimg = gt_alloc(total);
    uint64_t *didx = gt_alloc(sizeof idx);
    GT_CUDA(cudaMemcpy(dimg, img, total, cudaMemcpyHostToDevice));
    GT_CUDA(cudaMemcpy(didx, idx, sizeof idx, cudaMemcpyHostToDevice));
    void *dx = gt_alloc(total * 4);
    float *want = malloc(total * 4);
    for (int v = 0; v < 3; v++) { /* train augmentation (crop 2 + flip), none, flip all (TTA) */
        int pad = v == 0 ? 2 : 0, flip = v == 0, all = v == 2;
        flk_input_params p;
        memset(&p, 0, sizeof p);
        p.n = n;
        p.h = h;
        p.w = w;
        p.c = c;
        p.nchw = 1;
        p.pad = pad;
        p.pad_mode = FLK_PAD_ZERO;
        p.flip = all ? 2 : flip;
        p.seed = 5;
        p.epoch = 7;
        for (int k = 0; k < c; k++) {
            p.mean[k] = 255.0f * mean[k];
            p.stddev[k] = 255.0f * sd[k];
        }
        GT_CUDA(flk_input_u8(dimg, dx, dt, &p, didx, 0));
        cpu_input_u8(NULL, n, h, w, c, img, mean, sd, pad, flip, 5, 7, idx, all, want);
        gt_round(want, dt, total);
        float *got = gt_download(dx, total, dt);
        gt_close(v == 0   ? "input vs cpu_input_u8 (crop+flip)"
                 : v == 1 ? "input vs cpu_input_u8"
                          : "input vs cpu_input_u8 (TTA flip)",
                 got, want, total, dt, 4.0, 2.0);
        free(got);
    }
    free(img);
    free(want);
    cudaFree(dimg);
    cudaFree(didx);
    cudaFree(dx);
}

static void test_bn_act(flk_dtype dt)
{
    int n = 6, c = 24, h = 7, w = 9, rows = n * h * w;
    tf_shape s = {c, h, w};
    size_t ne = (size_t)n * c * h * w;
    float *x = gt_randn_array(ne, 2.0f, 0.5f), *dy = gt_randn_array(ne, 1.0f, 0.0f); /* NCHW */
    gt_round(x, dt, ne);
    gt_round(dy, dt, ne);
    float *gam = gt_randn_array(c, 0.2f, 1.0f), *bet = gt_randn_array(c, 0.2f, 0.0f);
    float *rm = calloc(c, 4), *rv = malloc(c * 4), *save = malloc(2 * c * 4), *y = malloc(ne * 4);
    float *dxc = calloc(ne, 4), *dg = calloc(c, 4), *db = calloc(c, 4);
    for (int i = 0; i < c; i++)
        rv[i] = 1.0f;
    cpu_bn_forward(NULL, n, s, 1, 1e-5f, 0.1f, x, gam, bet, rm, rv, save, y);
    cpu_bn_backward(NULL, n, s, x, gam, save, dy, dxc, dg, db);

    float *xh = gt_to_nhwc(x, n, c, h, w), *dyh = gt_to_nhwc(dy, n, c, h, w);
    void *dX = gt_upload(xh, ne, dt), *dDY = gt_upload(dyh, ne, dt), *dY = gt_alloc(ne * 4),
         *dDX = gt_alloc(ne * 4);
    float *dgam = gt_upload(gam, c, FLK_F32), *dbet = gt_upload(bet, c, FLK_F32);
    float ones[64];
    for (int i = 0; i < c; i++)
        ones[i] = 1.0f;
    float *drm = gt_alloc(c * 4), *drv = gt_upload(ones, c, FLK_F32);
    float *dsm = gt_alloc(c * 4), *dsi = gt_alloc(c * 4), *ddg = gt_alloc(c * 4),
          *ddb = gt_alloc(c * 4);
    void *ws = gt_alloc(flk_bn_ws_bytes(rows, c));
    GT_CUDA(flk_bn_forward_train(dX, dY, dt, rows, c, dgam, dbet, drm, drv, 0.1f, 1e-5f, dsm, dsi,
                                 FLK_ACT_NONE, ws, 0));
    float *got = download_nchw(dY, dt, n, c, h, w);
    gt_round(y, dt, ne);
    gt_close("bn forward vs cpu_bn_forward", got, y, ne, dt, 4.0, 1.0);
    free(got);
    got = gt_download(drm, c, FLK_F32);
    gt_close("bn running mean vs cpu", got, rm, c, FLK_F32, 4096.0, 1.0);
    free(got);
    got = gt_download(drv, c, FLK_F32);
    gt_close("bn running var vs cpu", got, rv, c, FLK_F32, 4096.0, 1.0);
    free(got);
    GT_CUDA(flk_bn_backward(dX, NULL, dDY, dDX, dt, rows, c, dgam, dsm, dsi, ddg, ddb, 0.0f,
                            FLK_ACT_NONE, ws, 0));
    got = download_nchw(dDX, dt, n, c, h, w);
    gt_round(dxc, dt, ne);
    gt_close("bn backward dx vs cpu_bn_backward", got, dxc, ne, dt, 8.0, 1.0);
    free(got);
    got = gt_download(ddg, c, FLK_F32);
    gt_close("bn dgamma vs cpu", got, dg, c, FLK_F32, 64.0 * rows, 10.0);
    free(got);
    got = gt_download(ddb, c, FLK_F32);
    gt_close("bn dbeta vs cpu", got, db, c, FLK_F32, 64.0 * rows, 10.0);
    free(got);

    /* activations: forward, then backward from the same x (layout-free, elementwise) */
    for (int a = 0; a < 2; a++) {
        flk_act act = a ? FLK_ACT_GELU : FLK_ACT_RELU;
        const char *nm = a ? "gelu" : "relu";
        float *yc = calloc(ne, 4), *dc = calloc(ne, 4);
        if (a) {
            cpu_gelu_forward((long)ne, xh, yc);
            cpu_gelu_backward((long)ne, xh, dyh, dc);
        } else {
            cpu_relu_forward((long)ne, xh, yc);
            cpu_relu_backward((long)ne, xh, dyh, dc);
        }
        GT_CUDA(flk_act_forward(act, dX, dY, dt, ne, 0));
        got = gt_download(dY, ne, dt);
        gt_round(yc, dt, ne);
        char what[64];
        snprintf(what, sizeof what, "%s forward vs cpu", nm);
        /* scale 2: the data's magnitude (x = 2·N(0,1) + 0.5); both sides round in fp32 with
         * different tanhf/expf, which near tanh's saturation moves GELU' by a few 1e-7 absolute */
        gt_close(what, got, yc, ne, dt, 4.0, 2.0);
        free(got);
        GT_CUDA(flk_act_backward(act, dX, dDY, dDX, dt, ne, 0));
        got = gt_download(dDX, ne, dt);
        gt_round(dc, dt, ne);
        snprintf(what, sizeof what, "%s backward vs cpu", nm);
        gt_close(what, got, dc, ne, dt, 4.0, 2.0);
        free(got);
        free(yc);
        free(dc);
    }
    free(x);
    free(dy);
    free(gam);
    free(bet);
    free(rm);
    free(rv);
    free(save);
    free(y);
    free(dxc);
    free(dg);
    free(db);
    free(xh);
    free(dyh);
    void *fr[] = {dX, dDY, dY, dDX, dgam, dbet, drm, drv, dsm, dsi, ddg, ddb, ws};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++)
        cudaFree(fr[i]);
}

static void test_pools(flk_dtype dt)
{
    struct {
        int k, st, pad, avg, h, w;
    } cases[3] = {{2, 2, 0, 0, 8, 10}, {3, 2, 1, 0, 9, 9}, {2, 2, 0, 1, 6, 8}};
    int n = 4, c = 5;
    for (int t = 0; t < 3; t++) {
        int h = cases[t].h, w = cases[t].w;
        flk_pool_params pp = {n,
                              h,
                              w,
                              c,
                              cases[t].k,
                              cases[t].st,
                              cases[t].pad,
                              cases[t].avg ? FLK_POOL_AVG : FLK_POOL_MAX};
        int oh, ow;
        flk_pool_out_dims(&pp, &oh, &ow);
        tf_shape si = {c, h, w}, so = {c, oh, ow};
        size_t ni = (size_t)n * c * h * w, no = (size_t)n * c * oh * ow;
        float *x = gt_randn_array(ni, 1.0f, 0.0f), *dy = gt_randn_array(no, 1.0f, 0.0f);
        gt_round(x, dt, ni);
        gt_round(dy, dt, no);
        float *y = malloc(no * 4), *dx = calloc(ni, 4);
        int32_t *arg = malloc(no * 4);
        if (cases[t].avg) {
            cpu_avgpool_forward(NULL, n, si, so, pp.k, pp.stride, pp.pad, x, y);
            cpu_avgpool_backward(NULL, n, si, so, pp.k, pp.stride, pp.pad, dy, dx);
        } else {
            cpu_maxpool_forward(NULL, n, si, so, pp.k, pp.stride, pp.pad, x, y, arg);
            cpu_maxpool_backward(NULL, n, si, so, arg, dy, dx);
        }
        float *xh = gt_to_nhwc(x, n, c, h, w), *dyh = gt_to_nhwc(dy, n, c, oh, ow);
        void *dX = gt_upload(xh, ni, dt), *dDY = gt_upload(dyh, no, dt), *dY = gt_alloc(no * 4),
             *dDX = gt_alloc(ni * 4);
        GT_CUDA(flk_pool_forward(&pp, dX, dY, dt, 0));
        float *got = download_nchw(dY, dt, n, c, oh, ow);
        gt_round(y, dt, no);
        gt_close(cases[t].avg ? "avgpool forward vs cpu" : "maxpool forward vs cpu", got, y, no, dt,
                 4.0, 1.0);
        free(got);
        GT_CUDA(flk_pool_backward(&pp, dX, dDY, dDX, dt, 0));
        got = download_nchw(dDX, dt, n, c, h, w);
        gt_round(dx, dt, ni);
        gt_close(cases[t].avg ? "avgpool backward vs cpu" : "maxpool backward vs cpu", got, dx, ni,
                 dt, 4.0, 1.0);
        free(got);
        free(x);
        free(dy);
        free(y);
        free(dx);
        free(arg);
        free(xh);
        free(dyh);
        cudaFree(dX);
        cudaFree(dDY);
        cudaFree(dY);
        cudaFree(dDX);
    }
    /* global average pool: NCHW (C,H,W) -> (C,1,1) equals NHWC -> [N][C] */
    int h = 6, w = 5, cc = 11;
    tf_shape s = {cc, h, w};
    size_t ni = (size_t)n * cc * h * w, no = (size_t)n * cc;
    float *x = gt_randn_array(ni, 1.0f, 0.3f), *dy = gt_randn_array(no, 1.0f, 0.0f);
    gt_round(x, dt, ni);
    gt_round(dy, dt, no);
    float *y = malloc(no * 4), *dx = calloc(ni, 4);
    cpu_gap_forward(n, s, x, y);
    cpu_gap_backward(n, s, dy, dx);
    float *xh = gt_to_nhwc(x, n, cc, h, w);
    void *dX = gt_upload(xh, ni, dt), *dDY = gt_upload(dy, no, dt), *dY = gt_alloc(no * 4),
         *dDX = gt_alloc(ni * 4);
    GT_CUDA(flk_gap_forward(dX, dY, dt, n, h * w, cc, 0));
    float *got = gt_download(dY, no, dt);
    gt_round(y, dt, no);
    gt_close("gap forward vs cpu", got, y, no, dt, 4.0, 1.0);
    free(got);
    GT_CUDA(flk_gap_backward(dDY, dDX, dt, n, h * w, cc, 0));
    got = download_nchw(dDX, dt, n, cc, h, w);
    gt_round(dx, dt, ni);
    gt_close("gap backward vs cpu", got, dx, ni, dt, 4.0, 1e-3);
    free(got);
    free(x);
    free(dy);
    free(y);
    free(dx);
    free(xh);
    cudaFree(dX);
    cudaFree(dDY);
    cudaFree(dY);
    cudaFree(dDX);
}

static void test_xent(flk_dtype dt)
{
    int n = 50, k = 10;
    size_t nk = (size_t)n * k;
    float *z = gt_randn_array(nk, 2.5f, 0.0f), *dl = malloc(nk * 4);
    gt_round(z, dt, nk);
    int32_t lab[50];
    for (int i = 0; i < n; i++)
        lab[i] = (int32_t)(gt_uniform() * k);
    uint32_t c1 = 0, c5 = 0;
    double sum = cpu_softmax_xent(n, k, z, lab, 0.1f, 1.0f / n, dl, &c1, &c5);
    void *dz = gt_upload(z, nk, dt), *ddl = gt_alloc(nk * 4);
    int32_t *dlab = gt_alloc(sizeof lab);
    GT_CUDA(cudaMemcpy(dlab, lab, sizeof lab, cudaMemcpyHostToDevice));
    float *dloss = gt_alloc(n * 4), *dsum = gt_alloc(4);
    long long *dcnt = gt_alloc(16), cnt[2];
    GT_CUDA(flk_xent_forward_backward(dz, dt, dlab, n, k, 0.1f, 1.0f / n, dloss, ddl, dcnt, 0));
    GT_CUDA(flk_sum(dloss, n, dsum, 0));
    float *got = gt_download(dsum, 1, FLK_F32), fs = (float)sum;
    gt_close("softmax xent loss sum vs cpu_softmax_xent", got, &fs, 1, FLK_F32, 64.0 * n * k, 1.0);
    free(got);
    got = gt_download(ddl, nk, dt);
    gt_round(dl, dt, nk);
    gt_close("softmax xent dlogits vs cpu", got, dl, nk, dt, 4.0, 1.0 / n);
    free(got);
    GT_CUDA(cudaMemcpy(cnt, dcnt, 16, cudaMemcpyDeviceToHost));
    EXPECTF(cnt[0] == (long long)c1 && cnt[1] == (long long)c5,
            "[%s] top-1/top-5 counts GPU %lld/%lld vs CPU %u/%u", flk_dtype_name(dt), cnt[0],
            cnt[1], c1, c5);
    free(z);
    free(dl);
    cudaFree(dz);
    cudaFree(ddl);
    cudaFree(dlab);
    cudaFree(dloss);
    cudaFree(dsum);
    cudaFree(dcnt);
}

int main(void)
{
    gt_require_gpu("test_gpu_layers");
    const flk_dtype dts[3] = {FLK_F32, FLK_F16, FLK_BF16};
    for (int d = 0; d < 3; d++) {
        test_input(dts[d]);
        test_bn_act(dts[d]);
        test_pools(dts[d]);
        test_xent(dts[d]);
        printf("test_gpu_layers: %s done (%d failures so far)\n", flk_dtype_name(dts[d]),
               fl_check_failures);
    }
    if (fl_check_failures) {
        fprintf(stderr, "test_gpu_layers: %d failures\n", fl_check_failures);
        return 1;
    }
    printf("test_gpu_layers: every GPU layer matches the CPU backend's layer\n");
    return 0;
}
