/* test_train_inprocess.c — the CPU backend end to end without files of data: a model too small for
 * its input is refused; a tiny model learns a separable synthetic task to 100% and refuses a bad
 * label or shape; training N steps equals training k steps, checkpointing, destroying the backend,
 * resuming from the file and training N - k more (bit-identical params, momentum, stats, EMA), also
 * with --accum, EMA and a residual GELU model. The checkpoint format itself: test_checkpoint. */
#include "inproc.h"

static void resume_case(const tf_model_spec *spec, const char *dir, int accum, float ema,
                        int threads)
{
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.max_batch = NB;
    cfg.accum = accum;
    cfg.ema_decay = ema;
    cfg.crop_pad = 1;
    cfg.flip = 1;
    cfg.aug_seed = 99;
    cfg.label_smoothing = 0.1f;
    cfg.threads = threads;
    const uint64_t N = 9, K = 4; /* K not on an accumulation boundary when accum = 3 */
    tf_backend *a = start(spec, &cfg, 5);
    train(a, 0, N, NULL, NULL);
    tf_checkpoint full;
    snapshot(a, spec, ema > 0, &full);
    ops->destroy(a);

    tf_backend *b = start(spec, &cfg, 5);
    train(b, 0, K, NULL, NULL);
    tf_checkpoint mid;
    snapshot(b, spec, ema > 0, &mid);
    ops->destroy(b); /* the "killed" process */
    mid.epoch = 0;
    mid.batch = K;
    char path[4096];
    fl_error err;
    EXPECTF(tf_checkpoint_save(dir, &mid, path, sizeof path, &err) == 0, "save: %s", err.msg);
    tf_checkpoint_free(&mid);
    tf_checkpoint back;
    EXPECTF(tf_checkpoint_load_latest(dir, &back, NULL, 0, NULL, 0, &err) == 0, "load: %s",
            err.msg);
    EXPECTF(back.batch == K, "position %llu", (unsigned long long)back.batch);
    tf_backend *c;
    ops->create(spec, &cfg, &c, &err);
    EXPECTF(ops->set_state(c, &back.st, &err) == 0, "set_state: %s", err.msg);
    train(c, back.batch, N, NULL, NULL);
    tf_checkpoint resumed;
    snapshot(c, spec, ema > 0, &resumed);
    ops->destroy(c);
    EXPECTF(same_state(&full, &resumed),
            "resume (accum %d, ema %g, threads %d): state differs from the uninterrupted run",
            accum, ema, threads);
    if (!fl_check_failures)
        printf("ok   resume after %llu of %llu steps is bit-identical (accum %d, ema %g, %d "
               "threads)\n",
               (unsigned long long)K, (unsigned long long)N, accum, ema, threads);
    tf_checkpoint_free(&full);
    tf_checkpoint_free(&back);
    tf_checkpoint_free(&resumed);
}

int main(void)
{
    char dir[512];
    tf_model_spec spec;
    if (inproc_begin("tf_inproc", dir, sizeof dir, &spec))
        return 1;
    fl_error err;
    /* a model too small for its input is refused with a reason */
    tf_model_spec bad;
    EXPECTF(tf_model_build("fastcnn", 1, 4, 4, 10, NULL, &bad, &err) == FL_E_INVALID &&
                strstr(err.msg, "too small"),
            "fastcnn on 4x4: %s", err.msg);
    EXPECTF(tf_model_build("vgg", 3, 32, 32, 10, NULL, &bad, &err) == FL_E_INVALID &&
                strstr(err.msg, "unknown model"),
            "unknown model: %s", err.msg);

    /* 1. learning: 100% on held-out batches */
    {
        tf_train_config cfg;
        tf_train_config_init(&cfg);
        cfg.max_batch = NB;
        tf_backend *b = start(&spec, &cfg, 1);
        double loss0 = 0, loss = 0;
        train(b, 0, 1, &loss0, NULL);
        train(b, 1, 60, &loss, NULL);
        uint32_t correct = 0, total = 0;
        uint8_t img[NB * H * W];
        int32_t lab[NB];
        uint64_t idx[NB];
        for (uint64_t s = 1000; s < 1004; s++) {
            make_batch(s, img, lab, idx);
            tf_batch x = {.images = img, .labels = lab, .n = NB, .h = H, .w = W, .c = 1};
            tf_eval_result r;
            EXPECTF(ops->eval_batch(b, &x, s & 1, 0, &r, &err) == 0, "eval: %s", err.msg);
            correct += r.correct1;
            total += r.n;
        }
        EXPECTF(correct == total, "learned %u/%u (loss %.3f -> %.3f)", correct, total, loss0, loss);
        EXPECTF(loss < loss0 * 0.5, "loss did not fall: %.3f -> %.3f", loss0, loss);
        printf("ok   tiny fastcnn learns the separable task: %u/%u held-out, loss %.3f -> %.4f\n",
               correct, total, loss0, loss);
        /* bad input is refused */
        int32_t badlab[NB] = {0};
        badlab[3] = 7;
        tf_batch x = {.images = img, .labels = badlab, .n = NB, .h = H, .w = W, .c = 1};
        tf_step_result r;
        EXPECTF(ops->train_step(b, &x, 0.1f, &r, &err) == FL_E_LABEL && strstr(err.msg, "sample 3"),
                "bad label: %s", err.msg);
        x.labels = lab;
        x.h = 9;
        EXPECTF(ops->train_step(b, &x, 0.1f, &r, &err) == FL_E_INVALID, "bad shape accepted");

        ops->destroy(b);
    }
    /* 5. resume identity */
    char d4[600];
    snprintf(d4, sizeof d4, "%s/r1", dir);
    resume_case(&spec, d4, 1, 0.0f, 2);
    snprintf(d4, sizeof d4, "%s/r2", dir);
    resume_case(&spec, d4, 3, 0.9f, 1);
    tf_model_spec rs;
    tf_model_options ro = {.width = 4, .residual = 1, .gelu = 1};
    tf_model_build("fastcnn", 1, H, W, 2, &ro, &rs, &err);
    snprintf(d4, sizeof d4, "%s/r3", dir);
    resume_case(&rs, d4, 2, 0.0f, 2);
    tf_model_free(&rs);
    return inproc_end(dir, &spec);
}
