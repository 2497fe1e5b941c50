/* export_onnx_plan.c — which batch-norm layers the ONNX exporter folds into a convolution, and
 * the folding arithmetic (export_onnx.h). Folding is exact in real arithmetic; in float32 it
 * moves the rounding (the exported logits differ from the trainer's by ~1e-6 relative). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export_onnx.h"

void tf_onnx_bn_affine(const tf_layer *L, const float *params, const float *stats, float *a,
                       float *b)
{
    const float *gamma = params + L->w_off, *beta = params + L->b_off;
    const float *mean = stats + L->stat_off, *var = stats + L->stat_off + L->cin;
    for (int c = 0; c < L->cin; c++) {
        double s = (double)gamma[c] / sqrt((double)var[c] + (double)L->bn_eps);
        a[c] = (float)s;
        b[c] = (float)((double)beta[c] - (double)mean[c] * s);
    }
}

void tf_onnx_fold_conv(int cout, int64_t per_out, const float *w, const float *bias, const float *a,
                       const float *b, float *w_out, float *b_out)
{
    for (int o = 0; o < cout; o++) {
        for (int64_t j = 0; j < per_out; j++)
            w_out[(int64_t)o * per_out + j] = (float)((double)w[(int64_t)o * per_out + j] * a[o]);
        b_out[o] = (float)((bias ? (double)bias[o] * a[o] : 0.0) + b[o]);
    }
}

void tf_onnx_plan_free(tf_onnx_plan *p)
{
    if (!p)
        return;
    free(p->fold_into);
    free(p->folded_bn);
    free(p->scale);
    free(p->shift);
    memset(p, 0, sizeof *p);
}

/* the layer that writes each tensor (-1: the input) and how many layers read it */
static void producers(const tf_model_spec *s, int *prod, int *readers)
{
    for (int t = 0; t < s->n_tensors; t++) {
        prod[t] = -1;
        readers[t] = 0;
    }
    for (int l = 0; l < s->n_layers; l++) {
        const tf_layer *L = &s->layers[l];
        prod[L->out] = l;
        readers[L->in]++;
        if (L->in2 >= 0)
            readers[L->in2]++;
    }
}

/* The conv that BN layer l can be folded into, or -1. Through a max-pool only when every
 * channel's scale is >= 0: max(a x + b) = a max(x) + b needs an increasing map (the rounding of
 * a x + b is monotone too, so the pool picks the same element). */
static int fold_target(const tf_model_spec *s, const tf_onnx_plan *p, const int *prod,
                       const int *readers, int l, int *through_pool)
{
    const tf_layer *L = &s->layers[l];
    int q = prod[L->in];
    *through_pool = 0;
    if (q < 0 || readers[L->in] != 1)
        return -1;
    if (s->layers[q].kind == TF_MAXPOOL) {
        const float *a = p->scale + L->stat_off / 2;
        for (int c = 0; c < L->cin; c++)
            if (!(a[c] >= 0.0f))
                return -1;
        int in = s->layers[q].in;
        q = prod[in];
        if (q < 0 || readers[in] != 1)
            return -1;
        *through_pool = 1;
    }
    if (s->layers[q].kind != TF_CONV || p->folded_bn[q] >= 0)
        return -1;
    return q;
}

int tf_onnx_plan_make(const tf_model_spec *s, const float *params, const float *stats,
                      tf_onnx_plan *p, fl_error *err)
{
    memset(p, 0, sizeof *p);
    p->n_layers = s->n_layers;
    size_t nl = (size_t)(s->n_layers ? s->n_layers : 1), nt = (size_t)s->n_tensors;
    size_t nc = (size_t)(s->stat_count / 2 + 1);
    p->fold_into = malloc(nl * sizeof(int));
    p->folded_bn = malloc(nl * sizeof(int));
    p->scale = malloc(nc * sizeof(float));
    p->shift = malloc(nc * sizeof(float));
    int *prod = malloc(nt * sizeof(int)), *readers = malloc(nt * sizeof(int));
    if (!p->fold_into || !p->folded_bn || !p->scale || !p->shift || !prod || !readers) {
        free(prod);
        free(readers);
        tf_onnx_plan_free(p);
        return fl_error_set(err, -ENOMEM, "ONNX export: out of memory");
    }
    producers(s, prod, readers);
    for (int l = 0; l < s->n_layers; l++) {
        p->fold_into[l] = p->folded_bn[l] = -1;
        const tf_layer *L = &s->layers[l];
        if (L->kind == TF_BN)
            tf_onnx_bn_affine(L, params, stats, p->scale + L->stat_off / 2,
                              p->shift + L->stat_off / 2);
    }
    for (int l = 0; l < s->n_layers; l++) {
        if (s->layers[l].kind != TF_BN)
            continue;
        int pool;
        int q = fold_target(s, p, prod, readers, l, &pool);
        if (q < 0) {
            p->bn_affine++;
            continue;
        }
        p->fold_into[l] = q;
        p->folded_bn[q] = l;
        if (pool)
            p->bn_pool++;
        else
            p->bn_conv++;
    }
    free(prod);
    free(readers);
    return 0;
}
