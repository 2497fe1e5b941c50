/* export_onnx.c — tf_onnx_export / tf_onnx_serialize (export_onnx.h): the ONNX ModelProto around
 * the layers of export_onnx_graph.c (input normalisation, graph inputs and outputs, opset and IR
 * version, metadata_props), serialised with protobuf-c straight into the file (a resnet50 is
 * ~100 MB: no second copy in memory) through fl_file_begin/commit (common/fl_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export_onnx_internal.h"
#include "fl_file.h"
#include "fl_json.h"
#include "fl_version.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "ONNX raw_data is little-endian: the exporter copies floats as they are in memory");

/* ---- the builder's allocations and messages ------------------------------------------------ */

static int track(tf_onnx_builder *g, void *p)
{
    if (!p || g->n_allocs == g->cap_allocs) {
        size_t nc = g->cap_allocs ? 2 * g->cap_allocs : 256;
        void **na = p ? realloc(g->allocs, nc * sizeof *na) : NULL;
        if (!na) {
            free(p);
            g->fail = -ENOMEM;
            return -1;
        }
        g->allocs = na;
        g->cap_allocs = nc;
    }
    g->allocs[g->n_allocs++] = p;
    return 0;
}

void *tf_onnx_alloc(tf_onnx_builder *g, size_t bytes)
{
    if (g->fail)
        return NULL;
    void *p = calloc(1, bytes ? bytes : 1);
    return track(g, p) ? NULL : p;
}

char *tf_onnx_str(tf_onnx_builder *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? tf_onnx_alloc(g, (size_t)n + 1) : NULL;
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static int push(tf_onnx_builder *g, void ***arr, size_t *n, size_t *cap, void *item)
{
    if (g->fail || !item)
        return -1;
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        void **na = realloc(*arr, nc * sizeof *na);
        if (!na) {
            g->fail = -ENOMEM;
            return -1;
        }
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = item;
    return 0;
}

Onnx__NodeProto *tf_onnx_node(tf_onnx_builder *g, const char *op, const char *const *in, int nin,
                              const char *out)
{
    Onnx__NodeProto *n = tf_onnx_alloc(g, sizeof *n);
    char **iv = tf_onnx_alloc(g, (size_t)nin * sizeof(char *));
    char **ov = tf_onnx_alloc(g, sizeof(char *));
    if (!n || !iv || !ov || !out)
        return NULL;
    for (int i = 0; i < nin; i++)
        if (!(iv[i] = (char *)in[i])) {
            g->fail = g->fail ? g->fail : -ENOMEM; /* a name that failed to allocate */
            return NULL;
        }
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = tf_onnx_str(g, "%s_%zu", op, g->n_nodes);
    n->n_input = (size_t)nin;
    n->input = iv;
    n->n_output = 1;
    n->output = ov;
    ov[0] = (char *)out;
    return push(g, (void ***)&g->nodes, &g->n_nodes, &g->cap_nodes, n) ? NULL : n;
}

static Onnx__AttributeProto *attr(tf_onnx_builder *g, Onnx__NodeProto *n, const char *name)
{
    Onnx__AttributeProto *a = n ? tf_onnx_alloc(g, sizeof *a) : NULL;
    Onnx__AttributeProto **v = a ? tf_onnx_alloc(g, (n->n_attribute + 1) * sizeof *v) : NULL;
    if (!v)
        return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    if (n->n_attribute) /* the old array stays tracked */
        memcpy(v, n->attribute, n->n_attribute * sizeof *v);
    v[n->n_attribute++] = a;
    n->attribute = v;
    return a;
}

void tf_onnx_attr_int(tf_onnx_builder *g, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(g, n, name);
    if (!a)
        return;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
}

void tf_onnx_attr_ints(tf_onnx_builder *g, Onnx__NodeProto *n, const char *name, const int64_t *v,
                       int count)
{
    Onnx__AttributeProto *a = attr(g, n, name);
    int64_t *c = a ? tf_onnx_alloc(g, (size_t)count * sizeof *c) : NULL;
    if (!c)
        return;
    memcpy(c, v, (size_t)count * sizeof *c);
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = (size_t)count;
    a->ints = c;
}

const char *tf_onnx_init(tf_onnx_builder *g, const char *name, const int64_t *dims, int ndims,
                         const float *data, int64_t count)
{
    Onnx__TensorProto *t = tf_onnx_alloc(g, sizeof *t);
    int64_t *d = tf_onnx_alloc(g, (size_t)(ndims ? ndims : 1) * sizeof *d);
    uint8_t *raw = tf_onnx_alloc(g, (size_t)count * sizeof(float));
    if (!t || !d || !raw || !name)
        return NULL;
    onnx__tensor_proto__init(t);
    if (ndims)
        memcpy(d, dims, (size_t)ndims * sizeof *d);
    memcpy(raw, data, (size_t)count * sizeof(float));
    t->name = (char *)name;
    t->n_dims = (size_t)ndims;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->has_raw_data = 1;
    t->raw_data.len = (size_t)count * sizeof(float);
    t->raw_data.data = raw;
    g->weights += count;
    return push(g, (void ***)&g->inits, &g->n_inits, &g->cap_inits, t) ? NULL : name;
}

void tf_onnx_builder_free(tf_onnx_builder *g)
{
    for (size_t i = 0; i < g->n_allocs; i++)
        free(g->allocs[i]);
    free(g->allocs);
    free(g->nodes);
    free(g->inits);
    free(g->name);
    free(g->rank);
    memset(g, 0, sizeof *g);
}

/* ---- the model ------------------------------------------------------------------------------ */

/* value info "name": float32 [batch or "N", d1, ...] */
static Onnx__ValueInfoProto *value_info(tf_onnx_builder *g, const char *name, int64_t batch,
                                        const int64_t *dims, int nd)
{
    Onnx__ValueInfoProto *v = tf_onnx_alloc(g, sizeof *v);
    Onnx__TypeProto *tp = tf_onnx_alloc(g, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = tf_onnx_alloc(g, sizeof *tt);
    Onnx__TensorShapeProto *sh = tf_onnx_alloc(g, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dv = tf_onnx_alloc(g, (size_t)(nd + 1) * sizeof *dv);
    if (!v || !tp || !tt || !sh || !dv)
        return NULL;
    for (int i = 0; i <= nd; i++) {
        Onnx__TensorShapeProto__Dimension *d = tf_onnx_alloc(g, sizeof *d);
        if (!(dv[i] = d))
            return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        if (i == 0 && batch <= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = "N";
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = i == 0 ? batch : dims[i - 1];
        }
    }
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    sh->n_dim = (size_t)nd + 1;
    sh->dim = dv;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->name = (char *)name;
    v->type = tp;
    return v;
}

/* images -> (images / 255 - mean) / std, the CPU backend's per-value arithmetic
 * (cpu_input_run: (v / 255.0f - mean) / std), so the first layer sees the same floats */
static const char *input_normalise(tf_onnx_builder *g)
{
    const tf_model_spec *s = g->spec;
    const float k255 = 255.0f;
    int64_t d[4] = {1, s->in_c, 1, 1};
    const char *c255 = tf_onnx_init(g, "input.255", NULL, 0, &k255, 1);
    const char *mean = tf_onnx_init(g, "input.mean", d, 4, s->mean, s->in_c);
    const char *sd = tf_onnx_init(g, "input.std", d, 4, s->std, s->in_c);
    const char *in1[2] = {"images", c255}, *in2[2] = {"input_01", mean}, *in3[2] = {"input_c", sd};
    tf_onnx_node(g, "Div", in1, 2, "input_01");
    tf_onnx_node(g, "Sub", in2, 2, "input_c");
    tf_onnx_node(g, "Div", in3, 2, "input_norm");
    return "input_norm";
}

/* IR version that goes with a default-domain opset (onnx/helper.py's VERSION_TABLE) */
static int64_t ir_version(int opset)
{
    return opset <= 14 ? 7 : opset <= 18 ? 8 : opset <= 20 ? 9 : 10;
}

static Onnx__StringStringEntryProto *meta(tf_onnx_builder *g, const char *k, const char *v)
{
    Onnx__StringStringEntryProto *e = tf_onnx_alloc(g, sizeof *e);
    if (!e)
        return NULL;
    onnx__string_string_entry_proto__init(e);
    e->key = tf_onnx_str(g, "%s", k);
    e->value = tf_onnx_str(g, "%s", v ? v : "");
    return e->key && e->value ? e : NULL;
}

/* "classes": JSON array of names; "input": the input contract as JSON */
static void meta_contract(tf_onnx_builder *g, const tf_onnx_options *o, char **classes,
                          char **input)
{
    const tf_model_spec *s = g->spec;
    fl_json j;
    fl_json_init(&j);
    fl_json_begin_array(&j);
    for (int k = 0; k < s->num_classes; k++) {
        char num[16];
        snprintf(num, sizeof num, "%d", k);
        fl_json_string(&j, o->classes ? o->classes[k] : num);
    }
    fl_json_end_array(&j);
    *classes = fl_json_failed(&j) ? NULL : tf_onnx_str(g, "%s", fl_json_text(&j));
    fl_json_free(&j);
    fl_json_init(&j);
    fl_json_begin_object(&j);
    fl_json_key(&j, "name");
    fl_json_string(&j, "images");
    fl_json_key(&j, "dtype");
    fl_json_string(&j, "float32");
    fl_json_key(&j, "layout");
    fl_json_string(&j, "NCHW");
    fl_json_key(&j, "shape");
    fl_json_begin_array(&j);
    if (o->batch > 0)
        fl_json_int(&j, o->batch);
    else
        fl_json_string(&j, "N");
    fl_json_int(&j, s->in_c);
    fl_json_int(&j, s->in_h);
    fl_json_int(&j, s->in_w);
    fl_json_end_array(&j);
    fl_json_key(&j, "channels");
    fl_json_string(&j, s->in_c == 1 ? "grey" : "RGB");
    fl_json_key(&j, "range");
    fl_json_begin_array(&j);
    fl_json_int(&j, 0);
    fl_json_int(&j, 255);
    fl_json_end_array(&j);
    fl_json_key(&j, "normalisation");
    fl_json_string(&j, "in the graph: (images / 255 - mean) / std per channel");
    fl_json_key(&j, "mean");
    fl_json_begin_array(&j);
    for (int c = 0; c < s->in_c; c++)
        fl_json_double(&j, s->mean[c]);
    fl_json_end_array(&j);
    fl_json_key(&j, "std");
    fl_json_begin_array(&j);
    for (int c = 0; c < s->in_c; c++)
        fl_json_double(&j, s->std[c]);
    fl_json_end_array(&j);
    fl_json_key(&j, "resize");
    fl_json_string(&j, "as trainfast eval: fixed-size data as stored; other images resized "
                       "(shorter side to size / 0.875) and centre-cropped to H x W");
    fl_json_key(&j, "output");
    fl_json_string(&j, "logits float32 [N, classes], no softmax");
    fl_json_end_object(&j);
    *input = fl_json_failed(&j) ? NULL : tf_onnx_str(g, "%s", fl_json_text(&j));
    fl_json_free(&j);
}

static int add_meta(tf_onnx_builder *g, Onnx__ModelProto *m, const tf_onnx_options *o)
{
    char *classes, *input;
    meta_contract(g, o, &classes, &input);
    int n = 5 + o->n_meta;
    Onnx__StringStringEntryProto **v = tf_onnx_alloc(g, (size_t)n * sizeof *v);
    if (!v || !classes || !input)
        return g->fail ? g->fail : -ENOMEM;
    char folded[96];
    snprintf(folded, sizeof folded, "%d into the conv before, %d through a max-pool, %d as Mul+Add",
             g->plan->bn_conv, g->plan->bn_pool, g->plan->bn_affine);
    int k = 0;
    v[k++] = meta(g, "classes", classes);
    v[k++] = meta(g, "input", input);
    v[k++] = meta(g, "model", g->spec->name);
    v[k++] = meta(g, "weights", o->weights ? o->weights : "raw");
    v[k++] = meta(g, "batch_norm_folded", folded);
    for (int i = 0; i < o->n_meta; i++)
        v[k++] = meta(g, o->meta[i].key, o->meta[i].value);
    for (int i = 0; i < k; i++)
        if (!v[i])
            return g->fail ? g->fail : -ENOMEM;
    m->n_metadata_props = (size_t)k;
    m->metadata_props = v;
    return 0;
}

/* the whole ModelProto in g's memory */
static int build_model(tf_onnx_builder *g, const tf_onnx_options *o, Onnx__ModelProto *m,
                       Onnx__GraphProto *gr, fl_error *err)
{
    const tf_model_spec *s = g->spec;
    g->name = calloc((size_t)s->n_tensors, sizeof *g->name);
    g->rank = calloc((size_t)s->n_tensors, sizeof *g->rank);
    if (!g->name || !g->rank)
        g->fail = -ENOMEM;
    if (!g->fail) {
        g->name[0] = input_normalise(g);
        g->rank[0] = 4;
        tf_onnx_graph_layers(g);
    }
    int64_t in_dims[3] = {s->in_c, s->in_h, s->in_w}, out_dims[1] = {s->num_classes};
    Onnx__ValueInfoProto **ins = tf_onnx_alloc(g, sizeof *ins),
                         **outs = tf_onnx_alloc(g, sizeof *outs);
    Onnx__OperatorSetIdProto *ops = tf_onnx_alloc(g, sizeof *ops);
    Onnx__OperatorSetIdProto **opv = tf_onnx_alloc(g, sizeof *opv);
    if (ins && outs && ops && opv) {
        ins[0] = value_info(g, "images", o->batch, in_dims, 3);
        outs[0] = value_info(g, "logits", o->batch, out_dims, 1);
    }
    if (!g->fail)
        add_meta(g, m, o);
    if (g->fail == FL_E_UNSUPPORTED)
        return fl_error_set(err, g->fail, "ONNX export: %s", g->why);
    if (g->fail || !ins[0] || !outs[0])
        return fl_error_set(err, -ENOMEM, "ONNX export of %s: out of memory", s->name);
    onnx__graph_proto__init(gr);
    gr->name = (char *)s->name;
    gr->n_node = g->n_nodes;
    gr->node = g->nodes;
    gr->n_initializer = g->n_inits;
    gr->initializer = g->inits;
    gr->n_input = 1;
    gr->input = ins;
    gr->n_output = 1;
    gr->output = outs;
    onnx__operator_set_id_proto__init(ops);
    ops->domain = "";
    ops->has_version = 1;
    ops->version = o->opset;
    opv[0] = ops;
    m->has_ir_version = 1;
    m->ir_version = ir_version(o->opset);
    m->n_opset_import = 1;
    m->opset_import = opv;
    m->producer_name = "trainfast";
    m->producer_version = FASTLOAD_VERSION;
    m->domain = "ai.fastload";
    m->has_model_version = 1;
    m->model_version = 1;
    m->doc_string = (char *)o->doc;
    m->graph = gr;
    return 0;
}

static int check_options(const tf_model_spec *s, const tf_onnx_options *in, tf_onnx_options *o,
                         fl_error *err)
{
    *o = *in;
    if (!o->opset)
        o->opset = TF_ONNX_OPSET_DEFAULT;
    if (o->opset < TF_ONNX_OPSET_MIN || o->opset > TF_ONNX_OPSET_MAX)
        return fl_error_set(err, FL_E_INVALID, "ONNX export: opset %d (supported: %d to %d)",
                            o->opset, TF_ONNX_OPSET_MIN, TF_ONNX_OPSET_MAX);
    if (o->batch < 0)
        return fl_error_set(err, FL_E_INVALID, "ONNX export: batch %lld", (long long)o->batch);
    if (o->classes && o->class_count != (uint32_t)s->num_classes)
        return fl_error_set(err, FL_E_INVALID,
                            "ONNX export: %u class names for a model of %d "
                            "classes",
                            o->class_count, s->num_classes);
    if (o->n_meta < 0 || (o->n_meta && !o->meta))
        return fl_error_set(err, FL_E_INVALID, "ONNX export: bad metadata list");
    return 0;
}

/* Build the model and hand it to `emit` (which serialises it). */
static int with_model(const tf_model_spec *s, const float *params, const float *stats,
                      const tf_onnx_options *opt, tf_onnx_summary *sum,
                      int (*emit)(const Onnx__ModelProto *m, void *user, fl_error *err), void *user,
                      fl_error *err)
{
    tf_onnx_options o;
    int rc = check_options(s, opt, &o, err);
    if (rc)
        return rc;
    tf_onnx_plan plan;
    if ((rc = tf_onnx_plan_make(s, params, stats, &plan, err)))
        return rc;
    tf_onnx_builder g = {.spec = s, .plan = &plan, .params = params, .stats = stats};
    Onnx__ModelProto m;
    Onnx__GraphProto gr;
    onnx__model_proto__init(&m);
    rc = build_model(&g, &o, &m, &gr, err);
    if (!rc && sum) {
        memset(sum, 0, sizeof *sum);
        sum->nodes = (int)g.n_nodes;
        sum->initializers = (int)g.n_inits;
        sum->bn_folded_conv = plan.bn_conv;
        sum->bn_folded_pool = plan.bn_pool;
        sum->bn_affine = plan.bn_affine;
        sum->weights = g.weights;
        sum->bytes = onnx__model_proto__get_packed_size(&m);
    }
    if (!rc)
        rc = emit(&m, user, err);
    tf_onnx_builder_free(&g);
    tf_onnx_plan_free(&plan);
    return rc;
}

/* ---- to memory --------------------------------------------------------------------------------
 */

typedef struct mem_out {
    uint8_t *buf;
    size_t len;
} mem_out;

static int emit_mem(const Onnx__ModelProto *m, void *user, fl_error *err)
{
    mem_out *mo = user;
    size_t n = onnx__model_proto__get_packed_size(m);
    mo->buf = malloc(n ? n : 1);
    if (!mo->buf)
        return fl_error_set(err, -ENOMEM, "ONNX export: out of memory (%zu bytes)", n);
    mo->len = onnx__model_proto__pack(m, mo->buf);
    return 0;
}

int tf_onnx_serialize(const tf_model_spec *spec, const float *params, const float *stats,
                      const tf_onnx_options *opt, uint8_t **out, size_t *len, tf_onnx_summary *sum,
                      fl_error *err)
{
    mem_out mo = {0};
    int rc = with_model(spec, params, stats, opt, sum, emit_mem, &mo, err);
    *out = rc ? NULL : mo.buf;
    *len = rc ? 0 : mo.len;
    if (rc)
        free(mo.buf);
    return rc;
}

/* ---- to a file ------------------------------------------------------------------------------- */

/* protobuf-c appends here; bytes go to the file through a 1 MiB staging buffer */
typedef struct file_out {
    ProtobufCBuffer base;
    int fd, rc;
    size_t used;
    uint8_t buf[1 << 20];
} file_out;

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    file_out *f = (file_out *)b;
    while (len && !f->rc) {
        size_t room = sizeof f->buf - f->used, n = len < room ? len : room;
        memcpy(f->buf + f->used, data, n);
        f->used += n;
        data += n;
        len -= n;
        if (f->used == sizeof f->buf) {
            f->rc = fl_write_all(f->fd, f->buf, f->used);
            f->used = 0;
        }
    }
}

/* The model streamed into a durable write (fl_file_begin/commit: a temporary renamed into place,
 * or a device/FIFO written in place) */
static int emit_file(const Onnx__ModelProto *m, void *user, fl_error *err)
{
    const char *path = user;
    file_out *f = malloc(sizeof *f);
    if (!f)
        return fl_error_set(err, -ENOMEM, "ONNX export: out of memory");
    f->base.append = file_append;
    f->used = 0;
    f->rc = 0;
    fl_file_writer w;
    fl_write_step step;
    int rc = fl_file_begin(path, 0666, &w, &step);
    if (rc) {
        free(f);
        return fl_error_set(err, rc, "%s: cannot %s: %s", path,
                            step == FL_WRITE_NOT_FILE ? "write a model over a directory"
                                                      : fl_write_step_name(step),
                            strerror(-rc));
    }
    f->fd = w.fd;
    onnx__model_proto__pack_to_buffer(m, &f->base);
    if (!f->rc && f->used)
        f->rc = fl_write_all(f->fd, f->buf, f->used);
    rc = f->rc;
    free(f);
    if (rc) {
        fl_error_set(err, rc, "%s: cannot write: %s", w.tmp ? w.tmp : path, strerror(-rc));
        fl_file_abort(&w);
        return rc;
    }
    if ((rc = fl_file_commit(&w, &step)))
        return fl_error_set(err, rc, "%s: cannot %s: %s", path, fl_write_step_name(step),
                            strerror(-rc));
    return 0;
}

int tf_onnx_export(const char *path, const tf_model_spec *spec, const float *params,
                   const float *stats, const tf_onnx_options *opt, tf_onnx_summary *sum,
                   fl_error *err)
{
    return with_model(spec, params, stats, opt, sum, emit_file, (void *)path, err);
}
