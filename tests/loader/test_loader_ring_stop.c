/* test_loader_ring_stop.c — stopping the batch ring (loader/ring.h) wakes everyone who waits:
 * a consumer blocked in take (nothing ready) returns FL_RING_STOPPED; producers blocked in claim
 * (ring full) return 0; a failed sample makes take return its error (the lowest failed sample
 * of the batch), stops the producers and keeps returning it; fl_ring_fail does the same for an
 * error from outside. A hang fails the test (alarm). Built with ThreadSanitizer by
 * scripts/test.sh --tsan. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ring_fake.h"

typedef struct taker {
    fl_ring *R;
    int rc;
} taker;

static void *take_one(void *arg)
{
    taker *t = arg;
    uint32_t slot;
    t->rc = fl_ring_take(t->R, &slot, NULL, NULL);
    return NULL;
}

int main(void)
{
    alarm(60);
    /* a consumer waiting on an empty ring */
    fake_ring f;
    fake_init(&f, 2, 8, 8, 0);
    taker tk = {&f.R, 1};
    pthread_t th[3];
    CHECK(pthread_create(&th[0], NULL, take_one, &tk) == 0);
    usleep(20000);
    fl_ring_stop(&f.R);
    pthread_join(th[0], NULL);
    CHECK(tk.rc == FL_RING_STOPPED);
    fake_free(&f);

    /* producers waiting on a full ring (the consumer takes nothing) */
    fake_init(&f, 2, 8, 2, 0);
    for (int i = 0; i < 3; i++)
        CHECK(pthread_create(&th[i], NULL, fake_producer, &f) == 0);
    while (__atomic_load_n(&f.runs_done, __ATOMIC_RELAXED) < 8) /* both slots filled */
        usleep(1000);
    usleep(20000); /* the producers are now blocked in claim */
    fl_ring_stop(&f.R);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK(f.assign_bad == 0);
    fake_free(&f);

    /* a failed sample: take reports the lowest failed one and stops the producers */
    fake_init(&f, 3, 4, 1, 0);
    fl_ring_run r[4];
    for (int k = 0; k < 4; k++)
        CHECK(fl_ring_claim(&f.R, 0, &r[k], NULL) == 1 && r[k].k0 == (uint32_t)k);
    fl_error e3, e1, got;
    fl_error_set(&e3, FL_E_CHECKSUM, "sample 3 is bad");
    fl_error_set(&e1, FL_E_DECODE, "sample 1 is bad");
    fl_ring_fill_done(&f.R, &r[3], 3, &e3, 0, NULL, 0, NULL);
    fl_ring_fill_done(&f.R, &r[0], FL_RING_NO_ERROR, NULL, 0, NULL, 0, NULL);
    fl_ring_fill_done(&f.R, &r[1], 1, &e1, 0, NULL, 0, NULL);
    fl_ring_fill_done(&f.R, &r[2], FL_RING_NO_ERROR, NULL, 1, NULL, 0, NULL);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&th[i], NULL, fake_producer, &f) == 0);
    uint32_t slot;
    CHECK(fl_ring_take(&f.R, &slot, NULL, &got) == FL_E_DECODE);
    CHECK(strcmp(got.msg, "sample 1 is bad") == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL); /* stopped by the failure */
    memset(&got, 0, sizeof got);
    CHECK(fl_ring_take(&f.R, &slot, NULL, &got) == FL_E_DECODE); /* again, same error */
    CHECK(strcmp(got.msg, "sample 1 is bad") == 0);
    CHECK(fl_ring_claim(&f.R, 1, &r[0], NULL) == 0);
    fake_free(&f);

    /* an error from outside the ring (a device copy) while a consumer waits */
    fake_init(&f, 2, 8, 8, 0);
    tk.R = &f.R;
    tk.rc = 1;
    CHECK(pthread_create(&th[0], NULL, take_one, &tk) == 0);
    usleep(20000);
    fl_error_set(&e1, -EIO, "device copy failed");
    fl_ring_fail(&f.R, &e1);
    pthread_join(th[0], NULL);
    CHECK(tk.rc == -EIO);
    fake_free(&f);
    printf("test_loader_ring_stop: ok\n");
    return 0;
}
