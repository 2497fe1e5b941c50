/* test_attach_comm.c — the CPU backend's attach_comm (backend.h) without MPI: with a fake
 * communicator of world 2 whose sums double every buffer (two ranks holding the same data), the
 * averaged gradients equal one process's, so training gives the same state bit for bit (with
 * --sync-bn, whose sums take another order, the same weights within rounding); the sums are
 * called once per optimizer step (and per BN layer with --sync-bn); world 1 attaches nothing; a
 * failing sum fails train_step with its message. The real collectives over mpirun:
 * test_dist.sh. */
#include "inproc.h"

static int calls_f32, calls_f64, fail_f32;

static int sum_f32(void *user, float *buf, int64_t n, fl_error *err)
{
    (void)user;
    calls_f32++;
    if (fail_f32)
        return fl_error_set(err, -EIO, "fake collective failed");
    for (int64_t i = 0; i < n; i++)
        buf[i] *= 2.0f;
    return 0;
}

static int sum_f64(void *user, double *buf, int64_t n, fl_error *err)
{
    (void)user, (void)err;
    calls_f64++;
    for (int64_t i = 0; i < n; i++)
        buf[i] *= 2.0;
    return 0;
}

static int bcast(void *user, void *buf, size_t bytes, int root, fl_error *err)
{
    (void)user, (void)buf, (void)bytes, (void)root, (void)err;
    return 0;
}

/* the state after `steps` steps, with comm attached when not NULL */
static void run(const tf_model_spec *spec, const tf_comm *comm, int steps, tf_checkpoint *out)
{
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.max_batch = NB;
    cfg.accum = 2;
    cfg.threads = 1;
    cfg.aug_seed = 7;
    tf_backend *b;
    fl_error err;
    CHECK(ops->create(spec, &cfg, &b, &err) == 0);
    char note[64] = "x";
    if (comm)
        EXPECTF(ops->attach_comm(b, comm, note, sizeof note, &err) == 0 && note[0] == 0,
                "attach_comm: %s (note '%s')", err.msg, note);
    tf_checkpoint ck;
    tf_checkpoint_alloc(&ck, spec->param_count, spec->stat_count, 0);
    tf_model_init(spec, 3, ck.st.params, ck.st.stats);
    CHECK(ops->set_state(b, &ck.st, &err) == 0);
    tf_checkpoint_free(&ck);
    train(b, 0, (uint64_t)steps, NULL, NULL);
    snapshot(b, spec, 0, out);
    ops->destroy(b);
}

int main(void)
{
    ops = tf_backend_cpu();
    CHECK(ops->attach_comm != NULL);
    tf_model_spec spec;
    tf_model_options mo = {.width = 4};
    fl_error err;
    CHECK_OK(tf_model_build("fastcnn", 1, H, W, 2, &mo, &spec, &err), &err);
    tf_checkpoint plain, two, one;
    run(&spec, NULL, 6, &plain);

    tf_comm c = {.rank = 0,
                 .world = 2,
                 .sync_bn = 0,
                 .sum_f32 = sum_f32,
                 .sum_f64 = sum_f64,
                 .bcast = bcast};
    run(&spec, &c, 6, &two);
    EXPECTF(calls_f32 == 3, "gradient sums: %d, expected 3 (6 micro-batches, --accum 2)",
            calls_f32);
    EXPECTF(calls_f64 == 0, "BN statistics synchronised without --sync-bn");
    EXPECT(same_state(&plain, &two)); /* x2 then x1/2: exact */
    printf("ok   world 2 of identical ranks (%d gradient sums) == one process, bit for bit\n",
           calls_f32);
    tf_checkpoint_free(&two);

    /* --sync-bn: the BN statistics go through the double sums (another summation order: equal
     * within rounding) */
    calls_f32 = calls_f64 = 0;
    c.sync_bn = 1;
    run(&spec, &c, 6, &two);
    double d2 = 0, n2 = 0;
    for (int64_t j = 0; j < spec.param_count; j++) {
        double d = (double)two.st.params[j] - plain.st.params[j];
        d2 += d * d;
        n2 += (double)plain.st.params[j] * plain.st.params[j];
    }
    EXPECTF(calls_f32 == 3 && calls_f64 > 0, "sums with --sync-bn: %d gradient, %d BN", calls_f32,
            calls_f64);
    EXPECTF(sqrt(d2 / n2) < 1e-5, "--sync-bn: params differ by %.3g relative L2", sqrt(d2 / n2));
    printf("ok   --sync-bn: %d BN sums, params within %.2g relative L2 of one process\n", calls_f64,
           sqrt(d2 / n2));

    calls_f32 = calls_f64 = 0;
    c.world = 1;
    run(&spec, &c, 6, &one);
    EXPECT(calls_f32 == 0 && calls_f64 == 0 && same_state(&plain, &one));
    printf("ok   world 1 attaches nothing\n");

    /* a failed collective fails the step that needed it, with its message */
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.max_batch = NB;
    cfg.threads = 1;
    tf_backend *b = start(&spec, &cfg, 3);
    c.world = 2;
    c.sync_bn = 0;
    fail_f32 = 1;
    CHECK(ops->attach_comm(b, &c, NULL, 0, &err) == 0);
    uint8_t img[NB * H * W];
    int32_t lab[NB];
    uint64_t idx[NB];
    make_batch(0, img, lab, idx);
    tf_batch x = {.images = img, .labels = lab, .indices = idx, .n = NB, .h = H, .w = W, .c = 1};
    tf_step_result r;
    EXPECTF(ops->train_step(b, &x, 0.05f, &r, &err) == -EIO && strstr(err.msg, "fake collective"),
            "a failed sum: %d %s", err.code, err.msg);
    printf("ok   a failed gradient sum fails train_step: %s\n", err.msg);
    ops->destroy(b);
    tf_checkpoint_free(&plain);
    tf_checkpoint_free(&two);
    tf_checkpoint_free(&one);
    tf_model_free(&spec);
    return fl_check_status();
}
