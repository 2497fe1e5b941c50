/* checkpoint_config.c — the run's config section of a checkpoint (checkpoint.h): typed fields in
 * version 2, read back from the JSON text of version 1 checkpoints. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "fl_json.h"

enum { FIXED = 124 }; /* bytes before the strings (layout in checkpoint.h) */

int tf_run_config_set_strings(tf_run_config *cfg, const char *data, const char *data_id,
                              const char *const *classes, uint32_t class_count)
{
    free(cfg->data);
    free(cfg->data_id);
    for (uint32_t k = 0; cfg->classes && k < cfg->class_count; k++)
        free(cfg->classes[k]);
    free(cfg->classes);
    cfg->data = strdup(data ? data : "");
    cfg->data_id = strdup(data_id ? data_id : "");
    cfg->classes = calloc(class_count ? class_count : 1, sizeof *cfg->classes);
    cfg->class_count = cfg->classes ? class_count : 0;
    int bad = !cfg->data || !cfg->data_id || !cfg->classes;
    for (uint32_t k = 0; !bad && k < class_count; k++)
        bad = !(cfg->classes[k] = strdup(classes && classes[k] ? classes[k] : ""));
    return bad ? -ENOMEM : 0;
}

void tf_run_config_free(tf_run_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->data);
    free(cfg->data_id);
    for (uint32_t k = 0; cfg->classes && k < cfg->class_count; k++)
        free(cfg->classes[k]);
    free(cfg->classes);
    memset(cfg, 0, sizeof *cfg);
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static void putf(uint8_t *p, float v) { memcpy(p, &v, 4); }
static float getf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

int tf_ckpt_config_encode(const tf_run_config *c, uint8_t *out, size_t *len)
{
    const char *data = c->data ? c->data : "", *id = c->data_id ? c->data_id : "";
    size_t n = FIXED + strlen(data) + strlen(id);
    for (uint32_t k = 0; k < c->class_count; k++)
        n += 4 + strlen(c->classes[k]);
    if (n > ((size_t)1 << 30) || strlen(c->model) >= 32 || strlen(c->device) >= 16)
        return -EINVAL;
    *len = n;
    if (!out)
        return 0;
    memset(out, 0, FIXED);
    const uint32_t u[] = {c->world, c->batch, c->pad_tail, c->epochs, c->accum};
    const float f[] = {c->lr, c->wd, c->momentum, c->label_smoothing, c->warmup_epochs, c->ema};
    const uint32_t v[] = {c->nesterov, c->cosine, c->crop_pad, c->flip, c->size};
    for (int i = 0; i < 5; i++)
        put32(out + 4 * i, u[i]);
    for (int i = 0; i < 6; i++)
        putf(out + 20 + 4 * i, f[i]);
    for (int i = 0; i < 5; i++)
        put32(out + 44 + 4 * i, v[i]);
    memcpy(out + 64, c->model, strlen(c->model));
    memcpy(out + 96, c->device, strlen(c->device));
    put32(out + 112, (uint32_t)strlen(data));
    put32(out + 116, (uint32_t)strlen(id));
    put32(out + 120, c->class_count);
    uint8_t *p = out + FIXED;
    memcpy(p, data, strlen(data));
    p += strlen(data);
    memcpy(p, id, strlen(id));
    p += strlen(id);
    for (uint32_t k = 0; k < c->class_count; k++) {
        put32(p, (uint32_t)strlen(c->classes[k]));
        memcpy(p + 4, c->classes[k], strlen(c->classes[k]));
        p += 4 + strlen(c->classes[k]);
    }
    return 0;
}

/* a string of n bytes at *p (advanced) within end, NUL-free; NULL when it does not fit */
static char *take_string(const uint8_t **p, const uint8_t *end, uint64_t n)
{
    if (n > (uint64_t)(end - *p) || memchr(*p, 0, (size_t)n))
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s) {
        memcpy(s, *p, (size_t)n);
        s[n] = 0;
        *p += n;
    }
    return s;
}

/* a string NUL-padded to n bytes: a NUL at its end, nothing but NULs after the first (so that a
 * file read and written again is the same bytes) */
static int nul_padded(const uint8_t *p, size_t n)
{
    const uint8_t *z = memchr(p, 0, n);
    if (!z)
        return 0;
    for (; z < p + n; z++)
        if (*z)
            return 0;
    return 1;
}

int tf_ckpt_config_decode(const uint8_t *b, size_t len, const char *name, tf_run_config *c,
                          fl_error *err)
{
    memset(c, 0, sizeof *c);
    if (len < FIXED || !nul_padded(b + 64, 32) || !nul_padded(b + 96, 16))
        return fl_error_set(err, FL_E_FORMAT, "%s: bad config section (%zu bytes)", name, len);
    uint32_t *u[] = {&c->world, &c->batch, &c->pad_tail, &c->epochs, &c->accum};
    float *f[] = {&c->lr, &c->wd, &c->momentum, &c->label_smoothing, &c->warmup_epochs, &c->ema};
    uint32_t *v[] = {&c->nesterov, &c->cosine, &c->crop_pad, &c->flip, &c->size};
    for (int i = 0; i < 5; i++)
        *u[i] = get32(b + 4 * i);
    for (int i = 0; i < 6; i++)
        *f[i] = getf(b + 20 + 4 * i);
    for (int i = 0; i < 5; i++)
        *v[i] = get32(b + 44 + 4 * i);
    memcpy(c->model, b + 64, 32);
    memcpy(c->device, b + 96, 16);
    const uint32_t ncls = get32(b + 120);
    const uint8_t *p = b + FIXED, *end = b + len;
    c->data = take_string(&p, end, get32(b + 112));
    c->data_id = c->data ? take_string(&p, end, get32(b + 116)) : NULL;
    int bad = !c->data || !c->data_id || ncls > (uint32_t)(len / 4);
    if (!bad && !(c->classes = calloc(ncls ? ncls : 1, sizeof *c->classes)))
        bad = 1;
    for (uint32_t k = 0; !bad && k < ncls; k++) {
        bad = end - p < 4;
        if (!bad) {
            const uint32_t n = get32(p);
            p += 4;
            bad = !(c->classes[k] = take_string(&p, end, n));
            c->class_count = k + 1; /* owned from here on, for tf_run_config_free */
        }
    }
    if (bad || p != end) {
        tf_run_config_free(c);
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: bad config section (strings do not fit its "
                            "%zu bytes)",
                            name, len);
    }
    c->present = TF_CFG_ALL;
    return 0;
}

/* ---- version 1: the config as JSON text ------------------------------------------------------ */
static int j_u32(const fl_jnode *o, const char *key, uint32_t *out)
{
    const fl_jnode *v = fl_jget(o, key);
    if (!v || v->type != FL_J_NUMBER || !v->is_int || v->ival < 0 || v->ival > UINT32_MAX)
        return 0;
    *out = (uint32_t)v->ival;
    return 1;
}

static int j_f32(const fl_jnode *o, const char *key, float *out)
{
    const fl_jnode *v = fl_jget(o, key);
    if (!v || v->type != FL_J_NUMBER)
        return 0;
    *out = (float)v->dval;
    return 1;
}

static int j_str(const fl_jnode *o, const char *key, char *out, size_t cap)
{
    const fl_jnode *v = fl_jget(o, key);
    if (!v || v->type != FL_J_STRING || strlen(v->str) >= cap)
        return 0;
    memcpy(out, v->str, strlen(v->str) + 1);
    return 1;
}

static void v1_numbers(const fl_jnode *o, tf_run_config *c)
{
    static const struct {
        const char *key;
        uint32_t bit;
        size_t off;
    } U[] = {{"world", TF_CFG_WORLD, offsetof(tf_run_config, world)},
             {"batch", TF_CFG_BATCH, offsetof(tf_run_config, batch)},
             {"pad_tail", TF_CFG_PAD_TAIL, offsetof(tf_run_config, pad_tail)},
             {"epochs", TF_CFG_EPOCHS, offsetof(tf_run_config, epochs)},
             {"accum", TF_CFG_ACCUM, offsetof(tf_run_config, accum)},
             {"nesterov", TF_CFG_NESTEROV, offsetof(tf_run_config, nesterov)},
             {"crop_pad", TF_CFG_CROP_PAD, offsetof(tf_run_config, crop_pad)},
             {"flip", TF_CFG_FLIP, offsetof(tf_run_config, flip)},
             {"size", TF_CFG_SIZE, offsetof(tf_run_config, size)}};
    static const struct {
        const char *key;
        uint32_t bit;
        size_t off;
    } F[] = {{"lr", TF_CFG_LR, offsetof(tf_run_config, lr)},
             {"wd", TF_CFG_WD, offsetof(tf_run_config, wd)},
             {"momentum", TF_CFG_MOMENTUM, offsetof(tf_run_config, momentum)},
             {"label_smoothing", TF_CFG_LABEL_SMOOTHING, offsetof(tf_run_config, label_smoothing)},
             {"warmup_epochs", TF_CFG_WARMUP, offsetof(tf_run_config, warmup_epochs)},
             {"ema", TF_CFG_EMA, offsetof(tf_run_config, ema)}};
    for (size_t i = 0; i < sizeof U / sizeof U[0]; i++)
        if (j_u32(o, U[i].key, (uint32_t *)((char *)c + U[i].off)))
            c->present |= U[i].bit;
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++)
        if (j_f32(o, F[i].key, (float *)((char *)c + F[i].off)))
            c->present |= F[i].bit;
}

int tf_ckpt_config_decode_v1(const char *text, size_t len, const char *name, tf_run_config *c,
                             fl_error *err)
{
    memset(c, 0, sizeof *c);
    if (len == 0)
        return 0; /* no config: nothing can be checked */
    fl_jdoc *doc;
    if (fl_jparse(text, len, name, &doc, err))
        return fl_error_prefix(err, "its config");
    const fl_jnode *o = fl_jroot(doc);
    v1_numbers(o, c);
    char sched[16];
    if (j_str(o, "schedule", sched, sizeof sched) &&
        (!strcmp(sched, "cosine") || !strcmp(sched, "linear"))) {
        c->cosine = !strcmp(sched, "cosine");
        c->present |= TF_CFG_SCHEDULE;
    }
    if (j_str(o, "model", c->model, sizeof c->model))
        c->present |= TF_CFG_MODEL;
    if (j_str(o, "device", c->device, sizeof c->device))
        c->present |= TF_CFG_DEVICE;
    const fl_jnode *d = fl_jget(o, "data"), *id = fl_jget(o, "data_id"),
                   *cl = fl_jget(o, "classes");
    size_t n = cl && cl->type == FL_J_ARRAY ? cl->count : 0;
    const char **names = calloc(n ? n : 1, sizeof *names);
    size_t k = 0;
    for (const fl_jnode *e = n ? cl->child : NULL; names && e; e = e->next)
        names[k++] = e->type == FL_J_STRING ? e->str : "";
    int rc = names ? tf_run_config_set_strings(c, d && d->type == FL_J_STRING ? d->str : "",
                                               id && id->type == FL_J_STRING ? id->str : "", names,
                                               (uint32_t)n)
                   : -ENOMEM;
    free(names);
    c->present |= (d && d->type == FL_J_STRING ? TF_CFG_DATA : 0) |
                  (id && id->type == FL_J_STRING ? TF_CFG_DATA_ID : 0) |
                  (cl && cl->type == FL_J_ARRAY ? TF_CFG_CLASSES : 0);
    fl_jfree(doc);
    if (rc) {
        tf_run_config_free(c);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", name);
    }
    return 0;
}
