/* test_train_inprocess.c — the CPU backend end to end without files of data: a tiny model learns a
 * separable synthetic task to 100%; checkpoint save -> load is bit-exact; training N steps equals
 * training k steps, checkpointing, destroying the backend, resuming from the file and training
 * N - k more (bit-identical params, momentum, stats, EMA), also with --accum and EMA; damaged and
 * truncated checkpoints give clear errors and --resume falls back to the previous good one. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "checkpoint.h"
#include "fl_dataset.h"
#include "model.h"

#define H 8
#define W 8
#define NB 16

static int g_fail;
#define CHECK(c, ...)                                                                             \
    do {                                                                                          \
        if (!(c)) {                                                                               \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                           \
            printf(__VA_ARGS__);                                                                  \
            printf("\n");                                                                         \
            g_fail = 1;                                                                           \
        }                                                                                         \
    } while (0)

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

static const tf_backend_ops *ops;

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
        tf_batch x = {.images = img, .labels = lab, .indices = idx, .epoch = s / 10, .n = NB,
                      .h = H, .w = W, .c = 1};
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
    tf_checkpoint_alloc(ck, spec->param_count, spec->stat_count, ema);
    if (ops->get_state(b, &ck->st, &err)) {
        printf("get_state: %s\n", err.msg);
        exit(1);
    }
    snprintf(ck->model, sizeof ck->model, "%s", spec->name);
    ck->spec_id = spec->spec_id;
    ck->in_c = spec->in_c;
    ck->in_h = spec->in_h;
    ck->in_w = spec->in_w;
    ck->num_classes = spec->num_classes;
}

static int same_state(const tf_checkpoint *a, const tf_checkpoint *b)
{
    size_t n = (size_t)(3 * a->param_count + a->stat_count +
                        (a->has_ema ? a->param_count + a->stat_count : 0));
    return a->param_count == b->param_count && a->stat_count == b->stat_count &&
           memcmp(a->storage, b->storage, n * sizeof(float)) == 0 && a->st.step == b->st.step &&
           a->st.micro_step == b->st.micro_step && a->st.accum_count == b->st.accum_count;
}

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
    CHECK(tf_checkpoint_save(dir, &mid, path, sizeof path, &err) == 0, "save: %s", err.msg);
    tf_checkpoint_free(&mid);
    tf_checkpoint back;
    CHECK(tf_checkpoint_load_latest(dir, &back, NULL, 0, NULL, 0, &err) == 0, "load: %s",
          err.msg);
    CHECK(back.batch == K, "position %llu", (unsigned long long)back.batch);
    tf_backend *c;
    ops->create(spec, &cfg, &c, &err);
    CHECK(ops->set_state(c, &back.st, &err) == 0, "set_state: %s", err.msg);
    train(c, back.batch, N, NULL, NULL);
    tf_checkpoint resumed;
    snapshot(c, spec, ema > 0, &resumed);
    ops->destroy(c);
    CHECK(same_state(&full, &resumed),
          "resume (accum %d, ema %g, threads %d): state differs from the uninterrupted run", accum,
          ema, threads);
    if (!g_fail)
        printf("ok   resume after %llu of %llu steps is bit-identical (accum %d, ema %g, %d threads)\n",
               (unsigned long long)K, (unsigned long long)N, accum, ema, threads);
    tf_checkpoint_free(&full);
    tf_checkpoint_free(&back);
    tf_checkpoint_free(&resumed);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ops = tf_backend_cpu();
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tf_inproc_XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    fl_error err;
    tf_model_spec spec;
    tf_model_options mo = {.width = 4};
    if (tf_model_build("fastcnn", 1, H, W, 2, &mo, &spec, &err)) {
        printf("build: %s\n", err.msg);
        return 1;
    }
    /* a model too small for its input is refused with a reason */
    tf_model_spec bad;
    CHECK(tf_model_build("fastcnn", 1, 4, 4, 10, NULL, &bad, &err) == FL_E_INVALID &&
              strstr(err.msg, "too small"),
          "fastcnn on 4x4: %s", err.msg);
    CHECK(tf_model_build("vgg", 3, 32, 32, 10, NULL, &bad, &err) == FL_E_INVALID &&
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
            CHECK(ops->eval_batch(b, &x, s & 1, 0, &r, &err) == 0, "eval: %s", err.msg);
            correct += r.correct1;
            total += r.n;
        }
        CHECK(correct == total, "learned %u/%u (loss %.3f -> %.3f)", correct, total, loss0, loss);
        CHECK(loss < loss0 * 0.5, "loss did not fall: %.3f -> %.3f", loss0, loss);
        printf("ok   tiny fastcnn learns the separable task: %u/%u held-out, loss %.3f -> %.4f\n",
               correct, total, loss0, loss);
        /* bad input is refused */
        int32_t badlab[NB] = {0};
        badlab[3] = 7;
        tf_batch x = {.images = img, .labels = badlab, .n = NB, .h = H, .w = W, .c = 1};
        tf_step_result r;
        CHECK(ops->train_step(b, &x, 0.1f, &r, &err) == FL_E_LABEL && strstr(err.msg, "sample 3"),
              "bad label: %s", err.msg);
        x.labels = lab;
        x.h = 9;
        CHECK(ops->train_step(b, &x, 0.1f, &r, &err) == FL_E_INVALID, "bad shape accepted");

        /* 2. checkpoint identity: serialise, parse, compare every byte of state */
        tf_checkpoint a, c;
        snapshot(b, &spec, 0, &a);
        a.epoch = 3;
        a.batch = 17;
        a.seed = 42;
        const char *cls[] = {"zero", "one", "two"};
        a.cfg.present = TF_CFG_ALL;
        a.cfg.epochs = 5;
        a.cfg.lr = 0.1f;
        a.cfg.cosine = 1;
        snprintf(a.cfg.model, sizeof a.cfg.model, "fastcnn");
        CHECK(tf_run_config_set_strings(&a.cfg, "/data/x", "dataset_id 00ff", cls, 3) == 0,
              "config strings");
        uint8_t *buf;
        size_t len;
        CHECK(tf_checkpoint_serialize(&a, &buf, &len) == 0, "serialize");
        CHECK(tf_checkpoint_parse(buf, len, "mem", &c, &err) == 0, "parse: %s", err.msg);
        CHECK(same_state(&a, &c) && c.epoch == 3 && c.batch == 17 && c.seed == 42 &&
                  c.spec_id == spec.spec_id && c.version == TF_CKPT_VERSION &&
                  c.cfg.present == TF_CFG_ALL && c.cfg.epochs == 5 && c.cfg.lr == 0.1f &&
                  c.cfg.cosine == 1 && !strcmp(c.cfg.model, "fastcnn") &&
                  !strcmp(c.cfg.data, "/data/x") && !strcmp(c.cfg.data_id, "dataset_id 00ff") &&
                  c.cfg.class_count == 3 && !strcmp(c.cfg.classes[2], "two"),
              "checkpoint round trip differs");
        tf_checkpoint_free(&c);
        /* 3. damage: flipped byte, truncation, bad magic, other version */
        buf[len / 2] ^= 0x40;
        CHECK(tf_checkpoint_parse(buf, len, "ck.tfc", &c, &err) == FL_E_CHECKSUM &&
                  strstr(err.msg, "ck.tfc") && strstr(err.msg, "checksum"),
              "flipped byte: %d %s", err.code, err.msg);
        buf[len / 2] ^= 0x40;
        CHECK(tf_checkpoint_parse(buf, len - 100, "ck.tfc", &c, &err) == FL_E_TRUNCATED &&
                  strstr(err.msg, "truncated"),
              "truncated: %s", err.msg);
        CHECK(tf_checkpoint_parse(buf, 10, "ck.tfc", &c, &err) == FL_E_FORMAT, "tiny: %s", err.msg);
        buf[8] = 9;
        CHECK(tf_checkpoint_parse(buf, len, "ck.tfc", &c, &err) == FL_E_VERSION &&
                  strstr(err.msg, "version 9"),
              "version: %s", err.msg);
        buf[8] = (uint8_t)TF_CKPT_VERSION;
        buf[0] = 'X';
        CHECK(tf_checkpoint_parse(buf, len, "ck.tfc", &c, &err) == FL_E_FORMAT &&
                  strstr(err.msg, "magic"),
              "magic: %s", err.msg);
        buf[0] = 'T';
        /* 3b. format version 1 (config as JSON text) still loads into the typed fields, and
         * writes back byte for byte; a version 2 config whose strings do not fit is refused */
        {
            const char *js = "{\"epochs\":3,\"lr\":0.25,\"schedule\":\"cosine\",\"batch\":16,"
                             "\"classes\":[\"a\",\"b\"]}";
            uint64_t clen;
            uint32_t hb;
            memcpy(&hb, buf + 12, 4);
            memcpy(&clen, buf + hb - 8, 8); /* config_len ends the header */
            const size_t arr_end = len - 4 - (size_t)clen, l1 = arr_end + strlen(js) + 4;
            uint8_t *v1 = malloc(l1);
            memcpy(v1, buf, arr_end);
            memcpy(v1 + arr_end, js, strlen(js));
            v1[8] = 1;
            clen = strlen(js);
            memcpy(v1 + hb - 8, &clen, 8);
            uint32_t crc = fl_crc32c(0, v1, l1 - 4);
            memcpy(v1 + l1 - 4, &crc, 4);
            CHECK(tf_checkpoint_parse(v1, l1, "v1.tfc", &c, &err) == 0, "v1: %s", err.msg);
            CHECK(c.version == 1 && c.cfg.present == (TF_CFG_EPOCHS | TF_CFG_LR | TF_CFG_SCHEDULE |
                                                      TF_CFG_BATCH | TF_CFG_CLASSES) &&
                      c.cfg.epochs == 3 && c.cfg.lr == 0.25f && c.cfg.cosine == 1 &&
                      c.cfg.batch == 16 && c.cfg.class_count == 2 &&
                      !strcmp(c.cfg.classes[1], "b") && same_state(&a, &c),
                  "v1 config read as %#x", c.cfg.present);
            uint8_t *again;
            size_t alen;
            CHECK(tf_checkpoint_serialize(&c, &again, &alen) == 0 && alen == l1 &&
                      !memcmp(again, v1, l1),
                  "v1 does not write back byte for byte");
            free(again);
            tf_checkpoint_free(&c);
            free(v1);
            printf("ok   a version 1 checkpoint loads (its JSON config as typed fields) and "
                   "writes back unchanged\n");
            /* a class name's length pointing past the section */
            buf[len - 4 - 3 - 4] = 0x7f; /* the low byte of the length of "two" */
            crc = fl_crc32c(0, buf, len - 4);
            memcpy(buf + len - 4, &crc, 4);
            CHECK(tf_checkpoint_parse(buf, len, "ck.tfc", &c, &err) == FL_E_FORMAT &&
                      strstr(err.msg, "config"),
                  "bad config: %d %s", err.code, err.msg);
        }
        free(buf);
        /* 4. a torn newest checkpoint is skipped by load_latest */
        char d2[600], path[4096], skipped[2048];
        snprintf(d2, sizeof d2, "%s/torn", dir);
        a.st.micro_step = 10;
        CHECK(tf_checkpoint_save(d2, &a, path, sizeof path, &err) == 0, "save: %s", err.msg);
        char stale[700];
        snprintf(stale, sizeof stale, "%s/ckpt-00000015.tfc.tmp", d2);
        FILE *sf = fopen(stale, "w");
        if (sf)
            fclose(sf);
        a.st.micro_step = 20;
        CHECK(tf_checkpoint_save(d2, &a, path, sizeof path, &err) == 0, "save: %s", err.msg);
        CHECK(access(stale, F_OK) != 0, "stale .tmp of a killed write not removed");
        CHECK(truncate(path, 1000) == 0, "truncate");
        CHECK(tf_checkpoint_load_latest(d2, &c, path, sizeof path, skipped, sizeof skipped,
                                        &err) == 0 && c.st.micro_step == 10 &&
                  strstr(skipped, "ckpt-00000020.tfc") && strstr(skipped, "truncated"),
              "fallback: %s / %s", path, skipped);
        tf_checkpoint_free(&c);
        char d3[600];
        snprintf(d3, sizeof d3, "%s/empty", dir);
        mkdir(d3, 0777);
        CHECK(tf_checkpoint_load_latest(d3, &c, NULL, 0, NULL, 0, &err) == -ENOENT &&
                  strstr(err.msg, "no valid checkpoint"),
              "empty dir: %s", err.msg);
        tf_checkpoint_free(&a);
        ops->destroy(b);
        if (!g_fail)
            printf("ok   checkpoint round trip exact; damaged/truncated/version/magic errors clear; "
                   "torn newest skipped\n");
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
    tf_model_free(&spec);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", dir);
    printf(g_fail ? "FAILED\n" : "PASS\n");
    return g_fail;
}
