/* train_eval.c — evaluation over a whole dataset (each epoch's and the last of `trainfast train`),
 * the class checks both commands make, and `trainfast eval CKPT DATA`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fl_cli.h"
#include "fl_clock.h"
#include "fl_json.h"
#include "train_internal.h"

void tf_loader_log(void *user, int level, const char *msg)
{
    int quiet = *(int *)user;
    if (!quiet || level > 0)
        fprintf(stderr, "%s: %s%s\n", TOOL, level > 0 ? "warning: " : "", msg);
}

tf_batch tf_batch_of(const fl_batch *fb, uint32_t n)
{
    return (tf_batch){.images = fb->images,
                      .labels = fb->labels,
                      .indices = fb->indices,
                      .epoch = fb->epoch,
                      .n = n,
                      .h = fb->height,
                      .w = fb->width,
                      .c = fb->channels,
                      .device_images = fb->device_images,
                      .device_labels = fb->device_labels,
                      .event = fb->event,
                      .stream = fb->stream};
}

int tf_evaluate(const tf_backend_ops *ops, tf_backend *b, const char *path, uint32_t batch,
                uint32_t size, int tta, int use_ema, int workers, int *quiet, tf_eval_out *out,
                fl_error *err)
{
    double t0 = fl_now_s();
    memset(out, 0, sizeof *out);
    fl_loader_options lo;
    fl_loader_options_init(&lo);
    lo.batch_size = batch;
    lo.workers = (uint32_t)workers;
    lo.order = FL_ORDER_SEQUENTIAL;
    lo.drop_last = 0;
    lo.log = tf_loader_log;
    lo.log_user = quiet;
    if (size) {
        lo.out_height = lo.out_width = size;
        lo.augment = FL_AUG_CENTER;
    }
    fl_loader *L;
    int rc = fl_loader_create(path, &lo, &L, err);
    if (rc)
        return rc;
    const uint64_t count = fl_dataset_count(fl_loader_dataset(L));
    const uint64_t nb = fl_loader_batches_per_epoch(L);
    double loss = 0;
    uint64_t c1 = 0, c5 = 0, seen = 0;
    for (uint64_t i = 0; i < nb && seen < count; i++) {
        fl_batch *fb;
        rc = fl_loader_next(L, &fb, err);
        if (rc)
            break;
        uint32_t n = fb->size;
        if (seen + n > count) /* a wrapped-around tail would count samples twice */
            n = (uint32_t)(count - seen);
        tf_batch x = tf_batch_of(fb, n);
        tf_eval_result r;
        rc = ops->eval_batch(b, &x, tta, use_ema, &r, err);
        fl_loader_release(L, fb);
        if (rc)
            break;
        loss += r.loss_sum;
        c1 += r.correct1;
        c5 += r.correct5;
        seen += r.n;
    }
    fl_loader_close(L);
    if (rc)
        return fl_error_prefix(err, "%s", path);
    out->n = seen;
    out->loss = seen ? loss / (double)seen : 0;
    out->top1 = seen ? (double)c1 / (double)seen : 0;
    out->top5 = seen ? (double)c5 / (double)seen : 0;
    out->seconds = fl_now_s() - t0;
    return 0;
}

const char **tf_class_names(const fl_dataset *ds, uint32_t n)
{
    const char **v = calloc(n ? n : 1, sizeof *v);
    for (uint32_t k = 0; v && k < n; k++) {
        const char *c = fl_dataset_class_name(ds, k);
        v[k] = c ? c : "";
    }
    return v;
}

uint32_t tf_first_class_difference(const char *const *ref, uint32_t nref, const char *const *got,
                                   uint32_t ngot)
{
    for (uint32_t k = 0; k < ngot; k++)
        if (k >= nref || strcmp(ref[k], got[k]))
            return k;
    return UINT32_MAX;
}

/* ---- trainfast eval ----------------------------------------------------------------------- */

/* Scored against the wrong labels, a dataset packed with another class list gives a number that
 * means nothing: compare with the classes the checkpoint was trained on (version 2
 * checkpoints record them; older ones only know their count). The reason goes to why ("" when the
 * data fits). */
void tf_check_classes(const tf_checkpoint *ck, const char *ckpt_path, const fl_dataset *ds,
                      const char *data, char *why, size_t cap)
{
    const uint32_t dn = fl_dataset_num_classes(ds);
    const tf_run_config *c = &ck->cfg;
    if ((c->present & TF_CFG_CLASSES) && c->class_count == (uint32_t)ck->num_classes) {
        const char **got = tf_class_names(ds, dn);
        const char *const *ref = (const char *const *)c->classes;
        uint32_t k = got ? tf_first_class_difference(ref, c->class_count, got, dn) : 0;
        if (!got)
            snprintf(why, cap, "out of memory");
        else if (k != UINT32_MAX)
            snprintf(why, cap,
                     "%s labels its classes differently from the data %s was trained "
                     "on: label %u is '%s' in %s, '%s' in training",
                     data, ckpt_path, k, got[k], data,
                     k < c->class_count ? ref[k] : "(none: more classes)");
        free((void *)got);
    } else if (dn > (uint32_t)ck->num_classes) {
        snprintf(why, cap, "%s has %u classes but %s was trained on %d", data, dn, ckpt_path,
                 ck->num_classes);
    }
}

int tf_eval_load(const char **ckpt_path, char *latest, size_t cap, const char *verb, int json,
                 tf_checkpoint *ck, tf_model_spec *spec)
{
    fl_error err;
    struct stat st;
    if (stat(*ckpt_path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* A --checkpoint DIR: evaluate its newest valid checkpoint, as --resume would use. */
        if (tf_checkpoint_load_latest(*ckpt_path, ck, latest, cap, NULL, 0, &err)) {
            fl_cli_error(TOOL, "%s", err.msg);
            return FL_EXIT_DATA;
        }
        *ckpt_path = latest;
        if (!json && verb)
            fprintf(stderr, "%s: %s %s (newest valid checkpoint)\n", TOOL, verb, *ckpt_path);
    } else if (tf_checkpoint_load(*ckpt_path, ck, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    if (tf_model_build(ck->model, ck->in_c, ck->in_h, ck->in_w, ck->num_classes, &ck->mopt, spec,
                       &err)) {
        fl_cli_error(TOOL, "%s: %s", *ckpt_path, err.msg);
        tf_checkpoint_free(ck);
        return FL_EXIT_DATA;
    }
    if (spec->spec_id != ck->spec_id || spec->param_count != ck->param_count ||
        spec->stat_count != ck->stat_count) {
        fl_cli_error(TOOL, "%s: model %s does not match this build's definition", *ckpt_path,
                     ck->model);
        tf_model_free(spec);
        tf_checkpoint_free(ck);
        return FL_EXIT_DATA;
    }
    memcpy(spec->mean, ck->mean, sizeof spec->mean);
    memcpy(spec->std, ck->std, sizeof spec->std);
    return 0;
}

/* the result line (or JSON object) on stdout */
static int eval_print(const char *ckpt_path, const char *data, const tf_checkpoint *ck,
                      const tf_model_spec *spec, const char *device, const char *backend,
                      const tf_eval_out *ev, int json)
{
    if (json) {
        printf("{\"checkpoint\":");
        fl_json_fputs(stdout, ckpt_path, strlen(ckpt_path));
        printf(",\"model\":\"%s\",\"images\":%llu,\"top1\":%.6g,\"top5\":%.6g,\"loss\":%.6g,"
               "\"epoch\":%llu,\"steps\":%llu,\"device\":\"%s\",\"backend\":",
               spec->name, (unsigned long long)ev->n, ev->top1, ev->top5, ev->loss,
               (unsigned long long)ck->epoch, (unsigned long long)ck->st.step, device);
        fl_json_fputs(stdout, backend, strlen(backend));
        printf(",\"seconds\":%.3f}\n", ev->seconds);
    } else {
        printf("%s on %s: %llu images, top1 %.2f%%, top5 %.2f%%, loss %.4f (%.1f s)\n", ckpt_path,
               data, (unsigned long long)ev->n, 100 * ev->top1, 100 * ev->top5, ev->loss,
               ev->seconds);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fl_cli_error(TOOL, "cannot write the result to stdout: %s", strerror(errno));
        return FL_EXIT_DATA;
    }
    return 0;
}

int tf_eval_main(const char *ckpt_path, const char *data, uint32_t batch, int tta, int json,
                 const char *device, int threads, int cpu_impl)
{
    fl_error err;
    tf_checkpoint ck;
    tf_model_spec spec;
    char latest[4096];
    int status = tf_eval_load(&ckpt_path, latest, sizeof latest, "evaluating", json, &ck, &spec);
    if (status)
        return status;
    const tf_backend_ops *ops;
    tf_backend *b = NULL;
    char notice[400];
    if (tf_pick_backend(device, &ops, notice, sizeof notice, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        status = FL_EXIT_DATA;
        goto out;
    }
    if (notice[0] && !json)
        fprintf(stderr, "%s: %s\n", TOOL, notice);
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.precision = strcmp(ops->name, "cpu") ? TF_BF16 : TF_FP32;
    cfg.max_batch = batch ? batch : 256;
    cfg.threads = threads;
    cfg.cpu_impl = cpu_impl;
    cfg.ema_decay = ck.has_ema ? 0.5f : 0.0f;
    if (ops->create(&spec, &cfg, &b, &err) || ops->set_state(b, &ck.st, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        status = FL_EXIT_DATA;
        goto out;
    }
    fl_dataset *probe;
    if (fl_dataset_open(data, &probe, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        status = FL_EXIT_DATA;
        goto out;
    }
    uint32_t size = fl_dataset_schema(probe)->height ? 0 : (uint32_t)ck.in_h;
    char why[9000] = "";
    tf_check_classes(&ck, ckpt_path, probe, data, why, sizeof why);
    fl_dataset_close(probe);
    int quiet = json;
    tf_eval_out ev;
    if (why[0]) {
        fl_cli_error(TOOL, "%s", why);
        status = FL_EXIT_USAGE;
    } else if (tf_evaluate(ops, b, data, cfg.max_batch, size, tta, ck.has_ema, 1, &quiet, &ev,
                           &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        status = FL_EXIT_DATA;
    } else {
        char desc[256] = "";
        if (ops->describe)
            ops->describe(b, desc, sizeof desc);
        status = eval_print(ckpt_path, data, &ck, &spec, ops->name, desc, &ev, json);
    }
out:
    /* every exit frees what was loaded and built (a refused --device used to leak both) */
    if (b)
        ops->destroy(b);
    tf_model_free(&spec);
    tf_checkpoint_free(&ck);
    return status;
}
