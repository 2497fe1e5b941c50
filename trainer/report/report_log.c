/* report_log.c — reads trainfast's JSONL training log back (report_log.h) for `trainfast report`
 * and `train --report`: each line through the project's JSON reader (fl_jparse), every figure
 * type-checked, a malformed line an error naming file:line. The bytes are untrusted (a log may
 * come from anywhere): tests/fuzz/fuzz_trainlog.c runs this parser and the page behind it. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fl_file.h"
#include "report_log.h"

static const char *const EPOCH_KEYS[TF_E_COUNT] = {"epoch",
                                                   "steps",
                                                   "lr",
                                                   "train_loss",
                                                   "train_acc",
                                                   "val_loss",
                                                   "val_top1",
                                                   "val_top5",
                                                   "images_per_sec",
                                                   "data_wait_fraction",
                                                   "epoch_seconds",
                                                   "wall_seconds",
                                                   "compute_seconds",
                                                   "data_wait_seconds",
                                                   "h2d_seconds",
                                                   "eval_seconds",
                                                   "checkpoint_seconds",
                                                   "gpu_utilization",
                                                   "gpu_memory_used_bytes",
                                                   "gpu_memory_total_bytes",
                                                   "cores",
                                                   "compute_threads",
                                                   "decode_workers",
                                                   "decode_cpu_seconds",
                                                   "cpu_seconds",
                                                   "train_wall_seconds"};
static const char *const POINT_KEYS[TF_P_COUNT] = {
    "x", "step", "lr", "loss", "acc", "images_per_sec", "data_wait_fraction"};

const char *tf_log_epoch_key(int which)
{
    return which >= 0 && which < TF_E_COUNT ? EPOCH_KEYS[which] : "";
}

const char *tf_log_point_key(int which)
{
    return which >= 0 && which < TF_P_COUNT ? POINT_KEYS[which] : "";
}

void tf_log_free(tf_log *log)
{
    if (!log)
        return;
    for (size_t i = 0; i < log->n_cfg; i++) {
        free(log->cfg[i].key);
        free(log->cfg[i].value);
    }
    free(log->cfg);
    free(log->ep);
    free(log->pt);
    free(log->name);
    memset(log, 0, sizeof *log);
}

/* grow *arr (elements of `size` bytes) to hold n + 1; 0 or -ENOMEM */
static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    if (nc > SIZE_MAX / size)
        return -ENOMEM;
    void *p = realloc(*arr, nc * size);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = nc;
    return 0;
}

/* figures `keys` of object o into v (NaN when absent or null); 0, or 1 naming the bad key */
static int read_figures(const fl_jnode *o, const char *const *keys, int n, double *v,
                        const char **bad)
{
    for (int k = 0; k < n; k++) {
        const fl_jnode *x = fl_jget(o, keys[k]);
        v[k] = NAN;
        if (!x || x->type == FL_J_NULL)
            continue;
        if (x->type != FL_J_NUMBER) {
            *bad = keys[k];
            return 1;
        }
        v[k] = x->dval;
    }
    return 0;
}

static char *dup_n(const char *s, size_t n)
{
    if (n > 1024)
        n = 1024; /* a table cell, not a payload */
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* the "run" object: its scalar members as text */
static int read_config(const fl_jnode *run, const char *line, tf_log *out)
{
    size_t cap = 0;
    for (const fl_jnode *m = run->child; m && out->n_cfg < TF_LOG_MAX_CFG; m = m->next) {
        if (m->type == FL_J_ARRAY || m->type == FL_J_OBJECT || !m->key)
            continue;
        if (grow((void **)&out->cfg, &cap, out->n_cfg, sizeof *out->cfg))
            return -ENOMEM;
        tf_log_kv *kv = &out->cfg[out->n_cfg];
        kv->key = dup_n(m->key, strlen(m->key));
        kv->value = m->type == FL_J_STRING ? dup_n(m->str, m->str_len)
                                           : dup_n(line + m->src_begin, m->src_end - m->src_begin);
        if (!kv->key || !kv->value) {
            free(kv->key);
            free(kv->value);
            return -ENOMEM;
        }
        out->n_cfg++;
    }
    return 0;
}

typedef struct reader {
    tf_log *out;
    size_t ep_cap, pt_cap;
    const char *what;
    size_t lineno;
    fl_error *err;
} reader;

/* the points of one epoch line */
static int read_points(reader *rd, const fl_jnode *pts)
{
    tf_log *out = rd->out;
    if (pts->type != FL_J_ARRAY)
        return fl_error_set(rd->err, FL_E_FORMAT, "%s:%zu: \"points\" is not an array", rd->what,
                            rd->lineno);
    if (pts->count > TF_LOG_MAX_POINTS)
        return fl_error_set(rd->err, FL_E_FORMAT, "%s:%zu: %zu points (at most %u a line)",
                            rd->what, rd->lineno, pts->count, TF_LOG_MAX_POINTS);
    size_t i = 0;
    for (const fl_jnode *p = pts->child; p; p = p->next, i++) {
        const char *bad = NULL;
        if (p->type != FL_J_OBJECT)
            return fl_error_set(rd->err, FL_E_FORMAT, "%s:%zu: point %zu is not an object",
                                rd->what, rd->lineno, i);
        if (grow((void **)&out->pt, &rd->pt_cap, out->n_pt, sizeof *out->pt))
            return fl_error_set(rd->err, -ENOMEM, "%s: out of memory", rd->what);
        double *v = out->pt[out->n_pt];
        if (read_figures(p, POINT_KEYS, TF_P_COUNT, v, &bad))
            return fl_error_set(rd->err, FL_E_FORMAT, "%s:%zu: point %zu: \"%s\" is not a number",
                                rd->what, rd->lineno, i, bad);
        if (!isfinite(v[TF_P_X]))
            return fl_error_set(rd->err, FL_E_FORMAT, "%s:%zu: point %zu has no \"x\"", rd->what,
                                rd->lineno, i);
        out->n_pt++;
    }
    return 0;
}

/* An epoch number not above the last one: a resumed run wrote it again; keep the later lines. */
static void start_over_at(tf_log *out, double epoch)
{
    while (out->n_ep && out->ep[out->n_ep - 1][TF_E_EPOCH] >= epoch)
        out->n_ep--;
    while (out->n_pt && out->pt[out->n_pt - 1][TF_P_X] > epoch - 1)
        out->n_pt--;
}

/* one non-empty line (len bytes, no newline) */
static int read_line(reader *rd, const char *line, size_t len)
{
    tf_log *out = rd->out;
    char where[600];
    snprintf(where, sizeof where, "%s:%zu", rd->what, rd->lineno);
    if (len > TF_LOG_MAX_LINE)
        return fl_error_set(rd->err, FL_E_FORMAT, "%s: line of %zu bytes (at most %u)", where, len,
                            TF_LOG_MAX_LINE);
    fl_jdoc *doc;
    int rc = fl_jparse(line, len, where, &doc, rd->err);
    if (rc)
        return rc;
    const fl_jnode *root = fl_jroot(doc), *e = fl_jget(root, "epoch");
    const fl_jnode *pts = fl_jget(root, "points"), *run = fl_jget(root, "run");
    const char *bad = NULL;
    if (!root || root->type != FL_J_OBJECT)
        rc = fl_error_set(rd->err, FL_E_FORMAT, "%s: not a JSON object", where);
    else if (!e || e->type != FL_J_NUMBER || !e->is_int || e->ival < 1 || e->ival > 10000000)
        rc = fl_error_set(rd->err, FL_E_FORMAT, "%s: no \"epoch\" number (1..10^7)", where);
    if (rc)
        goto done;
    start_over_at(out, (double)e->ival);
    if (grow((void **)&out->ep, &rd->ep_cap, out->n_ep, sizeof *out->ep)) {
        rc = fl_error_set(rd->err, -ENOMEM, "%s: out of memory", rd->what);
        goto done;
    }
    if (read_figures(root, EPOCH_KEYS, TF_E_COUNT, out->ep[out->n_ep], &bad)) {
        rc = fl_error_set(rd->err, FL_E_FORMAT, "%s: \"%s\" is not a number", where, bad);
        goto done;
    }
    out->n_ep++;
    if (pts && pts->type != FL_J_NULL && (rc = read_points(rd, pts)))
        goto done;
    if (run && run->type == FL_J_OBJECT && !out->cfg && (rc = read_config(run, line, out)))
        rc = fl_error_set(rd->err, rc, "%s: out of memory", rd->what);
done:
    fl_jfree(doc);
    return rc;
}

int tf_log_parse(const char *text, size_t len, const char *what, const char *name, tf_log *out,
                 fl_error *err)
{
    memset(out, 0, sizeof *out);
    reader rd = {.out = out, .what = what, .err = err};
    if (len > TF_LOG_MAX_BYTES)
        return fl_error_set(err, FL_E_TOO_LARGE, "%s: %zu bytes (at most %u)", what, len,
                            TF_LOG_MAX_BYTES);
    out->name = dup_n(name, strlen(name));
    if (!out->name)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", what);
    size_t pos = 0;
    while (pos < len) {
        const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        rd.lineno++;
        size_t t = n;
        while (t && (s[t - 1] == '\r' || s[t - 1] == ' ' || s[t - 1] == '\t'))
            t--;
        size_t b = 0;
        while (b < t && (s[b] == ' ' || s[b] == '\t'))
            b++;
        if (b == t)
            continue;
        int rc = read_line(&rd, s + b, t - b);
        if (rc && !nl && rc == FL_E_FORMAT) {
            out->skipped_lines = 1; /* a line cut short while written */
            break;
        }
        if (rc) {
            tf_log_free(out);
            return rc;
        }
    }
    return 0;
}

int tf_log_load(const char *path, tf_log *out, fl_error *err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    fl_read_step step;
    memset(out, 0, sizeof *out);
    int rc = fl_read_file_at(AT_FDCWD, path, TF_LOG_MAX_BYTES, FL_READ_REGULAR | FL_READ_SHORT_OK,
                             &buf, NULL, &len, &step);
    if (rc) {
        free(buf);
        if (step == FL_READ_TOO_LARGE)
            return fl_error_set(err, FL_E_TOO_LARGE, "%s: larger than %u bytes", path,
                                TF_LOG_MAX_BYTES);
        return fl_error_set(err, rc, "%s: %s", path,
                            step == FL_READ_NOT_REGULAR ? "not a regular file" : strerror(-rc));
    }
    /* the run's name: the file's base name without .jsonl */
    const char *base = strrchr(path, '/');
    base = base && base[1] ? base + 1 : path;
    char name[256];
    snprintf(name, sizeof name, "%s", base);
    size_t nl = strlen(name);
    if (nl > 6 && !strcmp(name + nl - 6, ".jsonl"))
        name[nl - 6] = 0;
    rc = tf_log_parse((const char *)buf, len, path, name, out, err);
    free(buf);
    return rc;
}
