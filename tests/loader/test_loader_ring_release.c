/* test_loader_ring_release.c — the consumer may hold several batches of the batch ring
 * (loader/ring.h) and release them in any order: producers refill each slot as it comes back,
 * batches still arrive in ticket order, and releasing a slot that is not held (twice, or out of
 * range) changes nothing; a batch held for good leaves the ring working with the other slots. Built
 * with ThreadSanitizer by scripts/test.sh --tsan. */
#include <stdio.h>

#include "ring_fake.h"

int main(void)
{
    enum { NSLOTS = 4, HOLD = 3, ROUNDS = 200 };
    fake_ring f;
    fake_init(&f, NSLOTS, 12, 5, 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        CHECK(pthread_create(&th[i], NULL, fake_producer, &f) == 0);
    uint64_t t = 0;
    uint32_t held[HOLD];
    for (int round = 0; round < ROUNDS; round++) {
        int n = 1 + round % HOLD; /* hold 1, 2 or 3 batches at once */
        for (int i = 0; i < n; i++, t++) {
            CHECK(fl_ring_take(&f.R, &held[i], NULL, NULL) == 0);
            CHECK(held[i] < NSLOTS);
            for (int j = 0; j < i; j++)
                CHECK(held[j] != held[i]);
            fake_check_batch(&f, held[i], t);
        }
        /* release in reverse, or from the middle out */
        for (int i = 0; i < n; i++) {
            int j = round & 1 ? n - 1 - i : (i + n / 2) % n;
            fl_ring_release(&f.R, held[j]);
            if (i == 0) {
                fl_ring_release(&f.R, held[j]);    /* twice: ignored */
                fl_ring_release(&f.R, NSLOTS + 7); /* out of range: ignored */
            }
        }
    }
    fl_ring_stop(&f.R);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    uint64_t taken;
    fl_ring_consumer_stats(&f.R, NULL, &taken, NULL, NULL);
    CHECK(taken == t);
    CHECK(f.assign_bad == 0 && f.max_ahead <= NSLOTS);
    fake_free(&f);

    /* a batch held for good (the Python binding's arrays may live on): the ring goes on with
     * the other slots, in ticket order, and the held batch is never overwritten */
    fake_init(&f, NSLOTS, 12, 5, 0);
    for (int i = 0; i < 3; i++)
        CHECK(pthread_create(&th[i], NULL, fake_producer, &f) == 0);
    uint32_t keep;
    CHECK(fl_ring_take(&f.R, &keep, NULL, NULL) == 0);
    for (t = 1; t < 50; t++) {
        uint32_t s;
        CHECK(fl_ring_take(&f.R, &s, NULL, NULL) == 0);
        CHECK(s != keep);
        fake_check_batch(&f, s, t);
        fl_ring_release(&f.R, s);
    }
    fake_check_batch(&f, keep, 0);
    fl_ring_stop(&f.R);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK(f.assign_bad == 0 && f.max_ahead <= NSLOTS);
    fake_free(&f);
    printf("test_loader_ring_release: ok\n");
    return 0;
}
