/* export_onnx.h — the inference graph of a trained tf_model_spec as an ONNX model (for ONNX
 * Runtime and TensorRT): batch norm folded into the convolution before it, the input
 * normalisation inside the graph, so the model takes raw pixels. The protobuf is written with
 * protobuf-c from the onnx.proto that Debian's python3-onnx ships (trainer/export_onnx.cmake).
 *
 * The graph: input `images` float32 [N, C, H, W] (N dynamic, "N", or fixed), values 0..255 in
 * the channel order and size the loader gives the trainer (RGB, or one grey channel);
 *   x = (images / 255 - mean) / std            (Div, Sub, Div: the CPU backend's own arithmetic)
 * then the layers of the spec in order; output `logits` float32 [N, classes] (no softmax).
 * BN folding (export_onnx_plan.c): a BN whose input is a convolution's output read by nothing
 * else becomes that convolution's weights and bias; a BN after a max-pool of such a convolution
 * (fastcnn's conv -> maxpool -> BN) is folded through the pool when its per-channel scale is
 * >= 0 (max commutes with an increasing map); any other BN is a per-channel Mul and Add. */
#ifndef TF_EXPORT_ONNX_H
#define TF_EXPORT_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_ONNX_OPSET_DEFAULT 17
#define TF_ONNX_OPSET_MIN     13
#define TF_ONNX_OPSET_MAX     21

/* One metadata_props entry (both strings are the caller's, copied by the writer). */
typedef struct tf_onnx_meta {
    const char *key, *value;
} tf_onnx_meta;

typedef struct tf_onnx_options {
    int opset;                  /* default-domain opset, TF_ONNX_OPSET_MIN..MAX; 0 = 17 */
    int64_t batch;              /* fixed batch size; 0 = dynamic (dimension named "N") */
    const char *const *classes; /* class_count names in label order, or NULL: "0", "1", ... */
    uint32_t class_count;       /* must equal spec->num_classes when classes is set */
    const char *weights;        /* "ema" or "raw": which weights params/stats are (metadata) */
    const tf_onnx_meta *meta;   /* further metadata_props (checkpoint, epoch, ...), may be NULL */
    int n_meta;
    const char *doc; /* the model's doc_string, may be NULL */
} tf_onnx_options;

/* What the planner decided, for tests and the command's summary line. */
typedef struct tf_onnx_summary {
    int nodes, initializers;
    int bn_folded_conv; /* BN layers folded into the convolution right before them */
    int bn_folded_pool; /* ... folded through a max-pool into the convolution before it */
    int bn_affine;      /* BN layers left as a per-channel Mul + Add */
    int64_t weights;    /* float32 weights written (after folding) */
    uint64_t bytes;     /* size of the serialised model */
} tf_onnx_summary;

/* Serialise the inference graph of `spec` with weights `params` (spec->param_count floats) and
 * BN running statistics `stats` (spec->stat_count) to `path`: written to `path`.tmp, fsync'ed,
 * renamed over `path` (an existing file there is replaced), directory fsync'ed. `sum` (may be
 * NULL) receives what was written. Errors: FL_E_INVALID (an option out of range, class_count not
 * the model's), FL_E_UNSUPPORTED (a layer sequence the exporter cannot express, e.g. a conv after
 * a linear layer), -ENOMEM, -errno naming the file (create, write, fsync, rename). On error
 * nothing is left at `path` or at the temporary name. */
int tf_onnx_export(const char *path, const tf_model_spec *spec, const float *params,
                   const float *stats, const tf_onnx_options *opt, tf_onnx_summary *sum,
                   fl_error *err);

/* The same into a malloc'ed buffer (*out, *len; the caller frees *out). */
int tf_onnx_serialize(const tf_model_spec *spec, const float *params, const float *stats,
                      const tf_onnx_options *opt, uint8_t **out, size_t *len, tf_onnx_summary *sum,
                      fl_error *err);

/* ---- the planner (export_onnx_plan.c), shared with tests ----------------------------------- */

/* Per layer of a spec: how the exporter writes it. */
typedef struct tf_onnx_plan {
    int n_layers;
    int *fold_into; /* BN layer: index of the conv layer it is folded into, else -1 */
    int *folded_bn; /* conv layer: index of the BN layer folded into it, else -1 */
    float *scale;   /* per BN channel, a = gamma / sqrt(var + eps); BN layer L's channels
                       start at L.stat_off / 2 (its stats hold mean and var per channel) */
    float *shift;   /* per BN channel, b = beta - mean * a (same indexing) */
    int bn_conv, bn_pool, bn_affine; /* counts, as tf_onnx_summary */
} tf_onnx_plan;

/* Decide the folding for spec with these weights (the scale's sign matters through a max-pool).
 * Returns 0, -ENOMEM. Free with tf_onnx_plan_free. */
int tf_onnx_plan_make(const tf_model_spec *spec, const float *params, const float *stats,
                      tf_onnx_plan *plan, fl_error *err);
void tf_onnx_plan_free(tf_onnx_plan *plan);

/* The per-channel affine map of BN layer L: a[c] = gamma / sqrt(var + eps), b[c] = beta - mean a
 * (computed in double, rounded once). */
void tf_onnx_bn_affine(const tf_layer *L, const float *params, const float *stats, float *a,
                       float *b);

/* Fold the affine map (a, b) into a convolution's weights w [cout][cin*k*k] and bias (NULL:
 * none): w_out = w * a[o], b_out = bias * a[o] + b[o] (in double, rounded once). */
void tf_onnx_fold_conv(int cout, int64_t per_out, const float *w, const float *bias, const float *a,
                       const float *b, float *w_out, float *b_out);

#ifdef __cplusplus
}
#endif
#endif
