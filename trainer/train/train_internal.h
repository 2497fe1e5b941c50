/* train_internal.h — what the phases of `trainfast train` share (private to trainfast). train.c
 * drives them in order: prepare (train_prepare.c: options -> datasets -> model -> backend ->
 * loader), restore (train_restore.c: the checkpoint of --resume), the epochs (train_loop.c),
 * evaluation (train_eval.c) and the console output (progress/progress.c). train_config.c says what
 * defines a run. Each phase returns a process exit status (0 = go on) after printing its one-line
 * error. */
#ifndef TF_TRAIN_INTERNAL_H
#define TF_TRAIN_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "checkpoint.h"
#include "decode_workers.h"
#include "task_cpu.h"
#include "dist.h"
#include "fastload.h"
#include "train.h"

#define TOOL "trainfast"

/* one evaluation over a whole dataset */
typedef struct tf_eval_out {
    double loss, top1, top5;
    uint64_t n;
    double seconds;
} tf_eval_out;

/* what the epochs measured, for the summary (progress/progress.c) */
typedef struct tf_run_totals {
    double data_wait, compute, h2d, eval_s, ckpt_s; /* seconds */
    uint64_t images;           /* samples this process trained on in this run */
    uint64_t micro, opt_steps; /* train_step calls / optimizer steps so far (whole run) */
    tf_eval_out ev;            /* the last evaluation */
    int have_eval;
    double nv_util_sum; /* NVML: GPU utilisation samples (percent) */
    int nv_samples;
    unsigned long long nv_mem_max, nv_mem_total;
    uint64_t skipped_steps;                   /* fp16 steps skipped for inf/nan */
    double steps_min, steps_max, samples_run; /* over all ranks */
    fl_loader_stats ls;
    /* how the cores were used while training (the epochs less their evaluations): this
     * process's CPU seconds (user + system), those of the train loader's threads, and the wall
     * seconds they were spent in */
    double cpu_s, decode_cpu_s, cpu_wall_s;
} tf_run_totals;

typedef struct tf_run {
    const tf_options *o;
    const tf_dist *D;
    double t_start;
    int quiet; /* o->quiet, or not rank 0: only rank 0 reports */
    /* prepare_options */
    const tf_backend_ops *ops;
    int on_cpu;
    tf_precision prec;
    uint32_t batch;   /* per rank */
    int workers;      /* decode workers the loader starts (0: the loader's default) */
    int workers_auto; /* CPU without --workers: how many work is chosen as it trains (dw) */
    int cores;        /* the cores this process may use (the node's, shared out) */
    tf_decode_auto dw;
    /* restore: the checkpoint of --resume */
    int resumed;
    tf_checkpoint rck;
    char rpath[4096];
    uint64_t start_epoch, start_batch;
    int pad_tail; /* wrap the epoch's tail: every rank runs the same steps */
    /* prepare_data */
    fl_schema schema;
    uint32_t num_classes;
    char data_id[200]; /* train_config.c: tf_dataset_identity */
    uint32_t size;     /* output size of a variable-size dataset, else 0 */
    int in_h, in_w, in_c;
    tf_model_options mopt;
    uint32_t epochs; /* --epochs, or auto's (epoch_budget.h) / the checkpoint's */
    int epochs_auto; /* --epochs auto (the default) */
    /* prepare_model */
    fl_loader_options lo;
    tf_model_spec spec;
    int have_spec;
    tf_train_config cfg;
    /* prepare_backend */
    tf_backend *b;
    tf_comm comm;
    char desc[256];
    tf_checkpoint ck; /* the checkpoint this run writes (allocated once) */
    char last_ckpt[4096];
    /* prepare_loader */
    fl_loader *L;
    tf_tasks loader_tasks;    /* its threads (the decode workers): their CPU time */
    uint32_t workers_started; /* its decode workers (fl_loader_workers) */
    uint64_t bpe, spe;        /* batches / samples per epoch (this rank) */
    FILE *log;
    int ckpt_lock;     /* fd holding --checkpoint DIR's lock (rank 0), else -1 */
    fl_tbuf log_lines; /* the log's lines of this run, for --report (rank 0) */
    /* the interrupted epoch's running figures (restored) and the time before this run */
    double epoch_loss, wall_before;
    uint64_t epoch_correct, epoch_seen;
    tf_run_totals t;
} tf_run;

/* ---- train_prepare.c ---- */
int tf_prepare_options(tf_run *r); /* required options, backend, precision, batch, workers */
int tf_prepare_data(tf_run *r);    /* --data/--val: shapes, classes, identity; input size */
int tf_prepare_model(tf_run *r);   /* model spec, backend config, train loader options */
int tf_prepare_backend(tf_run *r); /* --batch auto, create, communicator, checkpoint buffer */
int tf_prepare_loader(tf_run *r);  /* the train loader and the run's config for checkpoints */
int tf_prepare_output(tf_run *r);  /* the banner, --log opened */

/* ---- train_restore.c ---- */
int tf_restore_load(tf_run *r);        /* --resume: read the newest valid checkpoint */
int tf_restore_check(tf_run *r);       /* refuse a run that differs from it; its global batch */
int tf_restore_check_model(tf_run *r); /* its model and EMA against this run's */
int tf_restore_state(tf_run *r);       /* weights into the backend: the checkpoint's or new */
int tf_restore_check_accum(tf_run *r); /* its accumulation group against this trainfast's */

/* ---- train_loop.c ---- */
/* Train until the last epoch or a stop (signal, error). Returns the exit status. */
int tf_run_epochs(tf_run *r);

/* Every rank calls this at the same step (it holds collectives); rank 0 writes the file. */
int tf_save_checkpoint(tf_run *r, uint64_t epoch, uint64_t batch, double loss_sum, uint64_t correct,
                       uint64_t seen, fl_error *err);

/* ---- train_eval.c ---- */
/* The loader's batch fb as a backend sees it: its first n samples (n <= fb->size; fewer for the
 * wrapped-around tail of an epoch), host and device pointers and the augmentation key;
 * accum_group 0 (the caller sets it). */
tf_batch tf_batch_of(const fl_batch *fb, uint32_t n);

/* Evaluate the backend's model (EMA weights when use_ema) on the dataset at path, in order. */
int tf_evaluate(const tf_backend_ops *ops, tf_backend *b, const char *path, uint32_t batch,
                uint32_t size, int tta, int use_ema, int workers, int *quiet, tf_eval_out *out,
                fl_error *err);

/* Class names of a dataset in label order ("" where it has none): a malloc'ed array of pointers
 * into ds (valid until it closes), or NULL when out of memory. */
const char **tf_class_names(const fl_dataset *ds, uint32_t n);

/* The first label whose class differs between the classes a model was trained on (ref) and those
 * of a dataset it is scored on (got), or UINT32_MAX when every label of got names the same class
 * in ref. A dataset holding only the first classes of ref, under the same names, labels them
 * alike: no difference. One with more classes than ref differs at label nref. */
uint32_t tf_first_class_difference(const char *const *ref, uint32_t nref, const char *const *got,
                                   uint32_t ngot);

/* the loader's messages on stderr (warnings always, notes unless *(int *)user) */
void tf_loader_log(void *user, int level, const char *msg);

/* eval, predict and export: load the checkpoint *ckpt_path (a --checkpoint DIR: its newest valid
 * one, whose path goes to `latest` and *ckpt_path, announced on stderr as "<verb> PATH" unless
 * json or verb is NULL) and build its model with the checkpoint's mean/std. Returns 0, or the
 * exit status after printing the error (nothing left to free). */
int tf_eval_load(const char **ckpt_path, char *latest, size_t cap, const char *verb, int json,
                 tf_checkpoint *ck, tf_model_spec *spec);

/* Why dataset `ds` (at `data`) cannot be scored by checkpoint ck: its classes are labelled
 * differently, or it has more of them; "" in why when it fits. */
void tf_check_classes(const tf_checkpoint *ck, const char *ckpt_path, const fl_dataset *ds,
                      const char *data, char *why, size_t cap);

/* ---- train_config.c ---- */
/* The dataset's identity: format v2's dataset_id when the manifest has one, followed by
 * "; content DIGEST" when the manifest has packdata's inputs digest (a re-pack of the same inputs
 * with the same options has a new id and the same digest: --resume accepts it), else its record
 * and class counts and the CRC32C of its manifest text (which lists every shard's size). */
void tf_dataset_identity(const fl_dataset *ds, char *out, size_t cap);

/* This run's config as a checkpoint records it (classes and data from ds). 0 or -ENOMEM. */
int tf_run_config_of(const tf_run *r, const fl_dataset *ds, tf_run_config *out);

/* Compare the options that define this run with the checkpoint's config ck. Returns 0 when they
 * match (options an older checkpoint did not record are listed in `unchecked`), else 1 with the
 * first difference described in msg. */
int tf_run_config_differs(const tf_run *r, const tf_run_config *ck, char *msg, size_t cap,
                          char *unchecked, size_t ucap);

/* ---- progress/progress.c ---- */
const char *tf_precision_name(tf_precision p);
void tf_report_banner(const tf_run *r); /* the run's one-line description (and resume) */
/* Close --log (flush, fsync); 0 or the errno of the first failure. */
int tf_close_output(FILE *f);
/* The end-of-run summary: text on stderr, the JSON object on stdout with --json. Returns status,
 * or FL_EXIT_DATA when the JSON could not be written. */
int tf_report_summary(tf_run *r, int status);

#endif
