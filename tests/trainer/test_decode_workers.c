/* test_decode_workers.c — the decode worker count of a CPU run (trainer/train/decode_workers.h):
 * the rule (ceil(1.25 x need), one more when a window waited for data, not fewer while it
 * waited, never below the floor or outside [1, max]) and the choice over steps (the first steps
 * not measured, a window of at least 4 steps and 0.5 s, a count that waited never chosen again,
 * fewest/most/mean). Exact values, no clock. */
#include <stdio.h>

#include "decode_workers.h"
#include "fl_check.h"

int main(void)
{
    /* need = busy per batch / step: 0.3 -> ceil(0.375) = 1; 1.0 -> ceil(1.25) = 2; 3.3 -> 5 */
    CHECK(tf_decode_workers_needed(0.03, 0.1, 0, 1, 1, 8) == 2); /* the need + 1 spare */
    CHECK(tf_decode_workers_needed(0.10, 0.1, 0, 1, 1, 8) == 3);
    CHECK(tf_decode_workers_needed(0.33, 0.1, 0, 1, 1, 8) == 6);
    CHECK(tf_decode_workers_needed(5.0, 0.1, 0, 1, 1, 8) == 8);      /* at most max */
    CHECK(tf_decode_workers_needed(0.0, 0.1, 0, 4, 1, 8) == 1);      /* at least 1 */
    CHECK(tf_decode_workers_needed(0.0, 0.1, 0, 4, 3, 8) == 3);      /* at least the floor */
    CHECK(tf_decode_workers_needed(0.1, 0.0, 0, 1, 1, 6) == 6);      /* no step time: all */
    CHECK(tf_decode_workers_needed(0.01, 0.1, 0.05, 2, 1, 8) == 3);  /* waited: one more */
    CHECK(tf_decode_workers_needed(0.01, 0.1, 0.05, 8, 1, 8) == 8);  /* ... up to max */
    CHECK(tf_decode_workers_needed(0.01, 0.1, 0.02, 3, 1, 8) == 3);  /* waiting a little: keep */
    CHECK(tf_decode_workers_needed(0.01, 0.1, 0.005, 3, 1, 8) == 2); /* not waiting: fewer */
    CHECK(tf_decode_workers_needed(0.01, 0.1, 0.005, 3, 1, 1) == 1); /* the spare within max */
    CHECK(tf_decode_workers_needed(0.5, 0.1, 0, 1, 1, 0) == 1);      /* max 0 read as 1 */

    /* the choice over steps: batch 100, 0.2 s of compute a step, no wait */
    tf_decode_auto a;
    tf_decode_auto_init(&a, 4, 1);
    CHECK(a.active == 1 && a.max == 4 && a.lo == 1 && a.hi == 1);
    double busy = 0;
    uint64_t img = 0;
    /* decode 4 ms an image per worker: 0.4 worker-s a batch, need 2 -> ceil(2.5) + 1 spare = 4 */
    for (int s = 1; s <= 3; s++) { /* skipped: no decision */
        busy += 0.4, img += 100;
        CHECK(tf_decode_auto_step(&a, 100, 0, 0.2, busy, img) == 1);
    }
    busy += 0.4, img += 100; /* step 4 starts the window */
    CHECK(tf_decode_auto_step(&a, 100, 0, 0.2, busy, img) == 1);
    for (int s = 0; s < 2; s++) { /* 2 steps of 0.2 s: under 4 steps and 0.5 s */
        busy += 0.4, img += 100;
        CHECK(tf_decode_auto_step(&a, 100, 0, 0.2, busy, img) == 1);
    }
    busy += 0.4, img += 100;
    CHECK(tf_decode_auto_step(&a, 100, 0, 0.2, busy, img) == 1); /* 3 steps */
    busy += 0.4, img += 100;
    CHECK(tf_decode_auto_step(&a, 100, 0, 0.2, busy, img) == 4); /* 4 steps, 0.8 s: decide */
    CHECK(a.changes == 1 && a.lo == 1 && a.hi == 4);
    CHECK(a.busy_per_image > 0.00399 && a.busy_per_image < 0.00401);
    CHECK(a.step_s > 0.1999 && a.step_s < 0.2001 && a.need > 1.99 && a.need < 2.01);
    CHECK(a.steps == 8 && a.active_steps == 8.0); /* 8 steps at 1 (the answer applies next) */

    /* decode gets cheap: 0.5 ms an image -> need 0.25 -> 1 + 1 spare */
    for (int s = 0; s < 3; s++) {
        busy += 0.05, img += 100;
        CHECK(tf_decode_auto_step(&a, 100, 0, 0.2, busy, img) == 4);
    }
    busy += 0.05, img += 100;
    CHECK(tf_decode_auto_step(&a, 100, 0, 0.2, busy, img) == 2);
    CHECK(a.changes == 2 && a.floor == 1);

    /* at 2 the trainer waits 10% of the time: 3, and 2 is never chosen again */
    for (int s = 0; s < 3; s++) {
        busy += 0.05, img += 100;
        CHECK(tf_decode_auto_step(&a, 100, 0.02, 0.2, busy, img) == 2);
    }
    busy += 0.05, img += 100;
    CHECK(tf_decode_auto_step(&a, 100, 0.02, 0.2, busy, img) == 3);
    CHECK(a.floor == 3);
    for (int s = 0; s < 8; s++) {
        busy += 0.01, img += 100;
        CHECK(tf_decode_auto_step(&a, 100, 0, 0.2, busy, img) == 3);
    }
    CHECK(a.changes == 3 && a.lo == 1 && a.hi == 4);
    CHECK(a.steps == 24 && a.active_steps > 55.99 && a.active_steps < 56.01);

    /* one worker started: nothing to choose */
    tf_decode_auto_init(&a, 1, 4);
    CHECK(a.active == 1);
    for (int s = 0; s < 20; s++)
        CHECK(tf_decode_auto_step(&a, 100, 0.1, 0.2, s * 1.0, (uint64_t)s * 100) == 1);
    tf_decode_auto_init(&a, 0, 0);
    CHECK(a.max == 1 && a.active == 1);
    printf("ok\n");
    return 0;
}
