/* cpu_half.h — host conversions between fp32 and the 16-bit floats of mixed precision (fp16, bf16),
 * rounding to nearest even like the GPU's __float2half_rn / __float2bfloat16_rn. The CPU reference
 * of the GPU casts (flk_cast); the GPU tests store and read their data through them. */
#ifndef TF_CPU_HALF_H
#define TF_CPU_HALF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* IEEE fp16 bits of f: overflow gives ±inf, values below half the smallest subnormal give ±0,
 * NaN stays NaN (quiet). */
uint16_t cpu_f32_to_f16(float f);
/* The fp32 value of fp16 bits h (exact). */
float cpu_f16_to_f32(uint16_t h);
/* bf16 bits of f (the upper half of the fp32 bits, rounded); NaN stays NaN (quiet). */
uint16_t cpu_f32_to_bf16(float f);
/* The fp32 value of bf16 bits h (exact). */
float cpu_bf16_to_f32(uint16_t h);

/* x[0..n) rounded to fp16 / bf16 and back to fp32, in place: what storing them in that type does.
 */
void cpu_round_f16(float *x, size_t n);
void cpu_round_bf16(float *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
