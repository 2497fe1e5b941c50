/* epoch_budget.c — `--epochs auto` and the warm-up length in steps (epoch_budget.h). A fixed
 * number of epochs fits one dataset size: 2 epochs of 60,000 images is 937 optimizer steps at
 * batch 128, 2 epochs of 6,000 only 92, far from trained. A budget in samples seen gives every
 * size about the same number of steps (at a given batch), down to the 2 epochs a large dataset
 * keeps. */
#include "epoch_budget.h"

uint32_t tf_epochs_auto(uint64_t n)
{
    if (n == 0)
        return TF_MAX_EPOCHS;
    uint64_t e = (TF_AUTO_SAMPLES + n - 1) / n;
    if (e < TF_AUTO_MIN_EPOCHS)
        e = TF_AUTO_MIN_EPOCHS;
    return e > TF_MAX_EPOCHS ? TF_MAX_EPOCHS : (uint32_t)e;
}

uint64_t tf_warmup_steps(float warmup_epochs, uint64_t steps_per_epoch, uint64_t total_steps)
{
    if (!(warmup_epochs > 0))
        return 0;
    /* the same truncation as before the floor existed: large datasets warm up exactly as they did
     */
    uint64_t w = (uint64_t)(warmup_epochs * (double)steps_per_epoch);
    uint64_t floor = total_steps / 4 < TF_MIN_WARMUP_STEPS ? total_steps / 4 : TF_MIN_WARMUP_STEPS;
    if (w < floor)
        w = floor;
    return w > total_steps ? total_steps : w;
}
