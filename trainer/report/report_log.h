/* report_log.h — the training log (`trainfast train --log FILE.jsonl`) read back for reports
 * (report_log.c), and the HTML report drawn from one or more logs (report_html.c, report_svg.c).
 *
 * The log is one JSON object per line, one line per finished epoch (docs/REPORT.md lists the
 * fields). A line may carry "points" (the epoch's per-N-steps figures) and "run" (the run's
 * configuration: written on the first line each process writes). The reader keeps what the
 * charts need; fields it does not know are ignored, so logs may gain fields freely. */
#ifndef TF_REPORT_LOG_H
#define TF_REPORT_LOG_H

#include <stddef.h>

#include "fl_error.h"
#include "fl_json.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The per-epoch figures a report uses, in the order of TF_LOG_EPOCH_KEYS (report_log.c). A
 * figure a line does not carry (or carries as null) is NaN. */
enum {
    TF_E_EPOCH = 0, /* 1-based epoch number (the x of the per-epoch points) */
    TF_E_STEPS,     /* optimizer steps so far */
    TF_E_LR,
    TF_E_TRAIN_LOSS,
    TF_E_TRAIN_ACC, /* fraction */
    TF_E_VAL_LOSS,
    TF_E_VAL_TOP1, /* fraction */
    TF_E_VAL_TOP5,
    TF_E_IPS,       /* images/s (all processes) */
    TF_E_WAIT_FRAC, /* data-wait fraction of the step time */
    TF_E_EPOCH_S,   /* the epoch's wall time (its steps and evaluation, checkpoints during it) */
    TF_E_WALL_S,    /* since the run started (with the time before a resume) */
    TF_E_COMPUTE_S, /* the step-time split of the epoch, seconds */
    TF_E_WAIT_S,
    TF_E_H2D_S,
    TF_E_EVAL_S,
    TF_E_CKPT_S,
    TF_E_GPU_UTIL,      /* mean GPU utilisation, fraction (NVML) */
    TF_E_GPU_MEM,       /* GPU memory used, max over the epoch, bytes */
    TF_E_GPU_MEM_TOTAL, /* bytes */
    /* how the cores were split while the epoch trained: the process's cores, its compute
     * threads, the decode workers at work (mean), the CPU seconds of its loader's threads and of
     * the whole process, and the wall seconds of that training */
    TF_E_CORES,
    TF_E_THREADS,
    TF_E_DECODE_WORKERS,
    TF_E_DECODE_CPU_S,
    TF_E_CPU_S,
    TF_E_TRAIN_WALL_S,
    TF_E_COUNT
};

/* One per-N-steps point (the "points" array of an epoch line). */
enum {
    TF_P_X = 0, /* epochs done at this point (fractional: 2.5 = half of epoch 3) */
    TF_P_STEP,  /* optimizer steps so far */
    TF_P_LR,
    TF_P_LOSS, /* mean training loss of the steps since the previous point */
    TF_P_ACC,
    TF_P_IPS,
    TF_P_WAIT_FRAC,
    TF_P_COUNT
};

/* JSON keys of the figures above (tf_log_epoch_key(TF_E_LR) is "lr"). */
const char *tf_log_epoch_key(int which);
const char *tf_log_point_key(int which);

typedef struct tf_log_kv {
    char *key, *value; /* value as text: strings unquoted, numbers and booleans as written */
} tf_log_kv;

/* One log, read. Arrays are malloc'ed; tf_log_free releases them. */
typedef struct tf_log {
    char *name;               /* the run's name in legends (the file name without .jsonl) */
    double (*ep)[TF_E_COUNT]; /* epochs in order (a resumed run's repeated epochs: the last) */
    size_t n_ep;
    double (*pt)[TF_P_COUNT]; /* points in order */
    size_t n_pt;
    tf_log_kv *cfg; /* the first "run" object of the log */
    size_t n_cfg;
    size_t skipped_lines; /* a truncated last line (see tf_log_parse) */
} tf_log;

/* Limits of the reader (a log is untrusted bytes: fuzzed in tests/fuzz/fuzz_trainlog.c). */
#define TF_LOG_MAX_LINE   (4u << 20) /* bytes per line */
#define TF_LOG_MAX_BYTES  (1u << 30) /* per file */
#define TF_LOG_MAX_POINTS 100000u    /* per line */
#define TF_LOG_MAX_CFG    128u       /* "run" members */

/* Parse a log's text (`len` bytes, need not be NUL-terminated). `what` names it in messages
 * ("runs/a.jsonl"); `name` is the run's name (copied). Empty lines are skipped. A line that is
 * not a JSON object with a numeric "epoch" in 1..10^7 and numbers (or null) for the figures above
 * is an error naming what:LINE, except the last line when it lacks its newline: the trace of a
 * run killed while writing it, skipped (out->skipped_lines = 1; the caller warns). An epoch
 * number not above the one before starts over from there (a run resumed from a checkpoint older
 * than the log's last line): the later lines win. Returns 0, FL_E_FORMAT (err: "what:LINE:
 * reason"), FL_E_TOO_LARGE or -ENOMEM. On error *out is empty (nothing to free). */
int tf_log_parse(const char *text, size_t len, const char *what, const char *name, tf_log *out,
                 fl_error *err);

/* Read and parse the file at path (name: its base name without ".jsonl"). Errors as
 * tf_log_parse, and -errno naming the file when it cannot be read. */
int tf_log_load(const char *path, tf_log *out, fl_error *err);

void tf_log_free(tf_log *log);

/* The HTML report of n logs (n >= 1) appended to out: one self-contained page, charts as inline
 * SVG, every string from the logs HTML-escaped. `title` heads the page. out->failed is set when
 * out of memory. */
void tf_report_html(const tf_log *logs, size_t n, const char *title, fl_tbuf *out);

/* Write the report of n logs to path ("-": stdout) through a temporary file renamed into place.
 * Returns 0, or -errno with err naming the file. */
int tf_report_write(const tf_log *logs, size_t n, const char *title, const char *path,
                    fl_error *err);

/* Append text to out with & < > " ' escaped (HTML text and attribute values). */
void tf_html_escape(fl_tbuf *out, const char *text);

#ifdef __cplusplus
}
#endif
#endif
