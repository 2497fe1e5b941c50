/* train_config.c — what defines a run: the options a checkpoint records (tf_run_config,
 * checkpoint.h) and the comparison that makes --resume refuse a run that differs.
 *
 * A checkpoint continues only the run that wrote it: every option in KEYS below changes the
 * weights, the batches or the schedule, so --resume refuses (exit 2) when one differs from the
 * checkpoint's config. Model, width, residual, gelu and seed come from the checkpoint header
 * (train_restore.c); the global batch is checked where the batch is chosen. Options that may
 * change on resume (they change no number the run computes, or only where it runs): --val, --log,
 * --json, --quiet, --threads, --workers, --device, --precision, --checkpoint, --checkpoint-every,
 * --no-tta, --sync-bn, the number of processes (same global batch). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_dataset.h"
#include "fl_json.h"
#include "train_internal.h"

/* between a dataset identity's dataset_id and its content digest */
#define TF_CONTENT_SEP "; content "

/* The records' identity apart from the dataset id a pack draws at random: the inputs digest
 * packdata stores in the options (names, sizes, mtimes or pixel CRCs of every input) and a
 * CRC32C over the record count, classes, schema, fields, part and every other option (not
 * "source", which is the path as typed). Two packs of the same inputs with the same options
 * hold the same records. "" when the manifest has no inputs digest. */
static void content_digest(const char *mj, const fl_jnode *root, char *out, size_t cap)
{
    static const char *const top[] = {"records", "classes", "schema", "fields", "part"};
    const fl_jnode *opt = fl_jget(root, "options");
    const fl_jnode *sha = fl_jget(fl_jget(opt, "inputs"), "sha256");
    out[0] = 0;
    if (!sha || sha->type != FL_J_STRING || sha->str_len < 32)
        return;
    uint32_t c = 0;
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
        const fl_jnode *v = fl_jget(root, top[i]);
        if (v)
            c = fl_crc32c(c, mj + v->src_begin, v->src_end - v->src_begin);
    }
    for (const fl_jnode *m = opt->child; m; m = m->next)
        if (strcmp(m->key, "source")) {
            c = fl_crc32c(c, m->key, strlen(m->key));
            c = fl_crc32c(c, mj + m->src_begin, m->src_end - m->src_begin);
        }
    snprintf(out, cap, "%.32s-%08x", sha->str, c);
}

void tf_dataset_identity(const fl_dataset *ds, char *out, size_t cap)
{
    const char *mj = fl_dataset_manifest_json(ds);
    size_t ml = mj ? strlen(mj) : 0;
    fl_jdoc *doc;
    fl_error e;
    if (ml && fl_jparse(mj, ml, "manifest.json", &doc, &e) == 0) {
        const fl_jnode *id = fl_jget(fl_jroot(doc), "dataset_id");
        if (id && id->type == FL_J_STRING && id->str_len) {
            char content[64];
            content_digest(mj, fl_jroot(doc), content, sizeof content);
            snprintf(out, cap, "dataset_id %s%s%s", id->str, content[0] ? TF_CONTENT_SEP : "",
                     content);
            fl_jfree(doc);
            return;
        }
        fl_jfree(doc);
    }
    snprintf(out, cap, "%llu records, %u classes, manifest crc32c %08x",
             (unsigned long long)fl_dataset_count(ds), fl_dataset_num_classes(ds),
             ml ? fl_crc32c(0, mj, ml) : 0u);
}

int tf_run_config_of(const tf_run *r, const fl_dataset *ds, tf_run_config *c)
{
    const tf_options *o = r->o;
    tf_run_config_free(c);
    c->present = TF_CFG_ALL;
    c->world = (uint32_t)r->D->world;
    c->batch = r->batch;
    c->pad_tail = !r->lo.drop_last;
    c->epochs = r->epochs;
    c->accum = (uint32_t)o->accum;
    c->lr = o->lr;
    c->wd = o->wd;
    c->momentum = o->momentum;
    c->label_smoothing = o->label_smoothing;
    c->warmup_epochs = o->warmup_epochs;
    c->ema = o->ema;
    c->nesterov = (uint32_t)o->nesterov;
    c->cosine = (uint32_t)o->cosine;
    c->crop_pad = (uint32_t)(o->crop_pad >= 0 ? o->crop_pad : 0);
    c->flip = (uint32_t)o->flip;
    c->size = r->size;
    snprintf(c->model, sizeof c->model, "%s", o->model);
    snprintf(c->device, sizeof c->device, "%s", r->ops->name);
    /* the classes in label order, so that eval can check a dataset labels them alike */
    const uint32_t n = fl_dataset_num_classes(ds);
    const char **names = tf_class_names(ds, n);
    int rc = names ? tf_run_config_set_strings(c, o->data, r->data_id, names, n) : -1;
    free((void *)names);
    return rc;
}

/* the options compared, in the order a difference is reported */
enum { K_U32, K_F32, K_SCHEDULE, K_DATA_ID };
static const struct run_key {
    uint32_t bit;
    const char *opt; /* the option that sets it, as the user writes it */
    int kind;
    size_t off; /* of the field in tf_run_config */
} KEYS[] = {
    {TF_CFG_EPOCHS, "--epochs", K_U32, offsetof(tf_run_config, epochs)},
    {TF_CFG_ACCUM, "--accum", K_U32, offsetof(tf_run_config, accum)},
    {TF_CFG_LR, "--lr", K_F32, offsetof(tf_run_config, lr)},
    {TF_CFG_WD, "--wd", K_F32, offsetof(tf_run_config, wd)},
    {TF_CFG_MOMENTUM, "--momentum", K_F32, offsetof(tf_run_config, momentum)},
    {TF_CFG_NESTEROV, "--no-nesterov", K_U32, offsetof(tf_run_config, nesterov)},
    {TF_CFG_LABEL_SMOOTHING, "--label-smoothing", K_F32, offsetof(tf_run_config, label_smoothing)},
    {TF_CFG_SCHEDULE, "--schedule", K_SCHEDULE, offsetof(tf_run_config, cosine)},
    {TF_CFG_WARMUP, "--warmup", K_F32, offsetof(tf_run_config, warmup_epochs)},
    {TF_CFG_EMA, "--ema", K_F32, offsetof(tf_run_config, ema)},
    {TF_CFG_CROP_PAD, "--crop-pad", K_U32, offsetof(tf_run_config, crop_pad)},
    {TF_CFG_FLIP, "--no-flip", K_U32, offsetof(tf_run_config, flip)},
    {TF_CFG_SIZE, "--size", K_U32, offsetof(tf_run_config, size)},
    {TF_CFG_DATA_ID, "--data", K_DATA_ID, offsetof(tf_run_config, data_id)},
};

/* one key of a config as text (floats with %g); 1 when a and b hold the same value */
static int key_text(const struct run_key *k, const tf_run_config *a, const tf_run_config *b,
                    char *ta, char *tb, size_t cap)
{
    const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
    if (k->kind == K_U32 || k->kind == K_SCHEDULE) {
        uint32_t ua, ub;
        memcpy(&ua, pa, 4);
        memcpy(&ub, pb, 4);
        if (k->kind == K_SCHEDULE) {
            snprintf(ta, cap, "%s", ua ? "cosine" : "linear");
            snprintf(tb, cap, "%s", ub ? "cosine" : "linear");
        } else {
            snprintf(ta, cap, "%u", ua);
            snprintf(tb, cap, "%u", ub);
        }
        return ua == ub;
    }
    if (k->kind == K_F32) {
        float fa, fb;
        memcpy(&fa, pa, 4);
        memcpy(&fb, pb, 4);
        snprintf(ta, cap, "%g", (double)fa);
        snprintf(tb, cap, "%g", (double)fb);
        return fa == fb;
    }
    const char *sa = *(char *const *)pa, *sb = *(char *const *)pb;
    snprintf(ta, cap, "%s", sa ? sa : "");
    snprintf(tb, cap, "%s", sb ? sb : "");
    return !strcmp(ta, tb);
}

/* Same data? The same dataset_id, or (a re-pack: pack --force gives a new id) the same content
 * digest. An identity written before the digest existed is its dataset_id alone. Sets *repacked
 * when only the digests match. */
static int same_data(const char *now, const char *was, int *repacked)
{
    const char *cn = strstr(now, TF_CONTENT_SEP), *cw = strstr(was, TF_CONTENT_SEP);
    size_t ln = cn ? (size_t)(cn - now) : strlen(now), lw = cw ? (size_t)(cw - was) : strlen(was);
    *repacked = 0;
    if (ln == lw && !memcmp(now, was, ln))
        return 1;
    if (cn && cw && !strcmp(cn, cw) && !strncmp(now, "dataset_id ", 11) &&
        !strncmp(was, "dataset_id ", 11)) {
        *repacked = 1;
        return 1;
    }
    return 0;
}

/* an identity as a message shows it: without the content digest */
static void data_id_text(const char *id, char *out, size_t cap)
{
    const char *c = strstr(id, TF_CONTENT_SEP);
    snprintf(out, cap, "%.*s", c ? (int)(c - id) : (int)strlen(id), id);
}

int tf_run_config_differs(const tf_run *r, const tf_run_config *ck, char *msg, size_t cap,
                          char *unchecked, size_t ucap)
{
    tf_run_config now;
    memset(&now, 0, sizeof now);
    const tf_options *o = r->o;
    now.epochs = r->epochs;
    now.accum = (uint32_t)o->accum;
    now.lr = o->lr;
    now.wd = o->wd;
    now.momentum = o->momentum;
    now.nesterov = (uint32_t)o->nesterov;
    now.label_smoothing = o->label_smoothing;
    now.cosine = (uint32_t)o->cosine;
    now.warmup_epochs = o->warmup_epochs;
    now.ema = o->ema;
    now.crop_pad = (uint32_t)(o->crop_pad >= 0 ? o->crop_pad : 0);
    now.flip = (uint32_t)o->flip;
    now.size = r->size;
    now.data_id = (char *)r->data_id;
    unchecked[0] = 0;
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++) {
        const struct run_key *k = &KEYS[i];
        char t_now[256], t_was[256];
        if (!(ck->present & k->bit)) {
            size_t l = strlen(unchecked);
            snprintf(unchecked + l, ucap - l, "%s%s", l ? ", " : "", k->opt);
            continue;
        }
        if (k->kind == K_DATA_ID) {
            int repacked;
            const char *was = ck->data_id ? ck->data_id : "";
            data_id_text(r->data_id, t_now, sizeof t_now);
            data_id_text(was, t_was, sizeof t_was);
            if (same_data(r->data_id, was, &repacked)) {
                if (repacked && r->D->rank == 0)
                    fprintf(stderr,
                            "%s: note: --data %s was re-packed since the checkpoint (its "
                            "%s, now %s) from the same inputs with the same options: the same "
                            "records; resuming\n",
                            TOOL, o->data, t_was, t_now);
                continue;
            }
            snprintf(msg, cap,
                     "--data is not the dataset the checkpoint was trained on: this "
                     "run's %s, the checkpoint's %s%s",
                     t_now, t_was,
                     strstr(was, TF_CONTENT_SEP) && strstr(r->data_id, TF_CONTENT_SEP)
                         ? " (a re-pack of other inputs or with other options: other records)"
                         : "");
            return 1;
        }
        if (key_text(k, &now, ck, t_now, t_was, sizeof t_now))
            continue;
        if (k->bit == TF_CFG_NESTEROV || k->bit == TF_CFG_FLIP)
            snprintf(msg, cap, "%s was %s when the checkpoint was written, %s now", k->opt,
                     strcmp(t_was, "0") ? "absent" : "given",
                     strcmp(t_now, "0") ? "absent" : "given");
        else
            snprintf(msg, cap, "%s %s differs from the checkpoint's %s %s", k->opt, t_now, k->opt,
                     t_was);
        return 1;
    }
    return 0;
}
