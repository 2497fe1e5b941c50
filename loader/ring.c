/* ring.c — the batch slot ring (ring.h): slot states and sample counts under one mutex, three
 * condition variables (producers wait for a free slot, the consumer for the next ready one,
 * parked producers for a higher limit on those at work). */
#include "ring.h"

#include <stdlib.h>
#include <string.h>

#include "fl_clock.h"

#define NO_SLOT UINT32_MAX

int fl_ring_init(fl_ring *R, uint32_t nslots, uint32_t batch, uint32_t run, uint64_t first_ticket,
                 fl_ring_assign_fn assign, void *user)
{
    memset(R, 0, sizeof *R);
    R->slots = calloc(nslots, sizeof *R->slots);
    if (!R->slots)
        return -ENOMEM;
    for (uint32_t i = 0; i < nslots; i++)
        R->slots[i].err_k = FL_RING_NO_ERROR;
    R->nslots = nslots;
    R->batch = batch;
    R->run = run;
    R->assign = assign;
    R->user = user;
    R->fill_slot = NO_SLOT;
    R->fill_next = R->next_ticket = first_ticket;
    R->end_ticket = UINT64_MAX;
    pthread_mutex_init(&R->mu, NULL);
    pthread_cond_init(&R->free_cv, NULL);
    pthread_cond_init(&R->ready_cv, NULL);
    pthread_cond_init(&R->park_cv, NULL);
    return 0;
}

void fl_ring_destroy(fl_ring *R)
{
    if (!R->slots)
        return;
    pthread_mutex_destroy(&R->mu);
    pthread_cond_destroy(&R->free_cv);
    pthread_cond_destroy(&R->ready_cv);
    pthread_cond_destroy(&R->park_cv);
    free(R->slots);
    R->slots = NULL;
}

void fl_ring_set_end(fl_ring *R, uint64_t end_ticket)
{
    pthread_mutex_lock(&R->mu);
    R->end_ticket = end_ticket;
    pthread_mutex_unlock(&R->mu);
}

/* Wait, parked, until one more producer may work (or stop). Lock held. */
static void park_locked(fl_ring *R)
{
    R->parked++;
    while (!R->stop && R->producers - R->parked >= R->active)
        pthread_cond_wait(&R->park_cv, &R->mu);
    R->parked--;
}

/* fl_ring_claim with the lock held. */
static int claim_locked(fl_ring *R, int block, fl_ring_run *out, double *wait_s)
{
    while (!R->stop) {
        if (R->producers && R->producers - R->parked > R->active) {
            /* one producer too many at work: without block the caller holds a run, which it
             * finishes first; with block it holds none and parks */
            if (!block)
                return 0;
            park_locked(R);
            continue;
        }
        fl_ring_slot *s = R->fill_slot == NO_SLOT ? NULL : &R->slots[R->fill_slot];
        if (!s || s->claimed == R->batch) {
            if (R->fill_next >= R->end_ticket)
                return 0; /* nothing left to fill, whether or not the caller would wait */
            uint32_t i = (uint32_t)(R->fill_next % R->nslots);
            /* the consumer still holds ticket fill_next's usual slot: any free slot will do */
            for (uint32_t k = 1; k < R->nslots && R->slots[i].state == FL_SLOT_HELD; k++)
                if (R->slots[(i + k) % R->nslots].state == FL_SLOT_FREE)
                    i = (i + k) % R->nslots;
            fl_ring_slot *cand = &R->slots[i];
            if (cand->state != FL_SLOT_FREE) {
                if (!block)
                    return 0;
                double t0 = fl_now_s();
                pthread_cond_wait(&R->free_cv, &R->mu);
                if (wait_s)
                    *wait_s += fl_now_s() - t0;
                continue;
            }
            cand->ticket = R->fill_next++;
            cand->state = FL_SLOT_FILLING;
            cand->claimed = cand->done = cand->skipped = 0;
            cand->err_k = FL_RING_NO_ERROR;
            if (R->assign)
                R->assign(R->user, i, cand->ticket);
            R->fill_slot = i;
            s = cand;
        }
        out->slot = R->fill_slot;
        out->ticket = s->ticket;
        out->k0 = s->claimed;
        out->cnt = R->batch - s->claimed < R->run ? R->batch - s->claimed : R->run;
        s->claimed += out->cnt;
        return 1;
    }
    return 0;
}

int fl_ring_claim(fl_ring *R, int block, fl_ring_run *out, double *wait_s)
{
    pthread_mutex_lock(&R->mu);
    int got = claim_locked(R, block, out, wait_s);
    pthread_mutex_unlock(&R->mu);
    return got;
}

int fl_ring_fill_done(fl_ring *R, const fl_ring_run *done, uint32_t err_k, const fl_error *err,
                      uint32_t skipped, fl_ring_run *next, int block, double *wait_s)
{
    pthread_mutex_lock(&R->mu);
    fl_ring_slot *s = &R->slots[done->slot];
    s->skipped += skipped;
    if (err_k < s->err_k) {
        s->err_k = err_k;
        s->err = *err;
    }
    s->done += done->cnt;
    if (s->done == R->batch) {
        s->state = FL_SLOT_READY;
        pthread_cond_broadcast(&R->ready_cv);
    }
    int got = next ? claim_locked(R, block, next, wait_s) : 0;
    pthread_mutex_unlock(&R->mu);
    return got;
}

/* Stop with the lock held; a failure's error is kept for every later take. */
static void stop_locked(fl_ring *R, const fl_error *err)
{
    if (err && !R->failed) {
        R->failed = 1;
        R->fail_err = *err;
    }
    R->stop = 1;
    pthread_cond_broadcast(&R->free_cv);
    pthread_cond_broadcast(&R->ready_cv);
    pthread_cond_broadcast(&R->park_cv);
}

int fl_ring_take(fl_ring *R, uint32_t *slot, uint32_t *skipped, fl_error *err)
{
    pthread_mutex_lock(&R->mu);
    int rc = 0;
    /* the next ticket is in its usual slot (ticket mod nslots) unless the consumer held that
     * one when the ticket was claimed (see claim_locked) */
    uint32_t i = (uint32_t)(R->next_ticket % R->nslots);
    fl_ring_slot *s = NULL;
    if (!R->failed && R->next_ticket >= R->end_ticket) {
        rc = FL_RING_END;
        goto out;
    }
    double t0 = fl_now_s();
    while (!R->failed && !R->stop) {
        uint32_t held = 0;
        for (uint32_t k = 0; k < R->nslots; k++) {
            fl_ring_slot *c = &R->slots[(i + k) % R->nslots];
            if (c->state == FL_SLOT_READY && c->ticket == R->next_ticket) {
                i = (i + k) % R->nslots;
                s = c;
                break;
            }
            held += c->state == FL_SLOT_HELD;
        }
        if (s)
            break;
        if (held == R->nslots) {
            rc = FL_RING_ALL_HELD;
            goto out;
        }
        pthread_cond_wait(&R->ready_cv, &R->mu);
    }
    R->take_wait_s += fl_now_s() - t0;
    if (R->failed) {
        if (err)
            *err = R->fail_err;
        rc = R->fail_err.code;
        goto out;
    }
    if (R->stop) {
        rc = FL_RING_STOPPED;
        goto out;
    }
    if (s->err_k != FL_RING_NO_ERROR) {
        /* the batch cannot be delivered: stop the producers, report the first failed sample */
        stop_locked(R, &s->err);
        if (err)
            *err = s->err;
        rc = s->err.code;
        goto out;
    }
    s->state = FL_SLOT_HELD;
    if (i == R->fill_next % R->nslots) /* producers waiting for this slot may use a free one now */
        for (uint32_t k = 0; k < R->nslots; k++)
            if (R->slots[k].state == FL_SLOT_FREE) {
                pthread_cond_broadcast(&R->free_cv);
                break;
            }
    R->next_ticket++;
    R->taken++;
    R->taken_skipped += s->skipped;
    *slot = i;
    if (skipped)
        *skipped = s->skipped;
out:
    pthread_mutex_unlock(&R->mu);
    return rc;
}

void fl_ring_release(fl_ring *R, uint32_t slot)
{
    if (slot >= R->nslots)
        return;
    pthread_mutex_lock(&R->mu);
    if (R->slots[slot].state == FL_SLOT_HELD) {
        R->slots[slot].state = FL_SLOT_FREE;
        pthread_cond_broadcast(&R->free_cv);
    }
    pthread_mutex_unlock(&R->mu);
}

void fl_ring_set_active(fl_ring *R, uint32_t producers, uint32_t active)
{
    pthread_mutex_lock(&R->mu);
    R->producers = producers;
    R->active = active < 1 ? 1 : active > producers ? producers : active;
    pthread_cond_broadcast(&R->park_cv);
    pthread_mutex_unlock(&R->mu);
}

void fl_ring_stop(fl_ring *R)
{
    pthread_mutex_lock(&R->mu);
    stop_locked(R, NULL);
    pthread_mutex_unlock(&R->mu);
}

void fl_ring_fail(fl_ring *R, const fl_error *err)
{
    pthread_mutex_lock(&R->mu);
    stop_locked(R, err);
    pthread_mutex_unlock(&R->mu);
}

void fl_ring_consumer_stats(fl_ring *R, uint64_t *next_ticket, uint64_t *taken, uint64_t *skipped,
                            double *wait_s)
{
    pthread_mutex_lock(&R->mu);
    if (next_ticket)
        *next_ticket = R->next_ticket;
    if (taken)
        *taken = R->taken;
    if (skipped)
        *skipped = R->taken_skipped;
    if (wait_s)
        *wait_s = R->take_wait_s;
    pthread_mutex_unlock(&R->mu);
}
