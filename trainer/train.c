/* train.c — the trainfast loop: libfastload batches -> backend train_step with the LR schedule,
 * per-epoch evaluation, checkpoints (every N steps, at epoch ends, on SIGTERM/SIGINT), exact
 * resume, and the end-of-run summary with the step-time split. Also `trainfast eval`. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dist.h"
#include "fastload.h"
#include "fl_cli.h"
#include "fl_clock.h"
#include "fl_json.h"
#include "nvml.h"
#include "train.h"
#ifdef TF_HAVE_GPU_BACKEND
#include "gpu_dist.h"
#endif

#define TOOL "trainfast"

void tf_options_init(tf_options *o)
{
    memset(o, 0, sizeof *o);
    o->model = "fastcnn";
    o->epochs = 2;
    o->batch = 0;
    o->lr = 0.2f;
    o->wd = 5e-4f;
    o->momentum = 0.9f;
    o->label_smoothing = 0.1f;
    o->nesterov = 1;
    o->cosine = 0;
    o->warmup_epochs = 0.5f;
    o->precision = TF_FP32;
    o->device = "auto";
    o->seed = 0;
    o->accum = 1;
    o->tta = 1;
    o->crop_pad = -1;
    o->flip = 1;
}

/* ---- backend choice ---------------------------------------------------------------------- */
int tf_pick_backend(const char *device, const tf_backend_ops **ops, char *notice, size_t cap,
                    fl_error *err)
{
    if (notice && cap)
        notice[0] = 0;
    if (!strcmp(device, "cpu")) {
        *ops = tf_backend_cpu();
        return 0;
    }
    if (strcmp(device, "cuda") && strcmp(device, "auto"))
        return fl_error_set(err, FL_E_INVALID, "--device %s: expected cpu, cuda or auto", device);
    char why[256] = "this trainfast was built without the CUDA backend";
#ifdef TF_HAVE_GPU_BACKEND
    const tf_backend_ops *g = tf_backend_cuda();
    if (!g->available || g->available(why, sizeof why)) {
        *ops = g;
        return 0;
    }
#endif
    if (!strcmp(device, "cuda"))
        return fl_error_set(err, FL_E_UNSUPPORTED, "--device cuda: %s", why);
    if (notice)
        snprintf(notice, cap, strncmp(why, "no GPU", 6) ? "no GPU (%s): running on the CPU in fp32"
                                                        : "%s: running on the CPU in fp32",
                 why);
    *ops = tf_backend_cpu();
    return 0;
}

/* ---- signals: the handler only sets a flag; the loop stops at the next step boundary ------ */
static volatile sig_atomic_t g_stop_signal;

static void on_signal(int sig) { g_stop_signal = sig; }

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

/* ---- LR schedule over optimizer steps: linear warm-up, then linear or cosine decay to 0 ---- */
static float lr_at(const tf_options *o, uint64_t step, uint64_t total, uint64_t warmup)
{
    if (warmup > 0 && step < warmup)
        return o->lr * (float)(step + 1) / (float)warmup;
    if (total <= warmup)
        return o->lr;
    double t = (double)(step - warmup) / (double)(total - warmup);
    if (t > 1.0)
        t = 1.0;
    double f = o->cosine ? 0.5 * (1.0 + cos(M_PI * t)) : 1.0 - t;
    return (float)(o->lr * f);
}

static void loader_log(void *user, int level, const char *msg)
{
    int quiet = *(int *)user;
    if (!quiet || level > 0)
        fprintf(stderr, "%s: %s%s\n", TOOL, level > 0 ? "warning: " : "", msg);
}

/* ---- evaluation over a whole dataset ---------------------------------------------------------- */
typedef struct eval_out {
    double loss, top1, top5;
    uint64_t n;
    double seconds;
} eval_out;

static int evaluate(const tf_backend_ops *ops, tf_backend *b, const char *path, uint32_t batch,
                    uint32_t size, int tta, int use_ema, int workers, int *quiet, eval_out *out,
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
    lo.log = loader_log;
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
        tf_batch x = {.images = fb->images, .labels = fb->labels, .indices = fb->indices,
                      .epoch = fb->epoch, .n = n, .h = fb->height, .w = fb->width,
                      .c = fb->channels, .device_images = fb->device_images,
                      .device_labels = fb->device_labels, .event = fb->event,
                      .stream = fb->stream};
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

static const char *precision_name(tf_precision p)
{
    return p == TF_BF16 ? "bf16" : p == TF_FP16 ? "fp16" : "fp32";
}

/* Flush, fsync (regular files) and close an output; 0 or the errno of the first failure. A log
 * that cannot be written is an error, not a silent loss. */
static int close_output(FILE *f)
{
    int e = 0;
    if (fflush(f) != 0 || ferror(f))
        e = errno ? errno : EIO;
    struct stat sb;
    if (!e && fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && fsync(fileno(f)) != 0)
        e = errno;
    if (fclose(f) != 0 && !e)
        e = errno;
    return e;
}

/* Class names of a dataset in label order ("" where it has none): a malloc'ed array of pointers
 * into ds (valid until it closes), or NULL when out of memory. */
static const char **class_names(const fl_dataset *ds, uint32_t n)
{
    const char **v = calloc(n ? n : 1, sizeof *v);
    for (uint32_t k = 0; v && k < n; k++) {
        const char *c = fl_dataset_class_name(ds, k);
        v[k] = c ? c : "";
    }
    return v;
}

/* The first label whose class differs between the classes a model was trained on (ref) and those
 * of a dataset it is scored on (got), or UINT32_MAX when every label of got names the same class
 * in ref. A dataset holding only the first classes of ref, under the same names, labels them
 * alike: no difference. One with more classes than ref differs at label nref. */
static uint32_t first_class_difference(const char *const *ref, uint32_t nref,
                                       const char *const *got, uint32_t ngot)
{
    for (uint32_t k = 0; k < ngot; k++)
        if (k >= nref || strcmp(ref[k], got[k]))
            return k;
    return UINT32_MAX;
}

/* ---- what defines a run ---------------------------------------------------------------------
 * A checkpoint continues only the run that wrote it: every option below changes the weights, the
 * batches or the schedule, so --resume refuses (exit 2) when one differs from the checkpoint's
 * config (written by config_json, read back with the JSON parser). Model, width, residual, gelu and
 * seed come from the checkpoint header; the global batch is checked where the batch is chosen.
 * Options that may change on resume (they change no number the run computes, or only where it
 * runs): --val, --log, --json, --quiet, --threads, --workers, --device, --precision, --checkpoint,
 * --checkpoint-every, --no-tta, --sync-bn, the number of processes (same global batch). */
enum { RK_UINT, RK_FLOAT, RK_STR };
typedef struct run_key {
    const char *key; /* in the config JSON */
    const char *opt; /* the option that sets it, as the user writes it */
    int kind;
    uint64_t u;
    float f;
    const char *s;
} run_key;

enum { RUN_KEYS = 14 };

/* the dataset's identity: format v2's dataset_id when the manifest has one, else its record and
 * class counts and the CRC32C of its manifest text (which lists every shard's size) */
static void dataset_identity(const fl_dataset *ds, char *out, size_t cap)
{
    const char *mj = fl_dataset_manifest_json(ds);
    size_t ml = mj ? strlen(mj) : 0;
    fl_jdoc *doc;
    fl_error e;
    if (ml && fl_jparse(mj, ml, "manifest.json", &doc, &e) == 0) {
        const fl_jnode *id = fl_jget(fl_jroot(doc), "dataset_id");
        if (id && id->type == FL_J_STRING && id->str_len) {
            snprintf(out, cap, "dataset_id %s", id->str);
            fl_jfree(doc);
            return;
        }
        fl_jfree(doc);
    }
    snprintf(out, cap, "%llu records, %u classes, manifest crc32c %08x",
             (unsigned long long)fl_dataset_count(ds), fl_dataset_num_classes(ds),
             ml ? fl_crc32c(0, mj, ml) : 0u);
}

static int run_keys(const tf_options *o, uint32_t size, const char *data_id, run_key *k)
{
    int n = 0;
#define KU(k_, o_, v_) k[n++] = (run_key){.key = k_, .opt = o_, .kind = RK_UINT, .u = (uint64_t)(v_)}
#define KF(k_, o_, v_) k[n++] = (run_key){.key = k_, .opt = o_, .kind = RK_FLOAT, .f = (v_)}
#define KS(k_, o_, v_) k[n++] = (run_key){.key = k_, .opt = o_, .kind = RK_STR, .s = (v_)}
    KU("epochs", "--epochs", o->epochs);
    KU("accum", "--accum", o->accum);
    KF("lr", "--lr", o->lr);
    KF("wd", "--wd", o->wd);
    KF("momentum", "--momentum", o->momentum);
    KU("nesterov", "--no-nesterov", o->nesterov);
    KF("label_smoothing", "--label-smoothing", o->label_smoothing);
    KS("schedule", "--schedule", o->cosine ? "cosine" : "linear");
    KF("warmup_epochs", "--warmup", o->warmup_epochs);
    KF("ema", "--ema", o->ema);
    KU("crop_pad", "--crop-pad", o->crop_pad >= 0 ? o->crop_pad : 0);
    KU("flip", "--no-flip", o->flip);
    KU("size", "--size", size);
    KS("data_id", "--data", data_id);
#undef KU
#undef KF
#undef KS
    return n;
}

static void run_key_text(const run_key *k, char *buf, size_t cap)
{
    if (k->kind == RK_UINT)
        snprintf(buf, cap, "%llu", (unsigned long long)k->u);
    else if (k->kind == RK_FLOAT)
        for (int p = 6; p <= 9; p++) { /* the shortest text that reads back as the same float */
            snprintf(buf, cap, "%.*g", p, (double)k->f);
            if (strtof(buf, NULL) == k->f)
                break;
        }
    else
        snprintf(buf, cap, "%s", k->s);
}

static void config_json(const tf_options *o, const run_key *keys, int nkeys, const fl_dataset *ds,
                        uint32_t batch, const char *device, int world, int pad_tail, fl_json *j)
{
    fl_json_begin_object(j);
    fl_json_key(j, "world");
    fl_json_int(j, world);
    fl_json_key(j, "global_batch");
    fl_json_uint(j, (uint64_t)batch * (uint64_t)world);
    fl_json_key(j, "pad_tail");
    fl_json_int(j, pad_tail);
    fl_json_key(j, "batch");
    fl_json_uint(j, batch);
    fl_json_key(j, "model");
    fl_json_string(j, o->model);
    fl_json_key(j, "seed");
    fl_json_uint(j, o->seed);
    for (int i = 0; i < nkeys; i++) {
        char t[64];
        fl_json_key(j, keys[i].key);
        if (keys[i].kind == RK_STR) {
            fl_json_string(j, keys[i].s);
        } else {
            run_key_text(&keys[i], t, sizeof t); /* floats exact, not fl_json_double's %.6g */
            fl_json_raw(j, t);
        }
    }
    fl_json_key(j, "device");
    fl_json_string(j, device);
    fl_json_key(j, "data");
    fl_json_string(j, o->data);
    /* the classes in label order, so that eval can check a dataset labels them alike */
    fl_json_key(j, "classes");
    fl_json_begin_array(j);
    for (uint32_t k = 0; k < fl_dataset_num_classes(ds); k++) {
        const char *c = fl_dataset_class_name(ds, k);
        fl_json_string(j, c ? c : "");
    }
    fl_json_end_array(j);
    fl_json_end_object(j);
}

/* Compare this run's defining options with a checkpoint's config. Returns 0 when they match
 * (keys an older trainfast did not record are listed in `unchecked`), else 1 with the first
 * difference described in msg. */
static int run_keys_differ(const run_key *keys, int nkeys, const fl_jnode *cfg, char *msg,
                           size_t cap, char *unchecked, size_t ucap)
{
    unchecked[0] = 0;
    for (int i = 0; i < nkeys; i++) {
        const run_key *k = &keys[i];
        const fl_jnode *v = fl_jget(cfg, k->key);
        char now[256], was[256];
        run_key_text(k, now, sizeof now);
        if (!v) {
            size_t l = strlen(unchecked);
            snprintf(unchecked + l, ucap - l, "%s%s", l ? ", " : "", k->opt);
            continue;
        }
        int same;
        if (k->kind == RK_STR) {
            same = v->type == FL_J_STRING && !strcmp(v->str, k->s);
            snprintf(was, sizeof was, "%s", v->type == FL_J_STRING ? v->str : "?");
        } else if (k->kind == RK_UINT) {
            same = v->type == FL_J_NUMBER && v->is_int && (uint64_t)v->ival == k->u;
            snprintf(was, sizeof was, "%lld", v->type == FL_J_NUMBER ? (long long)v->ival : -1LL);
        } else {
            same = v->type == FL_J_NUMBER && (float)v->dval == k->f;
            snprintf(was, sizeof was, "%g", v->type == FL_J_NUMBER ? v->dval : NAN);
            snprintf(now, sizeof now, "%g", (double)k->f);
        }
        if (same)
            continue;
        if (!strcmp(k->key, "data_id"))
            snprintf(msg, cap, "--data is not the dataset the checkpoint was trained on: this "
                     "run's %s, the checkpoint's %s", now, was);
        else if (!strcmp(k->key, "nesterov") || !strcmp(k->key, "flip"))
            snprintf(msg, cap, "%s was %s when the checkpoint was written, %s now", k->opt,
                     strcmp(was, "0") ? "absent" : "given", strcmp(now, "0") ? "absent" : "given");
        else
            snprintf(msg, cap, "%s %s differs from the checkpoint's %s %s", k->opt, now, k->opt,
                     was);
        return 1;
    }
    return 0;
}

/* a number in a checkpoint's config, or dflt */
static uint64_t config_u64(const fl_jnode *cfg, const char *key, uint64_t dflt)
{
    const fl_jnode *v = fl_jget(cfg, key);
    return v && v->type == FL_J_NUMBER && v->is_int && v->ival >= 0 ? (uint64_t)v->ival : dflt;
}

/* everything the loop needs to write a checkpoint */
typedef struct ckpt_ctx {
    const tf_options *o;
    const tf_backend_ops *ops;
    tf_backend *b;
    const tf_model_spec *spec;
    const tf_dist *d;
    tf_checkpoint ck; /* allocated once */
    char last_path[4096];
} ckpt_ctx;

/* Every rank calls this at the same step (it holds collectives); rank 0 writes the file. */
static int save_checkpoint(ckpt_ctx *c, uint64_t epoch, uint64_t batch, double loss_sum,
                           uint64_t correct, uint64_t seen, double wall, fl_error *err)
{
    int rc = c->ops->get_state(c->b, &c->ck.st, err);
    if (rc)
        return rc;
    /* never write diverged weights: a checkpoint of them would rotate a good one out */
    for (int64_t j = 0; j < c->spec->param_count; j++)
        if (!isfinite(c->ck.st.params[j]) || !isfinite(c->ck.st.momentum[j]))
            return fl_error_set(err, FL_E_INVALID,
                                "the weights are not finite (inf/nan) after step %llu: training "
                                "diverged; no checkpoint written (lower --lr, now %g, and start "
                                "again)%s%s", (unsigned long long)c->ck.st.step, c->o->lr,
                                c->last_path[0] ? "; last checkpoint kept: " : "", c->last_path);
    if (c->d->world > 1) {
        /* the epoch's running figures of all ranks, so a resumed run (on any world size)
         * reports the same epoch totals; rank 0 alone restores them */
        double m[3] = {loss_sum, (double)correct, (double)seen};
        if ((rc = tf_dist_allreduce_f64(c->d, m, 3, 0, err)))
            return rc;
        loss_sum = m[0];
        correct = (uint64_t)m[1];
        seen = (uint64_t)m[2];
        if (c->ck.st.accum_count) {
            /* mid accumulation group: each rank holds its own partial gradient sum; store their
             * mean, which resume hands to every rank scaled by old/new world (docs) */
            rc = tf_dist_allreduce_f32(c->d, c->ck.st.grad_accum, (size_t)c->spec->param_count,
                                       0, err);
            if (rc)
                return rc;
            const float inv = 1.0f / (float)c->d->world;
            for (int64_t j = 0; j < c->spec->param_count; j++)
                c->ck.st.grad_accum[j] *= inv;
        }
        if (c->d->rank != 0)
            return 0;
    }
    c->ck.epoch = epoch;
    c->ck.batch = batch;
    c->ck.epoch_loss_sum = loss_sum;
    c->ck.epoch_correct = correct;
    c->ck.epoch_seen = seen;
    c->ck.wall_s = wall;
    return tf_checkpoint_save(c->o->ckpt_dir, &c->ck, c->last_path, sizeof c->last_path, err);
}

static int train_run(const tf_options *o, const tf_dist *D)
{
    double t_start = fl_now_s();
    fl_error err;
    int quiet = o->quiet || D->rank != 0; /* only rank 0 reports */
    if (!o->data || !o->val) {
        fl_cli_error(TOOL, "train needs --data DIR and --val DIR");
        return FL_EXIT_USAGE;
    }
    if (o->resume && !o->ckpt_dir) {
        fl_cli_error(TOOL, "--resume needs --checkpoint DIR");
        return FL_EXIT_USAGE;
    }
    /* backend */
    const tf_backend_ops *ops;
    char notice[400];
    if (tf_pick_backend(o->device, &ops, notice, sizeof notice, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    const int on_cpu = !strcmp(ops->name, "cpu");
    if (notice[0] && D->rank == 0)
        fprintf(stderr, "%s: %s\n", TOOL, notice);
    if (o->sync_bn && strcmp(ops->name, "cpu")) {
        fl_cli_error(TOOL, "--sync-bn is supported by the CPU backend only so far (the CUDA "
                     "backend keeps BatchNorm statistics per process); leave --sync-bn out");
        return FL_EXIT_USAGE;
    }
    tf_precision prec = o->precision_given ? o->precision : (on_cpu ? TF_FP32 : TF_BF16);
    if (on_cpu && prec != TF_FP32) {
        fprintf(stderr, "%s: the CPU backend computes in fp32: --precision %s falls back to fp32\n",
                TOOL, precision_name(prec));
        prec = TF_FP32;
    }
    uint32_t batch = o->batch ? o->batch : (on_cpu ? 128 : 512);
    int workers = o->workers > 0 ? o->workers : (on_cpu ? 1 : 0);

    /* resume: read the checkpoint first, since the loader starts at its position */
    tf_checkpoint rck;
    memset(&rck, 0, sizeof rck);
    int resumed = 0;
    char rpath[4096] = "";
    if (o->resume) {
        char skipped[4096];
        int rc = tf_checkpoint_load_latest(o->ckpt_dir, &rck, rpath, sizeof rpath, skipped,
                                           sizeof skipped, &err);
        if (skipped[0])
            fprintf(stderr, "%s: warning: skipped unreadable or damaged checkpoint(s): %s\n", TOOL,
                    skipped);
        if (rc == 0) {
            resumed = 1;
        } else if (rc == -ENOENT && !skipped[0]) {
            fprintf(stderr, "%s: --resume: no checkpoint in %s yet, starting fresh\n", TOOL,
                    o->ckpt_dir);
        } else {
            fl_cli_error(TOOL, "--resume: %s", err.msg);
            return FL_EXIT_DATA;
        }
    }
    /* the datasets: shapes, classes, identity */
    fl_dataset *probe;
    if (fl_dataset_open(o->data, &probe, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        tf_checkpoint_free(&rck);
        return FL_EXIT_DATA;
    }
    fl_schema schema = *fl_dataset_schema(probe);
    uint32_t num_classes = fl_dataset_num_classes(probe);
    char data_id[200];
    dataset_identity(probe, data_id, sizeof data_id);
    /* --val is first read at the end of epoch 1: check now that it fits the model and labels the
     * same classes, rather than failing (or scoring nonsense) after a whole epoch of training. */
    fl_dataset *vprobe;
    if (fl_dataset_open(o->val, &vprobe, &err)) {
        fl_cli_error(TOOL, "--val: %s", err.msg);
        fl_dataset_close(probe);
        tf_checkpoint_free(&rck);
        return FL_EXIT_DATA;
    }
    fl_schema vschema = *fl_dataset_schema(vprobe);
    uint32_t val_classes = fl_dataset_num_classes(vprobe);
    const int train_fixed = schema.height != 0 && schema.width != 0;
    int bad_val = 0;
    if (vschema.channels != schema.channels ||
        (train_fixed && (vschema.height != schema.height || vschema.width != schema.width))) {
        fl_cli_error(TOOL, "--val %s holds %ux%ux%u images but --data %s holds %ux%ux%u (HxWxC; "
                     "0x0 = variable size)", o->val, vschema.height, vschema.width,
                     vschema.channels, o->data, schema.height, schema.width, schema.channels);
        bad_val = FL_EXIT_DATA;
    } else if (val_classes > num_classes) {
        fl_cli_error(TOOL, "--val %s has %u classes but --data %s has %u: pack both with the same "
                     "class list (--classes/--class-names)", o->val, val_classes, o->data,
                     num_classes);
        bad_val = FL_EXIT_USAGE;
    } else {
        /* label k must name the same class in both: a val set packed with another class list
         * would be scored against the wrong labels. A val set whose classes are the first ones of
         * --data's, in the same order (it lacks only trailing classes), labels them alike: it is
         * accepted with a note. */
        const char **tn = class_names(probe, num_classes), **vn = class_names(vprobe, val_classes);
        uint32_t k = tn && vn ? first_class_difference(tn, num_classes, vn, val_classes) : 0;
        if (!tn || !vn) {
            fl_cli_error(TOOL, "out of memory");
            bad_val = FL_EXIT_DATA;
        } else if (k != UINT32_MAX) {
            fl_cli_error(TOOL, "--val %s labels its classes differently from --data %s: label %u "
                         "is '%s' in --val, '%s' in --data; pack both with the same class list "
                         "(--classes/--class-names)", o->val, o->data, k, vn[k], tn[k]);
            bad_val = FL_EXIT_USAGE;
        }
        free((void *)tn);
        free((void *)vn);
        if (!bad_val && val_classes < num_classes && !quiet) {
            const char *first = fl_dataset_class_name(probe, val_classes);
            fprintf(stderr, "%s: note: --val %s has %u of the %u classes of --data %s (the "
                    "first %u, same labels; from '%s' on none): accuracy is over those classes\n",
                    TOOL, o->val, val_classes, num_classes, o->data, val_classes,
                    first ? first : "?");
        }
    }
    fl_dataset_close(vprobe);
    fl_dataset_close(probe);
    if (bad_val) {
        tf_checkpoint_free(&rck);
        return bad_val;
    }
    uint32_t size = 0;
    if (schema.height == 0 || schema.width == 0)
        size = o->size ? o->size : 224;
    int in_h = size ? (int)size : (int)schema.height, in_w = size ? (int)size : (int)schema.width;
    int in_c = (int)schema.channels;
    tf_model_options mopt = o->mopt;
    if (mopt.width == 0 && !strcmp(o->model, "fastcnn"))
        mopt.width = 24;
    run_key keys[RUN_KEYS];
    const int nkeys = run_keys(o, size, data_id, keys);

    uint64_t seed = o->seed;
    int pad_tail = D->world > 1; /* distributed: pad the tail so every rank runs the same steps */
    uint64_t start_epoch = 0, start_batch = 0;
    if (resumed) {
        /* the checkpoint continues only the run that wrote it (see run_keys) */
        char why[600] = "", unchecked[300] = "";
        fl_jdoc *cdoc = NULL;
        const fl_jnode *cfg = NULL;
        size_t clen = rck.config_json ? strlen(rck.config_json) : 0;
        if (clen && fl_jparse(rck.config_json, clen, rpath, &cdoc, &err) == 0)
            cfg = fl_jroot(cdoc);
        if (clen && !cfg) {
            fl_cli_error(TOOL, "--resume: %s: its config: %s", rpath, err.msg);
            tf_checkpoint_free(&rck);
            return FL_EXIT_DATA;
        }
        const char *ck_model = fl_jget(cfg, "model") && fl_jget(cfg, "model")->type == FL_J_STRING
                                   ? fl_jget(cfg, "model")->str
                                   : rck.model;
        if (strcmp(o->model, ck_model) && strcmp(o->model, rck.model))
            snprintf(why, sizeof why, "--model %s differs from the checkpoint's --model %s",
                     o->model, ck_model);
        else if (mopt.width != rck.mopt.width)
            snprintf(why, sizeof why, "--width %d differs from the checkpoint's --width %d%s",
                     mopt.width, rck.mopt.width, o->mopt.width ? "" : " (--width left out: 24)");
        else if (mopt.residual != rck.mopt.residual)
            snprintf(why, sizeof why, "--residual was %s when the checkpoint was written, %s now",
                     rck.mopt.residual ? "given" : "absent", mopt.residual ? "given" : "absent");
        else if (mopt.gelu != rck.mopt.gelu)
            snprintf(why, sizeof why, "--gelu was %s when the checkpoint was written, %s now",
                     rck.mopt.gelu ? "given" : "absent", mopt.gelu ? "given" : "absent");
        else if (o->seed != rck.seed)
            snprintf(why, sizeof why, "--seed %llu differs from the checkpoint's --seed %llu",
                     (unsigned long long)o->seed, (unsigned long long)rck.seed);
        else if (cfg)
            run_keys_differ(keys, nkeys, cfg, why, sizeof why, unchecked, sizeof unchecked);
        else
            snprintf(unchecked, sizeof unchecked, "all options but the model and --seed");
        /* exact resume needs the batches of the interrupted run: the same global batch. On another
         * world size the per-rank batch is global/world, and the batch index is unchanged (the
         * same global sample position). */
        uint32_t stored = (uint32_t)config_u64(cfg, "batch", 0);
        uint64_t w0 = config_u64(cfg, "world", 1);
        pad_tail = (int)config_u64(cfg, "pad_tail", 0) || D->world > 1;
        start_epoch = rck.epoch;
        start_batch = rck.batch;
        if (w0 == 0)
            w0 = 1;
        const uint64_t global = (uint64_t)stored * w0;
        if (!why[0] && stored) {
            if (o->batch && (uint64_t)o->batch * (uint64_t)D->world != global)
                snprintf(why, sizeof why, "--batch %u on %d process(es) (global batch %llu) "
                         "differs from the checkpoint's --batch %u on %llu process(es) (global "
                         "batch %llu); leave --batch out to continue with the same global batch",
                         o->batch, D->world, (unsigned long long)o->batch * (uint64_t)D->world,
                         stored, (unsigned long long)w0, (unsigned long long)global);
            else if (global % (uint64_t)D->world)
                snprintf(why, sizeof why, "the checkpoint's global batch %llu (%llu x %u) cannot "
                         "be split over %d process(es); resume on a number of processes that "
                         "divides it", (unsigned long long)global, (unsigned long long)w0, stored,
                         D->world);
        }
        fl_jfree(cdoc);
        if (why[0]) {
            fl_cli_error(TOOL, "--resume: %s (%s); options that define the run must stay the "
                         "same (see trainfast --help)", why, rpath);
            tf_checkpoint_free(&rck);
            return FL_EXIT_USAGE;
        }
        if (unchecked[0] && D->rank == 0)
            fl_cli_warn(TOOL, "%s was written by an older trainfast: cannot check that %s "
                        "match(es)", rpath, unchecked);
        if (stored) {
            batch = (uint32_t)(global / (uint64_t)D->world);
            if ((uint64_t)D->world != w0 && D->rank == 0)
                fprintf(stderr, "%s: resume on %d process(es) x batch %u from a run of %llu x %u: "
                        "same global batch %llu, continuing at global sample %llu of epoch %llu\n",
                        TOOL, D->world, batch, (unsigned long long)w0, stored,
                        (unsigned long long)global, (unsigned long long)(rck.batch * global),
                        (unsigned long long)rck.epoch + 1);
            if ((uint64_t)D->world != w0 && rck.st.accum_count) {
                /* the stored partial gradient is the mean over the old ranks: hand each new rank
                 * sum/new_world so the next reduction sees the same total */
                const float f = (float)w0 / (float)D->world;
                for (int64_t j = 0; j < rck.param_count; j++)
                    rck.st.grad_accum[j] *= f;
            }
        }
        if (D->rank != 0) {
            /* rank 0 alone carries the interrupted epoch's figures (they are global sums) */
            rck.epoch_loss_sum = 0;
            rck.epoch_correct = rck.epoch_seen = 0;
        }
    }

    /* train loader */
    fl_loader_options lo;
    fl_loader_options_init(&lo);
    lo.batch_size = batch;
    lo.workers = (uint32_t)workers;
    lo.order = FL_ORDER_RANDOM;
    lo.seed = seed;
    lo.flip = o->flip;
    /* One process: full batches only (BN statistics and the schedule stay uniform). Data
     * parallel: pad by wrapping around, so every rank gets the same number of full batches
     * and no rank waits in a collective that another never enters. */
    lo.drop_last = !pad_tail;
    lo.rank = (uint32_t)D->rank;
    lo.world = (uint32_t)D->world;
    lo.log = loader_log;
    lo.log_user = &quiet;
    lo.start_epoch = start_epoch;
    lo.start_batch = start_batch;
    if (size) {
        lo.out_height = lo.out_width = size;
        lo.augment = FL_AUG_RRC;
    }

    /* model */
    tf_model_spec spec;
    if (tf_model_build(o->model, in_c, in_h, in_w, (int)num_classes, &mopt, &spec, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        tf_checkpoint_free(&rck);
        return FL_EXIT_DATA;
    }
    if (resumed && (rck.spec_id != spec.spec_id || rck.param_count != spec.param_count ||
                    rck.stat_count != spec.stat_count)) {
        fl_cli_error(TOOL,
                     "%s was written for a different model (%s, spec %08x) than this run builds "
                     "(%s %dx%dx%d, %u classes, spec %08x)",
                     rpath, rck.model, rck.spec_id, spec.name, in_c, in_h, in_w, num_classes,
                     spec.spec_id);
        tf_model_free(&spec);
        tf_checkpoint_free(&rck);
        return FL_EXIT_USAGE;
    }
    int crop = o->crop_pad >= 0 ? o->crop_pad : 0;

    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.precision = prec;
    cfg.label_smoothing = o->label_smoothing;
    cfg.momentum = o->momentum;
    cfg.nesterov = o->nesterov;
    cfg.weight_decay = o->wd;
    cfg.accum = o->accum;
    cfg.ema_decay = o->ema;
    cfg.crop_pad = crop;
    cfg.flip = 0; /* the loader flips */
    cfg.aug_seed = seed;
    cfg.threads = o->threads;
    cfg.max_batch = batch;
    cfg.device = on_cpu ? 0 : D->local_rank; /* one GPU per process on a node */
    cfg.world = D->world;
    if (on_cpu && D->world > 1) {
        cfg.grad_allreduce = tf_dist_grad_allreduce;
        cfg.grad_allreduce_user = (void *)D;
        if (o->sync_bn)
            cfg.bn_allreduce = tf_dist_bn_allreduce;
    }
    if (resumed && (rck.has_ema != (o->ema > 0))) {
        fl_cli_error(TOOL, "%s: EMA was %s when it was written; pass the same --ema", rpath,
                     rck.has_ema ? "on" : "off");
        tf_model_free(&spec);
        tf_checkpoint_free(&rck);
        return FL_EXIT_USAGE;
    }
    if (o->batch_auto && o->batch == 0 && !resumed && ops->probe_batch) {
        /* --batch auto: the largest power of two that fits, found by the backend by trying */
        uint32_t fit = 0;
        int prc = ops->probe_batch(&spec, &cfg, 4096, &fit, &err);
        if (D->world > 1) {
            /* every rank must use the same batch: the smallest fit over the ranks */
            double mf = prc ? 0.0 : -(double)fit;
            fl_error e2;
            if (tf_dist_allreduce_f64(D, &mf, 1, 1, &e2) == 0)
                fit = (uint32_t)(-mf);
        }
        if (prc || fit == 0) {
            fl_cli_error(TOOL, "--batch auto: %s", fit ? err.msg : "not even a batch of 1 fits");
            tf_model_free(&spec);
            tf_checkpoint_free(&rck);
            return FL_EXIT_DATA;
        }
        fprintf(stderr, "%s: --batch auto: %u is the largest power of two that fits\n", TOOL, fit);
        batch = fit;
        cfg.max_batch = batch;
        lo.batch_size = batch;
    } else if (o->batch_auto && o->batch == 0 && !resumed && !quiet && D->rank == 0) {
        fprintf(stderr, "%s: --batch auto: the %s backend has no memory probe: batch %u\n", TOOL,
                ops->name, batch);
    }
    /* from here on, failures leave through `out`, which frees whatever exists */
    int status = FL_EXIT_OK;
    tf_backend *b = NULL;
    fl_loader *L = NULL;
    FILE *log = NULL;
    ckpt_ctx cc = {.o = o, .ops = ops, .spec = &spec, .d = D};
    void *nccl_comm = NULL;
    if (ops->create(&spec, &cfg, &b, &err)) {
        fl_cli_error(TOOL, "%s backend: %s", ops->name, err.msg);
        b = NULL;
        status = FL_EXIT_DATA;
        goto out;
    }
    cc.b = b;
    if (!on_cpu && (D->world > 1 || o->nccl)) {
        /* GPU data parallel: gradients averaged by NCCL inside the CUDA backend (gpu_dist.h);
         * the NCCL unique id travels over MPI */
#ifdef TF_HAVE_GPU_BACKEND
        int rc = 0;
        if (D->world == 1) {
            rc = tf_gpu_comm_init_single(cfg.device, &nccl_comm, &err);
        } else {
            unsigned char id[TF_NCCL_ID_BYTES];
            memset(id, 0, sizeof id);
            if (D->rank == 0)
                rc = tf_gpu_nccl_unique_id(id, &err);
            if (tf_dist_bcast(D, id, sizeof id, 0, &err) == 0 && rc == 0)
                rc = tf_gpu_comm_init_rank(cfg.device, D->rank, D->world, id, &nccl_comm, &err);
            else if (rc == 0)
                rc = -EIO;
        }
        if (rc == 0)
            rc = tf_gpu_set_comm(b, nccl_comm, &err);
        if (rc) {
            fl_cli_error(TOOL, "NCCL: %s", err.msg);
            status = FL_EXIT_DATA;
            goto out;
        }
        if (D->rank == 0 && !quiet)
            fprintf(stderr, "%s: gradients averaged over %d GPU process(es) with NCCL\n", TOOL,
                    D->world);
#else
        fl_cli_error(TOOL, "data-parallel GPU training needs the CUDA backend with NCCL");
        status = FL_EXIT_DATA;
        goto out;
#endif
    }
    if (tf_checkpoint_alloc(&cc.ck, spec.param_count, spec.stat_count, o->ema > 0)) {
        fl_cli_error(TOOL, "out of memory");
        status = FL_EXIT_DATA;
        goto out;
    }
    snprintf(cc.ck.model, sizeof cc.ck.model, "%s", spec.name);
    cc.ck.spec_id = spec.spec_id;
    cc.ck.in_c = spec.in_c;
    cc.ck.in_h = spec.in_h;
    cc.ck.in_w = spec.in_w;
    cc.ck.num_classes = spec.num_classes;
    cc.ck.mopt = mopt;
    memcpy(cc.ck.mean, spec.mean, sizeof spec.mean);
    memcpy(cc.ck.std, spec.std, sizeof spec.std);
    cc.ck.seed = seed;
    double epoch_loss = 0, wall_before = 0;
    uint64_t epoch_correct = 0, epoch_seen = 0;
    if (resumed) {
        /* every rank read the same checkpoint; rank 0's copy of the weights and optimizer state
         * is broadcast so the ranks cannot start apart (e.g. files differing between nodes) */
        size_t pm = (size_t)spec.param_count * sizeof(float);
        if (tf_dist_bcast(D, rck.st.params, pm, 0, &err) ||
            tf_dist_bcast(D, rck.st.momentum, pm, 0, &err) ||
            tf_dist_bcast(D, rck.st.stats, (size_t)spec.stat_count * sizeof(float), 0, &err)) {
            fl_cli_error(TOOL, "broadcast of the resumed state: %s", err.msg);
            status = FL_EXIT_DATA;
            goto out;
        }
        if (ops->set_state(b, &rck.st, &err)) {
            fl_cli_error(TOOL, "%s: %s", rpath, err.msg);
            status = FL_EXIT_DATA;
            goto out;
        }
        epoch_loss = rck.epoch_loss_sum;
        epoch_correct = rck.epoch_correct;
        epoch_seen = rck.epoch_seen;
        wall_before = rck.wall_s;
    } else {
        tf_model_init(&spec, seed, cc.ck.st.params, cc.ck.st.stats);
        /* every rank starts from rank 0's weights (identical by construction, made certain) */
        if (tf_dist_bcast(D, cc.ck.st.params, (size_t)spec.param_count * sizeof(float), 0, &err) ||
            tf_dist_bcast(D, cc.ck.st.stats, (size_t)spec.stat_count * sizeof(float), 0, &err)) {
            fl_cli_error(TOOL, "broadcast of the initial weights: %s", err.msg);
            status = FL_EXIT_DATA;
            goto out;
        }
        tf_state init = {.params = cc.ck.st.params, .stats = cc.ck.st.stats, .loss_scale = 1.0f};
        if (ops->set_state(b, &init, &err)) {
            fl_cli_error(TOOL, "%s", err.msg);
            status = FL_EXIT_DATA;
            goto out;
        }
    }
    if (!on_cpu)
        lo.device = cfg.device;
    if (fl_loader_create(o->data, &lo, &L, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        L = NULL;
        status = FL_EXIT_DATA;
        goto out;
    }
    const uint64_t bpe = fl_loader_batches_per_epoch(L);
    const uint64_t spe = fl_loader_samples_per_epoch(L);
    if (bpe == 0) {
        fl_cli_error(TOOL, "%s: fewer samples than one batch of %u", o->data, batch);
        status = FL_EXIT_DATA;
        goto out;
    }
    {
        fl_json j;
        fl_json_init(&j);
        config_json(o, keys, nkeys, fl_loader_dataset(L), batch, ops->name, D->world, !lo.drop_last,
                    &j);
        free(cc.ck.config_json);
        cc.ck.config_json = fl_json_failed(&j) ? NULL : strdup(fl_json_text(&j));
        fl_json_free(&j);
        if (!cc.ck.config_json) {
            fl_cli_error(TOOL, "out of memory");
            status = FL_EXIT_DATA;
            goto out;
        }
    }
    /* Optimizer steps: groups of --accum micro-batches within an epoch. An epoch's last group may
     * be shorter: it still steps, with the mean of the gradients it had (tf_batch.accum_group),
     * so every sample of the epoch is in the weights before the epoch's evaluation and
     * checkpoint, and a run shorter than one group still trains. The schedule counts these
     * steps; a batch's step index follows from its position (epoch, batch), so a resumed run
     * continues the schedule exactly. */
    const uint64_t accum = (uint64_t)o->accum;
    const uint64_t steps_per_epoch = (bpe + accum - 1) / accum;
    const uint64_t total_steps = steps_per_epoch * (uint64_t)o->epochs;
    const uint64_t warmup = (uint64_t)(o->warmup_epochs * (double)steps_per_epoch);
    uint64_t micro = resumed ? rck.st.micro_step : 0;
    uint64_t opt_steps = resumed ? rck.st.step : 0; /* optimizer steps taken */
    if (resumed && rck.st.accum_count != start_batch % accum) {
        /* groups crossed epoch boundaries before they were kept within an epoch */
        fl_cli_error(TOOL, "--resume: %s holds %u summed micro-batch(es) at batch %llu of an epoch, "
                     "where this trainfast's groups of --accum %llu hold %llu: it was written by "
                     "an older trainfast; finish it with that version or start again", rpath,
                     rck.st.accum_count, (unsigned long long)start_batch,
                     (unsigned long long)accum, (unsigned long long)(start_batch % accum));
        status = FL_EXIT_USAGE;
        goto out;
    }
    /* a loss far above chance level (log K) is divergence, not a hard batch: with BatchNorm and
     * the usual learning rates a loss of 10^4 x log K is out of reach of a run that still learns */
    const double diverge_loss = 1e4 * logf((float)num_classes);

    char desc[256] = "";
    if (ops->describe)
        ops->describe(b, desc, sizeof desc);
    if (!quiet) {
        fprintf(stderr,
                "%s: %s (%.2f M params, %.1f MFLOP/img) on %s | %s: %llu train images, %u "
                "classes, %dx%dx%d | batch %u x %d accum, %d epoch%s, lr %g %s, %s\n",
                TOOL, spec.name, spec.param_count / 1e6, 2 * tf_model_flops(&spec) / 1e6,
                desc[0] ? desc : ops->name, o->data,
                (unsigned long long)fl_dataset_count(fl_loader_dataset(L)), num_classes, in_h,
                in_w, in_c, batch, o->accum, o->epochs, o->epochs == 1 ? "" : "s", o->lr, o->cosine ? "cosine" : "linear",
                precision_name(prec));
        if (D->world > 1)
            fprintf(stderr,
                    "%s: data parallel: %d processes (%s), batch %u per rank = global batch "
                    "%llu, %llu steps per epoch on every rank%s; BatchNorm statistics %s\n",
                    TOOL, D->world, D->launcher, batch, (unsigned long long)batch * D->world,
                    (unsigned long long)bpe,
                    pad_tail && bpe * batch * (uint64_t)D->world > fl_dataset_count(
                        fl_loader_dataset(L)) ? " (tail padded by wrap-around)" : "",
                    o->sync_bn ? "synchronized (--sync-bn)" : "per process");
        if (resumed)
            fprintf(stderr, "%s: resumed from %s at epoch %llu batch %llu (step %llu)\n", TOOL,
                    rpath, (unsigned long long)start_epoch + 1, (unsigned long long)start_batch,
                    (unsigned long long)micro);
    }
    tf_checkpoint_free(&rck);
    if (o->log_path && D->rank == 0 && !(log = fopen(o->log_path, resumed ? "a" : "w"))) {
        fl_cli_error(TOOL, "%s: %s", o->log_path, strerror(errno));
        status = FL_EXIT_DATA;
        goto out;
    }
    install_signals();
    /* GPU utilisation and memory, sampled about once a second while training (GPU runs only) */
    tf_nvml *nv = on_cpu ? NULL : tf_nvml_open();
    double nv_last = 0, nv_util_sum = 0;
    int nv_samples = 0;
    unsigned long long nv_mem_max = 0, nv_mem_total = 0;

    tf_live live;
    tf_live_start(&live, quiet);
    double data_wait = 0, compute = 0, h2d = 0, eval_s = 0, ckpt_s = 0;
    double ep_wait = 0, ep_compute = 0, ep_t0 = fl_now_s();
    uint64_t images = 0, ep_images = 0;
    uint64_t epoch = lo.start_epoch, bpos = lo.start_batch;
    eval_out ev = {0};
    int have_eval = 0;
    int warned_diverged = 0;
    int log_failed = 0; /* errno of a failed --log write */
    float lr = 0;
    while (epoch < (uint64_t)o->epochs) {
        double t0 = fl_now_s();
        fl_batch *fb;
        if (fl_loader_next(L, &fb, &err)) {
            tf_live_clear(&live);
            fl_cli_error(TOOL, "%s", err.msg);
            status = FL_EXIT_DATA;
            break;
        }
        double t1 = fl_now_s();
        tf_batch x = {.images = fb->images, .labels = fb->labels, .indices = fb->indices,
                      .epoch = fb->epoch, .n = fb->size, .h = fb->height, .w = fb->width,
                      .c = fb->channels, .device_images = fb->device_images,
                      .device_labels = fb->device_labels, .event = fb->event,
                      .stream = fb->stream};
        const uint64_t group = fb->batch / accum, b_epoch = fb->epoch;
        const uint64_t left = bpe > group * accum ? bpe - group * accum : accum;
        x.accum_group = (uint32_t)(left < accum ? left : accum);
        lr = lr_at(o, fb->epoch * steps_per_epoch + group, total_steps, warmup);
        tf_step_result r;
        int rc = ops->train_step(b, &x, lr, &r, &err);
        double t2 = fl_now_s();
        int last = fb->last_in_epoch;
        epoch = fb->epoch;
        bpos = fb->batch;
        fl_loader_release(L, fb);
        if (rc) {
            tf_live_clear(&live);
            fl_cli_error(TOOL, "step %llu: %s", (unsigned long long)micro, err.msg);
            status = FL_EXIT_DATA;
            break;
        }
        micro++;
        if (r.stepped)
            opt_steps++;
        if (!isfinite(r.loss) || r.loss > diverge_loss) {
            /* stop now: training on would only write diverged checkpoints over good ones */
            tf_live_clear(&live);
            char what[64];
            if (isfinite(r.loss))
                snprintf(what, sizeof what, "%.3g (chance level %.2f)", r.loss,
                         (double)logf((float)num_classes));
            else
                snprintf(what, sizeof what, "%s", isnan(r.loss) ? "nan" : "inf");
            char mb[48] = "";
            if (accum > 1)
                snprintf(mb, sizeof mb, ", micro-batch %llu", (unsigned long long)micro);
            fl_cli_error(TOOL, "loss became %s at step %llu (epoch %llu%s): training diverged; "
                         "lower --lr (now %g) and start again%s%s", what,
                         (unsigned long long)(r.stepped ? opt_steps : opt_steps + 1),
                         (unsigned long long)b_epoch + 1, mb, o->lr,
                         cc.last_path[0] || resumed ? "; last checkpoint kept: " : "",
                         cc.last_path[0] ? cc.last_path : resumed ? rpath : "");
            status = FL_EXIT_DATA;
            break;
        }
        if (nv && t2 - nv_last >= 1.0) {
            int u;
            unsigned long long used, tot;
            nv_last = t2;
            if (tf_nvml_sample(nv, (unsigned)cfg.device, &u, &used, &tot) == 0 && u >= 0) {
                nv_util_sum += u;
                nv_samples++;
                nv_mem_max = used > nv_mem_max ? used : nv_mem_max;
                nv_mem_total = tot;
            }
        }
        data_wait += t1 - t0;
        compute += t2 - t1;
        h2d += r.h2d_s;
        ep_wait += t1 - t0;
        ep_compute += t2 - t1;
        images += r.n;
        ep_images += r.n;
        epoch_loss += r.loss * r.n;
        epoch_correct += r.correct;
        epoch_seen += r.n;
        /* position of the next batch */
        if (last) {
            epoch++;
            bpos = 0;
        } else {
            bpos++;
        }
        tf_live_update(&live, (int)(last ? epoch : epoch + 1), o->epochs,
                       last ? spe : bpos * batch, spe, epoch_seen ? epoch_loss / epoch_seen : 0,
                       epoch_seen ? (double)epoch_correct / epoch_seen : 0,
                       ep_images / (ep_wait + ep_compute + 1e-9));
        if (last) {
            tf_live_clear(&live);
            /* the epoch's training figures over all ranks */
            double em[3] = {epoch_loss, (double)epoch_correct, (double)epoch_seen};
            if (tf_dist_allreduce_f64(D, em, 3, 0, &err)) {
                fl_cli_error(TOOL, "%s", err.msg);
                status = FL_EXIT_DATA;
                break;
            }
            /* flip TTA doubles the cost: only for the final evaluation. Data parallel: rank 0
             * evaluates (with its own BN running statistics); the others go on to the next
             * collective and wait there. */
            rc = D->rank != 0 ? 0
                              : evaluate(ops, b, o->val, batch, size,
                                         o->tta && epoch == (uint64_t)o->epochs, o->ema > 0,
                                         o->workers > 0 ? o->workers : 1, &quiet, &ev, &err);
            if (rc) {
                fl_cli_error(TOOL, "evaluation: %s", err.msg);
                status = FL_EXIT_DATA;
                break;
            }
            have_eval = 1;
            eval_s += ev.seconds;
            tf_epoch_report er = {
                .epoch = (int)epoch, .epochs = o->epochs,
                .train_loss = em[2] > 0 ? em[0] / em[2] : 0,
                .train_acc = em[2] > 0 ? em[1] / em[2] : 0,
                .val_loss = ev.loss, .val_top1 = ev.top1,
                .val_top5 = num_classes > 10 ? ev.top5 : -1, .lr = lr,
                .images_per_sec = ep_images * (double)D->world / (ep_wait + ep_compute + 1e-9),
                .data_wait_fraction = ep_wait / (ep_wait + ep_compute + 1e-9),
                .epoch_seconds = fl_now_s() - ep_t0,
                .wall_seconds = wall_before + fl_now_s() - t_start, .steps = opt_steps};
            int lerr = tf_report_epoch(&er, quiet, log);
            if (lerr && !log_failed)
                log_failed = lerr; /* finish this step (its checkpoint), then stop */
            /* chance level is log(classes): far above it the run has diverged; say so once
             * instead of training on silently */
            if (!warned_diverged && D->rank == 0 &&
                (!isfinite(er.train_loss) || er.train_loss > 10.0 * logf((float)num_classes) + 10.0)) {
                fl_cli_warn(TOOL, "training diverged at epoch %d (train loss %g, chance level %.2f): "
                            "lower --lr (now %g)", er.epoch, er.train_loss, (double)logf((float)num_classes), o->lr);
                warned_diverged = 1;
            }
            epoch_loss = 0;
            epoch_correct = epoch_seen = 0;
            ep_wait = ep_compute = 0;
            ep_images = 0;
            ep_t0 = fl_now_s();
        }
        int stop = g_stop_signal;
        if (D->world > 1) {
            /* ranks stop together: a signal seen by any rank (mpirun forwards SIGTERM/SIGINT to
             * all, but they arrive at different steps) stops every rank after this step */
            double sv = (double)stop;
            if (tf_dist_allreduce_f64(D, &sv, 1, 1, &err)) {
                tf_live_clear(&live);
                fl_cli_error(TOOL, "step %llu: %s", (unsigned long long)micro, err.msg);
                status = FL_EXIT_DATA;
                break;
            }
            stop = (int)sv;
        }
        int want_ckpt = o->ckpt_dir && (last || stop || (o->ckpt_every && micro % o->ckpt_every == 0));
        if (want_ckpt) {
            double c0 = fl_now_s();
            if (save_checkpoint(&cc, epoch, bpos, epoch_loss, epoch_correct, epoch_seen,
                                wall_before + fl_now_s() - t_start, &err)) {
                tf_live_clear(&live);
                fl_cli_error(TOOL, "checkpoint: %s", err.msg);
                status = FL_EXIT_DATA;
                break;
            }
            ckpt_s += fl_now_s() - c0;
        }
        if (log_failed) {
            tf_live_clear(&live);
            fl_cli_error(TOOL, "--log %s: cannot write: %s%s%s", o->log_path, strerror(log_failed),
                         o->ckpt_dir ? "; stopped after checkpoint " : "",
                         o->ckpt_dir ? cc.last_path : "");
            status = FL_EXIT_DATA;
            break;
        }
        if (stop) {
            tf_live_clear(&live);
            if (D->rank == 0)
                fprintf(stderr,
                    "%s: stopped by %s at epoch %llu batch %llu (step %llu)%s%s%s\n", TOOL,
                    stop == SIGTERM ? "SIGTERM" : stop == SIGINT ? "SIGINT" : "a signal",
                    (unsigned long long)epoch + 1, (unsigned long long)bpos,
                    (unsigned long long)micro, o->ckpt_dir ? "; checkpoint " : "; no --checkpoint DIR, progress lost",
                    o->ckpt_dir ? cc.last_path : "", o->ckpt_dir ? "; continue with --resume" : "");
            status = 128 + stop;
            break;
        }
    }
    fl_loader_stats ls;
    fl_loader_stats_get(L, &ls);
    fl_loader_close(L);
    L = NULL;
    if (status == FL_EXIT_OK && !have_eval && D->rank == 0) {
        /* resumed from a checkpoint taken after the last epoch: evaluate once */
        if (evaluate(ops, b, o->val, batch, size, o->tta, o->ema > 0, 1, &quiet, &ev, &err)) {
            fl_cli_error(TOOL, "evaluation: %s", err.msg);
            status = FL_EXIT_DATA;
        } else {
            have_eval = 1;
        }
    }
    if (log && D->rank == 0) {
        int e = close_output(log);
        log = NULL;
        if (e && status == FL_EXIT_OK) {
            fl_cli_error(TOOL, "--log %s: cannot write: %s", o->log_path, strerror(e));
            status = FL_EXIT_DATA;
        }
    }
    uint64_t skipped_steps = 0;
    if (ops->get_state(b, &cc.ck.st, &err) == 0)
        skipped_steps = cc.ck.st.skipped_steps;
    /* data parallel: every rank must have run the same number of steps; count the samples of
     * this run over all ranks (a resumed run's count shows where it started) */
    double steps_min = (double)micro, steps_max = (double)micro, samples_run = (double)images;
    if (D->world > 1 && status == FL_EXIT_OK) {
        double mm[2] = {(double)micro, -(double)micro};
        if (tf_dist_allreduce_f64(D, mm, 2, 1, &err) ||
            tf_dist_allreduce_f64(D, &samples_run, 1, 0, &err)) {
            fl_cli_error(TOOL, "%s", err.msg);
            status = FL_EXIT_DATA;
        }
        steps_max = mm[0];
        steps_min = -mm[1];
    }
    const uint64_t start_sample = start_batch * batch * (uint64_t)D->world;
    if (status == FL_EXIT_OK && !quiet && (D->world > 1 || resumed))
        fprintf(stderr,
                "%s: %d process(es): %.0f..%.0f steps per rank; %.0f samples trained in this run "
                "(all ranks), starting at epoch %llu sample %llu\n",
                TOOL, D->world, steps_min, steps_max, samples_run,
                (unsigned long long)start_epoch + 1, (unsigned long long)start_sample);
    double wall = fl_now_s() - t_start;
    double busy = data_wait + compute;
    double ips = busy > 0 ? images * (double)D->world / busy : 0,
           dwf = busy > 0 ? data_wait / busy : 0;
    if (status == FL_EXIT_OK && !quiet) {
        char rate[32];
        fl_cli_human_rate(ips, "img/s", rate, sizeof rate);
        fprintf(stderr,
                "%s: done: val top1 %.2f%% loss %.4f after %d epoch%s | %s | wall %.1f s "
                "(train %.1f s, eval %.1f s, checkpoints %.1f s)\n",
                TOOL, 100.0 * ev.top1, ev.loss, o->epochs, o->epochs == 1 ? "" : "s", rate, wall, busy, eval_s, ckpt_s);
        fprintf(stderr,
                "%s: step time split: compute %.1f%% (%.2f s)%s, waiting for data %.1f%% (%.2f s)"
                " | loader: %s, %u worker%s, decode %.2f s, io wait %.2f s%s\n",
                TOOL, busy > 0 ? 100.0 * (compute - h2d) / busy : 0, compute - h2d,
                on_cpu ? "" : "", 100.0 * dwf, data_wait, ls.io_backend ? ls.io_backend : "?",
                (unsigned)workers, workers == 1 ? "" : "s", ls.decode_s, ls.io_wait_s,
                dwf > 0.1 ? " -> the input pipeline is the bottleneck: raise --workers" : "");
        if (!on_cpu)
            fprintf(stderr, "%s: host-to-device copies %.2f s (%.1f%%)%s\n", TOOL, h2d,
                    busy > 0 ? 100.0 * h2d / busy : 0,
                    skipped_steps ? " (fp16 steps skipped for inf/nan: see JSON)" : "");
        if (nv_samples) {
            char m1[32], m2[32];
            fl_cli_human_bytes(nv_mem_max, m1, sizeof m1);
            fl_cli_human_bytes(nv_mem_total, m2, sizeof m2);
            fprintf(stderr, "%s: GPU utilisation %.0f%% on average (%d samples), memory used up to "
                    "%s of %s (NVML)\n", TOOL, nv_util_sum / nv_samples, nv_samples, m1, m2);
        } else if (!on_cpu) {
            fprintf(stderr, "%s: GPU utilisation: not available (no NVML or run too short)\n",
                    TOOL);
        }
    }
    if (o->json && status == FL_EXIT_OK && D->rank == 0) {
        fl_json j;
        fl_json_init(&j);
        fl_json_begin_object(&j);
        fl_json_key(&j, "val_top1");
        fl_json_double(&j, ev.top1);
        if (num_classes > 10) {
            fl_json_key(&j, "val_top5");
            fl_json_double(&j, ev.top5);
        }
        fl_json_key(&j, "val_loss");
        fl_json_double(&j, ev.loss);
        fl_json_key(&j, "epochs");
        fl_json_int(&j, o->epochs);
        fl_json_key(&j, "images_per_sec");
        fl_json_double(&j, ips);
        fl_json_key(&j, "data_wait_fraction");
        fl_json_double(&j, dwf);
        fl_json_key(&j, "device");
        fl_json_string(&j, ops->name);
        fl_json_key(&j, "precision");
        fl_json_string(&j, precision_name(prec));
        fl_json_key(&j, "wall_seconds");
        fl_json_double(&j, wall);
        fl_json_key(&j, "train_seconds");
        fl_json_double(&j, busy);
        fl_json_key(&j, "compute_seconds");
        fl_json_double(&j, compute - h2d);
        fl_json_key(&j, "data_wait_seconds");
        fl_json_double(&j, data_wait);
        fl_json_key(&j, "h2d_seconds");
        fl_json_double(&j, h2d);
        fl_json_key(&j, "eval_seconds");
        fl_json_double(&j, eval_s);
        fl_json_key(&j, "model");
        fl_json_string(&j, spec.name);
        fl_json_key(&j, "batch");
        fl_json_uint(&j, batch);
        fl_json_key(&j, "steps"); /* optimizer steps */
        fl_json_uint(&j, opt_steps);
        fl_json_key(&j, "micro_steps");
        fl_json_uint(&j, micro);
        fl_json_key(&j, "images");
        fl_json_uint(&j, (uint64_t)samples_run); /* all ranks */
        fl_json_key(&j, "skipped_steps");
        fl_json_uint(&j, skipped_steps);
        fl_json_key(&j, "resumed");
        fl_json_bool(&j, resumed);
        fl_json_key(&j, "world");
        fl_json_int(&j, D->world);
        fl_json_key(&j, "global_batch");
        fl_json_uint(&j, (uint64_t)batch * (uint64_t)D->world);
        fl_json_key(&j, "steps_min");
        fl_json_uint(&j, (uint64_t)steps_min);
        fl_json_key(&j, "steps_max");
        fl_json_uint(&j, (uint64_t)steps_max);
        fl_json_key(&j, "samples_run");
        fl_json_uint(&j, (uint64_t)samples_run);
        fl_json_key(&j, "start_epoch");
        fl_json_uint(&j, start_epoch);
        fl_json_key(&j, "start_sample");
        fl_json_uint(&j, start_sample);
        fl_json_key(&j, "backend");
        fl_json_string(&j, desc);
        fl_json_key(&j, "gpu_utilization");
        if (nv_samples)
            fl_json_double(&j, nv_util_sum / nv_samples / 100.0);
        else
            fl_json_null(&j);
        fl_json_key(&j, "gpu_memory_used_bytes");
        if (nv_samples)
            fl_json_uint(&j, nv_mem_max);
        else
            fl_json_null(&j);
        fl_json_end_object(&j);
        printf("%s\n", fl_json_text(&j));
        fl_json_free(&j);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fl_cli_error(TOOL, "--json: cannot write the summary to stdout: %s", strerror(errno));
            status = FL_EXIT_DATA;
        }
    }
    tf_nvml_close(nv);
out:
#ifdef TF_HAVE_GPU_BACKEND
    if (nccl_comm) {
        tf_gpu_set_comm(b, NULL, &err);
        tf_gpu_comm_destroy(nccl_comm);
    }
#else
    (void)nccl_comm;
#endif
    if (log)
        fclose(log);
    fl_loader_close(L);
    tf_checkpoint_free(&cc.ck);
    tf_checkpoint_free(&rck);
    ops->destroy(b);
    tf_model_free(&spec);
    return status;
}

int tf_train_main(const tf_options *o)
{
    fl_error err;
    tf_dist D;
    if (tf_dist_init(NULL, NULL, &D, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        tf_dist_finalize(&D);
        return FL_EXIT_USAGE;
    }
    int status = train_run(o, &D);
    if (D.world > 1 && status != FL_EXIT_OK && status < 128) {
        /* this rank failed: the others would wait for it in the next collective; end the job */
        fprintf(stderr, "%s: rank %d of %d failed (exit %d): aborting every rank\n", TOOL, D.rank,
                D.world, status);
        tf_dist_abort(&D, status);
    }
    tf_dist_finalize(&D);
    return status;
}

int tf_eval_main(const char *ckpt_path, const char *data, uint32_t batch, int tta, int json,
                 const char *device, int threads)
{
    fl_error err;
    tf_checkpoint ck;
    struct stat st;
    char latest[4096];
    if (stat(ckpt_path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* A --checkpoint DIR: evaluate its newest valid checkpoint, as --resume would use. */
        if (tf_checkpoint_load_latest(ckpt_path, &ck, latest, sizeof latest, NULL, 0, &err)) {
            fl_cli_error(TOOL, "%s", err.msg);
            return FL_EXIT_DATA;
        }
        ckpt_path = latest;
        if (!json)
            fprintf(stderr, "%s: evaluating %s (newest valid checkpoint)\n", TOOL, ckpt_path);
    } else if (tf_checkpoint_load(ckpt_path, &ck, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    tf_model_spec spec;
    if (tf_model_build(ck.model, ck.in_c, ck.in_h, ck.in_w, ck.num_classes, &ck.mopt, &spec,
                       &err)) {
        fl_cli_error(TOOL, "%s: %s", ckpt_path, err.msg);
        tf_checkpoint_free(&ck);
        return FL_EXIT_DATA;
    }
    if (spec.spec_id != ck.spec_id || spec.param_count != ck.param_count) {
        fl_cli_error(TOOL, "%s: model %s does not match this build's definition", ckpt_path,
                     ck.model);
        return FL_EXIT_DATA;
    }
    memcpy(spec.mean, ck.mean, sizeof spec.mean);
    memcpy(spec.std, ck.std, sizeof spec.std);
    const tf_backend_ops *ops;
    char notice[400];
    if (tf_pick_backend(device, &ops, notice, sizeof notice, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    if (notice[0] && !json)
        fprintf(stderr, "%s: %s\n", TOOL, notice);
    tf_train_config cfg;
    tf_train_config_init(&cfg);
    cfg.precision = strcmp(ops->name, "cpu") ? TF_BF16 : TF_FP32;
    cfg.max_batch = batch ? batch : 256;
    cfg.threads = threads;
    cfg.ema_decay = ck.has_ema ? 0.5f : 0.0f;
    tf_backend *b;
    if (ops->create(&spec, &cfg, &b, &err) || ops->set_state(b, &ck.st, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    fl_dataset *probe;
    if (fl_dataset_open(data, &probe, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    uint32_t size = fl_dataset_schema(probe)->height ? 0 : (uint32_t)ck.in_h;
    /* scored against the wrong labels, a dataset packed with another class list gives a number
     * that means nothing: compare with the classes the checkpoint was trained on (recorded since
     * issue 10; older checkpoints only know their count) */
    uint32_t dn = fl_dataset_num_classes(probe);
    char why[9000] = "";
    fl_jdoc *cdoc = NULL;
    const fl_jnode *cl = NULL;
    if (ck.config_json && ck.config_json[0] &&
        fl_jparse(ck.config_json, strlen(ck.config_json), ckpt_path, &cdoc, &err) == 0)
        cl = fl_jget(fl_jroot(cdoc), "classes");
    if (cl && cl->type == FL_J_ARRAY && cl->count == (size_t)ck.num_classes) {
        const char **ref = calloc(cl->count ? cl->count : 1, sizeof *ref);
        const char **got = class_names(probe, dn);
        uint32_t k = 0;
        for (const fl_jnode *c = cl->child; ref && c; c = c->next)
            ref[k++] = c->type == FL_J_STRING ? c->str : "";
        k = ref && got ? first_class_difference(ref, (uint32_t)cl->count, got, dn) : 0;
        if (!ref || !got)
            snprintf(why, sizeof why, "out of memory");
        else if (k != UINT32_MAX)
            snprintf(why, sizeof why, "%s labels its classes differently from the data %s was "
                     "trained on: label %u is '%s' in %s, '%s' in training", data, ckpt_path, k,
                     got[k], data, k < cl->count ? ref[k] : "(none: more classes)");
        free((void *)ref);
        free((void *)got);
    } else if (dn > (uint32_t)ck.num_classes) {
        snprintf(why, sizeof why, "%s has %u classes but %s was trained on %d", data, dn,
                 ckpt_path, ck.num_classes);
    }
    fl_jfree(cdoc);
    fl_dataset_close(probe);
    if (why[0]) {
        fl_cli_error(TOOL, "%s", why);
        ops->destroy(b);
        tf_model_free(&spec);
        tf_checkpoint_free(&ck);
        return FL_EXIT_USAGE;
    }
    int quiet = json;
    eval_out ev;
    int rc = evaluate(ops, b, data, cfg.max_batch, size, tta, ck.has_ema, 1, &quiet, &ev, &err);
    ops->destroy(b);
    if (rc) {
        fl_cli_error(TOOL, "%s", err.msg);
        tf_model_free(&spec);
        tf_checkpoint_free(&ck);
        return FL_EXIT_DATA;
    }
    if (json) {
        printf("{\"checkpoint\":");
        fl_json_fputs(stdout, ckpt_path, strlen(ckpt_path));
        printf(",\"model\":\"%s\",\"images\":%llu,\"top1\":%.6g,\"top5\":%.6g,\"loss\":%.6g,"
               "\"epoch\":%llu,\"steps\":%llu,\"device\":\"%s\",\"seconds\":%.3f}\n",
               spec.name, (unsigned long long)ev.n, ev.top1, ev.top5, ev.loss,
               (unsigned long long)ck.epoch, (unsigned long long)ck.st.step, ops->name,
               ev.seconds);
    } else {
        printf("%s on %s: %llu images, top1 %.2f%%, top5 %.2f%%, loss %.4f (%.1f s)\n", ckpt_path,
               data, (unsigned long long)ev.n, 100 * ev.top1, 100 * ev.top5, ev.loss, ev.seconds);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fl_cli_error(TOOL, "cannot write the result to stdout: %s", strerror(errno));
        tf_model_free(&spec);
        tf_checkpoint_free(&ck);
        return FL_EXIT_DATA;
    }
    tf_model_free(&spec);
    tf_checkpoint_free(&ck);
    return 0;
}
