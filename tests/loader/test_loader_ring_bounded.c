/* test_loader_ring_bounded.c — the batch ring (loader/ring.h) is bounded: producers never get
 * more than nslots batches ahead of the consumer, however slow it is; a non-blocking claim on a
 * full ring returns 0 at once; a consumer that holds every slot gets FL_RING_ALL_HELD (not a
 * deadlock) and can go on after a release. Built with ThreadSanitizer by scripts/test.sh --tsan. */
#include <stdio.h>

#include "ring_fake.h"

int main(void)
{
    /* slow consumer, fast producers: the bound is reached and never passed */
    fake_ring f;
    fake_init(&f, 3, 16, 4, 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        CHECK(pthread_create(&th[i], NULL, fake_producer, &f) == 0);
    for (uint64_t t = 0; t < 60; t++) {
        usleep(500);
        uint32_t slot;
        CHECK(fl_ring_take(&f.R, &slot, NULL, NULL) == 0);
        fake_check_batch(&f, slot, t);
        fl_ring_release(&f.R, slot);
    }
    fl_ring_stop(&f.R);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK(f.assign_bad == 0);
    CHECK(f.max_ahead == 3); /* reached (the consumer is slow) and not passed */
    fake_free(&f);

    /* no producer threads: fill the ring by hand, then a non-blocking claim finds no slot */
    fake_init(&f, 2, 4, 4, 0);
    fl_ring_run r;
    for (int i = 0; i < 2; i++) {
        CHECK(fl_ring_claim(&f.R, 0, &r, NULL) == 1);
        CHECK(r.ticket == (uint64_t)i && r.k0 == 0 && r.cnt == 4);
        fake_fill(&f, &r);
        fl_ring_fill_done(&f.R, &r, FL_RING_NO_ERROR, NULL, 0, NULL, 0, NULL);
    }
    CHECK(fl_ring_claim(&f.R, 0, &r, NULL) == 0);
    uint32_t s0, s1, s2;
    CHECK(fl_ring_take(&f.R, &s0, NULL, NULL) == 0);
    CHECK(fl_ring_take(&f.R, &s1, NULL, NULL) == 0);
    CHECK(s0 == 0 && s1 == 1);
    /* every slot held by the consumer: an error, not a wait */
    CHECK(fl_ring_take(&f.R, &s2, NULL, NULL) == FL_RING_ALL_HELD);
    CHECK(fl_ring_claim(&f.R, 0, &r, NULL) == 0);
    fl_ring_release(&f.R, s0);
    CHECK(fl_ring_claim(&f.R, 0, &r, NULL) == 1 && r.ticket == 2 && r.slot == 0);
    fake_fill(&f, &r);
    fl_ring_fill_done(&f.R, &r, FL_RING_NO_ERROR, NULL, 0, NULL, 0, NULL);
    CHECK(fl_ring_take(&f.R, &s2, NULL, NULL) == 0 && s2 == 0);
    fake_check_batch(&f, s2, 2);
    fake_free(&f);
    printf("test_loader_ring_bounded: ok\n");
    return 0;
}
