/* budget.c — the decode-memory budget shared by a loader's workers (budget.h): a mutex, one
 * condition variable and a ticket queue. */
#include <errno.h>

#include "budget.h"
#include "fl_clock.h"

int fl_budget_init(fl_budget *B, uint64_t limit)
{
    *B = (fl_budget){.limit = limit};
    int rc = pthread_mutex_init(&B->mu, NULL);
    if (rc)
        return -rc;
    if ((rc = pthread_cond_init(&B->cv, NULL))) {
        pthread_mutex_destroy(&B->mu);
        return -rc;
    }
    return 0;
}

void fl_budget_destroy(fl_budget *B)
{
    pthread_cond_destroy(&B->cv);
    pthread_mutex_destroy(&B->mu);
}

int fl_budget_take(fl_budget *B, uint64_t n, double *waited)
{
    if (waited)
        *waited = 0;
    if (!B->limit)
        return 0;
    pthread_mutex_lock(&B->mu);
    uint64_t t = B->next++;
    double t0 = 0;
    /* Served in ticket order: only the head may take, and it waits for room. Whoever holds
     * bytes never waits here (one reservation per worker at a time), so the head's wait ends
     * as soon as the holders decode and give back. */
    while (!B->stop && (t != B->head || B->used + n > B->limit)) {
        if (t0 == 0)
            t0 = fl_now_s();
        pthread_cond_wait(&B->cv, &B->mu);
    }
    int rc = FL_BUDGET_STOPPED;
    if (!B->stop) {
        B->used += n;
        if (B->used > B->peak)
            B->peak = B->used;
        rc = 0;
    }
    B->head++; /* a stopped waiter gives its turn on too */
    if (t0 != 0) {
        double dt = fl_now_s() - t0;
        B->wait_s += dt;
        if (waited)
            *waited = dt;
    }
    pthread_cond_broadcast(&B->cv); /* the next ticket may fit as well */
    pthread_mutex_unlock(&B->mu);
    return rc;
}

void fl_budget_give(fl_budget *B, uint64_t n)
{
    if (!B->limit)
        return;
    pthread_mutex_lock(&B->mu);
    B->used -= n;
    pthread_cond_broadcast(&B->cv);
    pthread_mutex_unlock(&B->mu);
}

void fl_budget_stop(fl_budget *B)
{
    pthread_mutex_lock(&B->mu);
    B->stop = 1;
    pthread_cond_broadcast(&B->cv);
    pthread_mutex_unlock(&B->mu);
}

void fl_budget_stats(fl_budget *B, uint64_t *peak, double *wait_s)
{
    pthread_mutex_lock(&B->mu);
    if (peak)
        *peak = B->peak;
    if (wait_s)
        *wait_s = B->wait_s;
    pthread_mutex_unlock(&B->mu);
}
