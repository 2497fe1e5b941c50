/* models.c — model builders: fastcnn (airbench-style small CNN for 28-64 px), resnet18 and
 * resnet50 (224 px), written as tf_model_spec data (model.h), plus deterministic init. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_dataset.h"
#include "fl_splitmix64.h"
#include "model.h"

typedef struct builder {
    tf_model_spec *s;
    int cap_l, cap_t, cap_p;
    int act_gelu;
    int fail; /* sticky: -ENOMEM or FL_E_INVALID */
    char why[160];
} builder;

static int grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 32;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np)
        return -ENOMEM;
    *p = np;
    *cap = nc;
    return 0;
}

static int add_tensor(builder *b, int c, int h, int w)
{
    if (b->fail)
        return 0;
    if (c <= 0 || h <= 0 || w <= 0) {
        b->fail = FL_E_INVALID;
        snprintf(b->why, sizeof b->why, "layer %d would produce an empty %dx%dx%d tensor",
                 b->s->n_layers, c, h, w);
        return 0;
    }
    if (grow((void **)&b->s->tensors, &b->cap_t, b->s->n_tensors + 1, sizeof(tf_shape))) {
        b->fail = -ENOMEM;
        return 0;
    }
    b->s->tensors[b->s->n_tensors] = (tf_shape){c, h, w};
    return b->s->n_tensors++;
}

static tf_layer *add_layer(builder *b, tf_layer_kind kind, int in)
{
    if (b->fail)
        return NULL;
    if (grow((void **)&b->s->layers, &b->cap_l, b->s->n_layers + 1, sizeof(tf_layer))) {
        b->fail = -ENOMEM;
        return NULL;
    }
    tf_layer *L = &b->s->layers[b->s->n_layers++];
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->in = in;
    L->in2 = -1;
    L->out = -1;
    L->w_off = L->b_off = L->stat_off = -1;
    L->k = L->stride = 1;
    return L;
}

static int64_t add_param(builder *b, const char *name, const char *suffix, int64_t count,
                         int no_decay, int fan_in)
{
    if (b->fail)
        return -1;
    if (grow((void **)&b->s->params, &b->cap_p, b->s->n_params + 1, sizeof(tf_param))) {
        b->fail = -ENOMEM;
        return -1;
    }
    tf_param *p = &b->s->params[b->s->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s.%s", name, suffix);
    p->offset = b->s->param_count;
    p->count = count;
    p->no_decay = no_decay;
    p->layer = b->s->n_layers - 1;
    p->fan_in = fan_in;
    b->s->param_count += count;
    return p->offset;
}

static int conv(builder *b, int in, int cout, int k, int stride, int pad, int bias,
                const char *name)
{
    if (b->fail)
        return 0;
    tf_shape s = b->s->tensors[in];
    tf_layer *L = add_layer(b, TF_CONV, in);
    if (!L)
        return 0;
    L->k = k;
    L->stride = stride;
    L->pad = pad;
    L->cin = s.c;
    L->cout = cout;
    int fan = s.c * k * k;
    L->w_off = add_param(b, name, "weight", (int64_t)cout * fan, 0, fan);
    if (bias)
        L->b_off = add_param(b, name, "bias", cout, 1, fan);
    int ho = (s.h + 2 * pad - k) / stride + 1, wo = (s.w + 2 * pad - k) / stride + 1;
    if (s.h + 2 * pad < k || s.w + 2 * pad < k)
        ho = wo = 0;
    int out = add_tensor(b, cout, ho, wo);
    if (!b->fail)
        b->s->layers[b->s->n_layers - 1].out = out;
    return out;
}

static int bn(builder *b, int in, const char *name)
{
    if (b->fail)
        return 0;
    tf_shape s = b->s->tensors[in];
    tf_layer *L = add_layer(b, TF_BN, in);
    if (!L)
        return 0;
    L->cin = L->cout = s.c;
    L->bn_eps = 1e-5f;
    L->bn_momentum = 0.1f;
    L->stat_off = b->s->stat_count;
    b->s->stat_count += 2 * s.c;
    L->w_off = add_param(b, name, "weight", s.c, 1, 1);
    L->b_off = add_param(b, name, "bias", s.c, 1, 1);
    int out = add_tensor(b, s.c, s.h, s.w);
    if (!b->fail)
        b->s->layers[b->s->n_layers - 1].out = out;
    return out;
}

static int simple(builder *b, tf_layer_kind kind, int in, int in2, int k, int stride, int pad,
                  float scale)
{
    if (b->fail)
        return 0;
    tf_shape s = b->s->tensors[in];
    tf_layer *L = add_layer(b, kind, in);
    if (!L)
        return 0;
    L->in2 = in2;
    L->k = k;
    L->stride = stride;
    L->pad = pad;
    L->scale = scale;
    L->cin = L->cout = s.c;
    tf_shape o = s;
    if (kind == TF_MAXPOOL || kind == TF_AVGPOOL) {
        o.h = s.h + 2 * pad >= k ? (s.h + 2 * pad - k) / stride + 1 : 0;
        o.w = s.w + 2 * pad >= k ? (s.w + 2 * pad - k) / stride + 1 : 0;
    } else if (kind == TF_GAP) {
        o.h = o.w = 1;
    }
    int out = add_tensor(b, o.c, o.h, o.w);
    if (!b->fail)
        b->s->layers[b->s->n_layers - 1].out = out;
    return out;
}

static int act(builder *b, int in)
{
    return simple(b, b->act_gelu ? TF_GELU : TF_RELU, in, -1, 1, 1, 0, 1.0f);
}

static int linear(builder *b, int in, int cout, const char *name)
{
    if (b->fail)
        return 0;
    int cin = (int)tf_shape_size(b->s->tensors[in]);
    tf_layer *L = add_layer(b, TF_LINEAR, in);
    if (!L)
        return 0;
    L->cin = cin;
    L->cout = cout;
    L->w_off = add_param(b, name, "weight", (int64_t)cout * cin, 0, cin);
    L->b_off = add_param(b, name, "bias", cout, 1, cin);
    int out = add_tensor(b, cout, 1, 1);
    if (!b->fail)
        b->s->layers[b->s->n_layers - 1].out = out;
    return out;
}

/* conv -> BN -> activation */
static int cba(builder *b, int in, int cout, int k, int stride, int pad, const char *name,
               int with_act)
{
    char n1[64], n2[64];
    snprintf(n1, sizeof n1, "%s.conv", name);
    snprintf(n2, sizeof n2, "%s.bn", name);
    int t = conv(b, in, cout, k, stride, pad, 0, n1);
    t = bn(b, t, n2);
    return with_act ? act(b, t) : t;
}

static void build_fastcnn(builder *b, const tf_model_options *o)
{
    /* airbench shape: per block conv3x3 -> maxpool2 -> BN -> act (pooling before BN halves the
     * BN/activation work), optional residual pair of conv-BN-act; then GAP, linear, and a fixed
     * logit scale. Three blocks take 28 px to 3 px and 64 px to 8 px. */
    int w = o && o->width > 0 ? o->width : 24;
    int t = 0;
    int widths[3] = {w, 2 * w, 4 * w};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "block%d.conv", i + 1);
        t = conv(b, t, widths[i], 3, 1, 1, 0, name);
        t = simple(b, TF_MAXPOOL, t, -1, 2, 2, 0, 1.0f);
        snprintf(name, sizeof name, "block%d.bn", i + 1);
        t = bn(b, t, name);
        t = act(b, t);
        if (o && o->residual) {
            snprintf(name, sizeof name, "block%d.res1", i + 1);
            int r = cba(b, t, widths[i], 3, 1, 1, name, 1);
            snprintf(name, sizeof name, "block%d.res2", i + 1);
            r = cba(b, r, widths[i], 3, 1, 1, name, 1);
            t = simple(b, TF_ADD, t, r, 1, 1, 0, 1.0f);
        }
    }
    t = simple(b, TF_GAP, t, -1, 1, 1, 0, 1.0f);
    t = linear(b, t, b->s->num_classes, "head");
}

static void build_resnet(builder *b, int depth)
{
    static const int blocks18[4] = {2, 2, 2, 2}, blocks50[4] = {3, 4, 6, 3};
    const int *nb = depth == 18 ? blocks18 : blocks50;
    const int expansion = depth == 18 ? 1 : 4;
    int t = cba(b, 0, 64, 7, 2, 3, "stem", 1);
    t = simple(b, TF_MAXPOOL, t, -1, 3, 2, 1, 1.0f);
    for (int l = 0; l < 4; l++) {
        int width = 64 << l;
        for (int i = 0; i < nb[l]; i++) {
            int stride = (l > 0 && i == 0) ? 2 : 1;
            char name[48];
            int r;
            if (depth == 18) {
                snprintf(name, sizeof name, "layer%d.%d.a", l + 1, i);
                r = cba(b, t, width, 3, stride, 1, name, 1);
                snprintf(name, sizeof name, "layer%d.%d.b", l + 1, i);
                r = cba(b, r, width, 3, 1, 1, name, 0);
            } else {
                snprintf(name, sizeof name, "layer%d.%d.a", l + 1, i);
                r = cba(b, t, width, 1, 1, 0, name, 1);
                snprintf(name, sizeof name, "layer%d.%d.b", l + 1, i);
                r = cba(b, r, width, 3, stride, 1, name, 1);
                snprintf(name, sizeof name, "layer%d.%d.c", l + 1, i);
                r = cba(b, r, width * expansion, 1, 1, 0, name, 0);
            }
            int skip = t;
            if (!b->fail && (stride != 1 || b->s->tensors[t].c != width * expansion)) {
                snprintf(name, sizeof name, "layer%d.%d.down", l + 1, i);
                skip = cba(b, t, width * expansion, 1, stride, 0, name, 0);
            }
            t = simple(b, TF_ADD, r, skip, 1, 1, 0, 1.0f);
            t = act(b, t);
        }
    }
    t = simple(b, TF_GAP, t, -1, 1, 1, 0, 1.0f);
    t = linear(b, t, b->s->num_classes, "fc");
}

void tf_model_finalize(tf_model_spec *s)
{
    uint32_t crc = fl_crc32c(0, s->name, strnlen(s->name, sizeof s->name));
    int32_t hdr[4] = {s->in_c, s->in_h, s->in_w, s->num_classes};
    crc = fl_crc32c(crc, hdr, sizeof hdr);
    for (int i = 0; i < s->n_layers; i++) {
        const tf_layer *L = &s->layers[i];
        int32_t v[9] = {L->kind, L->in, L->in2, L->out, L->k, L->stride, L->pad, L->cin, L->cout};
        crc = fl_crc32c(crc, v, sizeof v);
    }
    s->spec_id = crc;
}

int tf_model_build(const char *name, int in_c, int in_h, int in_w, int num_classes,
                   const tf_model_options *opt, tf_model_spec *out, fl_error *err)
{
    memset(out, 0, sizeof *out);
    if (!name || strlen(name) >= sizeof out->name)
        return fl_error_set(err, FL_E_INVALID, "model name missing or too long");
    if (in_c != 1 && in_c != 3)
        return fl_error_set(err, FL_E_INVALID, "model %s: %d input channels (need 1 or 3)", name,
                            in_c);
    if (num_classes < 2)
        return fl_error_set(err, FL_E_INVALID, "model %s: %d classes (need at least 2)", name,
                            num_classes);
    builder b = {.s = out, .act_gelu = opt && opt->gelu};
    snprintf(out->name, sizeof out->name, "%s", name);
    out->in_c = in_c;
    out->in_h = in_h;
    out->in_w = in_w;
    out->num_classes = num_classes;
    for (int c = 0; c < 3; c++) {
        out->mean[c] = 0.5f;
        out->std[c] = 0.25f;
    }
    add_tensor(&b, in_c, in_h, in_w);
    if (!strcmp(name, "fastcnn"))
        build_fastcnn(&b, opt);
    else if (!strcmp(name, "resnet18"))
        build_resnet(&b, 18);
    else if (!strcmp(name, "resnet50"))
        build_resnet(&b, 50);
    else {
        tf_model_free(out);
        return fl_error_set(err, FL_E_INVALID,
                            "unknown model '%s' (known: fastcnn, resnet18, resnet50)", name);
    }
    if (b.fail) {
        int code = b.fail;
        tf_model_free(out);
        if (code == -ENOMEM)
            return fl_error_set(err, code, "model %s: out of memory", name);
        return fl_error_set(err, code, "model %s: input %dx%dx%d too small: %s", name, in_c, in_h,
                            in_w, b.why);
    }
    tf_model_finalize(out);
    return 0;
}

void tf_model_free(tf_model_spec *s)
{
    if (!s)
        return;
    free(s->layers);
    free(s->tensors);
    free(s->params);
    s->layers = NULL;
    s->tensors = NULL;
    s->params = NULL;
    s->n_layers = s->n_tensors = s->n_params = 0;
}

void tf_model_init(const tf_model_spec *spec, uint64_t seed, float *params, float *stats)
{
    if (params) {
        for (int i = 0; i < spec->n_params; i++) {
            const tf_param *p = &spec->params[i];
            const tf_layer *L = &spec->layers[p->layer];
            float *d = params + p->offset;
            if (L->kind == TF_BN) {
                float v = p->offset == L->w_off ? 1.0f : 0.0f;
                for (int64_t j = 0; j < p->count; j++)
                    d[j] = v;
                continue;
            }
            /* each tensor gets its own stream, so adding a layer does not change the others */
            uint64_t st = seed ^ (0x5851F42D4C957F2Dull * (uint64_t)(i + 1));
            float bound = 1.0f / sqrtf((float)(p->fan_in > 0 ? p->fan_in : 1));
            for (int64_t j = 0; j < p->count; j++) {
                double u = (double)(fl_splitmix64_next(&st) >> 11) * (1.0 / 9007199254740992.0);
                d[j] = (float)((2.0 * u - 1.0) * bound);
            }
        }
    }
    if (stats) {
        for (int i = 0; i < spec->n_layers; i++) {
            const tf_layer *L = &spec->layers[i];
            if (L->kind != TF_BN)
                continue;
            for (int c = 0; c < L->cin; c++) {
                stats[L->stat_off + c] = 0.0f;
                stats[L->stat_off + L->cin + c] = 1.0f;
            }
        }
    }
}

double tf_model_flops(const tf_model_spec *spec)
{
    double macs = 0.0;
    for (int i = 0; i < spec->n_layers; i++) {
        const tf_layer *L = &spec->layers[i];
        tf_shape o = spec->tensors[L->out];
        if (L->kind == TF_CONV)
            macs += (double)o.h * o.w * L->cout * L->cin * L->k * L->k;
        else if (L->kind == TF_LINEAR)
            macs += (double)L->cin * L->cout;
    }
    return macs;
}
