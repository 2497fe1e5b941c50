/* gpu_conv.c — convolutions through cuDNN's legacy API in NHWC (tensor-core friendly): descriptors,
 * algorithms from the cudnnGet*Algorithm_v7 heuristics cached per batch size within the workspace
 * sized once at create, forward (+ bias kernel) and backward data / filter with fp32 accumulation.
 */
#include <string.h>

#include "gpu_internal.h"

int gpu_conv_setup(tf_backend *b, int li, fl_error *err)
{
    const tf_layer *L = &b->spec->layers[li];
    gpu_layer *G = &b->L[li];
    GPU_CUDNN(cudnnCreateFilterDescriptor(&G->wdesc));
    GPU_CUDNN(cudnnCreateConvolutionDescriptor(&G->cdesc));
    /* NHWC filter layout = OHWI ("KRSC"); flk_filter_to_ohwi packs the OIHW master into it */
    G->cin_pad = L->in == 0 ? b->in_cpad : L->cin;
    GPU_CUDNN(cudnnSetFilter4dDescriptor(G->wdesc, b->cudnn_dt, CUDNN_TENSOR_NHWC, L->cout,
                                         G->cin_pad, L->k, L->k));
    GPU_CUDNN(cudnnSetConvolution2dDescriptor(G->cdesc, L->pad, L->pad, L->stride, L->stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    /* half types: tensor cores; fp32: plain FMA so fp32 matches the CPU reference (no TF32) */
    GPU_CUDNN(cudnnSetConvolutionMathType(G->cdesc, b->dt == FLK_F32 ? CUDNN_FMA_MATH
                                                                     : CUDNN_TENSOR_OP_MATH));
    return 0;
}

void gpu_conv_teardown(gpu_layer *G)
{
    if (G->wdesc)
        cudnnDestroyFilterDescriptor(G->wdesc);
    if (G->cdesc)
        cudnnDestroyConvolutionDescriptor(G->cdesc);
    G->wdesc = NULL;
    G->cdesc = NULL;
}

static int set_io_desc(tf_backend *b, int li, int n, fl_error *err)
{
    const tf_layer *L = &b->spec->layers[li];
    tf_shape si = b->spec->tensors[L->in], so = b->spec->tensors[L->out];
    int ci = b->L[li].cin_pad;
    GPU_CUDNN(
        cudnnSetTensor4dDescriptor(b->xdesc, CUDNN_TENSOR_NHWC, b->cudnn_dt, n, ci, si.h, si.w));
    GPU_CUDNN(
        cudnnSetTensor4dDescriptor(b->ydesc, CUDNN_TENSOR_NHWC, b->cudnn_dt, n, so.c, so.h, so.w));
    return 0;
}

/* Pick from cuDNN's ranked list (perf array `arr` of `n` entries) the first algorithm that fits the
 * workspace limit, preferring deterministic ones; sets `found`, stores the algorithm in `dst` and
 * raises `need`. A macro because the three perf structs differ only in their algo type. */
#define PICK_ALGO(arr, n, dst)                                                                     \
    do {                                                                                           \
        found = 0;                                                                                 \
        for (int pass = 0; pass < 2 && !found; pass++)                                             \
            for (int i = 0; i < (n) && !found; i++)                                                \
                if ((arr)[i].status == CUDNN_STATUS_SUCCESS && (arr)[i].memory <= ws_limit &&      \
                    (pass == 1 || (arr)[i].determinism == CUDNN_DETERMINISTIC)) {                  \
                    (dst) = (arr)[i].algo;                                                         \
                    need = (arr)[i].memory > need ? (arr)[i].memory : need;                        \
                    found = 1;                                                                     \
                }                                                                                  \
    } while (0)

/* The first heuristic choice that succeeds, fits in ws_limit bytes and is deterministic (same
 * inputs, same bits: exact resume and reproducible runs); a non-deterministic one only when no
 * deterministic algorithm qualifies. */
int gpu_conv_plan_for(tf_backend *b, int li, int n, size_t ws_limit, size_t *ws_need,
                      gpu_conv_plan **out, fl_error *err)
{
    gpu_layer *G = &b->L[li];
    for (int i = 0; i < 2; i++)
        if (G->plans[i].n == n) {
            *out = &G->plans[i];
            if (ws_need)
                *ws_need = G->plans[i].ws;
            return 0;
        }
    GPU_TRY(set_io_desc(b, li, n, err));
    gpu_conv_plan p = {n, 0, 0, 0, 0};
    size_t need = 0;
    int got = 0, found;

    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    GPU_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(b->cudnn, b->xdesc, G->wdesc, G->cdesc,
                                                     b->ydesc, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                     &got, fp));
    PICK_ALGO(fp, got, p.fwd);
    if (!found)
        return fl_error_set(err, FL_E_CUDA,
                            "layer %d (conv %dx%d, %d->%d): cuDNN offers no forward "
                            "algorithm within %zu MiB of workspace",
                            li, b->spec->layers[li].k, b->spec->layers[li].k,
                            b->spec->layers[li].cin, b->spec->layers[li].cout, ws_limit >> 20);

    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    GPU_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        b->cudnn, G->wdesc, b->ydesc, G->cdesc, b->xdesc, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        &got, dp));
    PICK_ALGO(dp, got, p.bwd_data);
    if (!found)
        return fl_error_set(err, FL_E_CUDA,
                            "layer %d (conv): cuDNN offers no backward-data "
                            "algorithm within %zu MiB of workspace",
                            li, ws_limit >> 20);

    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    GPU_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        b->cudnn, b->xdesc, b->ydesc, G->cdesc, G->wdesc, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        &got, wp));
    PICK_ALGO(wp, got, p.bwd_filter);
    if (!found)
        return fl_error_set(err, FL_E_CUDA,
                            "layer %d (conv): cuDNN offers no backward-filter "
                            "algorithm within %zu MiB of workspace",
                            li, ws_limit >> 20);

    p.ws = need;
    G->plans[G->next_plan] = p;
    *out = &G->plans[G->next_plan];
    G->next_plan ^= 1;
    if (ws_need)
        *ws_need = need;
    return 0;
}

int gpu_conv_forward(tf_backend *b, int li, int n, const float *P, fl_error *err)
{
    const tf_layer *L = &b->spec->layers[li];
    gpu_layer *G = &b->L[li];
    gpu_conv_plan *p;
    size_t need = 0;
    GPU_TRY(gpu_conv_plan_for(b, li, n, GPU_WS_LIMIT, &need, &p, err));
    GPU_TRY(gpu_ensure_ws(b, need, err));
    GPU_TRY(set_io_desc(b, li, n, err));
    const float one = 1.0f, zero = 0.0f;
    GPU_CUDNN(cudnnConvolutionForward(b->cudnn, &one, b->xdesc, b->act[L->in], G->wdesc, G->wc,
                                      G->cdesc, p->fwd, b->ws, b->ws_bytes, &zero, b->ydesc,
                                      b->act[L->out]));
    if (L->b_off >= 0) {
        tf_shape so = b->spec->tensors[L->out];
        GPU_K(flk_bias_add(b->act[L->out], b->dt, P + L->b_off, n * so.h * so.w, so.c, b->stream));
    }
    return 0;
}

/* Parameter gradients go to gmicro (overwritten: one contribution per parameter); the input
 * gradient is written or, when another consumer already wrote it, accumulated (beta = 1). */
int gpu_conv_backward(tf_backend *b, int li, int n, fl_error *err)
{
    const tf_layer *L = &b->spec->layers[li];
    gpu_layer *G = &b->L[li];
    gpu_conv_plan *p;
    size_t need = 0;
    GPU_TRY(gpu_conv_plan_for(b, li, n, GPU_WS_LIMIT, &need, &p, err));
    GPU_TRY(gpu_ensure_ws(b, need, err));
    GPU_TRY(set_io_desc(b, li, n, err));
    tf_shape so = b->spec->tensors[L->out];
    const void *dy = b->grad[L->out];
    const float one = 1.0f, zero = 0.0f;
    if (L->b_off >= 0)
        GPU_K(flk_bias_backward(dy, b->dt, b->gmicro + L->b_off, n * so.h * so.w, so.c, 0.0f,
                                b->stream));
    GPU_CUDNN(cudnnConvolutionBackwardFilter(b->cudnn, &one, b->xdesc, b->act[L->in], b->ydesc, dy,
                                             G->cdesc, p->bwd_filter, b->ws, b->ws_bytes, &zero,
                                             G->wdesc, b->wgrad));
    GPU_K(flk_filter_grad_from_ohwi(b->wgrad, b->dt, b->gmicro + L->w_off, L->cout, L->cin, L->k,
                                    L->k, G->cin_pad, 1.0f, 0.0f, b->stream));
    if (L->in != 0) { /* the network input needs no gradient */
        const float beta = b->ginit[L->in] ? 1.0f : 0.0f;
        GPU_CUDNN(cudnnConvolutionBackwardData(b->cudnn, &one, G->wdesc, G->wc, b->ydesc, dy,
                                               G->cdesc, p->bwd_data, b->ws, b->ws_bytes, &beta,
                                               b->xdesc, b->grad[L->in]));
        b->ginit[L->in] = 1;
    }
    return 0;
}
