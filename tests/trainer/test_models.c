/* test_models.c — the model builders and the input stage: ResNet-18/50 have exactly torchvision's
 * parameter counts; ResNet-18 overfits one small batch on the CPU backend and ResNet-50 runs a
 * step; fastcnn's shapes; the uint8 input stage crops/flips exactly as backend.h specifies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_layers.h"
#include "fl_check.h"
#include "model.h"

static void overfit(const char *name, int steps, int expect_drop)
{
    fl_error err;
    tf_model_spec s;
    EXPECTF(tf_model_build(name, 3, 32, 32, 10, NULL, &s, &err) == 0, "%s: %s", name, err.msg);
    const tf_backend_ops *ops = tf_backend_cpu();
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.max_batch = 4;
    tf_backend *b;
    EXPECTF(ops->create(&s, &cfg, &b, &err) == 0, "create: %s", err.msg);
    float *p = malloc(sizeof(float) * (size_t)s.param_count);
    float *st = malloc(sizeof(float) * (size_t)s.stat_count);
    tf_model_init(&s, 3, p, st);
    tf_state init = {.params = p, .stats = st};
    ops->set_state(b, &init, &err);
    uint8_t img[4 * 32 * 32 * 3];
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (uint8_t)((i * 2654435761u) >> 24);
    int32_t lab[4] = {1, 7, 3, 9};
    tf_batch x = {.images = img, .labels = lab, .n = 4, .h = 32, .w = 32, .c = 3};
    double first = 0, last = 0;
    for (int i = 0; i < steps; i++) {
        tf_step_result r;
        EXPECTF(ops->train_step(b, &x, 0.02f, &r, &err) == 0, "step: %s", err.msg);
        if (i == 0)
            first = r.loss;
        last = r.loss;
        EXPECTF(isfinite(r.loss), "%s: loss not finite at step %d", name, i);
    }
    if (expect_drop)
        EXPECTF(last < 0.5 * first, "%s did not fit one batch: loss %.3f -> %.3f", name, first,
                last);
    printf("ok   %s at 32 px: %d steps on one batch, loss %.3f -> %.3f\n", name, steps, first,
           last);
    ops->destroy(b);
    free(p);
    free(st);
    tf_model_free(&s);
}

/* Whole-graph check: a hand-built model without kinks (GELU, average pooling: central
 * differences are then accurate in fp32) that exercises what per-layer tests cannot: gradients
 * summed into a tensor read twice (residual), BN in the graph, a strided 1x1 conv, GAP, linear,
 * scale and label-smoothed loss. The gradient the backend accumulates (accum = 1000: no optimizer
 * step runs) is compared with central differences of the training loss for every parameter. */
static tf_layer mk(tf_layer_kind k, int in, int in2, int out, int kk, int st, int pd, int ci,
                   int co, int64_t w, int64_t b, int64_t so)
{
    tf_layer L = {.kind = k,
                  .in = in,
                  .in2 = in2,
                  .out = out,
                  .k = kk,
                  .stride = st,
                  .pad = pd,
                  .cin = ci,
                  .cout = co,
                  .w_off = w,
                  .b_off = b,
                  .stat_off = so,
                  .bn_eps = 1e-5f,
                  .bn_momentum = 0.1f,
                  .scale = 0.5f};
    return L;
}

static void smooth_graph_gradcheck(void)
{
    tf_shape T[] = {{3, 8, 8}, {4, 8, 8}, {4, 8, 8}, {4, 8, 8}, {4, 4, 4}, {4, 4, 4}, {4, 4, 4},
                    {4, 4, 4}, {4, 4, 4}, {6, 2, 2}, {6, 1, 1}, {4, 1, 1}, {4, 1, 1}};
    tf_layer Ls[] = {
        mk(TF_CONV, 0, -1, 1, 3, 1, 1, 3, 4, 0, 108, -1),
        mk(TF_BN, 1, -1, 2, 1, 1, 0, 4, 4, 112, 116, 0),
        mk(TF_GELU, 2, -1, 3, 1, 1, 0, 4, 4, -1, -1, -1),
        mk(TF_AVGPOOL, 3, -1, 4, 2, 2, 0, 4, 4, -1, -1, -1),
        mk(TF_CONV, 4, -1, 5, 3, 1, 1, 4, 4, 120, -1, -1),
        mk(TF_BN, 5, -1, 6, 1, 1, 0, 4, 4, 264, 268, 8),
        mk(TF_GELU, 6, -1, 7, 1, 1, 0, 4, 4, -1, -1, -1),
        mk(TF_ADD, 7, 4, 8, 1, 1, 0, 4, 4, -1, -1, -1),
        mk(TF_CONV, 8, -1, 9, 1, 2, 0, 4, 6, 272, -1, -1),
        mk(TF_GAP, 9, -1, 10, 1, 1, 0, 6, 6, -1, -1, -1),
        mk(TF_LINEAR, 10, -1, 11, 1, 1, 0, 6, 4, 296, 320, -1),
        mk(TF_SCALE, 11, -1, 12, 1, 1, 0, 4, 4, -1, -1, -1),
    };
    tf_model_spec s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "smooth");
    s.in_c = 3;
    s.in_h = s.in_w = 8;
    s.num_classes = 4;
    for (int c = 0; c < 3; c++) {
        s.mean[c] = 0.5f;
        s.std[c] = 0.25f;
    }
    s.n_layers = (int)(sizeof Ls / sizeof Ls[0]);
    s.layers = Ls;
    s.n_tensors = (int)(sizeof T / sizeof T[0]);
    s.tensors = T;
    s.param_count = 324;
    s.stat_count = 16;
    tf_model_finalize(&s);
    fl_error err;
    const tf_backend_ops *ops = tf_backend_cpu();
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.max_batch = 5;
    cfg.accum = 1000;
    cfg.label_smoothing = 0.1f;
    cfg.threads = 2;
    tf_backend *b;
    EXPECTF(ops->create(&s, &cfg, &b, &err) == 0, "create: %s", err.msg);
    float p[324], st[16], g[324], m[324];
    uint64_t r64 = 77;
    for (int i = 0; i < 324; i++) {
        r64 = r64 * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(r64 >> 11) / 9007199254740992.0 - 0.5);
    }
    for (int i = 0; i < 16; i++)
        st[i] = i % 8 < 4 ? 0.0f : 1.0f;
    uint8_t img[5 * 8 * 8 * 3];
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (uint8_t)((i * 2654435761u) >> 24);
    int32_t lab[5] = {0, 1, 2, 3, 1};
    uint64_t idx[5] = {0, 1, 2, 3, 4};
    tf_batch x = {.images = img, .labels = lab, .indices = idx, .n = 5, .h = 8, .w = 8, .c = 3};
    tf_state in = {.params = p, .stats = st};
    tf_state out = {.grad_accum = g, .momentum = m};
    tf_step_result r;
    ops->set_state(b, &in, &err);
    ops->train_step(b, &x, 0.0f, &r, &err);
    ops->get_state(b, &out, &err);
    double worst = 0;
    for (int j = 0; j < 324; j++) {
        float keep = p[j];
        const float h = 1e-2f;
        double l[2];
        for (int k = 0; k < 2; k++) {
            p[j] = keep + (k ? -h : h);
            ops->set_state(b, &in, &err);
            ops->train_step(b, &x, 0.0f, &r, &err);
            l[k] = r.loss;
        }
        p[j] = keep;
        double num = (l[0] - l[1]) / (2.0 * h), ana = (double)g[j] * cfg.accum;
        double e = fabs(num - ana) / fmax(1e-2, fmax(fabs(num), fabs(ana)));
        if (e > worst)
            worst = e;
        if (e > 1e-2)
            printf("     param %d: analytic %.6g numeric %.6g\n", j, ana, num);
    }
    EXPECTF(worst <= 1e-2, "whole-graph gradient off by %.3g (relative)", worst);
    printf(
        "ok   whole graph (residual, BN, GELU, avgpool, strided 1x1, GAP, linear, scale): all 324 "
        "param gradients vs finite differences, worst rel err %.2g\n",
        worst);
    ops->destroy(b);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    fl_error err;
    tf_model_spec s;
    /* torchvision: resnet18 11,689,512 and resnet50 25,557,032 parameters (1000 classes) */
    EXPECTF(tf_model_build("resnet18", 3, 224, 224, 1000, NULL, &s, &err) == 0, "%s", err.msg);
    EXPECTF(s.param_count == 11689512, "resnet18 has %lld params", (long long)s.param_count);
    EXPECTF(s.tensors[s.n_tensors - 1].c == 1000, "resnet18 output");
    EXPECTF(fabs(tf_model_flops(&s) / 1e9 - 1.81) < 0.05, "resnet18 GMACs %.3f",
            tf_model_flops(&s) / 1e9);
    printf("ok   resnet18: %lld params, %.2f GMAC at 224 px\n", (long long)s.param_count,
           tf_model_flops(&s) / 1e9);
    tf_model_free(&s);
    EXPECTF(tf_model_build("resnet50", 3, 224, 224, 1000, NULL, &s, &err) == 0, "%s", err.msg);
    EXPECTF(s.param_count == 25557032, "resnet50 has %lld params", (long long)s.param_count);
    EXPECTF(fabs(tf_model_flops(&s) / 1e9 - 4.09) < 0.1, "resnet50 GMACs %.3f",
            tf_model_flops(&s) / 1e9);
    printf("ok   resnet50: %lld params, %.2f GMAC at 224 px\n", (long long)s.param_count,
           tf_model_flops(&s) / 1e9);
    tf_model_free(&s);
    /* fastcnn: 28 px -> 3 px after three pools; width doubles per block */
    tf_model_options mo = {.width = 16};
    EXPECTF(tf_model_build("fastcnn", 1, 28, 28, 10, &mo, &s, &err) == 0, "%s", err.msg);
    int pools = 0;
    for (int i = 0; i < s.n_layers; i++)
        if (s.layers[i].kind == TF_MAXPOOL) {
            tf_shape o = s.tensors[s.layers[i].out];
            pools++;
            EXPECTF(o.c == 16 << (pools - 1), "block %d width %d", pools, o.c);
            EXPECTF(pools != 3 || (o.h == 3 && o.w == 3), "last block %dx%d", o.h, o.w);
        }
    EXPECTF(pools == 3, "fastcnn has %d pools", pools);
    uint32_t id = s.spec_id;
    tf_model_free(&s);
    mo.width = 17;
    tf_model_build("fastcnn", 1, 28, 28, 10, &mo, &s, &err);
    EXPECTF(s.spec_id != id, "spec id ignores the width");
    tf_model_free(&s);
    /* no-decay flags: every BN parameter and bias, no conv/linear weight */
    tf_model_build("resnet18", 3, 64, 64, 10, NULL, &s, &err);
    for (int i = 0; i < s.n_params; i++) {
        const tf_param *p = &s.params[i];
        int want =
            strstr(p->name, ".bn.") || strstr(p->name, ".bias") || s.layers[p->layer].kind == TF_BN;
        EXPECTF(p->no_decay == want, "%s no_decay %d", p->name, p->no_decay);
    }
    tf_model_free(&s);

    /* input stage: sample with known crop/flip against the formula of backend.h */
    {
        enum { N = 3, H = 5, W = 6, C = 3, PAD = 2 };
        uint8_t img[N * H * W * C];
        for (int i = 0; i < N * H * W * C; i++)
            img[i] = (uint8_t)(i * 7 + 3);
        float mean[3] = {0.1f, 0.2f, 0.3f}, sd[3] = {0.5f, 0.25f, 0.125f};
        float x[N * C * H * W];
        uint64_t idx[N] = {11, 12, 13};
        cpu_input_u8(NULL, N, H, W, C, img, mean, sd, PAD, 1, 5, 2, idx, 0, x);
        int bad = 0, flips = 0;
        for (int n = 0; n < N; n++) {
            int dy, dx, fl;
            fl_aug_crop_flip(5, 2, idx[n], PAD, 1, &dy, &dx, &fl);
            flips += fl;
            for (int c = 0; c < C; c++)
                for (int y = 0; y < H; y++)
                    for (int xx = 0; xx < W; xx++) {
                        int cx = fl ? W - 1 - xx : xx;
                        int sy = y + dy - PAD, sx = cx + dx - PAD;
                        int u = (sy >= 0 && sy < H && sx >= 0 && sx < W)
                                    ? img[((n * H + sy) * W + sx) * C + c]
                                    : 0;
                        float want = ((float)u / 255.0f - mean[c]) / sd[c];
                        if (fabsf(x[((n * C + c) * H + y) * W + xx] - want) > 1e-5f)
                            bad++;
                    }
        }
        EXPECTF(bad == 0, "input stage: %d pixels differ from the crop/flip formula", bad);
        printf("ok   input stage crop-with-padding + flip matches backend.h (%d of %d flipped)\n",
               flips, N);
    }
    overfit("resnet18", 6, 1);
#ifndef __SANITIZE_ADDRESS__ /* 25 M params: initialising them is slow under ASan at -O0 */
    overfit("resnet50", 2, 0);
#endif
    smooth_graph_gradcheck();
    printf(fl_check_failures ? "FAILED\n" : "PASS\n");
    return fl_check_status();
}
