/* train_prepare.c — the prepare phases of `trainfast train` (train_internal.h): options and
 * backend, the datasets (shapes, classes, identity), the model and its training config, the
 * backend with its communicator, the train loader, the banner and --log. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "epoch_budget.h"
#include "fl_cli.h"
#include "fl_file.h"
#include "train_internal.h"

int tf_prepare_options(tf_run *r)
{
    const tf_options *o = r->o;
    fl_error err;
    if (!o->data || !o->val) {
        fl_cli_error(TOOL, "train needs --data DIR and --val DIR");
        return FL_EXIT_USAGE;
    }
    if (o->resume && !o->ckpt_dir) {
        fl_cli_error(TOOL, "--resume needs --checkpoint DIR");
        return FL_EXIT_USAGE;
    }
    char notice[400];
    if (tf_pick_backend(o->device, &r->ops, notice, sizeof notice, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    r->on_cpu = !strcmp(r->ops->name, "cpu");
    if (notice[0] && r->D->rank == 0)
        fprintf(stderr, "%s: %s\n", TOOL, notice);
    if (o->sync_bn && !r->on_cpu) {
        fl_cli_error(TOOL, "--sync-bn is supported by the CPU backend only so far (the CUDA "
                           "backend keeps BatchNorm statistics per process); leave --sync-bn out");
        return FL_EXIT_USAGE;
    }
    /* CPU: fp32 by default; bf16 when asked (the backend refuses it, saying why, on a CPU
     * without native bf16 or off the oneDNN path); fp16 has no CPU kernels: fp32 with a notice */
    r->prec = o->precision_given ? o->precision : (r->on_cpu ? TF_FP32 : TF_BF16);
    if (r->on_cpu && r->prec == TF_FP16) {
        fprintf(stderr,
                "%s: the CPU backend has no fp16 kernels: --precision fp16 falls back to "
                "fp32\n",
                TOOL);
        r->prec = TF_FP32;
    }
    r->batch = o->batch ? o->batch : (r->on_cpu ? 128 : 512);
    /* CPU: decoding and compute share the cores. Without --workers a worker per core is
     * started and only as many work as the steps need (decode_workers.h, train_loop.c) */
    r->cores = tf_dist_default_threads(r->D);
    r->workers_auto = r->on_cpu && o->workers <= 0;
    r->workers = o->workers > 0 ? o->workers : r->on_cpu ? r->cores : 0;
    r->pad_tail = r->D->world > 1; /* distributed: pad the tail so every rank runs the same steps */
    return 0;
}

/* --val is first read at the end of epoch 1: check now that it fits the model and labels the
 * same classes, rather than failing (or scoring nonsense) after a whole epoch of training.
 * Returns 0 or the exit status. */
static int check_val(const tf_run *r, const fl_dataset *train, const fl_dataset *val)
{
    const tf_options *o = r->o;
    const fl_schema *ts = &r->schema, *vs = fl_dataset_schema(val);
    const uint32_t nt = r->num_classes, nv = fl_dataset_num_classes(val);
    const int train_fixed = ts->height != 0 && ts->width != 0;
    if (vs->channels != ts->channels ||
        (train_fixed && (vs->height != ts->height || vs->width != ts->width))) {
        fl_cli_error(TOOL,
                     "--val %s holds %ux%ux%u images but --data %s holds %ux%ux%u (HxWxC; "
                     "0x0 = variable size)",
                     o->val, vs->height, vs->width, vs->channels, o->data, ts->height, ts->width,
                     ts->channels);
        return FL_EXIT_DATA;
    }
    if (nv > nt) {
        fl_cli_error(TOOL,
                     "--val %s has %u classes but --data %s has %u: pack both with the same "
                     "class list (--classes/--class-names)",
                     o->val, nv, o->data, nt);
        return FL_EXIT_USAGE;
    }
    /* label k must name the same class in both: a val set packed with another class list would
     * be scored against the wrong labels. A val set whose classes are the first ones of --data's,
     * in the same order (it lacks only trailing classes), labels them alike: it is accepted with
     * a note. */
    const char **tn = tf_class_names(train, nt), **vn = tf_class_names(val, nv);
    uint32_t k = tn && vn ? tf_first_class_difference(tn, nt, vn, nv) : 0;
    int bad = 0;
    if (!tn || !vn) {
        fl_cli_error(TOOL, "out of memory");
        bad = FL_EXIT_DATA;
    } else if (k != UINT32_MAX) {
        fl_cli_error(TOOL,
                     "--val %s labels its classes differently from --data %s: label %u is "
                     "'%s' in --val, '%s' in --data; pack both with the same class list "
                     "(--classes/--class-names)",
                     o->val, o->data, k, vn[k], tn[k]);
        bad = FL_EXIT_USAGE;
    }
    free((void *)tn);
    free((void *)vn);
    /* the training data as --val: its accuracy is how well the model fits what it trains on */
    uint8_t tid[16], vid[16];
    if (!bad && !r->quiet &&
        ((fl_dataset_id(train, tid) == 0 && fl_dataset_id(val, vid) == 0 &&
          !memcmp(tid, vid, sizeof tid)) ||
         fl_file_same_name(o->val, o->data)))
        fprintf(stderr,
                "%s: note: --val %s is the data set --data trains on: its accuracy says how well "
                "the model fits the images it learns from, not how it does on new ones (pack "
                "held-out images for --val)\n",
                TOOL, o->val);
    if (!bad && nv < nt && !r->quiet) {
        const char *first = fl_dataset_class_name(train, nv);
        fprintf(stderr,
                "%s: note: --val %s has %u of the %u classes of --data %s (the first %u, "
                "same labels; from '%s' on none): accuracy is over those classes\n",
                TOOL, o->val, nv, nt, o->data, nv, first ? first : "?");
    }
    return bad;
}

/* --epochs: as given, or auto's for a dataset of n samples (epoch_budget.h). A resumed run keeps
 * the number its checkpoint recorded, resolved when the run began: the budget's rule may change
 * between versions, the schedule of a run in progress must not. */
static void resolve_epochs(tf_run *r, uint64_t n)
{
    const tf_run_config *ck = &r->rck.cfg;
    r->epochs_auto = r->o->epochs == 0;
    if (!r->epochs_auto)
        r->epochs = (uint32_t)r->o->epochs;
    else if (r->resumed && (ck->present & TF_CFG_EPOCHS) && ck->epochs > 0)
        r->epochs = ck->epochs;
    else
        r->epochs = tf_epochs_auto(n);
}

int tf_prepare_data(tf_run *r)
{
    const tf_options *o = r->o;
    fl_error err;
    fl_dataset *probe, *vprobe;
    if (fl_dataset_open(o->data, &probe, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    r->schema = *fl_dataset_schema(probe);
    r->num_classes = fl_dataset_num_classes(probe);
    if (r->num_classes < 2) {
        const char *c0 = fl_dataset_class_name(probe, 0);
        fl_cli_error(TOOL,
                     "--data %s has %u class%s%s%s%s: a classifier needs at least 2 (one "
                     "folder per class)",
                     o->data, r->num_classes, r->num_classes == 1 ? "" : "es", c0 ? " ('" : "",
                     c0 ? c0 : "", c0 ? "')" : "");
        fl_dataset_close(probe);
        return FL_EXIT_USAGE;
    }
    resolve_epochs(r, fl_dataset_count(probe));
    tf_dataset_identity(probe, r->data_id, sizeof r->data_id);
    if (fl_dataset_open(o->val, &vprobe, &err)) {
        fl_cli_error(TOOL, "--val: %s", err.msg);
        fl_dataset_close(probe);
        return FL_EXIT_DATA;
    }
    int bad = check_val(r, probe, vprobe);
    fl_dataset_close(vprobe);
    fl_dataset_close(probe);
    if (bad)
        return bad;
    if (r->schema.height == 0 || r->schema.width == 0)
        r->size = o->size ? o->size : 224;
    r->in_h = r->size ? (int)r->size : (int)r->schema.height;
    r->in_w = r->size ? (int)r->size : (int)r->schema.width;
    r->in_c = (int)r->schema.channels;
    r->mopt = o->mopt;
    if (r->mopt.width == 0 && !strcmp(o->model, "fastcnn"))
        r->mopt.width = 24;
    return 0;
}

int tf_prepare_model(tf_run *r)
{
    const tf_options *o = r->o;
    const tf_dist *D = r->D;
    fl_error err;
    fl_loader_options *lo = &r->lo;
    fl_loader_options_init(lo);
    lo->batch_size = r->batch;
    lo->workers = (uint32_t)r->workers;
    lo->order = FL_ORDER_RANDOM;
    lo->seed = o->seed;
    lo->flip = o->flip;
    /* One process: full batches only (BN statistics and the schedule stay uniform). Data
     * parallel: pad by wrapping around, so every rank gets the same number of full batches
     * and no rank waits in a collective that another never enters. */
    lo->drop_last = !r->pad_tail;
    lo->rank = (uint32_t)D->rank;
    lo->world = (uint32_t)D->world;
    lo->log = tf_loader_log;
    lo->log_user = &r->quiet;
    lo->start_epoch = r->start_epoch;
    lo->start_batch = r->start_batch;
    if (r->size) {
        lo->out_height = lo->out_width = r->size;
        lo->augment = FL_AUG_RRC;
    }
    if (tf_model_build(o->model, r->in_c, r->in_h, r->in_w, (int)r->num_classes, &r->mopt, &r->spec,
                       &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    r->have_spec = 1;
    tf_train_config *cfg = &r->cfg;
    tf_train_config_init(cfg);
    cfg->precision = r->prec;
    cfg->label_smoothing = o->label_smoothing;
    cfg->momentum = o->momentum;
    cfg->nesterov = o->nesterov;
    cfg->weight_decay = o->wd;
    cfg->accum = o->accum;
    cfg->ema_decay = o->ema;
    cfg->crop_pad = o->crop_pad >= 0 ? o->crop_pad : 0;
    cfg->flip = 0; /* the loader flips */
    cfg->aug_seed = o->seed;
    /* by default the node's cores are shared out between its ranks, not taken by each */
    cfg->threads = o->threads > 0 ? o->threads : r->on_cpu ? tf_dist_default_threads(D) : 0;
    cfg->cpu_impl = o->cpu_impl;
    cfg->max_batch = r->batch;
    cfg->device = r->on_cpu ? 0 : D->local_rank; /* one GPU per process on a node */
    cfg->world = D->world; /* gradients are averaged through attach_comm (prepare_backend) */
    return 0;
}

/* --batch auto: the largest power of two that fits, found by the backend by trying */
static int probe_batch(tf_run *r)
{
    const tf_options *o = r->o;
    fl_error err;
    if (!(o->batch_auto && o->batch == 0 && !r->resumed))
        return 0;
    if (!r->ops->probe_batch) {
        if (!r->quiet && r->D->rank == 0)
            fprintf(stderr, "%s: --batch auto: the %s backend has no memory probe: batch %u\n",
                    TOOL, r->ops->name, r->batch);
        return 0;
    }
    uint32_t fit = 0;
    int prc = r->ops->probe_batch(&r->spec, &r->cfg, 4096, &fit, &err);
    if (r->D->world > 1) {
        /* every rank must use the same batch: the smallest fit over the ranks */
        double mf = prc ? 0.0 : -(double)fit;
        fl_error e2;
        if (tf_dist_allreduce_f64(r->D, &mf, 1, 1, &e2) == 0)
            fit = (uint32_t)(-mf);
    }
    if (prc || fit == 0) {
        fl_cli_error(TOOL, "--batch auto: %s", fit ? err.msg : "not even a batch of 1 fits");
        return FL_EXIT_DATA;
    }
    fprintf(stderr, "%s: --batch auto: %u is the largest power of two that fits\n", TOOL, fit);
    r->batch = fit;
    r->cfg.max_batch = fit;
    r->lo.batch_size = fit;
    return 0;
}

/* adapters from dist.h's collectives to tf_comm's callbacks (user: const tf_dist *) */
static int comm_bcast(void *user, void *buf, size_t bytes, int root, fl_error *err)
{
    return tf_dist_bcast((const tf_dist *)user, buf, bytes, root, err);
}

/* Data parallel (or --nccl): the backend joins the job through the trainer's communicator. */
static int attach_comm(tf_run *r)
{
    const tf_dist *D = r->D;
    fl_error err;
    if (!(D->world > 1 || (r->o->nccl && !r->on_cpu)))
        return 0;
    if (!r->ops->attach_comm) {
        fl_cli_error(TOOL, "the %s backend cannot train data-parallel", r->ops->name);
        return FL_EXIT_DATA;
    }
    r->comm = (tf_comm){.rank = D->rank,
                        .world = D->world,
                        .sync_bn = r->o->sync_bn,
                        .user = (void *)D,
                        .sum_f32 = tf_dist_grad_allreduce,
                        .sum_f64 = tf_dist_bn_allreduce,
                        .bcast = comm_bcast};
    char note[256];
    if (r->ops->attach_comm(r->b, &r->comm, note, sizeof note, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    if (note[0] && D->rank == 0 && !r->quiet)
        fprintf(stderr, "%s: %s\n", TOOL, note);
    return 0;
}

int tf_prepare_backend(tf_run *r)
{
    fl_error err;
    int status = probe_batch(r);
    if (status)
        return status;
    if (r->ops->create(&r->spec, &r->cfg, &r->b, &err)) {
        fl_cli_error(TOOL, "%s backend: %s", r->ops->name, err.msg);
        r->b = NULL;
        return FL_EXIT_DATA;
    }
    if ((status = attach_comm(r)))
        return status;
    const tf_model_spec *spec = &r->spec;
    tf_checkpoint *ck = &r->ck;
    if (tf_checkpoint_for_model(ck, spec, &r->mopt, r->o->ema > 0)) {
        fl_cli_error(TOOL, "out of memory");
        return FL_EXIT_DATA;
    }
    ck->seed = r->o->seed;
    if (r->ops->describe)
        r->ops->describe(r->b, r->desc, sizeof r->desc);
    return 0;
}

/* n with thousands separators ("1,188") */
static const char *grouped(uint64_t n, char *buf, size_t cap)
{
    char d[24];
    int len = snprintf(d, sizeof d, "%llu", (unsigned long long)n), k = 0;
    for (int i = 0; i < len && (size_t)k + 2 < cap; i++) {
        if (i && (len - i) % 3 == 0)
            buf[k++] = ',';
        buf[k++] = d[i];
    }
    buf[k] = 0;
    return buf;
}

/* "trainfast: 6,000 images: 20 epochs, 920 steps (--epochs auto: ...)", before the banner */
static void say_epochs_auto(const tf_run *r)
{
    if (r->quiet)
        return;
    const uint64_t n = fl_dataset_count(fl_loader_dataset(r->L)), accum = (uint64_t)r->o->accum;
    const uint64_t steps = (r->bpe + accum - 1) / accum * r->epochs;
    char a[32], b[32], c[32];
    fprintf(stderr,
            "%s: %s images: %u epoch%s, %s steps (--epochs auto: %s samples at least, "
            "%u epochs at least%s; --epochs N to choose)\n",
            TOOL, grouped(n, a, sizeof a), r->epochs, r->epochs == 1 ? "" : "s",
            grouped(steps, b, sizeof b), grouped(TF_AUTO_SAMPLES, c, sizeof c), TF_AUTO_MIN_EPOCHS,
            r->resumed && (r->rck.cfg.present & TF_CFG_EPOCHS) ? "; resumed: the checkpoint's"
                                                               : "");
}

/* The loader's refusal in the trainer's words: a set smaller than one batch is a usage error
 * naming --batch (the loader speaks of drop_last, an option trainfast users never set). */
static int loader_refused(const tf_run *r, const fl_error *err)
{
    const tf_options *o = r->o;
    fl_dataset *ds;
    fl_error e2;
    uint64_t n = 0;
    if (err->code == FL_E_INVALID && !fl_dataset_open(o->data, &ds, &e2)) {
        n = fl_dataset_count(ds);
        fl_dataset_close(ds);
    }
    const uint64_t share = n / (uint64_t)r->D->world;
    if (n && r->lo.drop_last && share < r->batch) {
        char per[64] = "";
        if (r->D->world > 1)
            snprintf(per, sizeof per, " (%llu per process over %d)", (unsigned long long)share,
                     r->D->world);
        fl_cli_error(TOOL,
                     "--data %s has %llu records%s, fewer than one batch: --batch %u%s; use "
                     "--batch %llu or less",
                     o->data, (unsigned long long)n, per, r->batch,
                     o->batch ? "" : " (the default)", (unsigned long long)(share ? share : 1));
        return FL_EXIT_USAGE;
    }
    fl_cli_error(TOOL, "%s", err->msg);
    return FL_EXIT_DATA;
}

int tf_prepare_loader(tf_run *r)
{
    const tf_options *o = r->o;
    fl_error err;
    if (!r->on_cpu)
        r->lo.device = r->cfg.device;
    tf_tasks before;
    tf_tasks_list(&before);
    if (fl_loader_create(o->data, &r->lo, &r->L, &err)) {
        r->L = NULL;
        return loader_refused(r, &err);
    }
    tf_tasks_list(&r->loader_tasks); /* the threads create started are the loader's */
    tf_tasks_new(&before, &r->loader_tasks);
    r->workers_started = fl_loader_workers(r->L);
    if (r->workers_auto) {
        /* before anything is measured: one worker and its spare (decode_workers.h) */
        tf_decode_auto_init(&r->dw, fl_loader_workers(r->L), 1 + TF_DW_SPARE);
        if (fl_loader_set_workers(r->L, r->dw.active, &err)) {
            fl_cli_error(TOOL, "%s", err.msg);
            return FL_EXIT_DATA;
        }
    }
    r->bpe = fl_loader_batches_per_epoch(r->L);
    r->spe = fl_loader_samples_per_epoch(r->L);
    if (r->bpe == 0) {
        fl_cli_error(TOOL, "%s: fewer samples than one batch of %u", o->data, r->batch);
        return FL_EXIT_DATA;
    }
    if (r->epochs_auto)
        say_epochs_auto(r);
    if (tf_run_config_of(r, fl_loader_dataset(r->L), &r->ck.cfg)) {
        fl_cli_error(TOOL, "out of memory");
        return FL_EXIT_DATA;
    }
    return 0;
}

int tf_prepare_output(tf_run *r)
{
    const tf_options *o = r->o;
    tf_report_banner(r);
    tf_checkpoint_free(&r->rck); /* all of it is in the backend and in r now */
    fl_error err;
    int rc;
    if (o->ckpt_dir && r->D->rank == 0 &&
        (rc = tf_checkpoint_dir_check(o->ckpt_dir, !o->resume, &r->ckpt_lock, &err))) {
        fl_cli_error(TOOL, "%s", err.msg);
        return rc == -EBUSY || rc == -EEXIST ? FL_EXIT_USAGE : FL_EXIT_DATA;
    }
    /* --log (opened "w") and --report inside a dataset folder would replace its manifest or a
     * shard, or add a file that is not the dataset's */
    const char *outs[][2] = {{"--log", o->log_path}, {"--report", o->report_path}};
    const char *ins[][2] = {{"--data", o->data}, {"--val", o->val}};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++)
            if (outs[i][1] && ins[k][1] && fl_file_clobbers(outs[i][1], ins[k][1])) {
                fl_cli_error(TOOL,
                             "%s %s is in the folder of the dataset %s %s: it would replace or add "
                             "to the dataset's files; write it elsewhere",
                             outs[i][0], outs[i][1], ins[k][0], ins[k][1]);
                return FL_EXIT_USAGE;
            }
    if (o->log_path && r->D->rank == 0 && !(r->log = fopen(o->log_path, r->resumed ? "a" : "w"))) {
        fl_cli_error(TOOL, "%s: %s", o->log_path, strerror(errno));
        return FL_EXIT_DATA;
    }
    return 0;
}
