/* test_loader_ring_order.c — the batch ring (loader/ring.h) hands batches to the consumer in
 * ticket order, whole, whatever the number of producers and how runs split a batch: 1-4 fake
 * producers, runs that divide the batch or not, rings of 1-5 slots, a first ticket other than 0.
 * Built with ThreadSanitizer by scripts/test.sh --tsan. */
#include <stdio.h>

#include "ring_fake.h"

static void one(uint32_t producers, uint32_t nslots, uint32_t batch, uint32_t run, uint64_t first,
                uint64_t batches)
{
    fake_ring f;
    fake_init(&f, nslots, batch, run, first);
    pthread_t th[4];
    for (uint32_t i = 0; i < producers; i++)
        CHECK(pthread_create(&th[i], NULL, fake_producer, &f) == 0);
    for (uint64_t t = first; t < first + batches; t++) {
        uint32_t slot, skipped = 99;
        CHECK(fl_ring_take(&f.R, &slot, &skipped, NULL) == 0);
        CHECK(slot == t % nslots);
        CHECK(skipped == 0);
        fake_check_batch(&f, slot, t);
        uint64_t next;
        fl_ring_consumer_stats(&f.R, &next, NULL, NULL, NULL);
        CHECK(next == t + 1);
        fl_ring_release(&f.R, slot);
    }
    fl_ring_stop(&f.R);
    for (uint32_t i = 0; i < producers; i++)
        pthread_join(th[i], NULL);
    uint64_t taken;
    fl_ring_consumer_stats(&f.R, NULL, &taken, NULL, NULL);
    CHECK(taken == batches);
    CHECK(f.assign_bad == 0);
    fake_free(&f);
}

int main(void)
{
    one(1, 1, 8, 8, 0, 200);
    one(2, 3, 64, 16, 0, 300);
    one(3, 4, 37, 5, 11, 300); /* runs that do not divide the batch, resumed at ticket 11 */
    one(4, 5, 7, 32, 0, 500);  /* a run larger than the batch: whole batches */
    one(4, 2, 100, 1, 3, 100); /* one sample per run: the most lock traffic */
    printf("test_loader_ring_order: ok\n");
    return 0;
}
