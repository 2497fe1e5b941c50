/* test_gpu_backend.c — the CUDA backend against the CPU fp32 reference backend on the same model,
 * weights and batches: per-parameter-tensor gradients (one SGD step with lr 1, no momentum/decay:
 * grad = p_before − p_after) in fp32 / bf16 / fp16 with precision-scaled tolerances, losses of a
 * few training steps, eval (loss, top-1, flip TTA), state get/set round trip, that a small model
 * learns a toy task, bit-identical repeated runs, and the NCCL path with world size 1 equal to the
 * plain run. Exits 77 without a GPU. */
#include "gpu_test.h"

#include "backend.h"
#include "gpu_dist.h"
#include "model.h"

#define N       32
#define HW      16
#define CLASSES 10

typedef struct fixture {
    uint8_t img[N * HW * HW];
    int32_t labels[N];
    uint64_t indices[N];
} fixture;

static void make_batch(fixture *f, uint64_t seed, tf_batch *bt)
{
    gt_rng_state = seed;
    for (int i = 0; i < N; i++) {
        f->labels[i] = (int32_t)(gt_uniform() * CLASSES);
        f->indices[i] = 1000 + (uint64_t)i * 7;
        for (int p = 0; p < HW * HW; p++) {
            /* stripes plus noise; the class sets orientation (label < 5: vertical) and period
             * (2..6 pixels), which survive the random crop shift and the flip */
            int y = f->labels[i], coord = y < 5 ? p % HW : p / HW;
            int stripe = coord % (2 + y % 5) == 0;
            f->img[i * HW * HW + p] = (uint8_t)(stripe * 150 + gt_uniform() * 100);
        }
    }
    memset(bt, 0, sizeof *bt);
    bt->images = f->img;
    bt->labels = f->labels;
    bt->indices = f->indices;
    bt->epoch = 2;
    bt->n = N;
    bt->h = bt->w = HW;
    bt->c = 1;
}

typedef struct run {
    tf_backend *b;
    const tf_backend_ops *ops;
} run;

static float *state_params(const tf_backend_ops *ops, tf_backend *b, const tf_model_spec *s,
                           tf_state *st)
{
    memset(st, 0, sizeof *st);
    st->params = calloc((size_t)s->param_count, 4);
    st->momentum = calloc((size_t)s->param_count, 4);
    st->grad_accum = calloc((size_t)s->param_count, 4);
    st->stats = calloc((size_t)s->stat_count + 1, 4);
    fl_error err;
    if (ops->get_state(b, st, &err)) {
        fprintf(stderr, "get_state: %s\n", err.msg);
        exit(1);
    }
    return st->params;
}

static void free_state(tf_state *st)
{
    free(st->params);
    free(st->momentum);
    free(st->grad_accum);
    free(st->stats);
}

static tf_backend *make(const tf_backend_ops *ops, const tf_model_spec *s, tf_precision prec,
                        const float *p0, const float *s0)
{
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.precision = prec;
    cfg.momentum = 0.0f;
    cfg.nesterov = 0;
    cfg.weight_decay = 0.0f;
    cfg.label_smoothing = 0.1f;
    cfg.crop_pad = 2;
    cfg.flip = 1;
    cfg.aug_seed = 77;
    cfg.threads = 1;
    cfg.max_batch = N;
    cfg.loss_scale_init = 1024.0f;
    tf_backend *b = NULL;
    fl_error err;
    if (ops->create(s, &cfg, &b, &err)) {
        fprintf(stderr, "%s create (%d): %s\n", ops->name, (int)prec, err.msg);
        exit(1);
    }
    tf_state st;
    memset(&st, 0, sizeof st);
    st.params = (float *)p0;
    st.stats = (float *)s0;
    st.loss_scale = 1024.0f;
    if (ops->set_state(b, &st, &err)) {
        fprintf(stderr, "%s set_state: %s\n", ops->name, err.msg);
        exit(1);
    }
    return b;
}

static double step(const tf_backend_ops *ops, tf_backend *b, const tf_batch *bt, float lr)
{
    tf_step_result r;
    fl_error err;
    if (ops->train_step(b, bt, lr, &r, &err)) {
        fprintf(stderr, "%s train_step: %s\n", ops->name, err.msg);
        exit(1);
    }
    return r.loss;
}

/* Relative L2 distance of the gradients of each parameter tensor. */
static void compare_grads(const tf_model_spec *s, const float *p0, const float *pc, const float *pg,
                          double tol, const char *what)
{
    for (int i = 0; i < s->n_params; i++) {
        const tf_param *q = &s->params[i];
        double num = 0, den = 0;
        for (int64_t k = q->offset; k < q->offset + q->count; k++) {
            double gc = (double)p0[k] - pc[k], gg = (double)p0[k] - pg[k];
            num += (gc - gg) * (gc - gg);
            den += gc * gc;
        }
        double rel = sqrt(num / (den + 1e-30));
        if (!(rel <= tol || sqrt(den) < 1e-7))
            EXPECTF(0,
                    "%s: gradient of %s differs from the CPU by %.3g (relative L2, tolerance %.3g)",
                    what, q->name, rel, tol);
    }
}

static void test_model(const char *name, const tf_model_options *mo)
{
    tf_model_spec spec;
    fl_error err;
    if (tf_model_build(name, 1, HW, HW, CLASSES, mo, &spec, &err)) {
        fprintf(stderr, "tf_model_build: %s\n", err.msg);
        exit(1);
    }
    float *p0 = malloc((size_t)spec.param_count * 4), *s0 = malloc((size_t)spec.stat_count * 4 + 4);
    tf_model_init(&spec, 5, p0, s0);
    fixture f;
    tf_batch bt;
    make_batch(&f, 99, &bt);
    const tf_backend_ops *cpu = tf_backend_cpu(), *gpu = tf_backend_cuda();

    /* eval on the initial weights: same loss and accuracy (with and without flip TTA) */
    tf_eval_result ec[2];
    tf_backend *be = make(cpu, &spec, TF_FP32, p0, s0);
    for (int tta = 0; tta < 2; tta++)
        if (cpu->eval_batch(be, &bt, tta, 0, &ec[tta], &err)) {
            fprintf(stderr, "cpu eval_batch: %s\n", err.msg);
            exit(1);
        }
    cpu->destroy(be);

    /* one step with lr 1 and no momentum: p0 − p1 is the gradient */
    tf_backend *bc = make(cpu, &spec, TF_FP32, p0, s0);
    double lc = step(cpu, bc, &bt, 1.0f);
    tf_state sc;
    float *pc = state_params(cpu, bc, &spec, &sc);
    const tf_precision precs[3] = {TF_FP32, TF_BF16, TF_FP16};
    const double tols[3] = {2e-3, 6e-2, 3e-2}, ltol[3] = {1e-4, 2e-2, 5e-3};
    for (int k = 0; k < 3; k++) {
        char what[96];
        snprintf(what, sizeof what, "%s %s", name,
                 precs[k] == TF_FP32   ? "fp32"
                 : precs[k] == TF_BF16 ? "bf16"
                                       : "fp16");
        tf_backend *bg = make(gpu, &spec, precs[k], p0, s0);
        for (int tta = 0; tta < 2; tta++) {
            tf_eval_result eg;
            if (gpu->eval_batch(bg, &bt, tta, 0, &eg, &err)) {
                fprintf(stderr, "gpu eval_batch: %s\n", err.msg);
                exit(1);
            }
            EXPECTF(fabs(eg.loss_sum - ec[tta].loss_sum) <=
                        10 * ltol[k] * (fabs(ec[tta].loss_sum) + N),
                    "%s: eval loss (tta %d) GPU %.5f vs CPU %.5f", what, tta, eg.loss_sum,
                    ec[tta].loss_sum);
            int d1 = (int)eg.correct1 - (int)ec[tta].correct1;
            EXPECTF(abs(d1) <= (k == 0 ? 1 : 3), "%s: eval top-1 (tta %d) GPU %u vs CPU %u", what,
                    tta, eg.correct1, ec[tta].correct1);
            EXPECTF(eg.correct5 >= eg.correct1 && eg.n == N, "%s: eval counts inconsistent", what);
        }
        double lg = step(gpu, bg, &bt, 1.0f);
        EXPECTF(fabs(lg - lc) <= ltol[k] * (fabs(lc) + 1), "%s: first loss GPU %.6f vs CPU %.6f",
                what, lg, lc);
        tf_state sg;
        float *pg = state_params(gpu, bg, &spec, &sg);
        compare_grads(&spec, p0, pc, pg, tols[k], what);
        /* BN running statistics were updated from the same batch statistics */
        double worst = 0;
        for (int64_t i = 0; i < spec.stat_count; i++) {
            double d = fabs((double)sg.stats[i] - sc.stats[i]) / (fabs(sc.stats[i]) + 1e-2);
            worst = d > worst ? d : worst;
        }
        EXPECTF(worst <= 50 * tols[k], "%s: BN running stats differ by %.3g (relative)", what,
                worst);
        free_state(&sg);
        gpu->destroy(bg);
    }
    free_state(&sc);
    cpu->destroy(bc);

    /* a few more steps on fresh batches: the loss curves agree (fp32) */
    {
        tf_backend *c2 = make(cpu, &spec, TF_FP32, p0, s0), *g2 = make(gpu, &spec, TF_FP32, p0, s0);
        for (int t = 0; t < 4; t++) {
            fixture ft;
            tf_batch b2;
            make_batch(&ft, 1000 + (uint64_t)t, &b2);
            double a = step(cpu, c2, &b2, 0.05f), g = step(gpu, g2, &b2, 0.05f);
            EXPECTF(fabs(a - g) <= 1e-3 * (fabs(a) + 1),
                    "%s fp32 step %d: loss GPU %.6f vs CPU %.6f", name, t, g, a);
        }
        /* state round trip: a second GPU backend set from the first's state continues identically
         */
        tf_state st;
        state_params(gpu, g2, &spec, &st);
        tf_backend *g3 = make(gpu, &spec, TF_FP32, st.params, st.stats);
        fixture ft;
        tf_batch b3;
        make_batch(&ft, 5000, &b3);
        double la = step(gpu, g2, &b3, 0.05f), lb = step(gpu, g3, &b3, 0.05f);
        EXPECTF(fabs(la - lb) <= 1e-6 * (fabs(la) + 1),
                "%s: loss after state round trip %.7f vs %.7f", name, lb, la);
        free_state(&st);
        cpu->destroy(c2);
        gpu->destroy(g2);
        gpu->destroy(g3);
    }
    free(p0);
    free(s0);
    tf_model_free(&spec);
}

/* bf16 training makes progress on the striped task: the mean loss of the last 10 of 80 steps is
 * below half the first step's. */
static void test_learns(void)
{
    tf_model_spec spec;
    fl_error err;
    tf_model_options mo = {16, 0, 0};
    if (tf_model_build("fastcnn", 1, HW, HW, CLASSES, &mo, &spec, &err))
        exit(1);
    float *p0 = malloc((size_t)spec.param_count * 4), *s0 = malloc((size_t)spec.stat_count * 4 + 4);
    tf_model_init(&spec, 11, p0, s0);
    const tf_backend_ops *gpu = tf_backend_cuda();
    tf_backend *b = make(gpu, &spec, TF_BF16, p0, s0);
    double first = 0, last = 0;
    for (int t = 0; t < 80; t++) {
        fixture f;
        tf_batch bt;
        make_batch(&f, 7000 + (uint64_t)t, &bt);
        double l = step(gpu, b, &bt, 0.2f);
        if (t == 0)
            first = l;
        if (t >= 70)
            last += l / 10;
    }
    EXPECTF(last < 0.5 * first, "bf16 fastcnn did not learn: loss %.4f -> %.4f", first, last);
    printf("test_gpu_backend: bf16 learns: loss %.4f -> %.4f (mean of the last 10 of 80 steps)\n",
           first, last);
    gpu->destroy(b);
    free(p0);
    free(s0);
    tf_model_free(&spec);
}

/* Same inputs, same bits: two runs agree exactly (deterministic cuDNN algorithms, no float
 * atomics), and the NCCL path with world size 1 (gradients averaged over one rank) equals the
 * plain run bit for bit. */
static void test_determinism_and_nccl(tf_precision prec)
{
    tf_model_spec spec;
    fl_error err;
    tf_model_options mo = {8, 1, 0};
    if (tf_model_build("fastcnn", 1, HW, HW, CLASSES, &mo, &spec, &err))
        exit(1);
    float *p0 = malloc((size_t)spec.param_count * 4), *s0 = malloc((size_t)spec.stat_count * 4 + 4);
    tf_model_init(&spec, 3, p0, s0);
    const tf_backend_ops *gpu = tf_backend_cuda();
    void *comm = NULL;
    int with_nccl = tf_gpu_nccl_available(NULL);
    if (with_nccl && tf_gpu_comm_init_single(0, &comm, &err)) {
        EXPECTF(0, "NCCL world size 1: %s", err.msg);
        with_nccl = 0;
    }
    tf_backend *runs[3];
    int nruns = with_nccl ? 3 : 2;
    for (int r = 0; r < nruns; r++) {
        runs[r] = make(gpu, &spec, prec, p0, s0);
        if (r == 2 && tf_gpu_set_comm(runs[r], comm, &err))
            EXPECTF(0, "tf_gpu_set_comm: %s", err.msg);
        for (int t = 0; t < 3; t++) {
            fixture f;
            tf_batch bt;
            make_batch(&f, 300 + (uint64_t)t, &bt);
            step(gpu, runs[r], &bt, 0.1f);
        }
    }
    tf_state st[3];
    for (int r = 0; r < nruns; r++)
        state_params(gpu, runs[r], &spec, &st[r]);
    const char *pn = prec == TF_FP32 ? "fp32" : prec == TF_BF16 ? "bf16" : "fp16";
    EXPECTF(!memcmp(st[0].params, st[1].params, (size_t)spec.param_count * 4) &&
                !memcmp(st[0].stats, st[1].stats, (size_t)spec.stat_count * 4),
            "%s: two identical runs differ (non-deterministic kernels?)", pn);
    if (with_nccl)
        EXPECTF(!memcmp(st[0].params, st[2].params, (size_t)spec.param_count * 4),
                "%s: the NCCL world-size-1 run differs from the plain run", pn);
    printf("test_gpu_backend: %s runs bit-identical%s\n", pn,
           with_nccl ? "; NCCL world size 1 = plain run" : " (no NCCL in this build)");
    for (int r = 0; r < nruns; r++) {
        free_state(&st[r]);
        gpu->destroy(runs[r]);
    }
    tf_gpu_comm_destroy(comm);
    free(p0);
    free(s0);
    tf_model_free(&spec);
}

int main(void)
{
    char why[256];
    const tf_backend_ops *gpu = tf_backend_cuda();
    if (!gpu->available(why, sizeof why)) {
        printf("SKIP test_gpu_backend: %s\n", why);
        return 77;
    }
    gt_require_gpu("test_gpu_backend");
    tf_model_options plain = {8, 0, 0}, res_gelu = {8, 1, 1};
    test_model("fastcnn", &plain);
    printf("test_gpu_backend: fastcnn done (%d failures)\n", fl_check_failures);
    test_model("fastcnn", &res_gelu);
    printf("test_gpu_backend: fastcnn residual+gelu done (%d failures)\n", fl_check_failures);
    test_learns();
    test_determinism_and_nccl(TF_FP32);
    test_determinism_and_nccl(TF_BF16);
    if (fl_check_failures) {
        fprintf(stderr, "test_gpu_backend: %d failures\n", fl_check_failures);
        return 1;
    }
    printf("test_gpu_backend: GPU backend matches the CPU reference\n");
    return 0;
}
