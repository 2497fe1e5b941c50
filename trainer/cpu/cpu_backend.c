/* cpu_backend.c — the CPU backend (backend.h): runs a tf_model_spec either layer by layer
 * with the cpu_layers.h reference kernels or, when built with oneDNN and chosen (cfg.cpu_impl,
 * --cpu-backend), as oneDNN primitives (cpu_onednn.h); either way SGD (Nesterov) with weight
 * decay on the flat params, gradient accumulation and EMA here, on the same flat arrays, so the
 * state and checkpoints do not depend on the path. All buffers are allocated in create for
 * cfg.max_batch samples. Precision: fp32, or bf16 on the oneDNN path (convolutions on bf16
 * copies, fp32 accumulation, everything else and all state fp32: cpu_onednn.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cpu_layers.h"
#ifdef FL_HAVE_ONEDNN
#include "cpu_onednn.h"
#endif

#ifdef FL_HAVE_OPENBLAS
#include <cblas.h>
#endif

struct tf_backend {
    const tf_model_spec *spec;
    tf_train_config cfg;
    cpu_pool *pool;
    float *params, *momentum, *grad, *stats, *ema_params, *ema_stats;
    float **act, **dact; /* per tensor, max_batch samples */
    float **save;        /* per layer: BN mean/invstd */
    int32_t **arg;       /* per layer: maxpool argmax */
    float **col;         /* per conv layer: im2col cache shared by forward and backward, or NULL */
    float *logits_sum;   /* eval TTA: max_batch * classes */
    uint64_t step, micro_step;
    uint32_t accum_count;
    double *bn_scratch; /* --sync-bn: 2 x the widest BN layer, else NULL */
    int sync_rc;        /* first error of a sync-BN reduction in this step (0: none) */
    fl_error *sync_err;
#ifdef FL_HAVE_ONEDNN
    cpu_dnn *dnn; /* the oneDNN path; NULL: the reference layers (act, dact, ... set) */
#endif
};

int tf_cpu_have_onednn(void)
{
#ifdef FL_HAVE_ONEDNN
    return 1;
#else
    return 0;
#endif
}

void tf_train_config_init(tf_train_config *c)
{
    memset(c, 0, sizeof *c);
    c->precision = TF_FP32;
    c->momentum = 0.9f;
    c->nesterov = 1;
    c->weight_decay = 5e-4f;
    c->accum = 1;
    c->max_batch = 256;
    c->loss_scale_init = 65536.0f;
    c->loss_scale_window = 1000;
}

/* --sync-bn: room for the per-channel sums of the widest BN layer */
static double *bn_scratch_alloc(const tf_model_spec *s)
{
    int maxc = 1;
    for (int l = 0; l < s->n_layers; l++)
        if (s->layers[l].kind == TF_BN && s->layers[l].cin > maxc)
            maxc = s->layers[l].cin;
    return calloc(2 * (size_t)maxc, sizeof(double));
}

static void cpu_destroy(tf_backend *b)
{
    if (!b)
        return;
    const tf_model_spec *s = b->spec;
    if (b->act)
        for (int t = 0; t < s->n_tensors; t++) {
            free(b->act[t]);
            free(b->dact ? b->dact[t] : NULL);
        }
    if (b->save)
        for (int l = 0; l < s->n_layers; l++) {
            free(b->save[l]);
            free(b->arg ? b->arg[l] : NULL);
            free(b->col ? b->col[l] : NULL);
        }
    free(b->col);
    free(b->act);
    free(b->dact);
    free(b->save);
    free(b->arg);
    free(b->params);
    free(b->momentum);
    free(b->grad);
    free(b->stats);
    free(b->ema_params);
    free(b->ema_stats);
    free(b->logits_sum);
    free(b->bn_scratch);
#ifdef FL_HAVE_ONEDNN
    cpu_dnn_free(b->dnn);
#endif
    cpu_pool_free(b->pool);
    free(b);
}

static float *falloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* The reference layers' buffers: activations and their gradients per tensor, BN saves, max-pool
 * argmax, im2col caches. Returns 0 or -ENOMEM (with *bytes the activation size asked for). */
static int ref_alloc(tf_backend *b, double *bytes)
{
    const tf_model_spec *s = b->spec;
    const size_t N = b->cfg.max_batch;
    b->act = calloc((size_t)s->n_tensors, sizeof(float *));
    b->dact = calloc((size_t)s->n_tensors, sizeof(float *));
    b->save = calloc((size_t)s->n_layers, sizeof(float *));
    b->arg = calloc((size_t)s->n_layers, sizeof(int32_t *));
    b->col = calloc((size_t)s->n_layers, sizeof(float *));
    int bad = !b->act || !b->dact || !b->save || !b->arg || !b->col;
    *bytes = 0;
    for (int t = 0; t < s->n_tensors && !bad; t++) {
        size_t n = N * (size_t)tf_shape_size(s->tensors[t]);
        b->act[t] = falloc(n);
        b->dact[t] = t > 0 ? falloc(n) : NULL; /* the input needs no gradient */
        *bytes += (t > 0 ? 2.0 : 1.0) * n * 4;
        bad = !b->act[t] || (t > 0 && !b->dact[t]);
    }
    for (int l = 0; l < s->n_layers && !bad; l++) {
        const tf_layer *L = &s->layers[l];
        if (L->kind == TF_BN)
            bad = !(b->save[l] = falloc(2 * (size_t)L->cin));
        else if (L->kind == TF_MAXPOOL) {
            size_t n = N * (size_t)tf_shape_size(s->tensors[L->out]);
            bad = !(b->arg[l] = calloc(n, sizeof(int32_t)));
        }
    }
    /* im2col caches save recomputing the columns in the backward pass (~10% of a step for small
     * CNNs); only when they fit a budget, since at 224 px they would be gigabytes */
    double col_floats = 0;
    for (int l = 0; l < s->n_layers; l++) {
        const tf_layer *L = &s->layers[l];
        if (L->kind == TF_CONV)
            col_floats +=
                (double)N * L->cin * L->k * L->k * tf_shape_size(s->tensors[L->out]) / L->cout;
    }
    if (!bad && col_floats * 4 <= 512.0 * 1048576)
        for (int l = 0; l < s->n_layers; l++) {
            const tf_layer *L = &s->layers[l];
            if (L->kind == TF_CONV)
                b->col[l] = malloc(sizeof(float) * N * (size_t)L->cin * L->k * L->k *
                                   (size_t)(tf_shape_size(s->tensors[L->out]) / L->cout));
            /* a failed cache allocation only costs speed */
        }
    return bad ? -ENOMEM : 0;
}

/* The path cfg->cpu_impl asks for: 1 oneDNN, 0 reference, or an error (oneDNN not built in,
 * a bad $FASTLOAD_CPU_BACKEND). */
static int pick_impl(const tf_train_config *cfg, fl_error *err)
{
    int want = cfg->cpu_impl;
    if (want == TF_CPU_DEFAULT) {
        const char *e = getenv("FASTLOAD_CPU_BACKEND");
        if (e && *e && strcmp(e, "reference") && strcmp(e, "onednn"))
            return fl_error_set(err, FL_E_INVALID,
                                "FASTLOAD_CPU_BACKEND=%s: expected reference or onednn", e);
        want = e && !strcmp(e, "reference") ? TF_CPU_REFERENCE
               : e && !strcmp(e, "onednn")  ? TF_CPU_ONEDNN
               : tf_cpu_have_onednn()       ? TF_CPU_ONEDNN
                                            : TF_CPU_REFERENCE;
    }
    if (want == TF_CPU_ONEDNN && !tf_cpu_have_onednn())
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "--cpu-backend onednn: this trainfast was built without oneDNN "
                            "(install libdnnl-dev and reconfigure)");
    /* --sync-bn reduces BN statistics between the layers: the reference path has the hooks */
    return want == TF_CPU_ONEDNN && !(cfg->bn_allreduce && cfg->world > 1);
}

static int cpu_create(const tf_model_spec *s, const tf_train_config *cfg, tf_backend **out,
                      fl_error *err)
{
    *out = NULL;
    if (cfg->precision != TF_FP32 && cfg->precision != TF_BF16)
        return fl_error_set(err, FL_E_UNSUPPORTED, "cpu backend: fp32 or bf16 precision only");
    if (cfg->max_batch == 0 || cfg->accum < 1)
        return fl_error_set(err, FL_E_INVALID, "cpu backend: max_batch and accum must be >= 1");
    int use_dnn = pick_impl(cfg, err);
    if (use_dnn < 0)
        return use_dnn;
    if (cfg->precision == TF_BF16 && !use_dnn)
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "--precision bf16 runs on the oneDNN path only (%s): use --precision "
                            "fp32",
                            !tf_cpu_have_onednn() ? "this trainfast was built without oneDNN"
                            : cfg->bn_allreduce && cfg->world > 1
                                ? "--sync-bn runs on the reference layers"
                                : "--cpu-backend reference was asked for");
    tf_backend *b = calloc(1, sizeof *b);
    if (!b)
        return fl_error_set(err, -ENOMEM, "cpu backend: out of memory");
    b->spec = s;
    b->cfg = *cfg;
#ifdef FL_HAVE_OPENBLAS
    openblas_set_num_threads(1); /* we split the batch across our own threads */
#endif
    b->pool = cpu_pool_create(cfg->threads);
    const size_t P = (size_t)s->param_count, S = (size_t)s->stat_count, N = cfg->max_batch;
    b->params = falloc(P);
    b->momentum = falloc(P);
    b->grad = falloc(P);
    b->stats = falloc(S);
    if (cfg->ema_decay > 0) {
        b->ema_params = falloc(P);
        b->ema_stats = falloc(S);
    }
    b->logits_sum = falloc(N * (size_t)s->num_classes);
    if (cfg->bn_allreduce && cfg->world > 1)
        b->bn_scratch = bn_scratch_alloc(s);
    int bad = !b->pool || !b->params || !b->momentum || !b->grad || !b->stats || !b->logits_sum ||
              (cfg->ema_decay > 0 && (!b->ema_params || !b->ema_stats)) ||
              (cfg->bn_allreduce && cfg->world > 1 && !b->bn_scratch);
    double bytes = 0;
#ifdef FL_HAVE_ONEDNN
    if (!bad && use_dnn) {
        int rc =
            cpu_dnn_create_prec(s, (int)N, cfg->threads, cfg->precision == TF_BF16, &b->dnn, err);
        if (rc) {
            cpu_destroy(b);
            return rc;
        }
    }
#endif
    if (!bad && !use_dnn)
        bad = ref_alloc(b, &bytes) != 0;
    if (bad) {
        cpu_destroy(b);
        return fl_error_set(err, -ENOMEM,
                            "cpu backend: out of memory for %s at batch %zu (activations %.1f MiB)",
                            s->name, N, bytes / 1048576.0);
    }
    *out = b;
    return 0;
}

static int check_shape(tf_backend *b, const tf_batch *x, fl_error *err)
{
    const tf_model_spec *s = b->spec;
    if (x->n == 0 || x->n > b->cfg.max_batch)
        return fl_error_set(err, FL_E_INVALID, "batch of %u samples (backend sized for 1..%u)",
                            x->n, b->cfg.max_batch);
    if ((int)x->h != s->in_h || (int)x->w != s->in_w || (int)x->c != s->in_c)
        return fl_error_set(err, FL_E_INVALID,
                            "batch images are %ux%ux%u but model %s expects %dx%dx%d (HxWxC)", x->h,
                            x->w, x->c, s->name, s->in_h, s->in_w, s->in_c);
    return 0;
}

static int check_batch(tf_backend *b, const tf_batch *x, fl_error *err)
{
    const tf_model_spec *s = b->spec;
    int rc = check_shape(b, x, err);
    if (rc)
        return rc;
    if (x->accum_group > (uint32_t)b->cfg.accum ||
        (x->accum_group && b->accum_count >= x->accum_group))
        return fl_error_set(err, FL_E_INVALID,
                            "accumulation group of %u micro-batches (accum %d, %u already summed)",
                            x->accum_group, b->cfg.accum, b->accum_count);
    for (uint32_t i = 0; i < x->n; i++)
        if (x->labels[i] < 0 || x->labels[i] >= s->num_classes)
            return fl_error_set(err, FL_E_LABEL, "sample %u: label %d outside [0, %d)", i,
                                x->labels[i], s->num_classes);
    return 0;
}

/* forward through every layer; train selects BN mode */
static void forward(tf_backend *b, int N, int train, const float *params, float *stats)
{
    const tf_model_spec *s = b->spec;
    for (int l = 0; l < s->n_layers; l++) {
        const tf_layer *L = &s->layers[l];
        tf_shape is = s->tensors[L->in], os = s->tensors[L->out];
        const float *x = b->act[L->in];
        float *y = b->act[L->out];
        long n = (long)N * tf_shape_size(os);
        switch (L->kind) {
        case TF_CONV:
            cpu_conv_forward_cached(b->pool, N, is, os, L->k, L->stride, L->pad, x,
                                    params + L->w_off, L->b_off >= 0 ? params + L->b_off : NULL, y,
                                    train ? b->col[l] : NULL);
            break;
        case TF_LINEAR:
            cpu_linear_forward(b->pool, N, L->cin, L->cout, x, params + L->w_off,
                               L->b_off >= 0 ? params + L->b_off : NULL, y);
            break;
        case TF_BN:
            if (train && b->bn_scratch) {
                cpu_bn_sync sy = {b->cfg.bn_allreduce, b->cfg.grad_allreduce_user, b->cfg.world,
                                  b->bn_scratch, b->sync_err};
                int rc = b->sync_rc
                             ? b->sync_rc
                             : cpu_bn_forward_sync(
                                   b->pool, N, is, L->bn_eps, L->bn_momentum, x, params + L->w_off,
                                   params + L->b_off, stats ? stats + L->stat_off : NULL,
                                   stats ? stats + L->stat_off + L->cin : NULL, b->save[l], y, &sy);
                if (rc)
                    b->sync_rc = rc;
                break;
            }
            cpu_bn_forward(b->pool, N, is, train, L->bn_eps, L->bn_momentum, x, params + L->w_off,
                           params + L->b_off, stats ? stats + L->stat_off : NULL,
                           stats ? stats + L->stat_off + L->cin : NULL, b->save[l], y);
            break;
        case TF_RELU: cpu_relu_forward(n, x, y); break;
        case TF_GELU: cpu_gelu_forward(n, x, y); break;
        case TF_MAXPOOL:
            cpu_maxpool_forward(b->pool, N, is, os, L->k, L->stride, L->pad, x, y, b->arg[l]);
            break;
        case TF_AVGPOOL:
            cpu_avgpool_forward(b->pool, N, is, os, L->k, L->stride, L->pad, x, y);
            break;
        case TF_GAP: cpu_gap_forward(N, is, x, y); break;
        case TF_ADD: cpu_add_forward(n, x, b->act[L->in2], y); break;
        case TF_SCALE: cpu_scale_forward(n, L->scale, x, y); break;
        }
    }
}

static void backward(tf_backend *b, int N)
{
    const tf_model_spec *s = b->spec;
    float *g = b->grad, *p = b->params;
    for (int t = 1; t < s->n_tensors - 1; t++)
        memset(b->dact[t], 0, sizeof(float) * (size_t)N * (size_t)tf_shape_size(s->tensors[t]));
    for (int l = s->n_layers - 1; l >= 0; l--) {
        const tf_layer *L = &s->layers[l];
        tf_shape is = s->tensors[L->in], os = s->tensors[L->out];
        const float *x = b->act[L->in], *dy = b->dact[L->out];
        float *dx = b->dact[L->in]; /* NULL for the input tensor */
        long n = (long)N * tf_shape_size(os);
        switch (L->kind) {
        case TF_CONV:
            cpu_conv_backward_cached(b->pool, N, is, os, L->k, L->stride, L->pad, x, p + L->w_off,
                                     dy, dx, g + L->w_off, L->b_off >= 0 ? g + L->b_off : NULL,
                                     b->col[l]);
            break;
        case TF_LINEAR:
            cpu_linear_backward(b->pool, N, L->cin, L->cout, x, p + L->w_off, dy, dx, g + L->w_off,
                                L->b_off >= 0 ? g + L->b_off : NULL);
            break;
        case TF_BN:
            if (b->bn_scratch) {
                cpu_bn_sync sy = {b->cfg.bn_allreduce, b->cfg.grad_allreduce_user, b->cfg.world,
                                  b->bn_scratch, b->sync_err};
                int rc = b->sync_rc
                             ? b->sync_rc
                             : cpu_bn_backward_sync(b->pool, N, is, x, p + L->w_off, b->save[l], dy,
                                                    dx, g + L->w_off, g + L->b_off, &sy);
                if (rc)
                    b->sync_rc = rc;
                break;
            }
            cpu_bn_backward(b->pool, N, is, x, p + L->w_off, b->save[l], dy, dx, g + L->w_off,
                            g + L->b_off);
            break;
        case TF_RELU:
            if (dx)
                cpu_relu_backward(n, x, dy, dx);
            break;
        case TF_GELU:
            if (dx)
                cpu_gelu_backward(n, x, dy, dx);
            break;
        case TF_MAXPOOL:
            if (dx)
                cpu_maxpool_backward(b->pool, N, is, os, b->arg[l], dy, dx);
            break;
        case TF_AVGPOOL:
            if (dx)
                cpu_avgpool_backward(b->pool, N, is, os, L->k, L->stride, L->pad, dy, dx);
            break;
        case TF_GAP:
            if (dx)
                cpu_gap_backward(N, is, dy, dx);
            break;
        case TF_ADD:
            for (long i = 0; dx && i < n; i++)
                dx[i] += dy[i];
            if (b->dact[L->in2])
                for (long i = 0; i < n; i++)
                    b->dact[L->in2][i] += dy[i];
            break;
        case TF_SCALE:
            for (long i = 0; dx && i < n; i++)
                dx[i] += L->scale * dy[i];
            break;
        }
    }
}

typedef struct sgd_job {
    tf_backend *b;
    float lr;
} sgd_job;

/* one thread's share of the flat arrays: SGD on the parts of the parameter tensors inside it,
 * then EMA; element-wise, so the result does not depend on the split */
static void sgd_worker(void *arg, int tid, int nt)
{
    const sgd_job *J = arg;
    tf_backend *b = J->b;
    const tf_model_spec *s = b->spec;
    const float mu = b->cfg.momentum, wd = b->cfg.weight_decay;
    long lo, hi;
    cpu_range((long)s->param_count, tid, nt, &lo, &hi);
    for (int i = 0; i < s->n_params; i++) {
        const tf_param *tp = &s->params[i];
        long a = tp->offset > lo ? (long)tp->offset : lo;
        long e = tp->offset + tp->count < hi ? (long)(tp->offset + tp->count) : hi;
        if (a >= e)
            continue;
        cpu_sgd_step(e - a, b->params + a, b->grad + a, b->momentum + a, J->lr, mu,
                     tp->no_decay ? 0.0f : wd, b->cfg.nesterov);
        memset(b->grad + a, 0, sizeof(float) * (size_t)(e - a));
    }
    if (b->ema_params) {
        cpu_ema_update(hi - lo, b->ema_params + lo, b->params + lo, b->cfg.ema_decay);
        cpu_range((long)s->stat_count, tid, nt, &lo, &hi);
        cpu_ema_update(hi - lo, b->ema_stats + lo, b->stats + lo, b->cfg.ema_decay);
    }
}

static void optimizer_step(tf_backend *b, float lr)
{
    sgd_job J = {b, lr};
    /* on the pool: 11.7M parameters (resnet18) take tens of ms on one core */
    cpu_pool_run(b->spec->param_count >= 65536 ? b->pool : NULL, sgd_worker, &J);
    b->step++;
}

static int cpu_train_step(tf_backend *b, const tf_batch *x, float lr, tf_step_result *res,
                          fl_error *err)
{
    memset(res, 0, sizeof *res);
    int rc = check_batch(b, x, err);
    if (rc)
        return rc;
    const tf_model_spec *s = b->spec;
    const int N = (int)x->n, K = s->num_classes;
    /* an epoch's last accumulation group may hold fewer micro-batches (backend.h) */
    const uint32_t group = x->accum_group ? x->accum_group : (uint32_t)b->cfg.accum;
    uint32_t c1 = 0;
    double loss;
#ifdef FL_HAVE_ONEDNN
    if (b->dnn) {
        const float *logits;
        cpu_input_u8(b->pool, N, s->in_h, s->in_w, s->in_c, x->images, s->mean, s->std,
                     b->cfg.crop_pad, b->cfg.flip, b->cfg.aug_seed, x->epoch, x->indices, 0,
                     cpu_dnn_input(b->dnn));
        rc = cpu_dnn_forward(b->dnn, N, 1, b->params, b->stats, &logits, err);
        if (rc)
            return rc;
        loss =
            cpu_softmax_xent(N, K, logits, x->labels, b->cfg.label_smoothing,
                             1.0f / ((float)N * (float)group), cpu_dnn_dlogits(b->dnn), &c1, NULL);
        rc = cpu_dnn_backward(b->dnn, b->params, b->grad, err);
        if (rc)
            return rc;
    } else
#endif
    {
        cpu_input_u8(b->pool, N, s->in_h, s->in_w, s->in_c, x->images, s->mean, s->std,
                     b->cfg.crop_pad, b->cfg.flip, b->cfg.aug_seed, x->epoch, x->indices, 0,
                     b->act[0]);
        b->sync_rc = 0;
        b->sync_err = err;
        forward(b, N, 1, b->params, b->stats);
        if (b->sync_rc)
            return b->sync_rc;
        const int lt = s->n_tensors - 1;
        loss = cpu_softmax_xent(N, K, b->act[lt], x->labels, b->cfg.label_smoothing,
                                1.0f / ((float)N * (float)group), b->dact[lt], &c1, NULL);
        backward(b, N);
        if (b->sync_rc)
            return b->sync_rc;
    }
    b->micro_step++;
    res->loss = loss / N;
    res->correct = c1;
    res->n = x->n;
    if (++b->accum_count >= group) {
        if (b->cfg.grad_allreduce && b->cfg.world > 1) {
            /* data parallel: average the gradients over the ranks (sum, then 1/world) */
            rc = b->cfg.grad_allreduce(b->cfg.grad_allreduce_user, b->grad, s->param_count, err);
            if (rc)
                return rc;
            const float inv = 1.0f / (float)b->cfg.world;
            for (int64_t j = 0; j < s->param_count; j++)
                b->grad[j] *= inv;
        }
        optimizer_step(b, lr);
        b->accum_count = 0;
        res->stepped = 1;
    }
    return 0;
}

static int cpu_eval_batch(tf_backend *b, const tf_batch *x, int flip_tta, int use_ema,
                          tf_eval_result *res, fl_error *err)
{
    memset(res, 0, sizeof *res);
    int rc = check_batch(b, x, err);
    if (rc)
        return rc;
    if (use_ema && !b->ema_params)
        return fl_error_set(err, FL_E_INVALID, "evaluation with EMA weights but EMA is off");
    const tf_model_spec *s = b->spec;
    const int N = (int)x->n, K = s->num_classes, lt = s->n_tensors - 1;
    const float *params = use_ema ? b->ema_params : b->params;
    float *stats = use_ema ? b->ema_stats : b->stats;
    const float *logits = NULL, *out = NULL;
    for (int pass = 0; pass < (flip_tta ? 2 : 1); pass++) {
#ifdef FL_HAVE_ONEDNN
        if (b->dnn) {
            cpu_input_u8(b->pool, N, s->in_h, s->in_w, s->in_c, x->images, s->mean, s->std, 0, 0, 0,
                         0, NULL, pass, cpu_dnn_input(b->dnn));
            rc = cpu_dnn_forward(b->dnn, N, 0, params, stats, &out, err);
            if (rc)
                return rc;
        } else
#endif
        {
            cpu_input_u8(b->pool, N, s->in_h, s->in_w, s->in_c, x->images, s->mean, s->std, 0, 0, 0,
                         0, NULL, pass, b->act[0]);
            forward(b, N, 0, params, stats);
            out = b->act[lt];
        }
        logits = out;
        if (flip_tta) {
            for (long i = 0; i < (long)N * K; i++)
                b->logits_sum[i] = pass ? 0.5f * (b->logits_sum[i] + out[i]) : out[i];
            logits = b->logits_sum;
        }
    }
    res->loss_sum =
        cpu_softmax_xent(N, K, logits, x->labels, 0.0f, 0.0f, NULL, &res->correct1, &res->correct5);
    res->n = x->n;
    return 0;
}

/* backend.h predict_batch: exactly the forward of cpu_eval_batch's first pass, so the argmax of
 * these logits is eval's top-1 without TTA, bit for bit */
static int cpu_predict_batch(tf_backend *b, const tf_batch *x, int use_ema, float *logits,
                             fl_error *err)
{
    int rc = check_shape(b, x, err);
    if (rc)
        return rc;
    if (use_ema && !b->ema_params)
        return fl_error_set(err, FL_E_INVALID, "prediction with EMA weights but EMA is off");
    const tf_model_spec *s = b->spec;
    const int N = (int)x->n;
    const float *params = use_ema ? b->ema_params : b->params;
    float *stats = use_ema ? b->ema_stats : b->stats;
    const float *out;
#ifdef FL_HAVE_ONEDNN
    if (b->dnn) {
        cpu_input_u8(b->pool, N, s->in_h, s->in_w, s->in_c, x->images, s->mean, s->std, 0, 0, 0, 0,
                     NULL, 0, cpu_dnn_input(b->dnn));
        rc = cpu_dnn_forward(b->dnn, N, 0, params, stats, &out, err);
        if (rc)
            return rc;
    } else
#endif
    {
        cpu_input_u8(b->pool, N, s->in_h, s->in_w, s->in_c, x->images, s->mean, s->std, 0, 0, 0, 0,
                     NULL, 0, b->act[0]);
        forward(b, N, 0, params, stats);
        out = b->act[s->n_tensors - 1];
    }
    memcpy(logits, out, sizeof(float) * (size_t)N * (size_t)s->num_classes);
    return 0;
}

static int cpu_get_state(tf_backend *b, tf_state *st, fl_error *err)
{
    const size_t P = sizeof(float) * (size_t)b->spec->param_count,
                 S = sizeof(float) * (size_t)b->spec->stat_count;
    if (st->params)
        memcpy(st->params, b->params, P);
    if (st->momentum)
        memcpy(st->momentum, b->momentum, P);
    if (st->grad_accum)
        memcpy(st->grad_accum, b->grad, P);
    if (st->stats)
        memcpy(st->stats, b->stats, S);
    if (st->ema_params && b->ema_params)
        memcpy(st->ema_params, b->ema_params, P);
    if (st->ema_stats && b->ema_stats)
        memcpy(st->ema_stats, b->ema_stats, S);
    st->step = b->step;
    st->micro_step = b->micro_step;
    st->accum_count = b->accum_count;
    st->loss_scale = 1.0f;
    st->good_steps = 0;
    st->skipped_steps = 0;
    return 0;
}

static int cpu_set_state(tf_backend *b, const tf_state *st, fl_error *err)
{
    const size_t P = sizeof(float) * (size_t)b->spec->param_count,
                 S = sizeof(float) * (size_t)b->spec->stat_count;
    if (!st->params || !st->stats)
        return fl_error_set(err, FL_E_INVALID, "set_state: params and stats are required");
    memcpy(b->params, st->params, P);
    memcpy(b->stats, st->stats, S);
    if (st->momentum)
        memcpy(b->momentum, st->momentum, P);
    else
        memset(b->momentum, 0, P);
    if (st->grad_accum)
        memcpy(b->grad, st->grad_accum, P);
    else
        memset(b->grad, 0, P);
    if (b->ema_params) {
        /* no EMA in the state (fresh start or EMA newly enabled): start it at the weights */
        memcpy(b->ema_params, st->ema_params ? st->ema_params : st->params, P);
        memcpy(b->ema_stats, st->ema_stats ? st->ema_stats : st->stats, S);
    }
    b->step = st->step;
    b->micro_step = st->micro_step;
    b->accum_count = st->accum_count;
    return 0;
}

static void cpu_describe(tf_backend *b, char *buf, size_t cap)
{
#ifdef FL_HAVE_ONEDNN
    if (b->dnn) {
        char v[96];
        cpu_dnn_describe(b->dnn, v, sizeof v);
        snprintf(buf, cap, "CPU, %d threads, %s (--cpu-backend onednn), %s",
                 cpu_pool_threads(b->pool), v, b->cfg.precision == TF_BF16 ? "bf16" : "fp32");
        return;
    }
#endif
    snprintf(buf, cap, "CPU, %d threads, reference layers (--cpu-backend reference), GEMM %s, fp32",
             cpu_pool_threads(b->pool), cpu_gemm_name());
}

/* Data parallel: gradients (and with --sync-bn the BN statistics) summed over the ranks through
 * the trainer's communicator; the CPU backend has no collective of its own. */
static int cpu_attach_comm(tf_backend *b, const tf_comm *c, char *note, size_t cap, fl_error *err)
{
    if (note && cap)
        note[0] = 0;
    if (c->world <= 1)
        return 0;
    if (c->sync_bn && !b->bn_scratch && !(b->bn_scratch = bn_scratch_alloc(b->spec)))
        return fl_error_set(err, -ENOMEM, "cpu backend: out of memory");
#ifdef FL_HAVE_ONEDNN
    if (c->sync_bn && b->dnn) {
        /* BN statistics reduced between layers: only the reference path has that hook (describe
         * then names the reference layers) */
        double bytes;
        cpu_dnn_free(b->dnn);
        b->dnn = NULL;
        if (ref_alloc(b, &bytes))
            return fl_error_set(err, -ENOMEM, "cpu backend: out of memory for %s (%.1f MiB)",
                                b->spec->name, bytes / 1048576.0);
    }
#endif
    b->cfg.world = c->world;
    b->cfg.grad_allreduce = c->sum_f32;
    b->cfg.grad_allreduce_user = c->user;
    b->cfg.bn_allreduce = c->sync_bn ? c->sum_f64 : NULL;
    return 0;
}

static const tf_backend_ops cpu_ops = {
    .name = "cpu",
    .available = NULL,
    .create = cpu_create,
    .train_step = cpu_train_step,
    .eval_batch = cpu_eval_batch,
    .get_state = cpu_get_state,
    .set_state = cpu_set_state,
    .probe_batch = NULL,
    .describe = cpu_describe,
    .destroy = cpu_destroy,
    .attach_comm = cpu_attach_comm,
    .predict_batch = cpu_predict_batch,
};

const tf_backend_ops *tf_backend_cpu(void) { return &cpu_ops; }
