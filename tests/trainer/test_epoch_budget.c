/* test_epoch_budget.c — `--epochs auto` and the warm-up length (trainer/train/epoch_budget.h): the
 * epochs resolved for datasets of several sizes (exact values of ceil(TF_AUTO_SAMPLES / n),
 * floored at TF_AUTO_MIN_EPOCHS, capped at TF_MAX_EPOCHS), and warm-up steps that equal the old
 * half-epoch truncation on large datasets but are floored on small ones. The command line around
 * it (printed line, --json, resume keeps the number, bad values): test_epochs_auto.sh. */
#include <stdint.h>

#include "epoch_budget.h"
#include "fl_check.h"

static void check_epochs(void)
{
    const struct {
        uint64_t n;
        uint32_t want;
    } cases[] = {
        {1, TF_MAX_EPOCHS < TF_AUTO_SAMPLES ? TF_MAX_EPOCHS : TF_AUTO_SAMPLES},
        {0, TF_MAX_EPOCHS},
        {1000, (TF_AUTO_SAMPLES + 999) / 1000},
        {6000, (TF_AUTO_SAMPLES + 5999) / 6000},
        {8000, (TF_AUTO_SAMPLES + 7999) / 8000},
        {TF_AUTO_SAMPLES, TF_AUTO_MIN_EPOCHS}, /* one budget in one epoch: still 2 */
        {TF_AUTO_SAMPLES / 2, 2},
        {TF_AUTO_SAMPLES / 2 + 1, 2}, /* 1.99... epochs: rounds up to 2 */
        {TF_AUTO_SAMPLES / 2 - 1, 3}, /* just under half: 3 */
        {60000, 2},                   /* Fashion-MNIST: as before (2 epochs) */
        {1281167, 2},                 /* ImageNet */
        {UINT64_MAX, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t got = tf_epochs_auto(cases[i].n);
        EXPECTF(got == cases[i].want, "tf_epochs_auto(%llu) = %u, want %u",
                (unsigned long long)cases[i].n, got, cases[i].want);
    }
    /* the rule as the issue states it: at least the budget, never fewer than 2 */
    for (uint64_t n = 1; n < 400000; n = n * 3 + 7) {
        uint64_t e = tf_epochs_auto(n);
        EXPECTF(e >= TF_AUTO_MIN_EPOCHS, "n %llu: %llu epochs", (unsigned long long)n,
                (unsigned long long)e);
        EXPECTF(e == TF_MAX_EPOCHS || e * n >= TF_AUTO_SAMPLES,
                "n %llu: %llu epochs see %llu "
                "samples",
                (unsigned long long)n, (unsigned long long)e, (unsigned long long)(e * n));
        EXPECTF(e == TF_AUTO_MIN_EPOCHS || (e - 1) * n < TF_AUTO_SAMPLES,
                "n %llu: %llu epochs, one fewer would do", (unsigned long long)n,
                (unsigned long long)e);
    }
}

static void check_warmup(void)
{
    /* Fashion-MNIST at batch 128: 468 steps per epoch, half an epoch = 234 (as before the floor) */
    EXPECT(tf_warmup_steps(0.5f, 468, 936) == 234);
    /* 6,000 images: 46 steps per epoch, 23 by the half epoch, floored to 50 */
    EXPECT(tf_warmup_steps(0.5f, 46, 46 * 20) == TF_MIN_WARMUP_STEPS);
    /* 100 steps per epoch: exactly the floor either way */
    EXPECT(tf_warmup_steps(0.5f, 100, 1000) == 50);
    /* a short run: the floor is at most a quarter of it */
    EXPECT(tf_warmup_steps(0.5f, 10, 40) == 10);
    EXPECT(tf_warmup_steps(0.5f, 1, 2) == 0); /* 0.5 step truncates to 0, a quarter of 2 is 0 */
    /* --warmup 0: none; a warm-up longer than the run: the whole run */
    EXPECT(tf_warmup_steps(0.0f, 468, 936) == 0);
    EXPECT(tf_warmup_steps(0.0f, 3, 600) == 0);
    EXPECT(tf_warmup_steps(5.0f, 468, 936) == 936);
    /* fractional warm-up keeps the old truncation: 0.3 x 468 = 140.4 -> 140 */
    EXPECT(tf_warmup_steps(0.3f, 468, 4680) == 140);
}

int main(void)
{
    check_epochs();
    check_warmup();
    return fl_check_status();
}
