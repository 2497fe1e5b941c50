/* test_export_onnx.c — the ONNX exporter without any runtime (export_onnx.h): the folding
 * arithmetic against the CPU reference layers (conv + BN, conv + max-pool + BN), the planner's
 * decisions (resnet18/50: every BN into its conv; fastcnn: through the max-pool, and a Mul + Add
 * when a channel's scale is negative), and the serialised model read back with protobuf-c:
 * opset/IR version, input/output names and shapes (dynamic and fixed batch), no BN node, GELU as
 * primitives, metadata_props; bad options refused. The numbers against a runtime:
 * test_export_onnx.sh (ONNX Runtime). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_layers.h"
#include "export_onnx_internal.h"
#include "fl_check.h"
#include "fl_error.h"
#include "fl_splitmix64.h"
#include "model.h"

static float urand(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(fl_splitmix64_next(s) >> 11) / 9007199254740992.0);
}

/* random weights, and BN statistics/affine params far from the identity */
static void fill(const tf_model_spec *s, float *p, float *st, uint64_t seed)
{
    tf_model_init(s, seed, p, st);
    uint64_t r = seed * 7 + 1;
    for (int l = 0; l < s->n_layers; l++) {
        const tf_layer *L = &s->layers[l];
        if (L->kind != TF_BN)
            continue;
        for (int c = 0; c < L->cin; c++) {
            p[L->w_off + c] = urand(&r, 0.5f, 2.0f);
            p[L->b_off + c] = urand(&r, -1.0f, 1.0f);
            st[L->stat_off + c] = urand(&r, -0.5f, 0.5f);
            st[L->stat_off + L->cin + c] = urand(&r, 0.2f, 3.0f);
        }
    }
}

static double max_rel(const float *a, const float *b, long n)
{
    double m = 0, scale = 1e-30;
    for (long i = 0; i < n; i++) {
        m = fmax(m, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return m / scale;
}

/* conv (+ max-pool) + BN in eval mode vs the folded conv (+ max-pool) */
static void check_fold_numerics(int through_pool)
{
    const int N = 3, cin = 4, cout = 5, k = 3, H = 8;
    tf_shape in = {cin, H, H}, out = {cout, H, H}, po = {cout, H / 2, H / 2};
    tf_layer bn = {.kind = TF_BN,
                   .cin = cout,
                   .cout = cout,
                   .w_off = 0,
                   .b_off = cout,
                   .stat_off = 0,
                   .bn_eps = 1e-5f};
    float x[3 * 4 * 64], w[5 * 4 * 9], bias[5], bnp[10], st[10], a[5], b[5], wf[5 * 4 * 9], bf[5];
    float y[3 * 5 * 64], yp[3 * 5 * 16], ref[3 * 5 * 64], got[3 * 5 * 64];
    int32_t arg[3 * 5 * 16];
    uint64_t r = 42;
    for (int i = 0; i < N * cin * H * H; i++)
        x[i] = urand(&r, -2, 2);
    for (int i = 0; i < cout * cin * k * k; i++)
        w[i] = urand(&r, -0.5f, 0.5f);
    for (int c = 0; c < cout; c++) {
        bias[c] = urand(&r, -1, 1);
        bnp[c] = urand(&r, 0.3f, 2.0f);
        bnp[cout + c] = urand(&r, -1, 1);
        st[c] = urand(&r, -1, 1);
        st[cout + c] = urand(&r, 0.1f, 4.0f);
    }
    tf_onnx_bn_affine(&bn, bnp, st, a, b);
    tf_onnx_fold_conv(cout, (int64_t)cin * k * k, w, bias, a, b, wf, bf);
    cpu_conv_forward(NULL, N, in, out, k, 1, 1, x, w, bias, y);
    const float *pre = y;
    tf_shape bs = out;
    if (through_pool) {
        cpu_maxpool_forward(NULL, N, out, po, 2, 2, 0, y, yp, arg);
        pre = yp;
        bs = po;
    }
    cpu_bn_forward(NULL, N, bs, 0, 1e-5f, 0.1f, pre, bnp, bnp + cout, st, st + cout, NULL, ref);
    cpu_conv_forward(NULL, N, in, out, k, 1, 1, x, wf, bf, got);
    if (through_pool) {
        cpu_maxpool_forward(NULL, N, out, po, 2, 2, 0, got, yp, arg);
        memcpy(got, yp, sizeof yp);
    }
    double e = max_rel(got, ref, (long)N * tf_shape_size(bs));
    EXPECTF(e < 2e-6, "folded conv%s differs from conv + BN: max rel %.3g",
            through_pool ? " + max-pool" : "", e);
}

typedef struct built {
    tf_model_spec spec;
    float *p, *st;
} built;

static void build(built *m, const char *name, int c, int h, int classes, const tf_model_options *o,
                  uint64_t seed)
{
    fl_error err;
    CHECK_OK(tf_model_build(name, c, h, h, classes, o, &m->spec, &err), &err);
    m->p = malloc((size_t)m->spec.param_count * sizeof(float));
    m->st = malloc((size_t)(m->spec.stat_count + 1) * sizeof(float));
    CHECK(m->p && m->st);
    fill(&m->spec, m->p, m->st, seed);
}

static void unbuild(built *m)
{
    tf_model_free(&m->spec);
    free(m->p);
    free(m->st);
}

static int count_op(const Onnx__GraphProto *g, const char *op)
{
    int n = 0;
    for (size_t i = 0; i < g->n_node; i++)
        n += !strcmp(g->node[i]->op_type, op);
    return n;
}

static const char *meta_get(const Onnx__ModelProto *m, const char *key)
{
    for (size_t i = 0; i < m->n_metadata_props; i++)
        if (!strcmp(m->metadata_props[i]->key, key))
            return m->metadata_props[i]->value;
    return NULL;
}

/* dims of a value info as text: "N,1,28,28" */
static void dims_text(const Onnx__ValueInfoProto *v, char *buf, size_t cap)
{
    const Onnx__TensorShapeProto *s = v->type->tensor_type->shape;
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < s->n_dim && o < cap; i++) {
        const Onnx__TensorShapeProto__Dimension *d = s->dim[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? "," : "", d->dim_param);
        else
            o +=
                (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)d->dim_value);
    }
}

/* serialise with `o`, read back, check the frame every model has; returns the model (unpacked) */
static Onnx__ModelProto *roundtrip(const built *m, const tf_onnx_options *o, tf_onnx_summary *sum,
                                   const char *want_in, const char *want_out)
{
    fl_error err;
    uint8_t *buf;
    size_t len;
    CHECK_OK(tf_onnx_serialize(&m->spec, m->p, m->st, o, &buf, &len, sum, &err), &err);
    EXPECT(len == sum->bytes);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, buf);
    free(buf);
    CHECK(mp && mp->graph);
    const Onnx__GraphProto *g = mp->graph;
    int opset = o->opset ? o->opset : 17;
    EXPECTF(mp->n_opset_import == 1 && mp->opset_import[0]->version == opset, "opset");
    EXPECTF(mp->ir_version == (opset <= 14   ? 7
                               : opset <= 18 ? 8
                               : opset <= 20 ? 9
                                             : 10),
            "ir_version %lld for opset %d", (long long)mp->ir_version, opset);
    EXPECT_STR(mp->producer_name, "trainfast");
    CHECK(g->n_input == 1 && g->n_output == 1);
    EXPECT_STR(g->input[0]->name, "images");
    EXPECT_STR(g->output[0]->name, "logits");
    char d[64];
    dims_text(g->input[0], d, sizeof d);
    EXPECT_STR(d, want_in);
    dims_text(g->output[0], d, sizeof d);
    EXPECT_STR(d, want_out);
    EXPECT(count_op(g, "BatchNormalization") == 0);
    EXPECT(!strcmp(g->node[g->n_node - 1]->output[0], "logits"));
    EXPECTF(meta_get(mp, "classes") && meta_get(mp, "input") && meta_get(mp, "model"),
            "metadata_props incomplete");
    /* every initializer holds as many floats as its dims say */
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        int64_t n = 1;
        for (size_t k = 0; k < t->n_dims; k++)
            n *= t->dims[k];
        EXPECTF(t->raw_data.len == (size_t)n * 4, "initializer %s: %zu bytes for %lld floats",
                t->name, t->raw_data.len, (long long)n);
    }
    return mp;
}

static void check_fastcnn(void)
{
    built m;
    tf_model_options o = {.width = 8, .residual = 1};
    build(&m, "fastcnn", 1, 28, 10, &o, 1);
    const char *names[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                             "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle \"boot\""};
    const tf_onnx_meta extra[1] = {{"checkpoint", "ck/ckpt-1.tfc"}};
    tf_onnx_options opt = {
        .classes = names, .class_count = 10, .weights = "ema", .meta = extra, .n_meta = 1};
    tf_onnx_summary sum;
    Onnx__ModelProto *mp = roundtrip(&m, &opt, &sum, "N,1,28,28", "N,10");
    /* 3 block BNs through the max-pool, 6 residual BNs into their conv */
    EXPECTF(sum.bn_folded_pool == 3 && sum.bn_folded_conv == 6 && sum.bn_affine == 0,
            "fold %d/%d/%d", sum.bn_folded_pool, sum.bn_folded_conv, sum.bn_affine);
    EXPECT(count_op(mp->graph, "Conv") == 9 && count_op(mp->graph, "MaxPool") == 3);
    EXPECT(count_op(mp->graph, "Gemm") == 1 && count_op(mp->graph, "Mul") == 0);
    const char *cl = meta_get(mp, "classes");
    EXPECT_STR(cl ? cl : "", "[\"T-shirt/top\",\"Trouser\",\"Pullover\",\"Dress\",\"Coat\","
                             "\"Sandal\",\"Shirt\",\"Sneaker\",\"Bag\",\"Ankle \\\"boot\\\"\"]");
    EXPECT_STR(meta_get(mp, "weights") ? meta_get(mp, "weights") : "", "ema");
    EXPECT_STR(meta_get(mp, "checkpoint") ? meta_get(mp, "checkpoint") : "", "ck/ckpt-1.tfc");
    onnx__model_proto__free_unpacked(mp, NULL);

    /* a negative scale in block 2's BN: that BN cannot pass the max-pool, it becomes Mul + Add */
    const tf_layer *bn2 = NULL;
    for (int l = 0, seen = 0; l < m.spec.n_layers; l++)
        if (m.spec.layers[l].kind == TF_BN && m.spec.layers[l - 1].kind == TF_MAXPOOL &&
            ++seen == 2)
            bn2 = &m.spec.layers[l];
    CHECK(bn2);
    m.p[bn2->w_off + 3] = -0.7f;
    opt.batch = 8;
    opt.opset = 13;
    mp = roundtrip(&m, &opt, &sum, "8,1,28,28", "8,10");
    EXPECTF(sum.bn_folded_pool == 2 && sum.bn_affine == 1, "negative gamma: fold %d/%d/%d",
            sum.bn_folded_pool, sum.bn_folded_conv, sum.bn_affine);
    EXPECT(count_op(mp->graph, "Mul") == 1);
    onnx__model_proto__free_unpacked(mp, NULL);

    /* bad options */
    fl_error err;
    uint8_t *buf;
    size_t len;
    tf_onnx_options bad = {.opset = 12};
    EXPECT_RC(tf_onnx_serialize(&m.spec, m.p, m.st, &bad, &buf, &len, NULL, &err), FL_E_INVALID,
              &err);
    bad = (tf_onnx_options){.opset = 22};
    EXPECT_RC(tf_onnx_serialize(&m.spec, m.p, m.st, &bad, &buf, &len, NULL, &err), FL_E_INVALID,
              &err);
    bad = (tf_onnx_options){.classes = names, .class_count = 9};
    EXPECT_RC(tf_onnx_serialize(&m.spec, m.p, m.st, &bad, &buf, &len, NULL, &err), FL_E_INVALID,
              &err);
    bad = (tf_onnx_options){.batch = -1};
    EXPECT_RC(tf_onnx_serialize(&m.spec, m.p, m.st, &bad, &buf, &len, NULL, &err), FL_E_INVALID,
              &err);
    unbuild(&m);
}

static void check_gelu(void)
{
    built m;
    tf_model_options o = {.width = 4, .gelu = 1};
    build(&m, "fastcnn", 3, 32, 5, &o, 2);
    tf_onnx_options opt = {0};
    tf_onnx_summary sum;
    Onnx__ModelProto *mp = roundtrip(&m, &opt, &sum, "N,3,32,32", "N,5");
    EXPECT(count_op(mp->graph, "Tanh") == 3 && count_op(mp->graph, "Relu") == 0);
    const char *cl = meta_get(mp, "classes");
    EXPECT_STR(cl ? cl : "", "[\"0\",\"1\",\"2\",\"3\",\"4\"]");
    onnx__model_proto__free_unpacked(mp, NULL);
    unbuild(&m);
}

/* resnet18 / resnet50: every BN folded into the conv right before it */
static void check_resnet(const char *name, int n_bn, int n_conv)
{
    built m;
    build(&m, name, 3, 64, 7, NULL, 3);
    tf_onnx_options opt = {0};
    tf_onnx_summary sum;
    Onnx__ModelProto *mp = roundtrip(&m, &opt, &sum, "N,3,64,64", "N,7");
    EXPECTF(sum.bn_folded_conv == n_bn && sum.bn_folded_pool == 0 && sum.bn_affine == 0,
            "%s: fold %d/%d/%d", name, sum.bn_folded_conv, sum.bn_folded_pool, sum.bn_affine);
    EXPECT(count_op(mp->graph, "Conv") == n_conv);
    EXPECT(count_op(mp->graph, "Mul") == 0);
    /* folded: the BN parameters are gone, every conv has a bias: weights = params - 4 * BN ch + ...
     */
    int64_t bn_ch = 0, conv_out = 0;
    for (int l = 0; l < m.spec.n_layers; l++) {
        bn_ch += m.spec.layers[l].kind == TF_BN ? m.spec.layers[l].cin : 0;
        conv_out += m.spec.layers[l].kind == TF_CONV ? m.spec.layers[l].cout : 0;
    }
    EXPECTF(sum.weights == m.spec.param_count - 2 * bn_ch + conv_out + 1 + 2 * 3,
            "%s: %lld weights written", name, (long long)sum.weights);
    onnx__model_proto__free_unpacked(mp, NULL);
    unbuild(&m);
}

int main(void)
{
    check_fold_numerics(0);
    check_fold_numerics(1);
    check_fastcnn();
    check_gelu();
    check_resnet("resnet18", 20, 20);
    check_resnet("resnet50", 53, 53);
    return fl_check_status();
}
