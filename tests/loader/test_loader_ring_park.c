/* test_loader_ring_park.c — a limit on the producers at work (fl_ring_set_active): with 4
 * producers and the limit at 1, at most one fills a run at a time once those holding runs have
 * handed them in; raising it lets the parked ones work again; batches stay complete and in
 * ticket order throughout; stopping the ring wakes parked producers (no hang at join). Built with
 * ThreadSanitizer by scripts/test.sh --tsan. */
#include <stdio.h>

#include "ring_fake.h"

static uint32_t g_busy, g_busy_max; /* producers between claim and hand-in (atomic) */

/* fake_producer with a count of the producers inside a run */
static void *counting_producer(void *arg)
{
    fake_ring *f = arg;
    fl_ring_run run;
    int got = fl_ring_claim(&f->R, 1, &run, NULL);
    while (got) {
        uint32_t b = __atomic_add_fetch(&g_busy, 1, __ATOMIC_RELAXED);
        uint32_t m = __atomic_load_n(&g_busy_max, __ATOMIC_RELAXED);
        while (b > m && !__atomic_compare_exchange_n(&g_busy_max, &m, b, 0, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED))
            ;
        fake_fill(f, &run);
        __atomic_sub_fetch(&g_busy, 1, __ATOMIC_RELAXED);
        got = fl_ring_fill_done(&f->R, &run, FL_RING_NO_ERROR, NULL, 0, &run, 1, NULL);
    }
    return NULL;
}

/* take n batches (checking each), then reset the high-water mark of busy producers */
static void take(fake_ring *f, uint64_t *t, int n)
{
    for (int i = 0; i < n; i++, (*t)++) {
        uint32_t s;
        CHECK(fl_ring_take(&f->R, &s, NULL, NULL) == 0);
        fake_check_batch(f, s, *t);
        fl_ring_release(&f->R, s);
    }
}

static uint32_t busy_max_reset(void)
{
    return __atomic_exchange_n(&g_busy_max, 0, __ATOMIC_RELAXED);
}

int main(void)
{
    enum { P = 4 };
    (void)fake_producer; /* ring_fake.h's producer: counting_producer stands in for it here */
    fake_ring f;
    fake_init(&f, 6, 16, 2, 0); /* 8 runs a batch: room for every producer */
    f.slow_us = 200;
    pthread_t th[P];
    for (int i = 0; i < P; i++)
        CHECK(pthread_create(&th[i], NULL, counting_producer, &f) == 0);
    uint64_t t = 0;
    take(&f, &t, 20);
    uint32_t all = busy_max_reset();
    printf("no limit: up to %u producers at work\n", all);
    CHECK(all >= 1 && all <= P);

    fl_ring_set_active(&f.R, P, 1);
    take(&f, &t, 8); /* those holding runs hand them in and park at their next claim */
    busy_max_reset();
    take(&f, &t, 40);
    uint32_t one = busy_max_reset();
    printf("limit 1: up to %u at work\n", one);
    CHECK(one == 1);
    pthread_mutex_lock(&f.R.mu);
    uint32_t parked = f.R.parked;
    pthread_mutex_unlock(&f.R.mu);
    CHECK(parked == P - 1);

    fl_ring_set_active(&f.R, P, 3);
    take(&f, &t, 4);
    busy_max_reset();
    take(&f, &t, 40);
    uint32_t three = busy_max_reset();
    printf("limit 3: up to %u at work\n", three);
    CHECK(three >= 1 && three <= 3);

    /* out-of-range limits are clamped to [1, producers] */
    fl_ring_set_active(&f.R, P, 0);
    take(&f, &t, 4);
    busy_max_reset();
    take(&f, &t, 20);
    CHECK(busy_max_reset() == 1);
    fl_ring_set_active(&f.R, P, 99);
    take(&f, &t, 20);

    /* stop with producers parked: every one returns */
    fl_ring_set_active(&f.R, P, 1);
    take(&f, &t, 8);
    fl_ring_stop(&f.R);
    for (int i = 0; i < P; i++)
        pthread_join(th[i], NULL);
    CHECK(f.assign_bad == 0);
    fake_free(&f);
    printf("ok\n");
    return 0;
}
