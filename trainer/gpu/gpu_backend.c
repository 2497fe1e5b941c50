/* gpu_backend.c — the CUDA backend of trainfast (tf_backend_cuda): life cycle, the training step
 * (GPU input stage → forward → softmax CE → backward → SGD on fp32 master weights, fp16 loss
 * scaling decided on the device), evaluation with flip TTA / EMA, state get/set, batch probing.
 * Layers run NHWC in the compute type: convolutions in cuDNN (gpu_conv.c), linear in cuBLAS
 * (gpu_linear.c), everything else in kernels/ (BN with a fused ReLU, pools, GAP, add). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"

/* Upper bound for the cuDNN workspace; the actual size is the largest any chosen algorithm needs. */
#define GPU_WS_LIMIT ((size_t)512 << 20)

/* ---- helpers ------------------------------------------------------------------------------------ */

static int dalloc(void **p, size_t bytes, const char *what, fl_error *err) {
    *p = NULL;
    if (bytes == 0) return 0;
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

void *gpu_dx_begin(tf_backend *b, int t) { return b->ginit[t] ? b->scratch : b->grad[t]; }

int gpu_dx_end(tf_backend *b, int t, void *dx, int n, fl_error *err) {
    if (dx == b->scratch)
        GPU_K(flk_add(b->grad[t], b->scratch, b->grad[t], b->dt, gpu_tensor_elems(b, t, n), b->stream));
    b->ginit[t] = 1;
    return 0;
}

static flk_act act_of(tf_layer_kind k) { return k == TF_GELU ? FLK_ACT_GELU : FLK_ACT_RELU; }

/* Compute-type weight copies from fp32 masters `P` (params or EMA params). */
static int refresh_weights(tf_backend *b, const float *P, fl_error *err) {
    const tf_model_spec *s = b->spec;
    for (int li = 0; li < s->n_layers; li++) {
        const tf_layer *L = &s->layers[li];
        if (L->kind == TF_CONV)
            GPU_K(flk_filter_to_ohwi(P + L->w_off, b->L[li].wc, b->dt, L->cout, L->cin, L->k, L->k,
                                     b->stream));
        else if (L->kind == TF_LINEAR)
            GPU_K(flk_cast(P + L->w_off, FLK_F32, b->L[li].wc, b->dt, (size_t)L->cout * L->cin,
                           b->stream));
    }
    return 0;
}

/* ---- availability ------------------------------------------------------------------------------- */

static int gpu_available(char *why, size_t cap) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (why) snprintf(why, cap, "no GPU: cudaGetDeviceCount: %s", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0) {
        if (why) snprintf(why, cap, "no GPU: cudaGetDeviceCount found 0 devices");
        return 0;
    }
    return 1;
}

/* ---- create / destroy --------------------------------------------------------------------------- */

static void gpu_destroy(tf_backend *b) {
    if (!b) return;
    if (b->stream) cudaStreamSynchronize(b->stream);
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
        for (int t = 0; t < s->n_tensors; t++) cudaFree(b->act[t]);
    if (b->grad)
        for (int t = 0; t < s->n_tensors; t++) cudaFree(b->grad[t]);
    free(b->act);
    free(b->grad);
    free(b->ginit);
    void *bufs[] = {b->scratch, b->scratch2, b->wgrad, b->ws, b->bn_ws, b->params, b->mom, b->gacc,
                    b->gmicro, b->stats, b->ema_p, b->ema_s, b->in_u8, b->labels, b->indices,
                    b->loss, b->drb};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    if (b->hrb) cudaFreeHost(b->hrb);
    if (b->ev_h2d0) cudaEventDestroy(b->ev_h2d0);
    if (b->ev_h2d1) cudaEventDestroy(b->ev_h2d1);
    if (b->xdesc) cudnnDestroyTensorDescriptor(b->xdesc);
    if (b->ydesc) cudnnDestroyTensorDescriptor(b->ydesc);
    if (b->cublas) cublasDestroy(b->cublas);
    if (b->cudnn) cudnnDestroy(b->cudnn);
    if (b->stream) cudaStreamDestroy(b->stream);
    free(b);
}

static int check_spec(const tf_model_spec *s, const tf_train_config *cfg, fl_error *err) {
    if (s->in_c < 1 || s->in_c > 3)
        return fl_error_set(err, FL_E_UNSUPPORTED, "cuda backend: %d input channels (1..3 supported)",
                            s->in_c);
    if (cfg->precision != TF_FP32 && cfg->precision != TF_BF16 && cfg->precision != TF_FP16)
        return fl_error_set(err, FL_E_INVALID, "cuda backend: unknown precision %d", cfg->precision);
    if (cfg->max_batch < 1 || cfg->max_batch > (1u << 20))
        return fl_error_set(err, FL_E_INVALID, "cuda backend: max_batch %u out of range", cfg->max_batch);
    if (cfg->accum < 1)
        return fl_error_set(err, FL_E_INVALID, "cuda backend: accum %d < 1", cfg->accum);
    tf_shape last = s->tensors[s->n_tensors - 1];
    if (tf_shape_size(last) != s->num_classes)
        return fl_error_set(err, FL_E_INVALID, "cuda backend: output tensor has %lld values for %d classes",
                            (long long)tf_shape_size(last), s->num_classes);
    for (int li = 0; li < s->n_layers; li++) {
        const tf_layer *L = &s->layers[li];
        switch (L->kind) {
        case TF_CONV: case TF_BN: case TF_RELU: case TF_GELU: case TF_MAXPOOL: case TF_AVGPOOL:
        case TF_GAP: case TF_LINEAR: case TF_ADD: case TF_SCALE:
            break;
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
static void plan_fusion(tf_backend *b) {
    const tf_model_spec *s = b->spec;
    for (int li = 0; li + 1 < s->n_layers; li++) {
        const tf_layer *L = &s->layers[li], *N = &s->layers[li + 1];
        if (L->kind != TF_BN || N->kind != TF_RELU || N->in != L->out) continue;
        if (L->out == s->n_tensors - 1) continue;
        int readers = 0;
        for (int j = 0; j < s->n_layers; j++) {
            const tf_layer *R = &s->layers[j];
            readers += (R->in == L->out) + (R->kind == TF_ADD && R->in2 == L->out);
        }
        if (readers != 1) continue;
        b->L[li].fuse_relu = 1;
        b->L[li + 1].fused_away = 1;
    }
}

static int gpu_create(const tf_model_spec *spec, const tf_train_config *cfg, tf_backend **out,
                      fl_error *err) {
    *out = NULL;
    GPU_TRY(check_spec(spec, cfg, err));
    char why[256];
    if (!gpu_available(why, sizeof why)) return fl_error_set(err, FL_E_UNSUPPORTED, "%s", why);
    tf_backend *b = calloc(1, sizeof *b);
    if (!b) return fl_error_set(err, -ENOMEM, "cuda backend: out of host memory");
    b->spec = spec;
    b->cfg = *cfg;
    b->max_batch = (int)cfg->max_batch;
    b->dt = cfg->precision == TF_BF16 ? FLK_BF16 : cfg->precision == TF_FP16 ? FLK_F16 : FLK_F32;
    b->cudnn_dt = b->dt == FLK_BF16 ? CUDNN_DATA_BFLOAT16 : b->dt == FLK_F16 ? CUDNN_DATA_HALF
                                                                             : CUDNN_DATA_FLOAT;
    b->blas_dt = b->dt == FLK_BF16 ? CUDA_R_16BF : b->dt == FLK_F16 ? CUDA_R_16F : CUDA_R_32F;
    b->esize = flk_dtype_size(b->dt);
    b->loss_scale = cfg->precision == TF_FP16 ? (cfg->loss_scale_init > 0 ? cfg->loss_scale_init : 65536.0f)
                                              : 1.0f;
    int rc = 0;
#define C(x)                                                                                       \
    do {                                                                                           \
        rc = (x);                                                                                  \
        if (rc) goto fail;                                                                         \
    } while (0)
    C(gpu_fail_if(cudaSetDevice(cfg->device)));
    ;
fail:
    gpu_destroy(b);
    return rc;
#undef C
}
