/* ring_fake.h — fake producers and a checked assign callback for the ring's unit tests
 * (test_loader_ring_*.c): producers write sample k of batch `ticket` as the value
 * ticket * batch + k, the way decode workers fill a batch, so a consumer can check every
 * sample of what it takes. Header-only, test code. */
#ifndef RING_FAKE_H
#define RING_FAKE_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "ring.h"

#include "fl_check.h"

typedef struct fake_ring {
    fl_ring R;
    uint32_t nslots, batch, run;
    uint64_t *data;       /* nslots × batch sample values, written by producers */
    uint64_t assign_next; /* the ticket assign expects next (under the ring's lock) */
    uint64_t assign_bad;  /* assign calls out of ticket order or into the wrong slot */
    uint64_t max_ahead;   /* most tickets assigned beyond the consumer's next (under the lock) */
    uint32_t slow_us;     /* producers sleep this long per run (0: yield only) */
    uint64_t runs_done;   /* runs handed in, all producers (atomic) */
} fake_ring;

/* assign: tickets come in order (ticket t into slot t mod nslots unless the consumer holds that
 * one), and never more than nslots ahead of the consumer (the ring's bound). Runs under the
 * ring's lock. */
static void fake_assign(void *user, uint32_t slot, uint64_t ticket)
{
    fake_ring *f = user;
    if (ticket != f->assign_next++ || slot >= f->nslots ||
        (slot != ticket % f->nslots && f->R.slots[ticket % f->nslots].state != FL_SLOT_HELD))
        f->assign_bad++;
    uint64_t ahead = ticket + 1 - f->R.next_ticket; /* the ring's field, read under its lock */
    if (ahead > f->max_ahead)
        f->max_ahead = ahead;
}

static inline void fake_init(fake_ring *f, uint32_t nslots, uint32_t batch, uint32_t run,
                             uint64_t first)
{
    f->nslots = nslots;
    f->batch = batch;
    f->run = run;
    f->data = calloc((size_t)nslots * batch, sizeof *f->data);
    CHECK(f->data != NULL);
    f->assign_next = first;
    f->assign_bad = f->max_ahead = 0;
    f->slow_us = 0;
    f->runs_done = 0;
    CHECK(fl_ring_init(&f->R, nslots, batch, run, first, fake_assign, f) == 0);
}

static inline void fake_free(fake_ring *f)
{
    fl_ring_destroy(&f->R);
    free(f->data);
}

static inline void fake_fill(fake_ring *f, const fl_ring_run *r)
{
    uint64_t *d = f->data + (size_t)r->slot * f->batch;
    for (uint32_t k = r->k0; k < r->k0 + r->cnt; k++)
        d[k] = r->ticket * f->batch + k;
    if (f->slow_us)
        usleep(f->slow_us);
    else
        sched_yield();
}

/* A producer as a decode worker runs: claim (blocking), fill, hand in and claim the next in one
 * call; every other run through the separate claim, to cover both paths. Ends when stopped. */
static void *fake_producer(void *arg)
{
    fake_ring *f = arg;
    fl_ring_run run;
    int got = fl_ring_claim(&f->R, 1, &run, NULL);
    for (unsigned i = 0; got; i++) {
        fake_fill(f, &run);
        __atomic_fetch_add(&f->runs_done, 1, __ATOMIC_RELAXED);
        if (i & 1) {
            fl_ring_fill_done(&f->R, &run, FL_RING_NO_ERROR, NULL, 0, NULL, 0, NULL);
            got = fl_ring_claim(&f->R, 1, &run, NULL);
        } else {
            got = fl_ring_fill_done(&f->R, &run, FL_RING_NO_ERROR, NULL, 0, &run, 1, NULL);
        }
    }
    return NULL;
}

/* Every sample of the batch in `slot` is what the producers write for `ticket`. */
static inline void fake_check_batch(const fake_ring *f, uint32_t slot, uint64_t ticket)
{
    const uint64_t *d = f->data + (size_t)slot * f->batch;
    for (uint32_t k = 0; k < f->batch; k++)
        CHECK(d[k] == ticket * f->batch + k);
}

#endif
