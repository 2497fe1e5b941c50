/* cpu_onednn_impl.h — internals shared by cpu_onednn.c (object, plan cache, execution, hooks) and
 * cpu_onednn_plan.c (building a plan: one oneDNN primitive per layer and direction).
 *
 * A plan is the whole network for one batch size N and one mode (training or evaluation): a
 * forward op list and, in training, a backward op list, each op a primitive with its bound
 * arguments or a small host hook (BN running statistics, bias/BN gradient accumulation).
 * Activations and their gradients live in per-tensor arena buffers shared by all plans (sized
 * for max_batch with channel padding to 16), so a second batch size costs primitives only;
 * tensors whose gradients are never live at once share a gradient buffer (grad_slots).
 *
 * bf16 (cpu_dnn_create_prec): activations, gradients and everything but the convolutions stay
 * fp32 as in fp32 mode; each convolution reorders its input and its output gradient into bf16
 * copies (src16, ddst16), its weights into bf16, and computes with fp32 accumulation into an
 * fp32 output, input gradient and weight gradient. A convolution oneDNN has only its reference
 * kernel for in bf16 stays fp32 (dnn_layer.bf16 = 0). */
#ifndef TF_CPU_ONEDNN_IMPL_H
#define TF_CPU_ONEDNN_IMPL_H

#include <dnnl.h>
#include <stdint.h>

#include "cpu_contention.h"
#include "cpu_onednn.h"

#define DNN_MAX_ARGS 12
#define DNN_PLANS    6

typedef struct dnn_plan dnn_plan;
typedef void (*dnn_hook)(dnn_plan *p, int layer);

/* A 4-d activation layout the host BN kernels walk (cpu_onednn_bn.c): element (n, c, h, w) at
 * n*s[0] + (c/B)*s[1] + h*s[2] + w*s[3] + c%B, channels in groups of W (8 or 16) contiguous
 * floats: nChw16c / nChw8c (B = 16 / 8, padded channels up to Cp), or NHWC (B = 1, s[1] = 1). */
typedef struct dnn_bn_geom {
    long s[4];
    int B, W, C, Cp, H, Wd;
} dnn_bn_geom;

/* Samples are summed in DNN_BN_CHUNKS fixed chunks (partial sums added in chunk order), so BN
 * statistics and gradients do not depend on the thread count. */
#define DNN_BN_CHUNKS 16

typedef struct dnn_op {
    dnnl_primitive_t prim; /* NULL: call hook(p, layer) */
    int nargs;
    dnnl_exec_arg_t args[DNN_MAX_ARGS];
    dnn_hook hook;
    int layer;
    int elementwise; /* each output element computed alone (reorders, pooling, eltwise): the same
                      * bits on any thread count, so a serial object runs it on one thread */
} dnn_op;

/* Per layer of a plan. Memories named *_user are views of the flat model.h arrays whose handles
 * are set before every run (params may be the EMA copy, stats the EMA stats). */
typedef struct dnn_layer {
    int skip;                              /* a ReLU fused into the BN before it */
    int fuse_relu;                         /* BN whose output is the next layer's (ReLU) output */
    int out;                               /* tensor written (after fusion) */
    dnnl_primitive_desc_t fwd_pd;          /* hint for the backward primitives */
    dnnl_memory_t w_user, b_user, gw_user; /* weights/gamma, bias/beta, weight gradient */
    dnnl_memory_t w_fwd;                   /* weights in the forward primitive's layout */
    dnnl_memory_t mean, var;             /* BN: batch statistics (train) or views of stats (eval) */
    dnnl_memory_t ws;                    /* max pool / fused ReLU workspace */
    dnnl_memory_t dscale, dshift, dbias; /* private gradients a hook adds to grad */
    int host_bn;           /* training BN (+ fused ReLU) on the host kernels (cpu_onednn_bn.c) */
    dnn_bn_geom bn_g;      /* its layout (input, output and their gradients alike) */
    dnnl_memory_t bn_save; /* host BN: mean and 1/sqrt(var + eps) per channel, for backward */
    dnnl_memory_t bn_dx;   /* host BN: where the input gradient goes (NULL: none needed) */
    int bf16;              /* a convolution computed in bf16 (see above) */
    dnnl_memory_t src16, ddst16; /* its bf16 input copy and output-gradient copy */
} dnn_layer;

struct dnn_plan {
    cpu_dnn *d;
    int N, train;
    dnn_op *fwd, *bwd;
    int nfwd, nbwd, capf, capb;
    dnnl_memory_desc_t *md;    /* per tensor: the layout chosen */
    dnnl_memory_t *act, *dact; /* per tensor (NULL: fused away or no gradient) */
    int *dact_set;             /* build time: a backward op already writes dact[t] */
    dnnl_memory_t scratch_mem; /* build time */
    dnn_layer *L;
    dnnl_memory_t *own_m; /* memories and primitives this plan destroys */
    int n_own_m, cap_own_m;
    dnnl_primitive_t *own_p;
    int n_own_p, cap_own_p;
    const float *params; /* bound for the current run */
    float *stats, *grad;
    uint64_t last_use;
    int cur_layer; /* build time, for error messages */
    fl_error *err;
};

struct cpu_dnn {
    const tf_model_spec *spec;
    int max_batch;
    int threads;    /* OpenMP threads oneDNN runs on */
    int bf16;       /* convolutions in bf16 (cpu_dnn_create_prec) */
    void *bscratch; /* bf16: the output-gradient copy of the convolution being back-propagated */
    size_t bscratch_bytes;
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    float *input, *logits, *dlogits;
    float **arena; /* [2 * n_tensors]: activation then gradient buffer of each tensor; the
                    * gradient ones point into gbufs, shared by tensors never live at once */
    float **gbufs;
    int n_gbufs;
    size_t *arena_bytes;
    float *gscratch; /* a gradient that must be added to one already written */
    size_t gscratch_bytes;
    int *readers;         /* per tensor: layers reading it */
    double *bn_part;      /* host BN: per chunk partial sums, 2 x DNN_BN_CHUNKS x widest padded C */
    int serial;           /* this step: host BN and element-wise ops on the calling thread alone */
    int serial_mode;      /* CPU_DNN_SERIAL_* (cpu_dnn_set_serial) */
    cpu_contention probe; /* CPU_DNN_SERIAL_AUTO's verdict */
    uint64_t train_steps, serial_steps;
    dnn_plan *plans[DNN_PLANS];
    dnn_plan *last_train;
    uint64_t clock;
};

/* Build a plan for N samples (train: with the backward list). Errors as cpu_dnn_create. */
int dnn_plan_build(cpu_dnn *d, int N, int train, dnn_plan **out, fl_error *err);
void dnn_plan_free(dnn_plan *p);

/* Hooks (cpu_onednn.c). */
void dnn_hook_bn_stats(dnn_plan *p, int layer);
void dnn_hook_bn_grad(dnn_plan *p, int layer);
void dnn_hook_bias_grad(dnn_plan *p, int layer);
void dnn_hook_bn_fwd(dnn_plan *p, int layer); /* host BN forward on batch statistics */
void dnn_hook_bn_bwd(dnn_plan *p, int layer); /* host BN backward: dx, dscale, dshift */

/* The host BN layout of md into *g: 0, or -1 when the host kernels do not take it. */
int dnn_bn_geom_of(const dnnl_memory_desc_t *md, dnn_bn_geom *g);

/* "what failed (status) in layer L" into err; returns FL_E_UNSUPPORTED. */
int dnn_fail(dnn_plan *p, dnnl_status_t st, const char *what, int line);
#define DNN_TRY(p, call)                                                                           \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success)                                                                   \
            return dnn_fail((p), st_, #call, __LINE__);                                            \
    } while (0)

#endif
