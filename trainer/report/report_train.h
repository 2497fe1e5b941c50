/* report_train.h — trainfast's side of the report (report_train.c): the per-N-steps points an
 * epoch's log line carries, the run's configuration object ("run") of the log, `train --report`
 * at the end of a run and the `trainfast report` command. The page itself: report_log.h. */
#ifndef TF_REPORT_TRAIN_H
#define TF_REPORT_TRAIN_H

#include <stdint.h>

#include "fl_json.h"
#include "train_internal.h"

/* The points of the epoch being trained: one every `every` micro-batches and one at the epoch's
 * end, each the mean of the micro-batches since the point before (this process's figures). */
typedef struct tf_points {
    uint64_t every; /* micro-batches per point; 0: no points */
    uint64_t n;     /* micro-batches since the last point */
    double loss, correct, seen, wait, compute;
    fl_json j;      /* the epoch's "points" array so far */
    uint64_t count; /* points in j */
} tf_points;

/* Micro-batches per point for an epoch of bpe batches: --log-every N, or (auto, N = 0) about 50
 * points per epoch (every batch when the epoch has fewer). */
uint64_t tf_points_every(uint32_t log_every, uint64_t bpe);

void tf_points_init(tf_points *p, uint64_t every);
void tf_points_free(tf_points *p);

/* After one micro-batch: its loss sum, correct count and size, seconds waiting for the batch and
 * computing it. A point is added when `every` micro-batches have passed or `last` (the epoch's
 * last): x = epochs done (fractional), step = optimizer steps so far, world = processes (images/s
 * is this process's times world). */
void tf_points_add(tf_points *p, double x, uint64_t step, double lr, double loss_sum,
                   double correct, double n, double wait, double compute, int world, int last);

/* The epoch's points as a JSON array ("[]" when none), valid until the next tf_points_add; the
 * next call starts a new epoch. NULL when out of memory. */
const char *tf_points_take(tf_points *p);

/* The run's configuration (model, data, batch, schedule, device, ...) as one JSON object: the
 * "run" member of the first line each process writes. `epochs` is the run's epoch count. */
void tf_report_run_json(const tf_run *r, int epochs, fl_json *j);

/* How this process's cores were split between decoding and compute while it trained (the
 * epochs less their evaluations): cores, compute threads, decode workers (started, at work at
 * the end, fewest/most/mean at work and whether trainfast chose them), the workers' busy
 * seconds (reads, decode, augmentation, summed over workers: fl_loader_stats), the CPU seconds
 * of the process, of the loader's threads (decode) and of the rest (compute), and what decode
 * and compute are of the cores' time. tf_report_cores_text prints it as one line on stderr (the
 * summary); tf_report_cores_json adds its members to the open object j (--json: "cores",
 * "compute_threads", "decode_workers", "decode_workers_started", "decode_workers_auto",
 * "decode_workers_min", "decode_workers_max", "decode_workers_mean", "decode_busy_seconds",
 * "cpu_seconds", "decode_cpu_seconds", "compute_cpu_seconds", "train_wall_seconds",
 * "decode_core_fraction", "compute_core_fraction"). */
void tf_report_cores_text(const tf_run *r);
void tf_report_cores_json(const tf_run *r, fl_json *j);

/* The epoch's core split (tf_epoch_report: cores, compute_threads, decode_workers,
 * decode_cpu_seconds, cpu_seconds, train_wall_seconds) as members of the open object j, the
 * epoch's log line; nothing when r->cores is 0. */
void tf_report_epoch_cores(const tf_epoch_report *r, fl_json *j);

/* `train --report FILE.html` at the end of a run (rank 0): the page of the log's lines (the whole
 * --log file when the run was resumed from one; else the lines of this run, kept in
 * r->log_lines). Returns status, or FL_EXIT_DATA when the page could not be written. */
int tf_report_at_end(tf_run *r, int status);

/* `trainfast report LOG... [-o FILE.html] [--title TEXT]`: returns the exit status. */
int tf_report_main(const char *const *logs, int n, const char *out, const char *title);

#endif
