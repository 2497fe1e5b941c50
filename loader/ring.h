/* ring.h — the ring of batch slots between the decode workers (producers) and the caller
 * (consumer), as its own unit with its own lock: slot i carries tickets i, i + n, i + 2n, ...
 * (a ticket is the absolute batch number: epoch × batches per epoch + batch), except that a
 * ticket whose slot the consumer still holds goes to another free slot (a consumer may keep a
 * batch for as long as it likes: the ring works on with the other slots). It knows slot
 * states and sample counts only; what a slot holds (pixels, labels) belongs to the loader.
 * Internal. */
#ifndef FL_RING_H
#define FL_RING_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "fl_error.h"

/* A slot's life: FREE -claim-> FILLING -fill done (last sample)-> READY -take-> HELD
 * -release-> FREE. */
enum { FL_SLOT_FREE = 0, FL_SLOT_FILLING = 1, FL_SLOT_READY = 2, FL_SLOT_HELD = 3 };
#define FL_RING_NO_ERROR UINT32_MAX

/* fl_ring_take's code when the consumer holds every slot (release one first). */
#define FL_RING_ALL_HELD (-EBUSY)
/* fl_ring_take's code when the ring was stopped (fl_ring_stop) while no batch was ready. */
#define FL_RING_STOPPED (-ECANCELED)
/* fl_ring_take's code when every ticket before the end (fl_ring_set_end) was taken. */
#define FL_RING_END (-ENODATA)

typedef struct fl_ring_slot {
    int state;        /* FL_SLOT_* */
    uint64_t ticket;  /* the batch it holds or is being filled with */
    uint32_t claimed; /* samples handed to producers */
    uint32_t done;    /* samples finished */
    uint32_t skipped; /* samples replaced (FL_CORRUPT_SKIP), summed over its runs */
    uint32_t err_k;   /* lowest failed sample (FL_RING_NO_ERROR: none) */
    fl_error err;     /* its error */
} fl_ring_slot;

/* Called by fl_ring_claim, with the ring's lock held, when slot `slot` starts being filled with
 * batch `ticket`: the place to say which records the batch holds. Calls are serialised by the
 * lock (state only this callback touches needs no lock of its own) and made in ticket order. */
typedef void (*fl_ring_assign_fn)(void *user, uint32_t slot, uint64_t ticket);

typedef struct fl_ring {
    pthread_mutex_t mu;
    pthread_cond_t free_cv;  /* producers: a slot became free, or stop */
    pthread_cond_t ready_cv; /* consumer: a slot became ready, or stop */
    pthread_cond_t park_cv;  /* parked producers: more may work now, or stop */
    fl_ring_slot *slots;
    uint32_t nslots;
    uint32_t batch; /* samples per batch */
    uint32_t run;   /* samples a producer claims at once */
    fl_ring_assign_fn assign;
    void *user;
    int stop;
    int failed; /* a taken batch had an error: take returns fail_err from now on */
    fl_error fail_err;
    uint32_t fill_slot;   /* slot whose samples are being claimed (UINT32_MAX: none) */
    uint64_t fill_next;   /* next ticket to give a slot */
    uint64_t next_ticket; /* next ticket the consumer takes */
    uint64_t end_ticket;  /* no slot is claimed for this ticket or later (UINT64_MAX: none) */
    uint32_t producers;   /* producer threads (fl_ring_set_active; 0: no limit) */
    uint32_t active;      /* at most this many of them claim runs; the others park */
    uint32_t parked;      /* producers parked now */
    uint64_t taken;       /* batches taken, their replaced samples, time the consumer waited */
    uint64_t taken_skipped;
    double take_wait_s;
} fl_ring;

/* A run of samples [k0, k0 + cnt) of batch `ticket` in slot `slot`, claimed by one producer. */
typedef struct fl_ring_run {
    uint32_t slot;
    uint64_t ticket;
    uint32_t k0, cnt;
} fl_ring_run;

/* Set up a ring of nslots (>= 1) slots of `batch` samples, handed to producers `run` samples at
 * a time (1 <= run), the first batch being ticket `first_ticket`. assign (may be NULL) is called
 * as described above. Returns 0 or -ENOMEM. */
int fl_ring_init(fl_ring *R, uint32_t nslots, uint32_t batch, uint32_t run, uint64_t first_ticket,
                 fl_ring_assign_fn assign, void *user);
/* Free what init allocated. No thread may be using the ring. */
void fl_ring_destroy(fl_ring *R);

/* End the ring before ticket end_ticket (UINT64_MAX, init's: no end): no slot is claimed for it
 * or any later ticket, so producers fill nothing past end_ticket - 1 and a claim then returns 0
 * (with block too: the producer is done); take returns FL_RING_END for it. Before any claim. */
void fl_ring_set_end(fl_ring *R, uint64_t end_ticket);

/* Claim: the next run of samples to fill, in ticket order; opens the next slot (FREE ->
 * FILLING, calling assign) when the current one is fully claimed. With `block`, waits for that
 * slot to be free (the time waited is added to *wait_s when wait_s is not NULL). Returns 1 with
 * *out set, or 0 when stopped, when every ticket before the end is claimed (fl_ring_set_end), or
 * (without block) when the next slot is not free.
 * With a limit on active producers (fl_ring_set_active): a producer claims with `block` only
 * when it holds no run; while more producers are at work than allowed, a claim without block
 * returns 0 (the caller finishes what it holds) and one with block parks the caller until the
 * limit rises (parked time is not added to *wait_s). */
int fl_ring_claim(fl_ring *R, int block, fl_ring_run *out, double *wait_s);

/* Fill done: the samples of `done` are written; err_k is the lowest failed sample of the run
 * (FL_RING_NO_ERROR: none) with its error err, `skipped` how many were replaced. When the last
 * sample of the batch is done the slot becomes READY. Then, when next is not NULL, claims the
 * next run as fl_ring_claim(R, block, next, wait_s) does in the same lock hold (a producer pays
 * one lock round per run) and returns its result; returns 0 when next is NULL. */
int fl_ring_fill_done(fl_ring *R, const fl_ring_run *done, uint32_t err_k, const fl_error *err,
                      uint32_t skipped, fl_ring_run *next, int block, double *wait_s);

/* Take: wait for the next batch in ticket order to be READY and hand its slot to the consumer
 * (READY -> HELD). Returns 0 with *slot (and *skipped, when not NULL) set; the batch's error
 * when one of its samples failed (the ring then stops: producers finish and take returns that
 * error again); the error given to fl_ring_fail; FL_RING_ALL_HELD; FL_RING_STOPPED; FL_RING_END
 * (the end of fl_ring_set_end reached, once no failure is to be reported). err (may
 * be NULL) receives the message of an error. */
int fl_ring_take(fl_ring *R, uint32_t *slot, uint32_t *skipped, fl_error *err);

/* Release: slot goes back to the producers (HELD -> FREE). Slots may be released in any order;
 * a slot that is not held is ignored. */
void fl_ring_release(fl_ring *R, uint32_t slot);

/* At most `active` (1..producers) of the `producers` threads that claim from this ring work
 * from their next claim on; the others park there (see fl_ring_claim). Any thread, any time;
 * which producer fills a run never changes what a batch holds. */
void fl_ring_set_active(fl_ring *R, uint32_t producers, uint32_t active);

/* Stop: every waiting producer and consumer wakes up; claims return 0 from now on. */
void fl_ring_stop(fl_ring *R);
/* Stop, and make every later take return err (a failure outside the ring, e.g. a device copy). */
void fl_ring_fail(fl_ring *R, const fl_error *err);

/* The ticket the next take returns, and the consumer's totals (batches taken, samples replaced
 * in them, seconds take waited); any pointer may be NULL. */
void fl_ring_consumer_stats(fl_ring *R, uint64_t *next_ticket, uint64_t *taken, uint64_t *skipped,
                            double *wait_s);

#endif
