/* predict.c — `trainfast predict CKPT DATA...`: the checkpoint (as eval loads it), the data (one
 * packed dataset read by the loader as eval reads it, or image files decoded as the loader
 * would), the backend's predict_batch (the forward of eval without TTA), and the outputs of
 * predict_out.c; the images/s of the whole loop on stderr or in the JSON summary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_clock.h"
#include "fl_file.h"
#include "fl_json.h"
#include "predict.h"
#include "train_internal.h"

typedef struct pctx {
    const tf_predict_opts *o;
    const char *ckpt; /* the checkpoint file used */
    tf_checkpoint ck;
    tf_model_spec spec;
    fl_dataset *ds; /* packed data, else NULL (image files) */
    uint32_t size;  /* packed data of varying sizes: the loader's output size */
    const tf_backend_ops *ops;
    tf_backend *b;
    const char **names; /* class names (spec.num_classes) */
    char *numbers;      /* storage of names made up as "0", "1", ... */
    tf_pred_out out;
    float *logits; /* batch x classes */
    uint64_t n;    /* records predicted */
    double seconds, compute_s;
    fl_progress *bar;
} pctx;

/* The names the checkpoint recorded, else the packed dataset's, else the label numbers. */
static int class_names(pctx *c)
{
    const uint32_t K = (uint32_t)c->ck.num_classes;
    const tf_run_config *rc = &c->ck.cfg;
    c->names = calloc(K, sizeof *c->names);
    c->numbers = malloc((size_t)K * 12);
    if (!c->names || !c->numbers)
        return -ENOMEM;
    for (uint32_t k = 0; k < K; k++) {
        const char *n = NULL;
        if ((rc->present & TF_CFG_CLASSES) && rc->class_count == K)
            n = rc->classes[k];
        else if (c->ds && k < fl_dataset_num_classes(c->ds))
            n = fl_dataset_class_name(c->ds, k);
        if (!n || !n[0]) {
            snprintf(c->numbers + 12 * (size_t)k, 12, "%u", k);
            n = c->numbers + 12 * (size_t)k;
        }
        c->names[k] = n;
    }
    return 0;
}

/* A packed dataset the model can read: same image shape (or varying sizes, which the loader
 * resizes), same channels, classes labelled alike. Else exit 2 naming both sides. */
static int check_packed(pctx *c, const char *data)
{
    const fl_schema *s = fl_dataset_schema(c->ds);
    const tf_checkpoint *ck = &c->ck;
    if (s->channels != (uint32_t)ck->in_c ||
        (s->height && (s->height != (uint32_t)ck->in_h || s->width != (uint32_t)ck->in_w))) {
        char shape[48] = "images of varying size";
        if (s->height)
            snprintf(shape, sizeof shape, "%ux%u images", s->height, s->width);
        fl_cli_error(TOOL, "%s holds %s with %u channel(s) but %s (%s) takes %dx%dx%d (HxWxC)",
                     data, shape, s->channels, c->ckpt, c->spec.name, ck->in_h, ck->in_w, ck->in_c);
        return FL_EXIT_USAGE;
    }
    char why[9000] = "";
    tf_check_classes(ck, c->ckpt, c->ds, data, why, sizeof why);
    if (why[0]) {
        fl_cli_error(TOOL, "%s", why);
        return FL_EXIT_USAGE;
    }
    c->size = s->height ? 0 : (uint32_t)ck->in_h; /* as eval: the loader's centre crop */
    return 0;
}

/* DATA: one directory is a packed dataset; otherwise every argument is an image file. */
static int open_source(pctx *c)
{
    const tf_predict_opts *o = c->o;
    fl_error err;
    struct stat st;
    for (int i = 0; i < o->ndata; i++) {
        if (stat(o->data[i], &st)) {
            fl_cli_error(TOOL, "%s: %s", o->data[i], strerror(errno));
            return FL_EXIT_DATA;
        }
        if (S_ISDIR(st.st_mode) && o->ndata > 1) {
            fl_cli_error(TOOL, "%s is a directory: DATA is one packed dataset, or image files",
                         o->data[i]);
            return FL_EXIT_USAGE;
        }
    }
    if (o->ndata == 1 && S_ISDIR(st.st_mode)) {
        if (fl_dataset_open(o->data[0], &c->ds, &err)) {
            fl_cli_error(TOOL, "%s", err.msg);
            return FL_EXIT_DATA;
        }
        return check_packed(c, o->data[0]);
    }
    return 0;
}

static int make_backend(pctx *c)
{
    const tf_predict_opts *o = c->o;
    fl_error err;
    char notice[400];
    if (tf_pick_backend(o->device, &c->ops, notice, sizeof notice, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    if (notice[0] && !o->json)
        fprintf(stderr, "%s: %s\n", TOOL, notice);
    if (!c->ops->predict_batch) {
        fl_cli_error(TOOL, "the %s backend cannot predict", c->ops->name);
        return FL_EXIT_DATA;
    }
    tf_train_config cfg; /* as eval: bf16 on the GPU, EMA weights when the run kept them */
    tf_train_config_init(&cfg);
    cfg.precision = strcmp(c->ops->name, "cpu") ? TF_BF16 : TF_FP32;
    cfg.max_batch = o->batch;
    cfg.threads = o->threads;
    cfg.cpu_impl = o->cpu_impl;
    cfg.ema_decay = c->ck.has_ema ? 0.5f : 0.0f;
    if (c->ops->create(&c->spec, &cfg, &c->b, &err) || c->ops->set_state(c->b, &c->ck.st, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    c->logits = malloc(sizeof(float) * o->batch * (size_t)c->spec.num_classes);
    if (!c->logits) {
        fl_cli_error(TOOL, "out of memory");
        return FL_EXIT_DATA;
    }
    return 0;
}

/* one batch through the backend and out */
static int predict_rows(pctx *c, const tf_batch *x, const int32_t *labels, char *const *files,
                        fl_error *err)
{
    double t = fl_now_s();
    int rc = c->ops->predict_batch(c->b, x, c->ck.has_ema, c->logits, err);
    c->compute_s += fl_now_s() - t;
    if (!rc)
        rc = tf_pred_out_rows(&c->out, c->n, x->n, c->logits, labels, files, err);
    if (!rc) {
        c->n += x->n;
        fl_progress_update(c->bar, c->n);
    }
    return rc;
}

static int run_packed(pctx *c, fl_error *err)
{
    const tf_predict_opts *o = c->o;
    int quiet = o->json;
    fl_loader_options lo; /* as tf_evaluate: sequential, nothing dropped, centre crop if resized */
    fl_loader_options_init(&lo);
    lo.batch_size = o->batch;
    lo.workers = (uint32_t)(o->workers ? o->workers : 1);
    lo.order = FL_ORDER_SEQUENTIAL;
    lo.drop_last = 0;
    lo.log = tf_loader_log;
    lo.log_user = &quiet;
    if (c->size) {
        lo.out_height = lo.out_width = c->size;
        lo.augment = FL_AUG_CENTER;
    }
    fl_loader *L;
    int rc = fl_loader_create(o->data[0], &lo, &L, err);
    if (rc)
        return rc;
    const uint64_t count = fl_dataset_count(c->ds);
    const uint64_t nb = fl_loader_batches_per_epoch(L);
    for (uint64_t i = 0; i < nb && c->n < count && !rc; i++) {
        fl_batch *fb;
        if ((rc = fl_loader_next(L, &fb, err)))
            break;
        uint32_t n = fb->size;
        if (c->n + n > count) /* the wrapped-around tail of the last batch */
            n = (uint32_t)(count - c->n);
        for (uint32_t k = 0; k < n && !rc; k++)
            if (fb->indices[k] != c->n + k)
                rc = fl_error_set(err, FL_E_INVALID, "loader gave record %llu at position %llu",
                                  (unsigned long long)fb->indices[k],
                                  (unsigned long long)(c->n + k));
        tf_batch x = tf_batch_of(fb, n);
        if (!rc)
            rc = predict_rows(c, &x, fb->labels, NULL, err);
        fl_loader_release(L, fb);
    }
    fl_loader_close(L);
    return rc ? fl_error_prefix(err, "%s", o->data[0]) : 0;
}

static int run_images(pctx *c, fl_error *err)
{
    const tf_predict_opts *o = c->o;
    const tf_checkpoint *ck = &c->ck;
    /* trained on images the loader resized (--size S): its evaluation crop, as eval reads such a
     * dataset; trained on fixed-size data (size 0): the whole image at the model's size */
    int center = !(ck->cfg.present & TF_CFG_SIZE) || ck->cfg.size > 0;
    tf_images *im;
    int rc = tf_images_open(o->data, o->ndata, (uint32_t)ck->in_h, (uint32_t)ck->in_w,
                            (uint32_t)ck->in_c, center, &im, err);
    if (rc)
        return rc;
    uint8_t *pix = malloc((size_t)o->batch * ck->in_h * ck->in_w * ck->in_c);
    int32_t *labels = calloc(o->batch, sizeof *labels); /* not used by predict_batch */
    if (!pix || !labels)
        rc = fl_error_set(err, -ENOMEM, "out of memory");
    while (!rc) {
        uint32_t n;
        if ((rc = tf_images_next(im, pix, o->batch, &n, err)) || n == 0)
            break;
        tf_batch x = {.images = pix,
                      .labels = labels,
                      .n = n,
                      .h = (uint32_t)ck->in_h,
                      .w = (uint32_t)ck->in_w,
                      .c = (uint32_t)ck->in_c};
        rc = predict_rows(c, &x, NULL, o->data + c->n, err);
    }
    free(pix);
    free(labels);
    tf_images_close(im);
    return rc;
}

/* the figures: a JSON summary line, or the top-1/top-5 line (labelled data) on stdout and the
 * rate on stderr */
static int print_summary(pctx *c)
{
    const tf_predict_opts *o = c->o;
    const tf_pred_out *p = &c->out;
    double ips = c->seconds > 0 ? (double)c->n / c->seconds : 0;
    double cps = c->compute_s > 0 ? (double)c->n / c->compute_s : 0;
    double n = c->n ? (double)c->n : 1;
    if (o->json) {
        printf("{\"summary\":true,\"checkpoint\":");
        fl_json_fputs(stdout, c->ckpt, strlen(c->ckpt));
        printf(",\"model\":\"%s\",\"device\":\"%s\",\"batch\":%u,\"images\":%llu,"
               "\"seconds\":%.4f,\"images_per_sec\":%.1f,\"compute_seconds\":%.4f,"
               "\"compute_images_per_sec\":%.1f",
               c->spec.name, c->ops->name, o->batch, (unsigned long long)c->n, c->seconds, ips,
               c->compute_s, cps);
        char desc[256] = "";
        if (c->ops->describe)
            c->ops->describe(c->b, desc, sizeof desc);
        printf(",\"backend\":");
        fl_json_fputs(stdout, desc, strlen(desc));
        if (p->labelled)
            printf(",\"top1\":%.6g,\"top5\":%.6g", (double)p->correct1 / n,
                   (double)p->correct5 / n);
        printf("}\n");
    } else {
        if (p->labelled)
            printf("%s on %s: %llu images, top1 %.2f%%, top5 %.2f%% (no TTA)\n", c->ckpt,
                   o->data[0], (unsigned long long)c->n, 100.0 * (double)p->correct1 / n,
                   100.0 * (double)p->correct5 / n);
        /* the per-image lines first: with 2>&1 the summary must come after them, not amid */
        fflush(stdout);
        fprintf(stderr,
                "%s: predicted %llu images in %.2f s: %.1f images/s (%s, batch %u; "
                "the model alone %.1f images/s)\n",
                TOOL, (unsigned long long)c->n, c->seconds, ips, c->ops->name, o->batch, cps);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fl_cli_error(TOOL, "cannot write the predictions to stdout: %s", strerror(errno));
        return FL_EXIT_DATA;
    }
    return 0;
}

/* outputs, the loop over the data, the files committed, the summary */
static int run(pctx *c)
{
    const tf_predict_opts *o = c->o;
    fl_error err;
    uint64_t rows = c->ds ? fl_dataset_count(c->ds) : (uint64_t)o->ndata;
    if (class_names(c)) {
        fl_cli_error(TOOL, "out of memory");
        return FL_EXIT_DATA;
    }
    if (tf_pred_out_open(&c->out, o, rows, (uint32_t)c->spec.num_classes,
                         (const char *const *)c->names, c->ds != NULL, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    /* a bar only when the per-record lines go elsewhere than the terminal */
    c->bar = fl_progress_start("predict", rows, "img", isatty(STDOUT_FILENO));
    double t0 = fl_now_s();
    int rc = c->ds ? run_packed(c, &err) : run_images(c, &err);
    c->seconds = fl_now_s() - t0;
    fl_progress_finish(c->bar);
    c->bar = NULL;
    if (!rc)
        rc = tf_pred_out_commit(&c->out, &err);
    if (rc) {
        fflush(stdout);
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    return print_summary(c);
}

/* Refuse an output that would replace an input: the checkpoint itself, an input image, or a
 * file in the packed dataset's folder (its manifest, a shard: a typo would destroy the dataset).
 * Returns 0 or FL_EXIT_USAGE (message printed). */
static int output_refused(const char *opt, const char *out, const char *ckpt, char *const *data,
                          int ndata)
{
    const char *why = NULL, *what = NULL;
    if (out && fl_file_clobbers(out, ckpt))
        why = "is the checkpoint", what = ckpt;
    for (int i = 0; out && i < ndata && !why; i++)
        if (fl_file_clobbers(out, data[i])) {
            struct stat st;
            why = stat(data[i], &st) == 0 && S_ISDIR(st.st_mode) ? "is in the folder of the dataset"
                                                                 : "is the input";
            what = data[i];
        }
    if (!why)
        return 0;
    fl_cli_error(TOOL,
                 "%s %s %s %s: writing it would replace or add to what is read; write it "
                 "elsewhere (nothing was written)",
                 opt, out, why, what);
    return FL_EXIT_USAGE;
}

int tf_predict_main(const tf_predict_opts *o)
{
    pctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.ckpt = o->ckpt;
    c.out.npy_w.fd = c.out.csv_w.fd = -1;
    char latest[4096];
    int status =
        tf_eval_load(&c.ckpt, latest, sizeof latest, "predicting with", o->json, &c.ck, &c.spec);
    if (status)
        return status;
    status = output_refused("--logits", o->logits_path, c.ckpt, o->data, o->ndata);
    if (!status)
        status = output_refused("--csv", o->csv_path, c.ckpt, o->data, o->ndata);
    if (!status)
        status = open_source(&c);
    if (!status)
        status = make_backend(&c);
    if (!status)
        status = run(&c);
    tf_pred_out_close(&c.out);
    if (c.b)
        c.ops->destroy(c.b);
    if (c.ds)
        fl_dataset_close(c.ds);
    free(c.logits);
    free(c.names);
    free(c.numbers);
    tf_model_free(&c.spec);
    tf_checkpoint_free(&c.ck);
    return status;
}
