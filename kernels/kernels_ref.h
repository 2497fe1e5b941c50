/* kernels_ref.h — plain-C CPU references of the kernels in fl_kernels.h (fp32 tensors, double
 * accumulation where the kernel reduces), plus host conversions to and from fp16/bf16. The GPU
 * tests (tests/gpu) compare every kernel with its reference here; arguments mirror the launchers,
 * with host pointers and fp32 data. No CUDA needed to build or call these. */
#ifndef FL_KERNELS_REF_H
#define FL_KERNELS_REF_H

#include <stddef.h>
#include <stdint.h>

#include "fl_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Host conversions, round to nearest even (as __float2half_rn / __float2bfloat16_rn). */
uint16_t flk_ref_f32_to_f16(float f);
float flk_ref_f16_to_f32(uint16_t h);
uint16_t flk_ref_f32_to_bf16(float f);
float flk_ref_bf16_to_f32(uint16_t h);

/* Pack n floats into dst of type dt (fp32 copies), and back. */
void flk_ref_pack(const float *src, void *dst, flk_dtype dt, size_t n);
void flk_ref_unpack(const void *src, flk_dtype dt, float *dst, size_t n);
/* x rounded to dt and back to fp32, in place (what storing in dt does). */
void flk_ref_round(float *x, flk_dtype dt, size_t n);
/* Unit roundoff of dt: 2^-24 fp32, 2^-11 fp16, 2^-8 bf16. */
double flk_ref_eps(flk_dtype dt);

void flk_ref_input_u8(const uint8_t *src, float *dst, const flk_input_params *p,
                      const uint64_t *indices);
void flk_ref_act_forward(flk_act act, const float *x, float *y, size_t n);
void flk_ref_act_backward(flk_act act, const float *x, const float *dy, float *dx, size_t n);
void flk_ref_filter_to_ohwi(const float *w_oihw, float *dst, int o, int i, int kh, int kw, int ipad);
void flk_ref_transpose_chw(const float *src, float *dst, int n, int c, int h, int w, int to_nchw);
void flk_ref_bias_backward(const float *dy, float *dbias, int rows, int cols);

/* Training forward of batch norm (see flk_bn_forward_train); running stats updated in place. */
void flk_ref_bn_forward_train(const float *x, float *y, int rows, int c, const float *gamma,
                              const float *beta, float *running_mean, float *running_var,
                              float momentum, float eps, float *save_mean, float *save_invstd,
                              flk_act act);
void flk_ref_bn_backward(const float *x, const float *y, const float *dy, float *dx, int rows, int c,
                         const float *gamma, const float *save_mean, const float *save_invstd,
                         float *dgamma, float *dbeta, flk_act act);

void flk_ref_pool_forward(const flk_pool_params *p, const float *x, float *y);
void flk_ref_pool_backward(const flk_pool_params *p, const float *x, const float *dy, float *dx);
void flk_ref_gap_forward(const float *x, float *y, int n, int hw, int c);

/* Softmax cross-entropy (see flk_xent_forward_backward); counts[0..1] accumulated. */
void flk_ref_xent(const float *logits, const int32_t *labels, int n, int k, float eps,
                  float grad_scale, float *loss, float *dlogits, long long *counts);

/* SGD step (see flk_sgd_step) on fp32 arrays. */
void flk_ref_sgd_step(float *w, const float *grad, float *v, size_t n, float lr, float momentum,
                      float wd, int nesterov);

#ifdef __cplusplus
}
#endif
#endif
