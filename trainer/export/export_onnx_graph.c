/* export_onnx_graph.c — the layers of a tf_model_spec (model.h) as ONNX nodes and initializers,
 * with the batch-norm folding that export_onnx_plan.c decided. Each layer's ONNX form matches
 * the CPU reference layer (trainer/cpu/cpu_layers.c): zero-padded Conv, MaxPool (padding never
 * wins), AveragePool with count_include_pad, GlobalAveragePool, Flatten + Gemm for linear layers,
 * GELU in its tanh form from primitives (opset 17 has no Gelu operator). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_onnx_internal.h"

/* the ONNX name of the value layer output tensor t gets: the model's last tensor is "logits" */
static const char *out_name(tf_onnx_builder *g, int t)
{
    if (t == g->spec->n_tensors - 1 && g->rank[t] == 2)
        return "logits";
    return tf_onnx_str(g, "t%d", t);
}

/* the name of the layer owning the parameter at w_off, without ".weight" ("layer1.0.a.conv") */
static const char *param_base(tf_onnx_builder *g, int64_t w_off, int l)
{
    for (int i = 0; i < g->spec->n_params; i++) {
        const char *n = g->spec->params[i].name;
        size_t len = strlen(n);
        if (g->spec->params[i].offset != w_off)
            continue;
        if (len > 7 && !strcmp(n + len - 7, ".weight"))
            len -= 7;
        return tf_onnx_str(g, "%.*s", (int)len, n);
    }
    return tf_onnx_str(g, "layer%d", l);
}

static int unsupported(tf_onnx_builder *g, int l, const char *what)
{
    if (!g->fail) {
        g->fail = FL_E_UNSUPPORTED;
        snprintf(g->why, sizeof g->why, "layer %d (%s) %s", l, g->spec->name, what);
    }
    return g->fail;
}

/* a [1, C, 1, 1] initializer (per-channel constant broadcast over N, H, W) */
static const char *chan_const(tf_onnx_builder *g, const char *name, const float *v, int c, int rank)
{
    int64_t d4[4] = {1, c, 1, 1}, d2[2] = {1, c};
    return rank == 4 ? tf_onnx_init(g, name, d4, 4, v, c) : tf_onnx_init(g, name, d2, 2, v, c);
}

static void emit_conv(tf_onnx_builder *g, int l)
{
    const tf_layer *L = &g->spec->layers[l];
    const char *base = param_base(g, L->w_off, l);
    const int64_t per_out = (int64_t)L->cin * L->k * L->k, nw = per_out * L->cout;
    const float *w = g->params + L->w_off, *bias = L->b_off >= 0 ? g->params + L->b_off : NULL;
    const char *wn, *bn = NULL;
    int64_t wd[4] = {L->cout, L->cin, L->k, L->k}, bd[1] = {L->cout};
    int fb = g->plan->folded_bn[l];
    if (fb >= 0) {
        const tf_layer *B = &g->spec->layers[fb];
        float *wf = malloc((size_t)nw * sizeof(float)),
              *bf = malloc((size_t)L->cout * sizeof(float));
        if (wf && bf) {
            tf_onnx_fold_conv(L->cout, per_out, w, bias, g->plan->scale + B->stat_off / 2,
                              g->plan->shift + B->stat_off / 2, wf, bf);
            wn = tf_onnx_init(g, tf_onnx_str(g, "%s.weight", base), wd, 4, wf, nw);
            bn = tf_onnx_init(g, tf_onnx_str(g, "%s.bias", base), bd, 1, bf, L->cout);
        } else {
            g->fail = -ENOMEM;
            wn = NULL;
        }
        free(wf);
        free(bf);
    } else {
        wn = tf_onnx_init(g, tf_onnx_str(g, "%s.weight", base), wd, 4, w, nw);
        if (bias)
            bn = tf_onnx_init(g, tf_onnx_str(g, "%s.bias", base), bd, 1, bias, L->cout);
    }
    const char *in[3] = {g->name[L->in], wn, bn};
    Onnx__NodeProto *n = tf_onnx_node(g, "Conv", in, bn ? 3 : 2, out_name(g, L->out));
    int64_t ks[2] = {L->k, L->k}, st[2] = {L->stride, L->stride};
    int64_t pads[4] = {L->pad, L->pad, L->pad, L->pad};
    tf_onnx_attr_ints(g, n, "kernel_shape", ks, 2);
    tf_onnx_attr_ints(g, n, "strides", st, 2);
    tf_onnx_attr_ints(g, n, "pads", pads, 4);
}

/* a BN not folded: y = x * a + b per channel */
static void emit_bn(tf_onnx_builder *g, int l)
{
    const tf_layer *L = &g->spec->layers[l];
    if (g->plan->fold_into[l] >= 0) { /* already in the conv's weights: same value, new id */
        g->name[L->out] = g->name[L->in];
        return;
    }
    const char *a = chan_const(g, tf_onnx_str(g, "bn%d.scale", l), g->plan->scale + L->stat_off / 2,
                               L->cin, g->rank[L->in]);
    const char *b = chan_const(g, tf_onnx_str(g, "bn%d.shift", l), g->plan->shift + L->stat_off / 2,
                               L->cin, g->rank[L->in]);
    const char *t = tf_onnx_str(g, "t%d_scaled", L->out);
    const char *in1[2] = {g->name[L->in], a}, *in2[2] = {t, b};
    tf_onnx_node(g, "Mul", in1, 2, t);
    tf_onnx_node(g, "Add", in2, 2, out_name(g, L->out));
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the CPU layer's operation order */
static void emit_gelu(tf_onnx_builder *g, int l)
{
    const tf_layer *L = &g->spec->layers[l];
    if (!g->gelu_consts) {
        const float c[4] = {0.044715f, 0.7978845608028654f, 1.0f, 0.5f};
        tf_onnx_init(g, "gelu.c3", NULL, 0, &c[0], 1);
        tf_onnx_init(g, "gelu.k", NULL, 0, &c[1], 1);
        tf_onnx_init(g, "gelu.one", NULL, 0, &c[2], 1);
        tf_onnx_init(g, "gelu.half", NULL, 0, &c[3], 1);
        g->gelu_consts = 1;
    }
    const char *x = g->name[L->in];
    const char *v[8];
    for (int i = 0; i < 8; i++)
        v[i] = tf_onnx_str(g, "t%d_gelu%d", L->out, i);
    const char *steps[9][3] = {
        {"Mul", "gelu.half", x},   /* v0 = 0.5 x */
        {"Mul", x, "gelu.c3"},     /* v1 = 0.044715 x */
        {"Mul", v[1], x},          /* v2 = 0.044715 x x */
        {"Mul", v[2], x},          /* v3 = 0.044715 x x x */
        {"Add", x, v[3]},          /* v4 = x + 0.044715 x^3 */
        {"Mul", "gelu.k", v[4]},   /* v5 = k (...) */
        {"Tanh", v[5], NULL},      /* v6 */
        {"Add", "gelu.one", v[6]}, /* v7 = 1 + tanh */
        {"Mul", v[0], v[7]},       /* out */
    };
    for (int i = 0; i < 9; i++) {
        const char *in[2] = {steps[i][1], steps[i][2]};
        tf_onnx_node(g, steps[i][0], in, steps[i][2] ? 2 : 1, i == 8 ? out_name(g, L->out) : v[i]);
    }
}

static void emit_pool(tf_onnx_builder *g, int l)
{
    const tf_layer *L = &g->spec->layers[l];
    const char *in[1] = {g->name[L->in]};
    const char *op = L->kind == TF_MAXPOOL   ? "MaxPool"
                     : L->kind == TF_AVGPOOL ? "AveragePool"
                                             : "GlobalAveragePool";
    Onnx__NodeProto *n = tf_onnx_node(g, op, in, 1, out_name(g, L->out));
    if (L->kind == TF_GAP)
        return;
    int64_t ks[2] = {L->k, L->k}, st[2] = {L->stride, L->stride};
    int64_t pads[4] = {L->pad, L->pad, L->pad, L->pad};
    tf_onnx_attr_ints(g, n, "kernel_shape", ks, 2);
    tf_onnx_attr_ints(g, n, "strides", st, 2);
    tf_onnx_attr_ints(g, n, "pads", pads, 4);
    if (L->kind == TF_AVGPOOL)
        tf_onnx_attr_int(g, n, "count_include_pad", 1);
}

static void emit_linear(tf_onnx_builder *g, int l)
{
    const tf_layer *L = &g->spec->layers[l];
    const char *x = g->name[L->in];
    if (g->rank[L->in] == 4) { /* flatten in C, H, W order, as the CPU layer reads it */
        const char *in[1] = {x};
        x = tf_onnx_str(g, "t%d_flat", L->in);
        Onnx__NodeProto *n = tf_onnx_node(g, "Flatten", in, 1, x);
        tf_onnx_attr_int(g, n, "axis", 1);
    }
    const char *base = param_base(g, L->w_off, l);
    int64_t wd[2] = {L->cout, L->cin}, bd[1] = {L->cout};
    const char *wn = tf_onnx_init(g, tf_onnx_str(g, "%s.weight", base), wd, 2, g->params + L->w_off,
                                  (int64_t)L->cout * L->cin);
    const char *bn = NULL;
    if (L->b_off >= 0)
        bn = tf_onnx_init(g, tf_onnx_str(g, "%s.bias", base), bd, 1, g->params + L->b_off, L->cout);
    const char *in[3] = {x, wn, bn};
    Onnx__NodeProto *n = tf_onnx_node(g, "Gemm", in, bn ? 3 : 2, out_name(g, L->out));
    tf_onnx_attr_int(g, n, "transB", 1);
}

/* the remaining one-line layers */
static void emit_simple(tf_onnx_builder *g, int l)
{
    const tf_layer *L = &g->spec->layers[l];
    if (L->kind == TF_ADD) {
        if (g->rank[L->in] != g->rank[L->in2]) {
            unsupported(g, l, "adds tensors of different ranks");
            return;
        }
        const char *in[2] = {g->name[L->in], g->name[L->in2]};
        tf_onnx_node(g, "Add", in, 2, out_name(g, L->out));
    } else if (L->kind == TF_SCALE) {
        const char *s = tf_onnx_init(g, tf_onnx_str(g, "scale%d", l), NULL, 0, &L->scale, 1);
        const char *in[2] = {g->name[L->in], s};
        tf_onnx_node(g, "Mul", in, 2, out_name(g, L->out));
    } else { /* TF_RELU */
        const char *in[1] = {g->name[L->in]};
        tf_onnx_node(g, "Relu", in, 1, out_name(g, L->out));
    }
}

int tf_onnx_graph_layers(tf_onnx_builder *g)
{
    const tf_model_spec *s = g->spec;
    for (int l = 0; l < s->n_layers && !g->fail; l++) {
        const tf_layer *L = &s->layers[l];
        if (!g->name[L->in] || (L->in2 >= 0 && !g->name[L->in2]))
            return unsupported(g, l, "reads a tensor no earlier layer wrote");
        int needs4 = L->kind == TF_CONV || L->kind == TF_MAXPOOL || L->kind == TF_AVGPOOL ||
                     L->kind == TF_GAP;
        if (needs4 && g->rank[L->in] != 4)
            return unsupported(g, l, "is a spatial layer after a linear layer");
        g->rank[L->out] = L->kind == TF_LINEAR ? 2 : g->rank[L->in];
        switch (L->kind) {
        case TF_CONV: emit_conv(g, l); break;
        case TF_BN: emit_bn(g, l); break;
        case TF_GELU: emit_gelu(g, l); break;
        case TF_MAXPOOL:
        case TF_AVGPOOL:
        case TF_GAP: emit_pool(g, l); break;
        case TF_LINEAR: emit_linear(g, l); break;
        case TF_RELU:
        case TF_ADD:
        case TF_SCALE: emit_simple(g, l); break;
        default: return unsupported(g, l, "has a kind the exporter does not know");
        }
        if (!g->name[L->out])
            g->name[L->out] = out_name(g, L->out);
    }
    if (g->fail)
        return g->fail;
    const int last = s->n_tensors - 1;
    if (g->rank[last] == 4) { /* logits come as (classes, 1, 1): make them [N, classes] */
        const char *in[1] = {g->name[last]};
        Onnx__NodeProto *n = tf_onnx_node(g, "Flatten", in, 1, "logits");
        tf_onnx_attr_int(g, n, "axis", 1);
    } else if (strcmp(g->name[last], "logits")) { /* the last layer was folded away */
        const char *in[1] = {g->name[last]};
        tf_onnx_node(g, "Identity", in, 1, "logits");
    }
    return g->fail;
}
