/* cpu_onednn.h — the CPU backend's fast path on oneDNN (libdnnl 2.x, C API): a tf_model_spec run
 * as oneDNN primitives in the layouts oneDNN picks (blocked nChw16c on AVX-512 machines), created
 * once per batch size and mode and reused every step, BN + ReLU fused. Training BN runs on host
 * kernels in those layouts (cpu_onednn_bn.c: each channel summed in a fixed order whatever the
 * thread count, no spinning barriers). Threading is OpenMP's, as oneDNN's; the ops whose results
 * do not depend on the thread count run on one thread while the cores are contended
 * (cpu_dnn_set_serial). Only in builds with FL_HAVE_ONEDNN;
 * cpu_backend.c drives it and keeps the flat fp32 state (params, grads, stats, momentum, EMA) in
 * the model.h layout, so checkpoints are the same for both CPU paths.
 *
 * Numerics: the same functions as the reference layers (cpu_layers.h) up to summation order;
 * tests/trainer/test_onednn_grads.c states the tolerance. Not supported here: --sync-bn (the
 * backend falls back to the reference path for it). */
#ifndef TF_CPU_ONEDNN_H
#define TF_CPU_ONEDNN_H

#include <stdint.h>

#include "fl_error.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cpu_dnn cpu_dnn;

/* Build the training and evaluation plans of `spec` for batches of max_batch (other batch sizes
 * get their own plans on first use, kept in a small cache). oneDNN's thread count
 * (omp_set_num_threads) is `threads` (0: all cores), or 1 when a training step is under 1 GMAC
 * (too little work per primitive to share). spec must outlive the object.
 * Errors: FL_E_UNSUPPORTED (a layer or shape oneDNN has no primitive for: message names it),
 * -ENOMEM. */
int cpu_dnn_create(const tf_model_spec *spec, int max_batch, int threads, cpu_dnn **out,
                   fl_error *err);

/* As cpu_dnn_create; bf16 = 1: mixed precision (--precision bf16). Convolutions read bf16 copies
 * of their input, weights and output gradient and accumulate in fp32 into fp32 outputs and
 * gradients; everything else (BN, ReLU, pooling, adds, the linear layer, the loss) and all state
 * (params, gradients, statistics) stays fp32, as with fp32. Results differ from fp32 by bf16
 * rounding (tests/trainer/test_onednn_bf16.c states the tolerance) and are bit-identical run to
 * run for the same threads. Needs a CPU oneDNN runs bf16 natively on (effective ISA
 * avx512_core_bf16 or above): else FL_E_UNSUPPORTED saying so. bf16 = 0 is cpu_dnn_create. */
int cpu_dnn_create_prec(const tf_model_spec *spec, int max_batch, int threads, int bf16,
                        cpu_dnn **out, fl_error *err);

/* 1 when oneDNN reports native bf16 on this CPU (effective ISA avx512_core_bf16 or above, which
 * $ONEDNN_MAX_CPU_ISA can lower); *isa (may be NULL) gets the ISA's name. */
int cpu_dnn_native_bf16(const char **isa);

/* The input buffer to fill before a forward pass: max_batch * C * H * W floats, NCHW (the layout
 * cpu_input_u8 writes). */
float *cpu_dnn_input(cpu_dnn *d);

/* Forward pass over the first N samples of the input. train = 1: BN on batch statistics, the
 * running statistics in `stats` updated (PyTorch convention, as cpu_bn_forward), and what the
 * backward pass needs kept; train = 0: BN on `stats`. Returns the logits [N][num_classes]
 * (owned by d, valid until the next call) in *logits. Errors: FL_E_INVALID (N outside
 * 1..max_batch), FL_E_UNSUPPORTED / -ENOMEM when a plan for a new N cannot be built. */
int cpu_dnn_forward(cpu_dnn *d, int N, int train, const float *params, float *stats,
                    const float **logits, fl_error *err);

/* The gradient of the loss w.r.t. the logits of the last training forward pass: fill it
 * ([N][num_classes]) before cpu_dnn_backward. */
float *cpu_dnn_dlogits(cpu_dnn *d);

/* Backward pass of the last training forward pass (same N, same params): the parameter
 * gradients are ADDED to grad (model.h layout, spec->param_count floats). */
int cpu_dnn_backward(cpu_dnn *d, const float *params, float *grad, fl_error *err);

/* How the ops whose results do not depend on the thread count run: training BN (host kernels,
 * each channel summed in fixed chunks) and the element-wise primitives (reorders, sums, ReLU,
 * pooling, adds). Convolutions and linear layers always use all threads.
 *   CPU_DNN_SERIAL_AUTO (the default): on the calling thread alone while it is contended for its
 *     core (cpu_contention.h: other work holds the cores, and a thread descheduled at each of
 *     these short ops' barriers would cost a time slice each), on all threads otherwise;
 *   CPU_DNN_SERIAL_NEVER / _ALWAYS: all threads / one thread, every step;
 *   CPU_DNN_SERIAL_ALTERNATE: one thread every other training step (tests: the results are the
 *     same bits in every mode).
 * The environment variable TRAINFAST_SERIAL_OPS (auto, never, always, alternate) sets the mode of
 * objects created after it is read (cpu_dnn_create); this call overrides it. */
enum { CPU_DNN_SERIAL_AUTO, CPU_DNN_SERIAL_NEVER, CPU_DNN_SERIAL_ALWAYS, CPU_DNN_SERIAL_ALTERNATE };
void cpu_dnn_set_serial(cpu_dnn *d, int mode);

/* Training steps run so far (forward passes with train = 1), and how many of them ran serial. */
void cpu_dnn_serial_stats(const cpu_dnn *d, uint64_t *steps, uint64_t *serial);

/* "oneDNN 2.6.3 (avx512_core, 2 threads)" style description; bf16 objects add ", bf16 convs". */
void cpu_dnn_describe(cpu_dnn *d, char *buf, size_t cap);

void cpu_dnn_free(cpu_dnn *d);

#ifdef __cplusplus
}
#endif
#endif
