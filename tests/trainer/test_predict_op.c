/* test_predict_op.c — the CPU backend's predict_batch (backend.h) against eval_batch without TTA:
 * cross-entropy and top-1/top-5 computed from predict's logits equal eval's bit for bit, with
 * the training weights and with the EMA weights (which give other logits); a partial batch; the
 * labels are not read; a bad shape and EMA-while-off are refused; the training state is left
 * unchanged. (trainfast predict end to end: test_predict.sh.) */
#include "cpu_layers.h"
#include "inproc.h"

static void compare(tf_backend *b, int use_ema, uint32_t n, float *logits)
{
    uint8_t img[NB * H * W];
    int32_t lab[NB];
    uint64_t idx[NB];
    fl_error err;
    for (uint64_t s = 100; s < 104; s++) {
        make_batch(s, img, lab, idx);
        tf_batch x = {.images = img, .labels = lab, .indices = idx, .n = n, .h = H, .w = W, .c = 1};
        tf_eval_result r;
        CHECK_OK(ops->eval_batch(b, &x, 0, use_ema, &r, &err), &err);
        CHECK_OK(ops->predict_batch(b, &x, use_ema, logits, &err), &err);
        uint32_t c1 = 0, c5 = 0;
        double loss = cpu_softmax_xent((int)n, 2, logits, lab, 0.0f, 0.0f, NULL, &c1, &c5);
        EXPECTF(loss == r.loss_sum && c1 == r.correct1 && c5 == r.correct5,
                "ema %d n %u: predict's logits give loss %.17g top1 %u top5 %u, eval %.17g %u %u",
                use_ema, n, loss, c1, c5, r.loss_sum, r.correct1, r.correct5);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ops = tf_backend_cpu();
    CHECK(ops->predict_batch != NULL);
    fl_error err;
    tf_model_spec spec;
    tf_model_options mo = {.width = 4};
    CHECK_OK(tf_model_build("fastcnn", 1, H, W, 2, &mo, &spec, &err), &err);
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.max_batch = NB;
    cfg.ema_decay = 0.9f;
    cfg.threads = 2;
    tf_backend *b = start(&spec, &cfg, 3);
    train(b, 0, 6, NULL, NULL); /* the EMA now lags the weights */
    tf_checkpoint before, after;
    snapshot(b, &spec, 1, &before);

    float logits[NB * 2], ema_logits[NB * 2];
    compare(b, 0, NB, logits);
    compare(b, 1, NB, ema_logits);
    EXPECTF(memcmp(logits, ema_logits, sizeof logits) != 0, "EMA weights gave the same logits");
    compare(b, 0, 5, logits); /* a partial batch */
    printf("ok   predict's logits give eval's loss, top-1 and top-5 exactly (weights, EMA, n=5)\n");

    uint8_t img[NB * H * W];
    int32_t lab[NB];
    uint64_t idx[NB];
    make_batch(200, img, lab, idx);
    for (int i = 0; i < NB; i++)
        lab[i] = -1; /* unlabelled data: eval refuses, predict does not read them */
    tf_batch x = {.images = img, .labels = lab, .indices = idx, .n = NB, .h = H, .w = W, .c = 1};
    tf_eval_result r;
    EXPECT_RC(ops->eval_batch(b, &x, 0, 0, &r, &err), FL_E_LABEL, &err);
    EXPECT_RC(ops->predict_batch(b, &x, 0, logits, &err), 0, &err);
    x.h = H + 1;
    EXPECT_RC(ops->predict_batch(b, &x, 0, logits, &err), FL_E_INVALID, &err);
    x.h = H;
    x.n = NB + 1;
    EXPECT_RC(ops->predict_batch(b, &x, 0, logits, &err), FL_E_INVALID, &err);
    snapshot(b, &spec, 1, &after);
    EXPECTF(same_state(&before, &after), "predict_batch changed the training state");
    ops->destroy(b);

    cfg.ema_decay = 0;
    b = start(&spec, &cfg, 3);
    x.n = NB;
    EXPECT_RC(ops->predict_batch(b, &x, 1, logits, &err), FL_E_INVALID, &err);
    ops->destroy(b);
    printf("ok   labels unread; bad shape, oversize batch and EMA-while-off refused; state "
           "unchanged\n");
    tf_checkpoint_free(&before);
    tf_checkpoint_free(&after);
    tf_model_free(&spec);
    return fl_check_status();
}
