/* gpu_linear.c — linear layers through cublasGemmEx (compute-type inputs, CUBLAS_COMPUTE_32F
 * accumulation, fp32 weight gradients written straight into the fp32 gradient buffer). Row-major
 * tensors are handed to column-major cuBLAS as their transposes:
 *   forward  y[n][o]  = x[n][i] · W[o][i]^T   → C(o×n) = op_T(W: i×o) · x(i×n)
 *   dX       dx[n][i] = dy[n][o] · W[o][i]    → C(i×n) = W(i×o) · dy(o×n)
 *   dW       dW[o][i] = dy^T · x              → C(i×o) = x(i×n) · op_T(dy: o×n)
 * The spec flattens a linear input in C,H,W order; our activations are NHWC, so an input with
 * H·W > 1 is transposed to NCHW first (and its gradient back). */
#include "gpu_internal.h"

static const void *linear_input(tf_backend *b, const tf_layer *L, int n, fl_error *err, int *rc)
{
    tf_shape si = b->spec->tensors[L->in];
    *rc = 0;
    if (si.h * si.w == 1)
        return b->act[L->in];
    cudaError_t e =
        flk_transpose_chw(b->act[L->in], b->scratch2, b->dt, n, si.c, si.h, si.w, 1, b->stream);
    if (e != cudaSuccess)
        *rc = gpu_fail_cuda(err, e, "flk_transpose_chw", __FILE__, __LINE__);
    return b->scratch2;
}

int gpu_linear_forward(tf_backend *b, int li, int n, const float *P, fl_error *err)
{
    const tf_layer *L = &b->spec->layers[li];
    int rc;
    const void *x = linear_input(b, L, n, err, &rc);
    if (rc)
        return rc;
    const float one = 1.0f, zero = 0.0f;
    GPU_CUBLAS(gpu_cublas.gemm_ex(b->cublas, CUBLAS_OP_T, CUBLAS_OP_N, L->cout, n, L->cin, &one,
                                  b->L[li].wc, b->blas_dt, L->cin, x, b->blas_dt, L->cin, &zero,
                                  b->act[L->out], b->blas_dt, L->cout, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    if (L->b_off >= 0)
        GPU_K(flk_bias_add(b->act[L->out], b->dt, P + L->b_off, n, L->cout, b->stream));
    return 0;
}

int gpu_linear_backward(tf_backend *b, int li, int n, fl_error *err)
{
    const tf_layer *L = &b->spec->layers[li];
    tf_shape si = b->spec->tensors[L->in];
    const void *dy = b->grad[L->out];
    int rc;
    const void *x = linear_input(b, L, n, err, &rc);
    if (rc)
        return rc;
    const float one = 1.0f, zero = 0.0f;
    GPU_CUBLAS(gpu_cublas.gemm_ex(b->cublas, CUBLAS_OP_N, CUBLAS_OP_T, L->cin, L->cout, n, &one, x,
                                  b->blas_dt, L->cin, dy, b->blas_dt, L->cout, &zero,
                                  b->gmicro + L->w_off, CUDA_R_32F, L->cin, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    if (L->b_off >= 0)
        GPU_K(flk_bias_backward(dy, b->dt, b->gmicro + L->b_off, n, L->cout, 0.0f, b->stream));
    if (L->in == 0)
        return 0;
    if (si.h * si.w == 1) {
        const float beta = b->ginit[L->in] ? 1.0f : 0.0f;
        GPU_CUBLAS(gpu_cublas.gemm_ex(b->cublas, CUBLAS_OP_N, CUBLAS_OP_N, L->cin, n, L->cout, &one,
                                      b->L[li].wc, b->blas_dt, L->cin, dy, b->blas_dt, L->cout,
                                      &beta, b->grad[L->in], b->blas_dt, L->cin, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
        b->ginit[L->in] = 1;
        return 0;
    }
    /* NCHW-ordered gradient into scratch2 (x is no longer needed), then back to NHWC */
    GPU_CUBLAS(gpu_cublas.gemm_ex(b->cublas, CUBLAS_OP_N, CUBLAS_OP_N, L->cin, n, L->cout, &one,
                                  b->L[li].wc, b->blas_dt, L->cin, dy, b->blas_dt, L->cout, &zero,
                                  b->scratch2, b->blas_dt, L->cin, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    void *dx = gpu_dx_begin(b, L->in);
    GPU_K(flk_transpose_chw(b->scratch2, dx, b->dt, n, si.c, si.h, si.w, 0, b->stream));
    return gpu_dx_end(b, L->in, dx, n, err);
}
