/* export_onnx_internal.h — shared by export_onnx.c (the model, metadata and file) and
 * export_onnx_graph.c (the spec's layers as ONNX nodes): the builder that owns every protobuf-c
 * message and buffer of one export, all freed together. */
#ifndef TF_EXPORT_ONNX_INTERNAL_H
#define TF_EXPORT_ONNX_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "export_onnx.h"
#include "onnx.pb-c.h"

typedef struct tf_onnx_builder {
    void **allocs; /* every allocation of this export (freed by tf_onnx_builder_free) */
    size_t n_allocs, cap_allocs;
    Onnx__NodeProto **nodes; /* in topological order */
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits; /* initializers */
    size_t n_inits, cap_inits;
    int fail;      /* sticky: -ENOMEM or FL_E_UNSUPPORTED */
    char why[200]; /* FL_E_UNSUPPORTED: what */
    const tf_model_spec *spec;
    const tf_onnx_plan *plan;
    const float *params, *stats;
    const char **name; /* per tensor id: its ONNX value name (NULL: not yet written) */
    int *rank;         /* per tensor id: 4 (N,C,H,W) or 2 (N,features) */
    int64_t weights;   /* float32 initializer elements */
    int gelu_consts;   /* the GELU scalars are in the initializers */
} tf_onnx_builder;

/* Zeroed, tracked allocation; NULL (and fail = -ENOMEM) when out of memory. */
void *tf_onnx_alloc(tf_onnx_builder *g, size_t bytes);
/* printf into a tracked string. */
char *tf_onnx_str(tf_onnx_builder *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append a node `op` reading `in` (nin names) and writing `out`; NULL when failed. */
Onnx__NodeProto *tf_onnx_node(tf_onnx_builder *g, const char *op, const char *const *in, int nin,
                              const char *out);
void tf_onnx_attr_int(tf_onnx_builder *g, Onnx__NodeProto *n, const char *name, int64_t v);
void tf_onnx_attr_ints(tf_onnx_builder *g, Onnx__NodeProto *n, const char *name, const int64_t *v,
                       int count);
/* A float32 initializer `name` of shape dims[ndims] (ndims 0: a scalar) holding a copy of data
 * (count elements); returns the name (tracked) or NULL. */
const char *tf_onnx_init(tf_onnx_builder *g, const char *name, const int64_t *dims, int ndims,
                         const float *data, int64_t count);

/* The nodes and initializers of every layer, from g->name[0] (the normalised image tensor, set by
 * the caller) to the output named "logits". Returns 0 or g->fail. */
int tf_onnx_graph_layers(tf_onnx_builder *g);

void tf_onnx_builder_free(tf_onnx_builder *g);

#endif
