/* epoch_budget.h — how long `trainfast train` trains by default: `--epochs auto` sizes the run
 * from the dataset (enough samples seen, so a small dataset gets enough optimizer steps), and the
 * warm-up length in optimizer steps (not degenerate on a small dataset). Pure functions (no I/O):
 * train_prepare.c resolves the epochs, train_loop.c the warm-up; tests/trainer/test_epoch_budget.c
 * checks both. The rule and the measurement behind it: bench/README.md "Small datasets". */
#ifndef TF_EPOCH_BUDGET_H
#define TF_EPOCH_BUDGET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TF_AUTO_SAMPLES     120000u /* --epochs auto: at least this many samples seen ... */
#define TF_AUTO_MIN_EPOCHS  2u      /* ... and never fewer epochs than this */
#define TF_MAX_EPOCHS       100000u /* the largest --epochs (main.c's bound) */
#define TF_MIN_WARMUP_STEPS 50u     /* warm-up floor in optimizer steps (see tf_warmup_steps) */

/* --epochs auto for a dataset of n samples (its record count, the same on every rank): the
 * fewest epochs that show at least TF_AUTO_SAMPLES samples, ceil(TF_AUTO_SAMPLES / n), but at
 * least TF_AUTO_MIN_EPOCHS and at most TF_MAX_EPOCHS. n = 0 gives TF_MAX_EPOCHS (the caller
 * refuses an empty dataset before). */
uint32_t tf_epochs_auto(uint64_t n);

/* Warm-up length in optimizer steps for --warmup EPOCHS: warmup_epochs x steps_per_epoch, but at
 * least min(TF_MIN_WARMUP_STEPS, total_steps / 4) when warmup_epochs > 0, so that half an epoch
 * of a small dataset (3 steps for 1,000 images at batch 128) is not a warm-up in name only; the
 * floor is inactive from 100 steps per epoch on (12,800 samples at batch 128). --warmup 0 gives
 * 0 (no warm-up). Never more than total_steps. */
uint64_t tf_warmup_steps(float warmup_epochs, uint64_t steps_per_epoch, uint64_t total_steps);

#ifdef __cplusplus
}
#endif
#endif
