/* gpu_backend.c — the CUDA backend of trainfast (tf_backend_cuda): life cycle, the training step
 * (GPU input stage → forward → softmax CE → backward → SGD on fp32 master weights, fp16 loss
 * scaling decided on the device), evaluation with flip TTA / EMA, state get/set, batch probing.
 * Layers run NHWC in the compute type: convolutions in cuDNN (gpu_conv.c), linear in cuBLAS
 * (gpu_linear.c), everything else in kernels/ (BN with a fused ReLU, pools, GAP, add). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_dist.h"
#include "gpu_internal.h"

/* ---- helpers ------------------------------------------------------------------------------------
 */

static int dalloc(void **p, size_t bytes, const char *what, fl_error *err)
{
    *p = NULL;
    if (bytes == 0)
        return 0;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        cudaGetLastError(); /* allocation errors are not sticky; clear for the caller */
        return fl_error_set(err, FL_E_CUDA, "cudaMalloc of %.1f MiB for %s failed: %s%s",
                            (double)bytes / 1048576.0, what, cudaGetErrorString(e),
                            e == cudaErrorMemoryAllocation
                                ? " (hint: out of GPU memory: lower --batch, or use --batch auto)"
                                : "");
    }
    return 0;
}

int gpu_ensure_ws(tf_backend *b, size_t bytes, fl_error *err)
{
    if (bytes <= b->ws_bytes)
        return 0;
    GPU_CUDA(cudaStreamSynchronize(b->stream)); /* the old workspace may still be in use */
    cudaFree(b->ws);
    b->ws = NULL;
    b->ws_bytes = 0;
    GPU_TRY(dalloc(&b->ws, bytes, "cuDNN workspace", err));
    b->ws_bytes = bytes;
    return 0;
}

void *gpu_dx_begin(tf_backend *b, int t) { return b->ginit[t] ? b->scratch : b->grad[t]; }

int gpu_dx_end(tf_backend *b, int t, void *dx, int n, fl_error *err)
{
    if (dx == b->scratch)
        GPU_K(flk_add(b->grad[t], b->scratch, b->grad[t], b->dt, gpu_tensor_elems(b, t, n),
                      b->stream));
    b->ginit[t] = 1;
    return 0;
}

static flk_act act_of(tf_layer_kind k) { return k == TF_GELU ? FLK_ACT_GELU : FLK_ACT_RELU; }

/* Compute-type weight copies from fp32 masters `P` (params or EMA params). */
static int refresh_weights(tf_backend *b, const float *P, fl_error *err)
{
    const tf_model_spec *s = b->spec;
    for (int li = 0; li < s->n_layers; li++) {
        const tf_layer *L = &s->layers[li];
        if (L->kind == TF_CONV)
            GPU_K(flk_filter_to_ohwi(P + L->w_off, b->L[li].wc, b->dt, L->cout, L->cin, L->k, L->k,
                                     b->L[li].cin_pad, b->stream));
        else if (L->kind == TF_LINEAR)
            GPU_K(flk_cast(P + L->w_off, FLK_F32, b->L[li].wc, b->dt, (size_t)L->cout * L->cin,
                           b->stream));
    }
    return 0;
}

/* ---- availability -------------------------------------------------------------------------------
 */

static int gpu_available(char *why, size_t cap)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        /* Without any NVIDIA driver the runtime reports an "insufficient driver": say what it
         * means. */
        int driver = 0;
        cudaDriverGetVersion(&driver);
        if (why && (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) && driver == 0)
            snprintf(why, cap, "no GPU: no NVIDIA driver is installed or loaded");
        else if (why)
            snprintf(why, cap, "no GPU: cudaGetDeviceCount: %s (driver API %d.%d)",
                     cudaGetErrorString(e), driver / 1000, driver % 1000 / 10);
        return 0;
    }
    if (n == 0) {
        if (why)
            snprintf(why, cap, "no GPU: cudaGetDeviceCount found 0 devices");
        return 0;
    }
    return 1;
}

/* ---- create / destroy ---------------------------------------------------------------------------
 */

static void gpu_destroy(tf_backend *b)
{
    if (!b)
        return;
    if (b->stream)
        cudaStreamSynchronize(b->stream);
    if (b->comm_owned)
        tf_gpu_comm_destroy(b->comm); /* made by gpu_attach_comm (gpu_nccl.c) */
    b->comm = NULL;
    const tf_model_spec *s = b->spec;
    if (b->L) {
        for (int li = 0; li < s->n_layers; li++) {
            gpu_conv_teardown(&b->L[li]);
            cudaFree(b->L[li].wc);
            cudaFree(b->L[li].save_mean);
            cudaFree(b->L[li].save_invstd);
        }
        free(b->L);
    }
    if (b->act)
        for (int t = 0; t < s->n_tensors; t++)
            cudaFree(b->act[t]);
    if (b->grad)
        for (int t = 0; t < s->n_tensors; t++)
            cudaFree(b->grad[t]);
    free(b->act);
    free(b->grad);
    free(b->ginit);
    void *bufs[] = {b->scratch, b->scratch2, b->wgrad,   b->ws,    b->bn_ws, b->params,
                    b->mom,     b->gacc,     b->gmicro,  b->stats, b->ema_p, b->ema_s,
                    b->in_u8,   b->labels,   b->indices, b->loss,  b->drb};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    if (b->hrb)
        cudaFreeHost(b->hrb);
    if (b->ev_h2d0)
        cudaEventDestroy(b->ev_h2d0);
    if (b->ev_h2d1)
        cudaEventDestroy(b->ev_h2d1);
    if (b->xdesc)
        cudnnDestroyTensorDescriptor(b->xdesc);
    if (b->ydesc)
        cudnnDestroyTensorDescriptor(b->ydesc);
    if (b->cublas)
        gpu_cublas.destroy(b->cublas);
    if (b->cudnn)
        cudnnDestroy(b->cudnn);
    if (b->stream)
        cudaStreamDestroy(b->stream);
    free(b);
}

static int check_spec(const tf_model_spec *s, const tf_train_config *cfg, fl_error *err)
{
    if (s->in_c < 1 || s->in_c > 3)
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "cuda backend: %d input channels (1..3 supported)", s->in_c);
    if (cfg->precision != TF_FP32 && cfg->precision != TF_BF16 && cfg->precision != TF_FP16)
        return fl_error_set(err, FL_E_INVALID, "cuda backend: unknown precision %d",
                            cfg->precision);
    if (cfg->max_batch < 1 || cfg->max_batch > (1u << 20))
        return fl_error_set(err, FL_E_INVALID, "cuda backend: max_batch %u out of range",
                            cfg->max_batch);
    if (cfg->accum < 1)
        return fl_error_set(err, FL_E_INVALID, "cuda backend: accum %d < 1", cfg->accum);
    tf_shape last = s->tensors[s->n_tensors - 1];
    if (tf_shape_size(last) != s->num_classes)
        return fl_error_set(err, FL_E_INVALID,
                            "cuda backend: output tensor has %lld values for %d classes",
                            (long long)tf_shape_size(last), s->num_classes);
    for (int li = 0; li < s->n_layers; li++) {
        const tf_layer *L = &s->layers[li];
        switch (L->kind) {
        case TF_CONV:
        case TF_BN:
        case TF_RELU:
        case TF_GELU:
        case TF_MAXPOOL:
        case TF_AVGPOOL:
        case TF_GAP:
        case TF_LINEAR:
        case TF_ADD:
        case TF_SCALE: break;
        default:
            return fl_error_set(err, FL_E_UNSUPPORTED, "cuda backend: layer %d has unknown kind %d",
                                li, (int)L->kind);
        }
        if (L->in < 0 || L->in >= s->n_tensors || L->out <= 0 || L->out >= s->n_tensors ||
            (L->kind == TF_ADD && (L->in2 < 0 || L->in2 >= s->n_tensors)))
            return fl_error_set(err, FL_E_INVALID, "cuda backend: layer %d has bad tensor ids", li);
        if ((L->kind == TF_CONV || L->kind == TF_LINEAR) && L->w_off < 0)
            return fl_error_set(err, FL_E_INVALID, "cuda backend: layer %d has no weight", li);
    }
    return 0;
}

/* BN followed by a ReLU that is the only reader of the BN output: run them as one kernel. */
static void plan_fusion(tf_backend *b)
{
    const tf_model_spec *s = b->spec;
    for (int li = 0; li + 1 < s->n_layers; li++) {
        const tf_layer *L = &s->layers[li], *N = &s->layers[li + 1];
        if (L->kind != TF_BN || N->kind != TF_RELU || N->in != L->out)
            continue;
        if (L->out == s->n_tensors - 1)
            continue;
        int readers = 0;
        for (int j = 0; j < s->n_layers; j++) {
            const tf_layer *R = &s->layers[j];
            readers += (R->in == L->out) + (R->kind == TF_ADD && R->in2 == L->out);
        }
        if (readers != 1)
            continue;
        b->L[li].fuse_relu = 1;
        b->L[li + 1].fused_away = 1;
    }
}

/* Everything create allocates; on error the caller destroys the half-built backend. */
static int create_inner(tf_backend *b, fl_error *err)
{
    const tf_model_spec *s = b->spec;
    const tf_train_config *cfg = &b->cfg;
    int nb = b->max_batch;
    struct cudaDeviceProp prop;
    GPU_CUDA(cudaSetDevice(cfg->device));
    GPU_CUDA(cudaGetDeviceProperties(&prop, cfg->device));
    snprintf(b->devname, sizeof b->devname, "%.150s", prop.name);
    b->dev_mem = prop.totalGlobalMem;
    b->cc_major = prop.major;
    b->cc_minor = prop.minor;
    if (b->dt == FLK_BF16 && prop.major < 8)
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "cuda backend: bf16 needs compute capability 8.0+ "
                            "(%s is %d.%d): use --precision fp16",
                            prop.name, prop.major, prop.minor);
    GPU_CUDA(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    GPU_CUDNN(cudnnCreate(&b->cudnn));
    GPU_CUDNN(cudnnSetStream(b->cudnn, b->stream));
    GPU_TRY(gpu_cublas_load(err));
    GPU_CUBLAS(gpu_cublas.create(&b->cublas));
    GPU_CUBLAS(gpu_cublas.set_stream(b->cublas, b->stream));
    /* fp32 must match the CPU reference: no TF32 in cuBLAS (half types use tensor cores anyway) */
    GPU_CUBLAS(gpu_cublas.set_math_mode(b->cublas, CUBLAS_DEFAULT_MATH));
    GPU_CUDNN(cudnnCreateTensorDescriptor(&b->xdesc));
    GPU_CUDNN(cudnnCreateTensorDescriptor(&b->ydesc));
    GPU_CUDA(cudaEventCreate(&b->ev_h2d0));
    GPU_CUDA(cudaEventCreate(&b->ev_h2d1));

    size_t P = (size_t)s->param_count, S = (size_t)s->stat_count;
    GPU_TRY(dalloc((void **)&b->params, P * 4, "master weights", err));
    GPU_TRY(dalloc((void **)&b->mom, P * 4, "momentum", err));
    GPU_TRY(dalloc((void **)&b->gacc, P * 4, "gradient accumulator", err));
    GPU_TRY(dalloc((void **)&b->gmicro, P * 4, "gradients", err));
    GPU_TRY(dalloc((void **)&b->stats, S * 4 + 4, "BN statistics", err));
    if (cfg->ema_decay > 0) {
        GPU_TRY(dalloc((void **)&b->ema_p, P * 4, "EMA weights", err));
        GPU_TRY(dalloc((void **)&b->ema_s, S * 4 + 4, "EMA statistics", err));
    }
    /* everything runs on b->stream, a non-blocking stream that does not order with the legacy
     * default stream: so no plain cudaMemset/cudaMemcpy here or in set_state */
    void *zero_these[] = {b->params, b->mom, b->gacc, b->gmicro};
    for (int i = 0; i < 4; i++)
        GPU_CUDA(cudaMemsetAsync(zero_these[i], 0, P * 4, b->stream));

    b->L = calloc((size_t)s->n_layers, sizeof *b->L);
    b->act = calloc((size_t)s->n_tensors, sizeof *b->act);
    b->grad = calloc((size_t)s->n_tensors, sizeof *b->grad);
    b->ginit = calloc((size_t)s->n_tensors, sizeof *b->ginit);
    if (!b->L || !b->act || !b->grad || !b->ginit)
        return fl_error_set(err, -ENOMEM, "cuda backend: out of host memory");
    /* pad the input's channels (1 or 3) to 8 (half types) / 4 (fp32) when only convolutions read
     * it: cuDNN's NHWC tensor-core kernels want 16-byte channel vectors */
    int only_convs = 1;
    for (int li = 0; li < s->n_layers; li++) {
        const tf_layer *L = &s->layers[li];
        if ((L->in == 0 && L->kind != TF_CONV) || (L->kind == TF_ADD && L->in2 == 0))
            only_convs = 0;
    }
    int q = b->dt == FLK_F32 ? 4 : 8;
    b->in_cpad = only_convs ? (s->in_c + q - 1) / q * q : s->in_c;
    size_t max_t = 0;
    for (int t = 0; t < s->n_tensors; t++) {
        size_t bytes = gpu_tensor_elems(b, t, nb) * b->esize;
        if (t == 0)
            bytes = (size_t)nb * s->in_h * s->in_w * b->in_cpad * b->esize;
        max_t = bytes > max_t ? bytes : max_t;
        char what[64];
        snprintf(what, sizeof what, "activation %d", t);
        GPU_TRY(dalloc(&b->act[t], bytes, what, err));
        if (t > 0) {
            snprintf(what, sizeof what, "gradient of activation %d", t);
            GPU_TRY(dalloc(&b->grad[t], bytes, what, err));
        }
    }
    GPU_TRY(dalloc(&b->scratch, max_t, "scratch", err));
    GPU_TRY(dalloc(&b->scratch2, max_t, "scratch", err));

    size_t max_w = 0, bn_ws = 0;
    for (int li = 0; li < s->n_layers; li++) {
        const tf_layer *L = &s->layers[li];
        gpu_layer *G = &b->L[li];
        tf_shape si = s->tensors[L->in];
        if (L->kind == TF_CONV) {
            size_t w = (size_t)L->cout * (L->in == 0 ? b->in_cpad : L->cin) * L->k * L->k;
            max_w = w > max_w ? w : max_w;
            GPU_TRY(dalloc(&G->wc, w * b->esize, "conv weights", err));
            GPU_TRY(gpu_conv_setup(b, li, err));
        } else if (L->kind == TF_LINEAR) {
            if ((int64_t)L->cin != tf_shape_size(si))
                return fl_error_set(err, FL_E_INVALID,
                                    "cuda backend: linear layer %d: cin %d but input "
                                    "has %lld values",
                                    li, L->cin, (long long)tf_shape_size(si));
            GPU_TRY(dalloc(&G->wc, (size_t)L->cout * L->cin * b->esize, "linear weights", err));
        } else if (L->kind == TF_BN) {
            GPU_TRY(dalloc((void **)&G->save_mean, (size_t)si.c * 4, "BN batch mean", err));
            GPU_TRY(dalloc((void **)&G->save_invstd, (size_t)si.c * 4, "BN batch invstd", err));
            size_t need = flk_bn_ws_bytes(nb * si.h * si.w, si.c);
            bn_ws = need > bn_ws ? need : bn_ws;
        }
    }
    b->bn_ws_bytes = bn_ws;
    GPU_TRY(dalloc(&b->bn_ws, bn_ws, "BN workspace", err));
    GPU_TRY(dalloc(&b->wgrad, max_w * b->esize, "conv weight gradient", err));
    plan_fusion(b);

    /* algorithms for the full batch decide the workspace, allocated once */
    size_t ws = 0;
    for (int li = 0; li < s->n_layers; li++) {
        if (s->layers[li].kind != TF_CONV)
            continue;
        gpu_conv_plan *p;
        size_t need = 0;
        GPU_TRY(gpu_conv_plan_for(b, li, nb, GPU_WS_LIMIT, &need, &p, err));
        ws = need > ws ? need : ws;
    }
    b->ws_bytes = ws;
    GPU_TRY(dalloc(&b->ws, ws, "cuDNN workspace", err));

    size_t in_bytes = (size_t)nb * s->in_c * s->in_h * s->in_w;
    GPU_TRY(dalloc((void **)&b->in_u8, in_bytes, "input batch", err));
    GPU_TRY(dalloc((void **)&b->labels, (size_t)nb * 4, "labels", err));
    GPU_TRY(dalloc((void **)&b->indices, (size_t)nb * 8, "indices", err));
    GPU_TRY(dalloc((void **)&b->loss, (size_t)nb * 4, "per-sample loss", err));
    GPU_TRY(dalloc((void **)&b->drb, sizeof(gpu_readback), "step results", err));
    GPU_CUDA(cudaMallocHost((void **)&b->hrb, sizeof(gpu_readback)));
    GPU_CUDA(cudaStreamSynchronize(b->stream));
    return 0;
}

static int gpu_create(const tf_model_spec *spec, const tf_train_config *cfg, tf_backend **out,
                      fl_error *err)
{
    *out = NULL;
    GPU_TRY(check_spec(spec, cfg, err));
    char why[256];
    if (!gpu_available(why, sizeof why))
        return fl_error_set(err, FL_E_UNSUPPORTED, "%s", why);
    tf_backend *b = calloc(1, sizeof *b);
    if (!b)
        return fl_error_set(err, -ENOMEM, "cuda backend: out of host memory");
    b->spec = spec;
    b->cfg = *cfg;
    b->max_batch = (int)cfg->max_batch;
    b->dt = cfg->precision == TF_BF16 ? FLK_BF16 : cfg->precision == TF_FP16 ? FLK_F16 : FLK_F32;
    b->cudnn_dt = b->dt == FLK_BF16  ? CUDNN_DATA_BFLOAT16
                  : b->dt == FLK_F16 ? CUDNN_DATA_HALF
                                     : CUDNN_DATA_FLOAT;
    b->blas_dt = b->dt == FLK_BF16 ? CUDA_R_16BF : b->dt == FLK_F16 ? CUDA_R_16F : CUDA_R_32F;
    b->esize = flk_dtype_size(b->dt);
    b->loss_scale = 1.0f;
    if (cfg->precision == TF_FP16)
        b->loss_scale = cfg->loss_scale_init > 0 ? cfg->loss_scale_init : 65536.0f;
    int rc = create_inner(b, err);
    if (rc) {
        fl_error_prefix(err, "cuda backend (%s, batch %u)", flk_dtype_name(b->dt), cfg->max_batch);
        gpu_destroy(b);
        return rc;
    }
    *out = b;
    return 0;
}

/* ---- forward / backward -----------------------------------------------------------------------
 */

/* P: weights (params or EMA), S: BN statistics (stats or EMA stats). */
static int forward(tf_backend *b, int n, int train, const float *P, float *S, fl_error *err)
{
    const tf_model_spec *s = b->spec;
    for (int li = 0; li < s->n_layers; li++) {
        const tf_layer *L = &s->layers[li];
        gpu_layer *G = &b->L[li];
        if (G->fused_away)
            continue;
        tf_shape si = s->tensors[L->in];
        void *x = b->act[L->in], *y = b->act[L->out];
        size_t ne = gpu_tensor_elems(b, L->in, n);
        switch (L->kind) {
        case TF_CONV: GPU_TRY(gpu_conv_forward(b, li, n, P, err)); break;
        case TF_BN: {
            int to = G->fuse_relu ? s->layers[li + 1].out : L->out;
            flk_act a = G->fuse_relu ? FLK_ACT_RELU : FLK_ACT_NONE;
            const float *gamma = L->w_off >= 0 ? P + L->w_off : NULL;
            const float *beta = L->b_off >= 0 ? P + L->b_off : NULL;
            float *rm = S + L->stat_off, *rv = rm + si.c;
            if (train)
                GPU_K(flk_bn_forward_train(x, b->act[to], b->dt, n * si.h * si.w, si.c, gamma, beta,
                                           rm, rv, L->bn_momentum, L->bn_eps, G->save_mean,
                                           G->save_invstd, a, b->bn_ws, b->stream));
            else
                GPU_K(flk_bn_forward_eval(x, b->act[to], b->dt, n * si.h * si.w, si.c, gamma, beta,
                                          rm, rv, L->bn_eps, a, b->stream));
            break;
        }
        case TF_RELU:
        case TF_GELU: GPU_K(flk_act_forward(act_of(L->kind), x, y, b->dt, ne, b->stream)); break;
        case TF_MAXPOOL:
        case TF_AVGPOOL: {
            flk_pool_params pp = {
                n,    si.h,      si.w,   si.c,
                L->k, L->stride, L->pad, L->kind == TF_MAXPOOL ? FLK_POOL_MAX : FLK_POOL_AVG};
            GPU_K(flk_pool_forward(&pp, x, y, b->dt, b->stream));
            break;
        }
        case TF_GAP: GPU_K(flk_gap_forward(x, y, b->dt, n, si.h * si.w, si.c, b->stream)); break;
        case TF_LINEAR: GPU_TRY(gpu_linear_forward(b, li, n, P, err)); break;
        case TF_ADD: GPU_K(flk_add(x, b->act[L->in2], y, b->dt, ne, b->stream)); break;
        case TF_SCALE: GPU_K(flk_scale(x, y, b->dt, ne, L->scale, b->stream)); break;
        }
    }
    return 0;
}

/* Gradients of the loss w.r.t. every tensor (written into grad[]) and every parameter (gmicro).
 * grad[last] holds dlogits on entry. */
static int backward(tf_backend *b, int n, fl_error *err)
{
    const tf_model_spec *s = b->spec;
    const float *P = b->params;
    memset(b->ginit, 0, sizeof(int) * (size_t)s->n_tensors);
    b->ginit[s->n_tensors - 1] = 1;
    GPU_CUDA(cudaMemsetAsync(b->gmicro, 0, (size_t)s->param_count * 4, b->stream));
    for (int li = s->n_layers - 1; li >= 0; li--) {
        const tf_layer *L = &s->layers[li];
        gpu_layer *G = &b->L[li];
        if (G->fused_away)
            continue;
        int to = (L->kind == TF_BN && G->fuse_relu) ? s->layers[li + 1].out : L->out;
        if (!b->ginit[to])
            continue; /* nothing flows back through this layer: its grads stay 0 */
        tf_shape si = s->tensors[L->in];
        const void *dy = b->grad[to];
        size_t ne = gpu_tensor_elems(b, L->in, n);
        int need_dx = L->in != 0;
        void *dx = NULL;
        switch (L->kind) {
        case TF_CONV: GPU_TRY(gpu_conv_backward(b, li, n, err)); break;
        case TF_LINEAR: GPU_TRY(gpu_linear_backward(b, li, n, err)); break;
        case TF_BN: {
            /* the BN gradient is needed for gamma/beta even when the input needs none */
            dx = need_dx ? gpu_dx_begin(b, L->in) : b->scratch;
            const float *gamma = L->w_off >= 0 ? P + L->w_off : NULL;
            GPU_K(flk_bn_backward(b->act[L->in], b->act[to], dy, dx, b->dt, n * si.h * si.w, si.c,
                                  gamma, G->save_mean, G->save_invstd,
                                  L->w_off >= 0 ? b->gmicro + L->w_off : NULL,
                                  L->b_off >= 0 ? b->gmicro + L->b_off : NULL, 0.0f,
                                  G->fuse_relu ? FLK_ACT_RELU : FLK_ACT_NONE, b->bn_ws, b->stream));
            if (need_dx)
                GPU_TRY(gpu_dx_end(b, L->in, dx, n, err));
            break;
        }
        case TF_RELU:
        case TF_GELU:
            if (!need_dx)
                break;
            dx = gpu_dx_begin(b, L->in);
            GPU_K(flk_act_backward(act_of(L->kind), b->act[L->in], dy, dx, b->dt, ne, b->stream));
            GPU_TRY(gpu_dx_end(b, L->in, dx, n, err));
            break;
        case TF_MAXPOOL:
        case TF_AVGPOOL: {
            if (!need_dx)
                break;
            flk_pool_params pp = {
                n,    si.h,      si.w,   si.c,
                L->k, L->stride, L->pad, L->kind == TF_MAXPOOL ? FLK_POOL_MAX : FLK_POOL_AVG};
            dx = gpu_dx_begin(b, L->in);
            GPU_K(flk_pool_backward(&pp, b->act[L->in], dy, dx, b->dt, b->stream));
            GPU_TRY(gpu_dx_end(b, L->in, dx, n, err));
            break;
        }
        case TF_GAP:
            if (!need_dx)
                break;
            dx = gpu_dx_begin(b, L->in);
            GPU_K(flk_gap_backward(dy, dx, b->dt, n, si.h * si.w, si.c, b->stream));
            GPU_TRY(gpu_dx_end(b, L->in, dx, n, err));
            break;
        case TF_ADD: {
            int ins[2] = {L->in, L->in2};
            for (int k = 0; k < 2; k++) {
                int u = ins[k];
                if (u == 0)
                    continue;
                if (!b->ginit[u]) {
                    GPU_CUDA(cudaMemcpyAsync(b->grad[u], dy, ne * b->esize,
                                             cudaMemcpyDeviceToDevice, b->stream));
                    b->ginit[u] = 1;
                } else {
                    GPU_K(flk_add(b->grad[u], dy, b->grad[u], b->dt, ne, b->stream));
                }
            }
            break;
        }
        case TF_SCALE:
            if (!need_dx)
                break;
            dx = gpu_dx_begin(b, L->in);
            GPU_K(flk_scale(dy, dx, b->dt, ne, L->scale, b->stream));
            GPU_TRY(gpu_dx_end(b, L->in, dx, n, err));
            break;
        }
    }
    return 0;
}

/* ---- input
 * --------------------------------------------------------------------------------------- */

/* Batch → act[0] (normalized, NHWC, compute type) and labels on the device. flip: 0 none, 1 random
 * (training augmentation), 2 all (TTA); pad: crop padding (0 none). */
static int stage_input(tf_backend *b, const tf_batch *bt, int pad, int flip, int *copied,
                       fl_error *err)
{
    const tf_model_spec *s = b->spec;
    int n = (int)bt->n;
    if (bt->n < 1 || (int)bt->n > b->max_batch)
        return fl_error_set(err, FL_E_INVALID, "cuda backend: batch of %u samples (max %d)", bt->n,
                            b->max_batch);
    if ((int)bt->h != s->in_h || (int)bt->w != s->in_w || (int)bt->c != s->in_c)
        return fl_error_set(err, FL_E_INVALID,
                            "cuda backend: batch images are %ux%ux%u, model "
                            "expects %dx%dx%d (HxWxC)",
                            bt->h, bt->w, bt->c, s->in_h, s->in_w, s->in_c);
    size_t bytes = (size_t)n * bt->h * bt->w * bt->c;
    const uint8_t *src;
    const int32_t *lab;
    *copied = 0;
    if (bt->device_images && bt->device_labels) {
        /* loader device mode: the copies ran on the loader's stream; order after them */
        if (bt->event)
            GPU_CUDA(cudaStreamWaitEvent(b->stream, (cudaEvent_t)bt->event, 0));
        src = (const uint8_t *)bt->device_images;
        lab = (const int32_t *)bt->device_labels;
    } else {
        GPU_CUDA(cudaEventRecord(b->ev_h2d0, b->stream));
        GPU_CUDA(cudaMemcpyAsync(b->in_u8, bt->images, bytes, cudaMemcpyHostToDevice, b->stream));
        GPU_CUDA(cudaMemcpyAsync(b->labels, bt->labels, (size_t)n * 4, cudaMemcpyHostToDevice,
                                 b->stream));
        GPU_CUDA(cudaEventRecord(b->ev_h2d1, b->stream));
        src = b->in_u8;
        lab = b->labels;
        *copied = 1;
    }
    if (lab != b->labels)
        GPU_CUDA(
            cudaMemcpyAsync(b->labels, lab, (size_t)n * 4, cudaMemcpyDeviceToDevice, b->stream));
    const uint64_t *idx = NULL;
    if (bt->indices && (pad > 0 || flip == 1)) {
        GPU_CUDA(cudaMemcpyAsync(b->indices, bt->indices, (size_t)n * 8, cudaMemcpyHostToDevice,
                                 b->stream));
        idx = b->indices;
    }
    flk_input_params p;
    memset(&p, 0, sizeof p);
    p.n = n;
    p.h = s->in_h;
    p.w = s->in_w;
    p.c = s->in_c;
    for (int c = 0; c < s->in_c; c++) {
        /* spec: x = (u8/255 − mean)/std  ⇔  (u8 − 255·mean)/(255·std) */
        p.mean[c] = 255.0f * s->mean[c];
        p.stddev[c] = 255.0f * s->std[c];
    }
    p.nchw = 0;
    p.pad = pad;
    p.pad_mode = FLK_PAD_ZERO;
    p.flip = flip;
    p.seed = b->cfg.aug_seed;
    p.epoch = bt->epoch;
    p.c_out = b->in_cpad;
    GPU_K(flk_input_u8(src, b->act[0], b->dt, &p, idx, b->stream));
    return 0;
}

/* ---- train step -------------------------------------------------------------------------------
 */

/* Merge consecutive parameter tensors with the same decay into one optimizer launch. */
static int optimizer_step(tf_backend *b, float lr, fl_error *err)
{
    const tf_model_spec *s = b->spec;
    const int *skip = b->dt == FLK_F16 ? &b->drb->found_inf : NULL;
    int i = 0;
    while (i < s->n_params) {
        int j = i + 1;
        int64_t end = s->params[i].offset + s->params[i].count;
        while (j < s->n_params && s->params[j].no_decay == s->params[i].no_decay &&
               s->params[j].offset == end) {
            end += s->params[j].count;
            j++;
        }
        int64_t off = s->params[i].offset;
        float wd = s->params[i].no_decay ? 0.0f : b->cfg.weight_decay;
        GPU_K(flk_sgd_step(b->params + off, b->gacc + off, b->mom + off, (size_t)(end - off), lr,
                           b->cfg.momentum, wd, b->cfg.nesterov, NULL, FLK_F32, skip, b->stream));
        i = j;
    }
    if (b->cfg.ema_decay > 0) {
        GPU_K(flk_ema_update(b->ema_p, b->params, (size_t)s->param_count, b->cfg.ema_decay, skip,
                             b->stream));
        GPU_K(flk_ema_update(b->ema_s, b->stats, (size_t)s->stat_count, b->cfg.ema_decay, skip,
                             b->stream));
    }
    GPU_CUDA(cudaMemsetAsync(b->gacc, 0, (size_t)s->param_count * 4, b->stream));
    return refresh_weights(b, b->params, err);
}

static int gpu_train_step(tf_backend *b, const tf_batch *bt, float lr, tf_step_result *res,
                          fl_error *err)
{
    const tf_model_spec *s = b->spec;
    int n = (int)bt->n, copied = 0;
    memset(res, 0, sizeof *res);
    GPU_CUDA(cudaSetDevice(b->cfg.device));
    GPU_CUDA(cudaMemsetAsync(b->drb, 0, sizeof(gpu_readback), b->stream));
    GPU_TRY(stage_input(b, bt, b->cfg.crop_pad, b->cfg.flip ? 1 : 0, &copied, err));
    GPU_TRY(forward(b, n, 1, b->params, b->stats, err));
    int last = s->n_tensors - 1;
    /* an epoch's last accumulation group may hold fewer micro-batches (backend.h) */
    const int group = bt->accum_group ? (int)bt->accum_group : b->cfg.accum;
    float gs = b->loss_scale / ((float)n * (float)group);
    GPU_K(flk_xent_forward_backward(b->act[last], b->dt, b->labels, n, s->num_classes,
                                    b->cfg.label_smoothing, gs, b->loss, b->grad[last],
                                    b->drb->counts, b->stream));
    GPU_K(flk_sum(b->loss, n, &b->drb->loss_sum, b->stream));
    GPU_TRY(backward(b, n, err));
    /* unscale into the fp32 accumulator (the state keeps true gradients) */
    GPU_K(flk_accum_grad(b->gmicro, FLK_F32, b->gacc, (size_t)s->param_count, 1.0f / b->loss_scale,
                         b->accum_count > 0 ? 1.0f : 0.0f, b->stream));
    b->accum_count++;
    b->micro_step++;
    int stepped = 0;
    if ((int)b->accum_count >= group) {
        /* data-parallel: average before the inf check, so every rank skips or steps together */
        GPU_TRY(gpu_allreduce_grads(b, err));
        if (b->dt == FLK_F16)
            GPU_K(flk_unscale_check(b->gacc, (size_t)s->param_count, 1.0f, &b->drb->found_inf,
                                    b->stream));
        GPU_TRY(optimizer_step(b, lr, err));
        b->accum_count = 0;
        stepped = 1;
    }
    GPU_CUDA(
        cudaMemcpyAsync(b->hrb, b->drb, sizeof(gpu_readback), cudaMemcpyDeviceToHost, b->stream));
    GPU_CUDA(cudaStreamSynchronize(b->stream));
    res->loss = (double)b->hrb->loss_sum / n;
    res->correct = (uint32_t)b->hrb->counts[0];
    res->n = (uint32_t)n;
    res->stepped = stepped;
    if (copied) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, b->ev_h2d0, b->ev_h2d1) == cudaSuccess)
            res->h2d_s = ms * 1e-3;
    }
    if (stepped) {
        b->step++;
        if (b->dt == FLK_F16) {
            int gs_i = (int)b->good_steps;
            int window = b->cfg.loss_scale_window > 0 ? b->cfg.loss_scale_window : 1000;
            res->skipped = flk_loss_scale_update(&b->loss_scale, &gs_i, b->hrb->found_inf, window);
            b->good_steps = (uint32_t)gs_i;
            b->skipped_steps += (uint64_t)res->skipped;
        }
    }
    return 0;
}

/* ---- eval
 * ----------------------------------------------------------------------------------------- */

static int gpu_eval_batch(tf_backend *b, const tf_batch *bt, int flip_tta, int use_ema,
                          tf_eval_result *res, fl_error *err)
{
    const tf_model_spec *s = b->spec;
    int n = (int)bt->n, copied;
    memset(res, 0, sizeof *res);
    if (use_ema && !(b->cfg.ema_decay > 0))
        return fl_error_set(err, FL_E_INVALID,
                            "cuda backend: eval with EMA weights but EMA is off");
    GPU_CUDA(cudaSetDevice(b->cfg.device));
    const float *P = use_ema ? b->ema_p : b->params;
    float *S = use_ema ? b->ema_s : b->stats;
    if (use_ema)
        GPU_TRY(refresh_weights(b, P, err));
    GPU_CUDA(cudaMemsetAsync(b->drb, 0, sizeof(gpu_readback), b->stream));
    int last = s->n_tensors - 1;
    size_t nl = (size_t)n * s->num_classes;
    int rc = stage_input(b, bt, 0, 0, &copied, err);
    if (!rc)
        rc = forward(b, n, 0, P, S, err);
    if (!rc && flip_tta) {
        /* logits of the mirror image, then the mean of both */
        cudaError_t e = cudaMemcpyAsync(b->scratch, b->act[last], nl * b->esize,
                                        cudaMemcpyDeviceToDevice, b->stream);
        if (e != cudaSuccess)
            rc = gpu_fail_cuda(err, e, "cudaMemcpyAsync", __FILE__, __LINE__);
        if (!rc)
            rc = stage_input(b, bt, 0, 2, &copied, err);
        if (!rc)
            rc = forward(b, n, 0, P, S, err);
        if (!rc) {
            e = flk_add(b->act[last], b->scratch, b->act[last], b->dt, nl, b->stream);
            if (e == cudaSuccess)
                e = flk_scale(b->act[last], b->act[last], b->dt, nl, 0.5f, b->stream);
            if (e != cudaSuccess)
                rc = gpu_fail_cuda(err, e, "TTA mean", __FILE__, __LINE__);
        }
    }
    if (use_ema) { /* back to the training weights whatever happened */
        int r2 = refresh_weights(b, b->params, err);
        if (!rc)
            rc = r2;
    }
    if (rc)
        return rc;
    GPU_K(flk_xent_forward_backward(b->act[last], b->dt, b->labels, n, s->num_classes, 0.0f, 0.0f,
                                    b->loss, NULL, b->drb->counts, b->stream));
    GPU_K(flk_sum(b->loss, n, &b->drb->loss_sum, b->stream));
    GPU_CUDA(
        cudaMemcpyAsync(b->hrb, b->drb, sizeof(gpu_readback), cudaMemcpyDeviceToHost, b->stream));
    GPU_CUDA(cudaStreamSynchronize(b->stream));
    res->loss_sum = b->hrb->loss_sum;
    res->correct1 = (uint32_t)b->hrb->counts[0];
    res->correct5 = (uint32_t)b->hrb->counts[1];
    res->n = (uint32_t)n;
    return 0;
}

/* backend.h predict_batch: eval_batch's forward without TTA, the logits converted to fp32 on the
 * device (into scratch: it holds the largest tensor, at least max_batch x H x W x 8 halves for the
 * input, far more than max_batch x classes floats; checked) and copied to the caller. */
static int gpu_predict_batch(tf_backend *b, const tf_batch *bt, int use_ema, float *logits,
                             fl_error *err)
{
    const tf_model_spec *s = b->spec;
    int n = (int)bt->n, copied, last = s->n_tensors - 1;
    size_t nl = (size_t)n * s->num_classes;
    size_t room = (size_t)b->max_batch * s->in_h * s->in_w * b->in_cpad * b->esize;
    if (use_ema && !(b->cfg.ema_decay > 0))
        return fl_error_set(err, FL_E_INVALID,
                            "cuda backend: predict with EMA weights but EMA is off");
    if (b->dt != FLK_F32 && nl * 4 > room)
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "cuda backend: %zu logits do not fit the scratch "
                            "buffer (%zu bytes)",
                            nl, room);
    GPU_CUDA(cudaSetDevice(b->cfg.device));
    const float *P = use_ema ? b->ema_p : b->params;
    float *S = use_ema ? b->ema_s : b->stats;
    if (use_ema)
        GPU_TRY(refresh_weights(b, P, err));
    int rc = stage_input(b, bt, 0, 0, &copied, err);
    if (!rc)
        rc = forward(b, n, 0, P, S, err);
    const void *src = b->act[last];
    if (!rc && b->dt != FLK_F32) {
        cudaError_t e = flk_cast(b->act[last], b->dt, b->scratch, FLK_F32, nl, b->stream);
        if (e != cudaSuccess)
            rc = gpu_fail_cuda(err, e, "flk_cast (logits)", __FILE__, __LINE__);
        src = b->scratch;
    }
    if (!rc) {
        cudaError_t e = cudaMemcpyAsync(logits, src, nl * 4, cudaMemcpyDeviceToHost, b->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(b->stream);
        if (e != cudaSuccess)
            rc = gpu_fail_cuda(err, e, "logits to the host", __FILE__, __LINE__);
    }
    if (use_ema) { /* back to the training weights whatever happened */
        int r2 = refresh_weights(b, b->params, err);
        if (!rc)
            rc = r2;
    }
    return rc;
}

/* ---- state
 * ---------------------------------------------------------------------------------------- */

/* Host <-> device copies of the state, ordered on b->stream and waited for. */
static int copy_in(tf_backend *b, void *dst, const void *src, size_t bytes, fl_error *err)
{
    if (bytes == 0)
        return 0;
    if (src)
        GPU_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, b->stream));
    else
        GPU_CUDA(cudaMemsetAsync(dst, 0, bytes, b->stream));
    return 0;
}

static int copy_out(tf_backend *b, void *dst, const void *src, size_t bytes, fl_error *err)
{
    if (bytes && dst && src)
        GPU_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, b->stream));
    return 0;
}

static int gpu_get_state(tf_backend *b, tf_state *st, fl_error *err)
{
    size_t P = (size_t)b->spec->param_count * 4, S = (size_t)b->spec->stat_count * 4;
    GPU_CUDA(cudaSetDevice(b->cfg.device));
    GPU_TRY(copy_out(b, st->params, b->params, P, err));
    GPU_TRY(copy_out(b, st->momentum, b->mom, P, err));
    GPU_TRY(copy_out(b, st->grad_accum, b->gacc, P, err));
    GPU_TRY(copy_out(b, st->stats, b->stats, S, err));
    GPU_TRY(copy_out(b, st->ema_params, b->ema_p, P, err));
    GPU_TRY(copy_out(b, st->ema_stats, b->ema_s, S, err));
    GPU_CUDA(cudaStreamSynchronize(b->stream));
    st->step = b->step;
    st->micro_step = b->micro_step;
    st->accum_count = b->accum_count;
    st->loss_scale = b->loss_scale;
    st->good_steps = b->good_steps;
    st->skipped_steps = b->skipped_steps;
    return 0;
}

static int gpu_set_state(tf_backend *b, const tf_state *st, fl_error *err)
{
    size_t P = (size_t)b->spec->param_count * 4, S = (size_t)b->spec->stat_count * 4;
    if (!st->params)
        return fl_error_set(err, FL_E_INVALID, "cuda backend: set_state without params");
    if (S && !st->stats)
        return fl_error_set(err, FL_E_INVALID, "cuda backend: set_state without BN statistics");
    GPU_CUDA(cudaSetDevice(b->cfg.device));
    GPU_TRY(copy_in(b, b->params, st->params, P, err));
    GPU_TRY(copy_in(b, b->mom, st->momentum, P, err));    /* NULL: zeros */
    GPU_TRY(copy_in(b, b->gacc, st->grad_accum, P, err)); /* NULL: zeros */
    GPU_TRY(copy_in(b, b->stats, st->stats, S, err));
    if (b->ema_p) { /* EMA starts from the weights when the state has none */
        GPU_TRY(copy_in(b, b->ema_p, st->ema_params ? st->ema_params : st->params, P, err));
        GPU_TRY(copy_in(b, b->ema_s, st->ema_stats ? st->ema_stats : st->stats, S, err));
    }
    b->step = st->step;
    b->micro_step = st->micro_step;
    b->accum_count = st->accum_count;
    b->good_steps = st->good_steps;
    b->skipped_steps = st->skipped_steps;
    if (b->dt == FLK_F16)
        b->loss_scale = st->loss_scale > 0 ? st->loss_scale : b->loss_scale;
    GPU_TRY(refresh_weights(b, b->params, err));
    /* the host arrays may be freed as soon as we return */
    GPU_CUDA(cudaStreamSynchronize(b->stream));
    return 0;
}

/* ---- batch probing, description
 * --------------------------------------------------------------------- */

/* Largest power of two ≤ limit for which create + one training step succeed. */
static int gpu_probe_batch(const tf_model_spec *spec, const tf_train_config *cfg, uint32_t limit,
                           uint32_t *batch, fl_error *err)
{
    uint32_t bs = 1;
    while (bs * 2 <= limit)
        bs *= 2;
    size_t img = (size_t)spec->in_c * spec->in_h * spec->in_w;
    fl_error last;
    fl_error_clear(&last);
    for (; bs >= 1; bs /= 2) {
        tf_train_config c = *cfg;
        c.max_batch = bs;
        tf_backend *b = NULL;
        int rc = gpu_create(spec, &c, &b, &last);
        if (!rc) {
            uint8_t *imgs = calloc(bs, img);
            int32_t *labels = calloc(bs, sizeof(int32_t));
            if (!imgs || !labels)
                rc = fl_error_set(&last, -ENOMEM, "out of host memory");
            if (!rc) {
                tf_batch bt = {imgs,
                               labels,
                               NULL,
                               0,
                               bs,
                               (uint32_t)spec->in_h,
                               (uint32_t)spec->in_w,
                               (uint32_t)spec->in_c,
                               NULL,
                               NULL,
                               NULL,
                               NULL};
                tf_step_result r;
                rc = gpu_train_step(b, &bt, 0.0f, &r, &last);
            }
            free(imgs);
            free(labels);
            gpu_destroy(b);
        }
        if (!rc) {
            *batch = bs;
            return 0;
        }
        if (last.code != FL_E_CUDA)
            break; /* not a memory problem: report it */
        cudaGetLastError();
    }
    if (err)
        *err = last;
    return last.code ? last.code : FL_E_CUDA;
}

static void gpu_describe(tf_backend *b, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s, %.0f GiB, cc %d.%d, %s, cuDNN %zu, NHWC", b->devname,
             (double)b->dev_mem / (1024.0 * 1024.0 * 1024.0), b->cc_major, b->cc_minor,
             flk_dtype_name(b->dt), cudnnGetVersion());
}

static const tf_backend_ops GPU_OPS = {
    "cuda",         gpu_available, gpu_create,      gpu_train_step,
    gpu_eval_batch, gpu_get_state, gpu_set_state,   gpu_probe_batch,
    gpu_describe,   gpu_destroy,   gpu_attach_comm, gpu_predict_batch,
};

const tf_backend_ops *tf_backend_cuda(void) { return &GPU_OPS; }
