/* train.h — `trainfast train` (train.c, a driver over the phases of train_internal.h), `trainfast
 * eval` (train_eval.c), console output (progress/progress.c), the backend choice
 * (backend/backends.c) and the environment check (doctor/doctor.c). Front end: main.c. These
 * functions print (they are the front end's layer) and return a process exit status. */
#ifndef TF_TRAIN_H
#define TF_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "fl_cli_table.h"
#include "fl_json.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_options {
    const char *data, *val; /* packed datasets (train, validation) */
    const char *model;      /* "fastcnn" */
    tf_model_options mopt;
    int epochs;     /* 0 = auto: sized from the dataset (epoch_budget.h) */
    uint32_t batch; /* 0 = the default (128 on CPU, 512 on GPU) or --batch auto */
    int batch_auto; /* --batch auto: probe the largest power of two that fits (GPU) */
    float lr, wd, momentum, label_smoothing;
    int nesterov;
    int cosine; /* 1 cosine, 0 linear decay */
    float warmup_epochs;
    tf_precision precision;
    int precision_given; /* --precision was on the command line */
    const char *device;  /* "cpu", "cuda", "auto" */
    int workers;         /* 0 = auto */
    uint64_t seed;
    const char *ckpt_dir;
    uint64_t ckpt_every; /* steps; 0 = only at epoch ends and on signals */
    int resume;
    const char *log_path;
    uint32_t log_every;      /* --log-every N: micro-batches per point of the log; 0 = auto */
    const char *report_path; /* --report FILE.html: the HTML report at the end (report_train.c) */
    int json, quiet;
    int threads;  /* CPU compute threads; 0 = cores */
    int cpu_impl; /* --cpu-backend: tf_cpu_impl (0: the default) */
    int accum;
    float ema;
    int tta;       /* flip TTA at evaluation */
    int crop_pad;  /* random crop padding (-1 = auto: 2 for <= 64 px, else 0) */
    int flip;      /* random horizontal flip (loader) */
    uint32_t size; /* output size for variable-size datasets (0 = 224) */
    /* data parallel (docs/DISTRIBUTED.md); rank/world come from the launcher (dist.h) */
    int nproc;   /* --nproc N: main.c re-execs under mpirun -np N (0 = not given) */
    int sync_bn; /* --sync-bn: synchronized BatchNorm statistics */
    int nccl;    /* --nccl: GPU gradients through NCCL even for one process */
} tf_options;

void tf_options_init(tf_options *o);

/* Run `trainfast train`. Returns the exit status: 0, 1 (data/runtime error), 2 (usage),
 * 130/143 (stopped by SIGINT/SIGTERM after checkpointing). */
int tf_train_main(const tf_options *o);

/* Run `trainfast eval CKPT DATA`. */
int tf_eval_main(const char *ckpt, const char *data, uint32_t batch, int tta, int json,
                 const char *device, int threads, int cpu_impl);

/* ---- progress/progress.c ---- */
typedef struct tf_live { /* the progress line on a terminal */
    int active;          /* stderr is a TTY and not quiet */
    double last_draw;
    double t_start;
} tf_live;

void tf_live_start(tf_live *lv, int quiet);
/* Redraw (at most ~8 times a second) "epoch e/E [bar] done/total loss acc img/s". */
void tf_live_update(tf_live *lv, int epoch, int epochs, uint64_t done, uint64_t total, double loss,
                    double acc, double img_per_s);
void tf_live_clear(tf_live *lv);

typedef struct tf_epoch_report {
    int epoch, epochs;
    double train_loss, train_acc;
    double val_loss, val_top1, val_top5; /* val_top5 < 0: not reported (<= 10 classes) */
    double lr;
    double images_per_sec, data_wait_fraction;
    double epoch_seconds, wall_seconds;
    uint64_t steps;
    /* the epoch's step-time split (seconds): compute without host-to-device copies, copies,
     * waiting for data, its evaluation, checkpoints written during it */
    double compute_s, h2d_s, data_wait_s, eval_s, ckpt_s;
    double gpu_util; /* mean GPU utilisation (fraction); < 0: not sampled */
    unsigned long long gpu_mem, gpu_mem_total; /* bytes (when gpu_util >= 0) */
    /* how the cores were split while the epoch trained (its evaluation not included): the
     * cores of this process (0: not reported), compute threads (0: the GPU), decode workers at
     * work (mean over the steps), CPU seconds of the loader's threads and of the whole process,
     * and the wall seconds of the epoch's training */
    int cores, compute_threads;
    double decode_workers, decode_cpu_s, cpu_s, train_wall_s;
    const char *points_json; /* the "points" array (JSON text) or NULL */
    const char *run_json;    /* the "run" object (JSON text) or NULL */
} tf_epoch_report;

/* One line on stderr (unless quiet) and one JSON object line in `log` (may be NULL), flushed;
 * the line is also appended to `lines` (may be NULL; train --report). Returns 0, or the errno of
 * a failed write to `log` (e.g. ENOSPC). */
int tf_report_epoch(const tf_epoch_report *r, int quiet, FILE *log, fl_tbuf *lines);

/* Run `trainfast doctor`. */
int tf_doctor_main(int json);

/* Pick a backend for --device (cpu|cuda|auto). On success *ops is set and, when auto fell back
 * to the CPU, notice holds a one-line explanation. Errors: FL_E_UNSUPPORTED with the reason. */
int tf_pick_backend(const char *device, const tf_backend_ops **ops, char *notice, size_t cap,
                    fl_error *err);

/* --cpu-backend of train, eval and predict: its words (reference, onednn: tf_cpu_impl values),
 * help and default, and the check that the path asked for is in this build: 0, or FL_EXIT_USAGE
 * after one error line saying what to install. */
extern const fl_cli_choice tf_cpu_backend_choices[];
#define TF_CPU_BACKEND_HELP                                                                        \
    "CPU compute path: onednn (oneDNN primitives) or reference (the\n"                             \
    "plain C layers the tests compare against; same checkpoints)"
#define TF_CPU_BACKEND_DEF "onednn when built with it ($FASTLOAD_CPU_BACKEND overrides)"
int tf_cpu_impl_refused(int cpu_impl);

#ifdef __cplusplus
}
#endif
#endif
