/* decode_workers.h — how many of the loader's decode workers a CPU run keeps at work while its
 * compute threads train on the same cores. Decoding gets what the step needs, measured as the
 * run goes: the workers' busy time per image (fl_loader_stats: reads, decode, augmentation,
 * summed over workers) against the compute time of a step. Pure arithmetic (no I/O, no clock):
 * train_loop.c feeds it each step's figures and applies its answer with fl_loader_set_workers;
 * tests/trainer/test_decode_workers.c checks the rule. The batches do not depend on the count
 * (fastload.h), so neither do the losses or the checkpoints. The compute thread count is not
 * chosen here: it changes the order of floating-point sums, so it stays fixed for a run. */
#ifndef TF_DECODE_WORKERS_H
#define TF_DECODE_WORKERS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TF_DW_HEADROOM  1.25 /* workers for 1.25x the measured need: decode runs in bursts */
#define TF_DW_SPARE     1    /* and one more at work: idle, it costs nothing */
#define TF_DW_WAIT_HIGH 0.03 /* a window waiting longer for data than this needs one more */
#define TF_DW_WAIT_LOW  0.01 /* fewer only while waiting less than this */
#define TF_DW_SKIP      3u   /* steps not measured at the start (primitives built, ring filled) */
#define TF_DW_STEPS     4u   /* a window: at least this many steps ... */
#define TF_DW_SECONDS   0.5  /* ... and at least this long */

/* The workers to keep at work, from one window's figures: busy_per_batch = worker-seconds of
 * decoding per batch, step_s = compute seconds per step, wait_frac = the share of the window the
 * trainer waited for data, with `active` at work now, at least `floor` and at most `max`:
 * ceil(TF_DW_HEADROOM x busy_per_batch / step_s) + TF_DW_SPARE (1 when nothing was decoded), but
 * one more than `active` when the window waited more than TF_DW_WAIT_HIGH and not fewer than
 * `active` while it waited more than TF_DW_WAIT_LOW. Always in [max(1, floor), max]. */
uint32_t tf_decode_workers_needed(double busy_per_batch, double step_s, double wait_frac,
                                  uint32_t active, uint32_t floor, uint32_t max);

/* The choice over a run. */
typedef struct tf_decode_auto {
    uint32_t max;    /* workers started (1..cores) */
    uint32_t active; /* at work now */
    uint32_t floor;  /* a count that waited for data is never chosen again: one more */
    uint32_t lo, hi; /* fewest and most at work so far */
    uint32_t changes;
    uint64_t steps;      /* steps seen */
    double active_steps; /* sum over steps of the count at work (its mean) */
    /* the window being measured */
    uint32_t n;
    double wait, compute, busy0;
    uint64_t images0;
    int have0;
    /* the last window's estimate (the report) */
    double busy_per_image, step_s, need;
} tf_decode_auto;

/* Start with `initial` (clamped to [1, max]) of max workers at work. */
void tf_decode_auto_init(tf_decode_auto *a, uint32_t max, uint32_t initial);

/* After one step of `batch` samples: its seconds waiting for data and computing, and the
 * loader's totals now (busy_s = io_wait_s + decode_s + augment_s summed over workers; images
 * delivered). Returns the count to keep at work from now on (a->active, updated). */
uint32_t tf_decode_auto_step(tf_decode_auto *a, uint32_t batch, double wait_s, double compute_s,
                             double busy_s, uint64_t images);

#ifdef __cplusplus
}
#endif
#endif
