/* test_checkpoint.c — the trainer's checkpoint format (checkpoint.h) on a CPU backend's state: save
 * -> load is bit-exact with every config field; a flipped byte, truncation, a tiny file, another
 * version and a bad magic give clear errors naming the file; a version 1 checkpoint (config as JSON
 * text) loads into the typed fields and writes back byte for byte; a config whose strings do not
 * fit is refused; a torn newest checkpoint is skipped by load_latest (and stale .tmp files
 * removed); an empty directory has no valid checkpoint. */
#include "inproc.h"

/* format version 1 (config as JSON text) still loads into the typed fields, and
 * writes back byte for byte; a version 2 config whose strings do not fit is refused */
static void v1_case(uint8_t *buf, size_t len, const tf_checkpoint *a)
{
    tf_checkpoint c;
    fl_error err;
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
    EXPECTF(tf_checkpoint_parse(v1, l1, "v1.tfc", &c, &err) == 0, "v1: %s", err.msg);
    EXPECTF(c.version == 1 &&
                c.cfg.present ==
                    (TF_CFG_EPOCHS | TF_CFG_LR | TF_CFG_SCHEDULE | TF_CFG_BATCH | TF_CFG_CLASSES) &&
                c.cfg.epochs == 3 && c.cfg.lr == 0.25f && c.cfg.cosine == 1 && c.cfg.batch == 16 &&
                c.cfg.class_count == 2 && !strcmp(c.cfg.classes[1], "b") && same_state(a, &c),
            "v1 config read as %#x", c.cfg.present);
    uint8_t *again;
    size_t alen;
    EXPECTF(tf_checkpoint_serialize(&c, &again, &alen) == 0 && alen == l1 && !memcmp(again, v1, l1),
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
    EXPECTF(tf_checkpoint_parse(buf, len, "ck.tfc", &c, &err) == FL_E_FORMAT &&
                strstr(err.msg, "config"),
            "bad config: %d %s", err.code, err.msg);
}

int main(void)
{
    char dir[512];
    tf_model_spec spec;
    if (inproc_begin("tf_ckpt", dir, sizeof dir, &spec))
        return 1;
    fl_error err;
    {
        /* a backend a few steps into training: params, momentum and stats all non-trivial */
        tf_train_config cfg;
        tf_train_config_init(&cfg);
        cfg.max_batch = NB;
        tf_backend *b = start(&spec, &cfg, 1);
        train(b, 0, 5, NULL, NULL);

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
        EXPECTF(tf_run_config_set_strings(&a.cfg, "/data/x", "dataset_id 00ff", cls, 3) == 0,
                "config strings");
        uint8_t *buf;
        size_t len;
        EXPECTF(tf_checkpoint_serialize(&a, &buf, &len) == 0, "serialize");
        EXPECTF(tf_checkpoint_parse(buf, len, "mem", &c, &err) == 0, "parse: %s", err.msg);
        EXPECTF(same_state(&a, &c) && c.epoch == 3 && c.batch == 17 && c.seed == 42 &&
                    c.spec_id == spec.spec_id && c.version == TF_CKPT_VERSION &&
                    c.cfg.present == TF_CFG_ALL && c.cfg.epochs == 5 && c.cfg.lr == 0.1f &&
                    c.cfg.cosine == 1 && !strcmp(c.cfg.model, "fastcnn") &&
                    !strcmp(c.cfg.data, "/data/x") && !strcmp(c.cfg.data_id, "dataset_id 00ff") &&
                    c.cfg.class_count == 3 && !strcmp(c.cfg.classes[2], "two"),
                "checkpoint round trip differs");
        tf_checkpoint_free(&c);
        /* 3. damage: flipped byte, truncation, bad magic, other version */
        buf[len / 2] ^= 0x40;
        EXPECTF(tf_checkpoint_parse(buf, len, "ck.tfc", &c, &err) == FL_E_CHECKSUM &&
                    strstr(err.msg, "ck.tfc") && strstr(err.msg, "checksum"),
                "flipped byte: %d %s", err.code, err.msg);
        buf[len / 2] ^= 0x40;
        EXPECTF(tf_checkpoint_parse(buf, len - 100, "ck.tfc", &c, &err) == FL_E_TRUNCATED &&
                    strstr(err.msg, "truncated"),
                "truncated: %s", err.msg);
        EXPECTF(tf_checkpoint_parse(buf, 10, "ck.tfc", &c, &err) == FL_E_FORMAT, "tiny: %s",
                err.msg);
        buf[8] = 9;
        EXPECTF(tf_checkpoint_parse(buf, len, "ck.tfc", &c, &err) == FL_E_VERSION &&
                    strstr(err.msg, "version 9"),
                "version: %s", err.msg);
        buf[8] = (uint8_t)TF_CKPT_VERSION;
        buf[0] = 'X';
        EXPECTF(tf_checkpoint_parse(buf, len, "ck.tfc", &c, &err) == FL_E_FORMAT &&
                    strstr(err.msg, "magic"),
                "magic: %s", err.msg);
        buf[0] = 'T';
        v1_case(buf, len, &a); /* 3b */
        free(buf);
        /* 4. a torn newest checkpoint is skipped by load_latest */
        char d2[600], path[4096], skipped[2048];
        snprintf(d2, sizeof d2, "%s/torn", dir);
        a.st.micro_step = 10;
        EXPECTF(tf_checkpoint_save(d2, &a, path, sizeof path, &err) == 0, "save: %s", err.msg);
        char stale[700];
        snprintf(stale, sizeof stale, "%s/ckpt-00000015.tfc.tmp", d2);
        FILE *sf = fopen(stale, "w");
        if (sf)
            fclose(sf);
        a.st.micro_step = 20;
        EXPECTF(tf_checkpoint_save(d2, &a, path, sizeof path, &err) == 0, "save: %s", err.msg);
        EXPECTF(access(stale, F_OK) != 0, "stale .tmp of a killed write not removed");
        EXPECTF(truncate(path, 1000) == 0, "truncate");
        EXPECTF(tf_checkpoint_load_latest(d2, &c, path, sizeof path, skipped, sizeof skipped,
                                          &err) == 0 &&
                    c.st.micro_step == 10 && strstr(skipped, "ckpt-00000020.tfc") &&
                    strstr(skipped, "truncated"),
                "fallback: %s / %s", path, skipped);
        tf_checkpoint_free(&c);
        char d3[600];
        snprintf(d3, sizeof d3, "%s/empty", dir);
        mkdir(d3, 0777);
        EXPECTF(tf_checkpoint_load_latest(d3, &c, NULL, 0, NULL, 0, &err) == -ENOENT &&
                    strstr(err.msg, "no valid checkpoint"),
                "empty dir: %s", err.msg);
        tf_checkpoint_free(&a);
        ops->destroy(b);
        if (!fl_check_failures)
            printf(
                "ok   checkpoint round trip exact; damaged/truncated/version/magic errors clear; "
                "torn newest skipped\n");
    }
    return inproc_end(dir, &spec);
}
