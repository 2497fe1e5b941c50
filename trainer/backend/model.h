/* model.h — a model as data: a topologically ordered list of layers over numbered activation
 * tensors, with all trainable parameters in one flat fp32 array and BN running statistics in a
 * second flat array. Every backend (CPU reference, CUDA) runs the same spec, and checkpoints store
 * the flat arrays, so the layout below is a contract: do not reorder fields of the flat arrays. */
#ifndef TF_MODEL_H
#define TF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Layer kinds. Shapes are per sample, (C, H, W); the batch dimension is implicit. */
typedef enum tf_layer_kind {
    TF_CONV = 1, /* in (cin,H,W) -> out (cout,Ho,Wo); weight OIHW [cout][cin][k][k], optional bias
                    [cout]; Ho = (H + 2*pad - k)/stride + 1; zero padding */
    TF_BN = 2,   /* batch norm over N,H,W per channel; params gamma[c] then beta[c] (at w_off,
                    w_off + c); stats running mean[c] then running var[c] (at stat_off). Train:
                    batch statistics (biased var for normalizing, unbiased for the running var),
                    running = (1 - momentum) * running + momentum * batch. Eval: running stats. */
    TF_RELU = 3, /* out = max(in, 0) */
    TF_GELU = 4, /* out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (the tanh form) */
    TF_MAXPOOL = 5, /* k x k window, stride, pad (padding never wins the max) */
    TF_AVGPOOL = 6, /* k x k window, stride, pad; divides by k*k (count_include_pad) */
    TF_GAP = 7,     /* global average pool: (C,H,W) -> (C,1,1) */
    TF_LINEAR = 8,  /* in flattened in C,H,W order (cin = C*H*W) -> (cout,1,1); weight [cout][cin],
                       bias [cout] (b_off) */
    TF_ADD = 9,     /* residual: out = in + in2 (same shapes) */
    TF_SCALE = 10   /* out = in * scale (fixed, not trained; e.g. logit temperature) */
} tf_layer_kind;

typedef struct tf_shape {
    int c, h, w;
} tf_shape;

typedef struct tf_layer {
    tf_layer_kind kind;
    int in;             /* input activation tensor id */
    int in2;            /* second input (TF_ADD only), else -1 */
    int out;            /* output activation tensor id (written by this layer only) */
    int k, stride, pad; /* TF_CONV / pools */
    int cin, cout; /* TF_CONV / TF_LINEAR (cin of linear = flattened size); TF_BN: cin = cout = C */
    int64_t w_off; /* offset of the weight (conv/linear) or gamma (BN) in params, -1 none */
    int64_t b_off; /* offset of the bias (conv/linear) or beta (BN) in params, -1 none */
    int64_t stat_off;  /* TF_BN: offset of running mean in stats (running var follows), else -1 */
    float bn_eps;      /* TF_BN (default 1e-5) */
    float bn_momentum; /* TF_BN running-stat update factor (PyTorch convention, default 0.1) */
    float scale;       /* TF_SCALE factor */
} tf_layer;

/* One named parameter tensor inside the flat array. */
typedef struct tf_param {
    char name[48];  /* "conv3.weight", "bn3.bias", ... */
    int64_t offset; /* first element in the flat params array */
    int64_t count;  /* elements */
    int no_decay;   /* 1 for BN gamma/beta and all biases: no weight decay */
    int layer;      /* index of the owning layer */
    int fan_in;     /* for initialisation */
} tf_param;

/* A whole model. Tensor 0 is the network input, normalised from uint8 as
 * x = (u8 / 255 - mean[c]) / std[c] in NCHW order; the output (logits) is tensor `n_tensors - 1`
 * with shape (num_classes, 1, 1). Layers are listed in an order where every input is produced
 * before it is read; a tensor may be read by several layers (residual skips), and backward passes
 * must then sum the gradients flowing into it. */
typedef struct tf_model_spec {
    char name[32];        /* "fastcnn", "resnet18", "resnet50" */
    uint32_t spec_id;     /* CRC32C over name, input shape, classes and the layer list: a checkpoint
                             only loads into a model with the same id */
    int in_c, in_h, in_w; /* input image shape */
    int num_classes;
    float mean[3], std[3];
    int n_layers;
    tf_layer *layers; /* owned by the spec */
    int n_tensors;
    tf_shape *tensors; /* owned */
    int n_params;
    tf_param *params;    /* owned */
    int64_t param_count; /* total elements in the flat params array */
    int64_t stat_count;  /* total elements in the flat BN stats array */
} tf_model_spec;

/* Options of the model builders. Zero fields take the defaults noted. */
typedef struct tf_model_options {
    int width;    /* fastcnn: channels of the first block (default 24); doubles per block */
    int residual; /* fastcnn: add a residual conv pair per block (default 0) */
    int gelu;     /* use GELU instead of ReLU (default 0) */
} tf_model_options;

/* Build model `name` ("fastcnn", "resnet18", "resnet50") for images of in_c x in_h x in_w and
 * `num_classes` classes into *out (fill it; free with tf_model_free). The dataset's per-channel
 * mean/std are set to generic defaults (0.5/0.25); callers may overwrite them before use.
 * Errors: FL_E_INVALID (unknown name, or input too small for the model: message says why),
 * -ENOMEM. */
int tf_model_build(const char *name, int in_c, int in_h, int in_w, int num_classes,
                   const tf_model_options *opt, tf_model_spec *out, fl_error *err);

/* Recompute spec->spec_id (call after editing a spec by hand, e.g. in tests). */
void tf_model_finalize(tf_model_spec *spec);

/* Free what the spec owns; the struct itself is the caller's. NULL allowed. */
void tf_model_free(tf_model_spec *spec);

/* Deterministic initialisation from `seed` (PyTorch's defaults): conv/linear weights and biases
 * U(-1/sqrt(fan_in), +1/sqrt(fan_in)), BN gamma 1 and beta 0; stats: mean 0, var 1. `params` has
 * spec->param_count floats, `stats` spec->stat_count (either may be NULL). */
void tf_model_init(const tf_model_spec *spec, uint64_t seed, float *params, float *stats);

/* Multiply-accumulates of one forward pass for one sample (for reporting). */
double tf_model_flops(const tf_model_spec *spec);

/* Size of tensor t per sample (c*h*w). */
static inline int64_t tf_shape_size(tf_shape s) { return (int64_t)s.c * s.h * s.w; }

#ifdef __cplusplus
}
#endif
#endif
