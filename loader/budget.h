/* budget.h — the decode-memory budget the workers of one loader share: before decoding an
 * image a worker reserves what the decode can use (fl_decode_crop_resize_bytes and the masks),
 * waits while other workers' reservations leave too little, and gives it back after. Requests
 * are served in arrival order (a large one is not starved by small ones). Internal. */
#ifndef FL_BUDGET_H
#define FL_BUDGET_H

#include <pthread.h>
#include <stdint.h>

/* fl_budget_take's code when the budget was stopped (fl_budget_stop) while it waited. */
#define FL_BUDGET_STOPPED (-ECANCELED)

typedef struct fl_budget {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t limit;      /* bytes; 0: no budget (take and give do nothing) */
    uint64_t used;       /* reserved now */
    uint64_t peak;       /* the most reserved at once */
    uint64_t next, head; /* tickets: the next to hand out, the one served next */
    double wait_s;       /* summed over the waits */
    int stop;
} fl_budget;

/* Set up a budget of `limit` bytes (0: unlimited). 0 or -errno. */
int fl_budget_init(fl_budget *B, uint64_t limit);
/* Free it; no thread may be using it. */
void fl_budget_destroy(fl_budget *B);

/* Reserve n (<= limit: the caller refuses larger requests itself) bytes, waiting (in ticket
 * order) until they fit; *waited (may be NULL) receives the seconds waited. A caller must hold
 * no other reservation while it waits. Returns 0, or FL_BUDGET_STOPPED (nothing reserved). */
int fl_budget_take(fl_budget *B, uint64_t n, double *waited);
/* Give back n bytes taken before; wakes the waiters. */
void fl_budget_give(fl_budget *B, uint64_t n);
/* Wake every waiter: takes return FL_BUDGET_STOPPED from now on. */
void fl_budget_stop(fl_budget *B);
/* The most reserved at once and the seconds waited so far (any thread; either may be NULL). */
void fl_budget_stats(fl_budget *B, uint64_t *peak, double *wait_s);

#endif
