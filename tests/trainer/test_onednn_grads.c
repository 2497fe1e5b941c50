/* test_onednn_grads.c — the CPU backend's oneDNN path against its reference layers,
 * through the backend interface: the same initial state and batch in both, then
 *   - one micro-batch of an accumulation group of 2 (no optimizer step): every parameter
 *     tensor's accumulated gradient, the loss, the top-1 count and the BN running statistics;
 *   - evaluation (BN on running statistics, flip TTA): summed loss, top-1/top-5, and the
 *     predicted logits;
 *   - the optimizer step ending that group (Nesterov, wd; label smoothing, crop+flip): every
 *     parameter tensor's update; then a second step: updates (small models) or loss (whole).
 * Per tensor: max|onednn - reference| / max|reference| <= TOL (1e-4 for single layers,
 * 1e-3 for the whole models, whose gradients pass through up to 20 layers of fp32 sums taken in
 * another order). Cases: one hand-built model per layer kind and combination (conv with bias,
 * strided conv, BN + ReLU (fused), GELU, max/avg/global pooling, residual add of a tensor read
 * twice, scale, BN on the input, linear over a spatial tensor), then fastcnn and resnet18.
 * Skips (77) in a build without oneDNN. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "fl_check.h"
#include "model.h"

/* ---- a tiny spec builder ---- */
typedef struct sb {
    tf_model_spec s;
    int cap;
} sb;

static int sb_tensor(sb *b, int c, int h, int w)
{
    b->s.tensors = realloc(b->s.tensors, sizeof(tf_shape) * (size_t)(b->s.n_tensors + 1));
    b->s.tensors[b->s.n_tensors] = (tf_shape){c, h, w};
    return b->s.n_tensors++;
}

static int64_t sb_param(sb *b, const char *name, int64_t count, int no_decay, int fan)
{
    b->s.params = realloc(b->s.params, sizeof(tf_param) * (size_t)(b->s.n_params + 1));
    tf_param *p = &b->s.params[b->s.n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s%d", name, b->s.n_params);
    p->offset = b->s.param_count;
    p->count = count;
    p->no_decay = no_decay;
    p->layer = b->s.n_layers - 1;
    p->fan_in = fan;
    b->s.param_count += count;
    return p->offset;
}

static tf_layer *sb_layer(sb *b, tf_layer_kind kind, int in)
{
    b->s.layers = realloc(b->s.layers, sizeof(tf_layer) * (size_t)(b->s.n_layers + 1));
    tf_layer *L = &b->s.layers[b->s.n_layers++];
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->in = in;
    L->in2 = -1;
    L->w_off = L->b_off = L->stat_off = -1;
    L->k = L->stride = 1;
    L->cin = L->cout = b->s.tensors[in].c;
    return L;
}

static int sb_conv(sb *b, int in, int cout, int k, int stride, int pad, int bias)
{
    tf_shape s = b->s.tensors[in];
    tf_layer *L = sb_layer(b, TF_CONV, in);
    L->k = k, L->stride = stride, L->pad = pad, L->cout = cout;
    int fan = s.c * k * k;
    L->w_off = sb_param(b, "w", (int64_t)cout * fan, 0, fan);
    if (bias)
        b->s.layers[b->s.n_layers - 1].b_off = sb_param(b, "b", cout, 1, fan);
    int t = sb_tensor(b, cout, (s.h + 2 * pad - k) / stride + 1, (s.w + 2 * pad - k) / stride + 1);
    b->s.layers[b->s.n_layers - 1].out = t;
    return t;
}

static int sb_bn(sb *b, int in)
{
    tf_shape s = b->s.tensors[in];
    tf_layer *L = sb_layer(b, TF_BN, in);
    L->bn_eps = 1e-5f;
    L->bn_momentum = 0.1f;
    L->stat_off = b->s.stat_count;
    b->s.stat_count += 2 * s.c;
    L->w_off = sb_param(b, "g", s.c, 1, 1);
    b->s.layers[b->s.n_layers - 1].b_off = sb_param(b, "be", s.c, 1, 1);
    int t = sb_tensor(b, s.c, s.h, s.w);
    b->s.layers[b->s.n_layers - 1].out = t;
    return t;
}

static int sb_simple(sb *b, tf_layer_kind kind, int in, int in2, int k, int stride, int pad)
{
    tf_shape s = b->s.tensors[in];
    tf_layer *L = sb_layer(b, kind, in);
    L->in2 = in2, L->k = k, L->stride = stride, L->pad = pad, L->scale = 0.5f;
    if (kind == TF_MAXPOOL || kind == TF_AVGPOOL) {
        s.h = (s.h + 2 * pad - k) / stride + 1;
        s.w = (s.w + 2 * pad - k) / stride + 1;
    } else if (kind == TF_GAP) {
        s.h = s.w = 1;
    }
    int t = sb_tensor(b, s.c, s.h, s.w);
    b->s.layers[b->s.n_layers - 1].out = t;
    return t;
}

static int sb_linear(sb *b, int in, int cout)
{
    int cin = (int)tf_shape_size(b->s.tensors[in]);
    tf_layer *L = sb_layer(b, TF_LINEAR, in);
    L->cin = cin, L->cout = cout;
    L->w_off = sb_param(b, "lw", (int64_t)cout * cin, 0, cin);
    b->s.layers[b->s.n_layers - 1].b_off = sb_param(b, "lb", cout, 1, cin);
    int t = sb_tensor(b, cout, 1, 1);
    b->s.layers[b->s.n_layers - 1].out = t;
    return t;
}

static void sb_begin(sb *b, const char *name, int c, int h, int w, int classes)
{
    memset(b, 0, sizeof *b);
    snprintf(b->s.name, sizeof b->s.name, "%s", name);
    b->s.in_c = c, b->s.in_h = h, b->s.in_w = w, b->s.num_classes = classes;
    for (int i = 0; i < 3; i++)
        b->s.mean[i] = 0.5f, b->s.std[i] = 0.25f;
    sb_tensor(b, c, h, w);
}

/* ---- comparison ---- */

static double worst_rel; /* over the whole program, printed at the end */

static double rel_err(const float *a, const float *ref, int64_t n)
{
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - ref[i]));
        m = fmax(m, fabs((double)ref[i]));
    }
    return m > 0 ? d / m : d;
}

static void expect_close(const char *model, const char *what, const float *a, const float *ref,
                         int64_t n, double tol)
{
    double e = rel_err(a, ref, n);
    if (e > worst_rel)
        worst_rel = e;
    EXPECTF(e <= tol, "%s: %s differs: max|a-b|/max|b| = %.3g > %.1g", model, what, e, tol);
}

typedef struct side {
    tf_backend *b;
    float *params, *mom, *grad, *stats;
} side;

static void side_open(side *sd, const tf_model_spec *s, const tf_train_config *cfg, int impl,
                      const float *p0, const float *s0)
{
    const tf_backend_ops *ops = tf_backend_cpu();
    tf_train_config c = *cfg;
    c.cpu_impl = impl;
    fl_error err;
    CHECK_OK(ops->create(s, &c, &sd->b, &err), &err);
    tf_state st = {.params = (float *)p0, .stats = (float *)s0};
    CHECK_OK(ops->set_state(sd->b, &st, &err), &err);
    sd->params = malloc(sizeof(float) * (size_t)s->param_count);
    sd->mom = malloc(sizeof(float) * (size_t)s->param_count);
    sd->grad = malloc(sizeof(float) * (size_t)s->param_count);
    sd->stats = malloc(sizeof(float) * (size_t)(s->stat_count + 1));
}

static void side_state(side *sd)
{
    fl_error err;
    tf_state st = {
        .params = sd->params, .momentum = sd->mom, .grad_accum = sd->grad, .stats = sd->stats};
    CHECK_OK(tf_backend_cpu()->get_state(sd->b, &st, &err), &err);
}

static void side_close(side *sd)
{
    tf_backend_cpu()->destroy(sd->b);
    free(sd->params);
    free(sd->mom);
    free(sd->grad);
    free(sd->stats);
}

/* every parameter tensor of the two sides' arrays (a: oneDNN, r: reference) */
static void compare_params(const tf_model_spec *s, const char *what, const float *a, const float *r,
                           double tol)
{
    for (int i = 0; i < s->n_params; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s %s", what, s->params[i].name);
        expect_close(s->name, name, a + s->params[i].offset, r + s->params[i].offset,
                     s->params[i].count, tol);
    }
}

static void step_both(side sd[2], const tf_batch *x, tf_step_result res[2])
{
    fl_error err;
    for (int k = 0; k < 2; k++)
        CHECK_OK(tf_backend_cpu()->train_step(sd[k].b, x, 0.05f, &res[k], &err), &err);
}

static void eval_both(const tf_model_spec *s, side sd[2], const tf_batch *x, double tol)
{
    const tf_backend_ops *ops = tf_backend_cpu();
    fl_error err;
    tf_eval_result ev[2];
    for (int k = 0; k < 2; k++)
        CHECK_OK(ops->eval_batch(sd[k].b, x, 1, 0, &ev[k], &err), &err);
    float loss[2] = {(float)ev[0].loss_sum, (float)ev[1].loss_sum};
    expect_close(s->name, "eval loss (flip TTA)", &loss[0], &loss[1], 1, tol);
    EXPECTF(abs((int)ev[0].correct1 - (int)ev[1].correct1) <= 1 &&
                abs((int)ev[0].correct5 - (int)ev[1].correct5) <= 1,
            "%s: eval top-1/top-5 %u/%u (oneDNN) vs %u/%u (reference)", s->name, ev[0].correct1,
            ev[0].correct5, ev[1].correct1, ev[1].correct5);
    if (!ops->predict_batch)
        return;
    size_t n = (size_t)x->n * (size_t)s->num_classes;
    float *lg[2] = {malloc(sizeof(float) * n), malloc(sizeof(float) * n)};
    for (int k = 0; k < 2; k++)
        CHECK_OK(ops->predict_batch(sd[k].b, x, 0, lg[k], &err), &err);
    expect_close(s->name, "eval logits", lg[0], lg[1], (int64_t)n, tol);
    free(lg[0]);
    free(lg[1]);
}

/* the parameter change since p0 on both sides, per tensor */
static void compare_updates(const tf_model_spec *s, side sd[2], const float *p0, const char *what,
                            double tol)
{
    side_state(&sd[0]);
    side_state(&sd[1]);
    for (int64_t i = 0; i < s->param_count; i++) {
        sd[0].params[i] -= p0[i];
        sd[1].params[i] -= p0[i];
    }
    compare_params(s, what, sd[0].params, sd[1].params, tol);
}

/* The whole comparison for one model (see the file comment). */
static void compare_model(const tf_model_spec *s, int N, double tol)
{
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.max_batch = (uint32_t)N;
    cfg.accum = 2;
    cfg.label_smoothing = 0.1f;
    cfg.crop_pad = s->in_h >= 8 ? 2 : 0;
    cfg.flip = 1;
    cfg.aug_seed = 7;
    float *p0 = malloc(sizeof(float) * (size_t)s->param_count);
    float *s0 = malloc(sizeof(float) * (size_t)(s->stat_count + 1));
    tf_model_init(s, 11, p0, s0);
    side sd[2];
    side_open(&sd[0], s, &cfg, TF_CPU_ONEDNN, p0, s0);
    side_open(&sd[1], s, &cfg, TF_CPU_REFERENCE, p0, s0);
    size_t bytes = (size_t)N * s->in_h * s->in_w * s->in_c;
    uint8_t *img = malloc(bytes);
    int32_t *lab = malloc(sizeof(int32_t) * (size_t)N);
    uint64_t r = 99;
    for (size_t i = 0; i < bytes; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        img[i] = (uint8_t)(r >> 56);
    }
    for (int i = 0; i < N; i++)
        lab[i] = (i * 7) % s->num_classes;
    tf_batch x = {.images = img,
                  .labels = lab,
                  .n = (uint32_t)N,
                  .h = (uint32_t)s->in_h,
                  .w = (uint32_t)s->in_w,
                  .c = (uint32_t)s->in_c,
                  .accum_group = 2};
    tf_step_result res[2];
    step_both(sd, &x, res);
    float loss[2] = {(float)res[0].loss, (float)res[1].loss};
    expect_close(s->name, "training loss", &loss[0], &loss[1], 1, tol);
    EXPECTF(abs((int)res[0].correct - (int)res[1].correct) <= 1, "%s: top-1 %u vs %u", s->name,
            res[0].correct, res[1].correct);
    side_state(&sd[0]);
    side_state(&sd[1]);
    compare_params(s, "gradient of", sd[0].grad, sd[1].grad, tol);
    expect_close(s->name, "BN running stats", sd[0].stats, sd[1].stats, s->stat_count, tol);
    eval_both(s, sd, &x, tol);
    /* finish the group: the optimizer step on the summed gradients of two micro-batches run on
     * the same weights, so the update must agree to the gradient tolerance */
    x.epoch = 1;
    step_both(sd, &x, res);
    EXPECTF(res[0].stepped && res[1].stepped, "%s: the optimizer did not step", s->name);
    compare_updates(s, sd, p0, "SGD update of", tol);
    /* one more group: the weights now differ by rounding. In the small models that stays
     * rounding; in the whole models a ReLU near zero may flip on one side (seen: one layer's
     * update 4% off after the second step of resnet18 at batch 8, a different layer at another
     * lr), so there the second step's loss is compared */
    step_both(sd, &x, res);
    step_both(sd, &x, res);
    if (s->n_layers < 20) {
        compare_updates(s, sd, p0, "2-step update of", tol);
    } else {
        float l2[2] = {(float)res[0].loss, (float)res[1].loss};
        expect_close(s->name, "loss after 1 step", &l2[0], &l2[1], 1, tol);
    }
    printf("ok   %-10s batch %d: gradients, loss, BN stats, eval and 2 SGD steps agree "
           "(loss %.5f vs %.5f)\n",
           s->name, N, loss[0], loss[1]);
    side_close(&sd[0]);
    side_close(&sd[1]);
    free(p0);
    free(s0);
    free(img);
    free(lab);
}

static void finish(sb *b, int with_scale_head)
{
    int t = b->s.n_tensors - 1;
    if (b->s.tensors[t].h > 1 && with_scale_head < 2)
        t = sb_simple(b, TF_GAP, t, -1, 1, 1, 0);
    t = sb_linear(b, t, b->s.num_classes);
    if (with_scale_head == 1)
        sb_simple(b, TF_SCALE, t, -1, 1, 1, 0);
    tf_model_finalize(&b->s);
}

/* finish the model, run the whole comparison on it (batches of N, tolerance 1e-4) and free it */
static void finish_compare(sb *b, int with_scale_head, int N)
{
    finish(b, with_scale_head);
    compare_model(&b->s, N, 1e-4);
    tf_model_free(&b->s);
}

/* one hand-built model per layer kind or combination */
static void layer_cases(void)
{
    sb b;
    int t, u;
    /* conv with bias, 5x5 pad 2; GAP; linear */
    sb_begin(&b, "conv_bias", 3, 12, 12, 5);
    sb_conv(&b, 0, 16, 5, 1, 2, 1);
    finish_compare(&b, 0, 6);
    /* strided conv, BN + ReLU (fused by oneDNN), 1x1 conv, BN + ReLU */
    sb_begin(&b, "bn_relu", 3, 12, 12, 4);
    t = sb_conv(&b, 0, 24, 3, 2, 1, 0);
    t = sb_simple(&b, TF_RELU, sb_bn(&b, t), -1, 1, 1, 0);
    t = sb_conv(&b, t, 32, 1, 1, 0, 0);
    sb_simple(&b, TF_RELU, sb_bn(&b, t), -1, 1, 1, 0);
    finish_compare(&b, 0, 8);
    /* GELU, max pool 3/2/1 */
    sb_begin(&b, "gelu_maxpool", 1, 11, 11, 3);
    t = sb_conv(&b, 0, 16, 3, 1, 1, 0);
    t = sb_simple(&b, TF_GELU, sb_bn(&b, t), -1, 1, 1, 0);
    sb_simple(&b, TF_MAXPOOL, t, -1, 3, 2, 1);
    finish_compare(&b, 0, 5);
    /* max pool 2/2 before BN (fastcnn's order), average pool 3/2/1 (count_include_pad), ReLU
     * not after a BN (a plain eltwise primitive) */
    sb_begin(&b, "avgpool", 3, 10, 10, 4);
    t = sb_conv(&b, 0, 20, 3, 1, 1, 0);
    t = sb_simple(&b, TF_RELU, sb_bn(&b, sb_simple(&b, TF_MAXPOOL, t, -1, 2, 2, 0)), -1, 1, 1, 0);
    t = sb_simple(&b, TF_AVGPOOL, t, -1, 3, 2, 1);
    sb_simple(&b, TF_RELU, t, -1, 1, 1, 0);
    finish_compare(&b, 0, 4);
    /* residual: a tensor read by a BN and an add (gradients summed), scale, scale on the logits */
    sb_begin(&b, "residual", 3, 8, 8, 6);
    u = sb_conv(&b, 0, 16, 3, 1, 1, 0);
    t = sb_simple(&b, TF_RELU, sb_bn(&b, u), -1, 1, 1, 0);
    t = sb_bn(&b, sb_conv(&b, t, 16, 3, 1, 1, 0));
    t = sb_simple(&b, TF_ADD, t, u, 1, 1, 0);
    sb_simple(&b, TF_SCALE, t, -1, 1, 1, 0);
    finish_compare(&b, 1, 4);
    /* BN on the input; linear over a spatial tensor (flattened C,H,W) */
    sb_begin(&b, "bn_input", 3, 6, 6, 4);
    t = sb_bn(&b, 0);
    sb_conv(&b, t, 8, 3, 2, 1, 1);
    finish_compare(&b, 2, 3);
}

int main(void)
{
    if (!tf_cpu_have_onednn()) {
        printf("skip: this build has no oneDNN (libdnnl-dev not found at configure time)\n");
        return FL_CHECK_SKIP;
    }
    layer_cases();
    /* whole models: fastcnn (default width) on 28x28x1, resnet18 on 32x32x3 */
    fl_error err;
    tf_model_spec s;
    CHECK_OK(tf_model_build("fastcnn", 1, 28, 28, 10, NULL, &s, &err), &err);
    compare_model(&s, 16, 1e-3);
    tf_model_free(&s);
    CHECK_OK(tf_model_build("resnet18", 3, 32, 32, 10, NULL, &s, &err), &err);
    compare_model(&s, 8, 1e-3);
    tf_model_free(&s);
    printf("worst relative difference over all tensors: %.3g\n", worst_rel);
    return fl_check_status();
}
