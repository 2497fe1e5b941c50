/* inproc.h — the in-process trainer tests' fixture (test_train_inprocess, test_checkpoint): a
 * separable synthetic task of 8x8 gray images in batches of 16, a CPU backend started from
 * tf_model_init's weights, training over a range of step numbers (each step's batch is a function
 * of its number), snapshots of the backend's state compared bit for bit, and the programs' common
 * start (temp dir, model) and end. */
#ifndef TF_TEST_INPROC_H
#define TF_TEST_INPROC_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "checkpoint.h"
#include "fl_check.h"
#include "fl_dataset.h"
#include "model.h"

#define H  8
#define W  8
#define NB 16

/* class 0: bright top half; class 1: bright bottom half; plus deterministic noise */
static void make_batch(uint64_t step, uint8_t *img, int32_t *lab, uint64_t *idx)
{
    uint64_t s = step * 7919 + 13;
    for (int n = 0; n < NB; n++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int y = (int)((s >> 33) & 1);
        lab[n] = y;
        idx[n] = step * NB + (uint64_t)n;
        for (int i = 0; i < H * W; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int top = i < H * W / 2;
            int base = (top ^ y) ? 170 : 60;
            img[n * H * W + i] = (uint8_t)(base + (int)((s >> 40) % 60) - 30);
        }
    }
}

static const tf_backend_ops *ops; /* tf_backend_cpu(), set by main */

static tf_backend *start(const tf_model_spec *spec, const tf_train_config *cfg, uint64_t seed)
{
    tf_backend *b;
    fl_error err;
    if (ops->create(spec, cfg, &b, &err)) {
        printf("create failed: %s\n", err.msg);
        exit(1);
    }
    tf_checkpoint ck;
    tf_checkpoint_alloc(&ck, spec->param_count, spec->stat_count, 0);
    tf_model_init(spec, seed, ck.st.params, ck.st.stats);
    if (ops->set_state(b, &ck.st, &err)) {
        printf("set_state failed: %s\n", err.msg);
        exit(1);
    }
    tf_checkpoint_free(&ck);
    return b;
}

static void train(tf_backend *b, uint64_t from, uint64_t to, double *last_loss, uint32_t *correct)
{
    uint8_t img[NB * H * W];
    int32_t lab[NB];
    uint64_t idx[NB];
    for (uint64_t s = from; s < to; s++) {
        make_batch(s, img, lab, idx);
        tf_batch x = {.images = img,
                      .labels = lab,
                      .indices = idx,
                      .epoch = s / 10,
                      .n = NB,
                      .h = H,
                      .w = W,
                      .c = 1};
        tf_step_result r;
        fl_error err;
        if (ops->train_step(b, &x, 0.05f, &r, &err)) {
            printf("train_step: %s\n", err.msg);
            exit(1);
        }
        if (last_loss)
            *last_loss = r.loss;
        if (correct)
            *correct = r.correct;
    }
}

static void snapshot(tf_backend *b, const tf_model_spec *spec, int ema, tf_checkpoint *ck)
{
    fl_error err;
    CHECK(tf_checkpoint_for_model(ck, spec, NULL, ema) == 0); /* as trainfast fills its own */
    if (ops->get_state(b, &ck->st, &err)) {
        printf("get_state: %s\n", err.msg);
        exit(1);
    }
}

static int same_state(const tf_checkpoint *a, const tf_checkpoint *b)
{
    size_t n = (size_t)(3 * a->param_count + a->stat_count +
                        (a->has_ema ? a->param_count + a->stat_count : 0));
    return a->param_count == b->param_count && a->stat_count == b->stat_count &&
           memcmp(a->storage, b->storage, n * sizeof(float)) == 0 && a->st.step == b->st.step &&
           a->st.micro_step == b->st.micro_step && a->st.accum_count == b->st.accum_count;
}

/* The start of both programs: line-buffered stdout, the CPU backend in `ops`, a fresh directory
 * $TMPDIR/<tag>_XXXXXX (/tmp without TMPDIR) in dir (n bytes), and the fastcnn (width 4) model of
 * the task in *spec. Returns 0, or 1 after printing why. */
static inline int inproc_begin(const char *tag, char *dir, size_t n, tf_model_spec *spec)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ops = tf_backend_cpu();
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, n, "%s/%s_XXXXXX", tmp, tag);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    fl_error err;
    tf_model_options mo = {.width = 4};
    if (tf_model_build("fastcnn", 1, H, W, 2, &mo, spec, &err)) {
        printf("build: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* The end of both programs: frees spec, removes dir, prints PASS or FAILED; returns the exit
 * status. */
static inline int inproc_end(const char *dir, tf_model_spec *spec)
{
    tf_model_free(spec);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", dir);
    printf(fl_check_failures ? "FAILED\n" : "PASS\n");
    return fl_check_status();
}

#endif
