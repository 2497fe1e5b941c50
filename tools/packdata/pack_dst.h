/* pack_dst.h — `packdata pack`'s destination: the lock, what may be replaced or resumed, and the
 * job record (options + input list, "the plan") kept in DST.partial so that --resume continues
 * only the same job over the same inputs, and --resume on a finished dataset is a no-op. */
#ifndef PACK_DST_H
#define PACK_DST_H

#include "pack_internal.h"

#include "fl_writer.h"

typedef struct pd_dst {
    char *dst;               /* DST without trailing slashes */
    fl_writer_lock *lock;    /* held from pd_dst_begin to pd_dst_end */
    fl_writer_dst_info info; /* what DST and DST.partial held when locked */
} pd_dst;

/* What this run is: the head of its plan, its inputs' count and digest, and while a fresh run
 * starts, the file its plan was written to. */
typedef struct pd_job {
    char *head; /* the plan's version, source and option lines (the input lines are not kept) */
    size_t head_len;
    uint64_t count;  /* inputs */
    char sha256[65]; /* over the class and input lines of the plan */
    char *plan_file; /* "DST.partial.plan": the whole plan of a fresh run, until installed */
    /* the plan's short form: head + "inputs\tCOUNT\tSHA256": what the writer saves as plan.txt
     * before anything else can make DST.partial resumable, replaced by the whole plan at once
     * by pd_job_install (so a kill in between leaves a plan that still identifies the job) */
    char *summary;
    size_t summary_len;
} pd_job;

/* Normalise DST, refuse DST equal to, inside or around SRC, take the lock, look at DST and
 * DST.partial and refuse what must not be touched. Prints the error. Returns -1 to go on, else
 * the exit status. */
int pd_dst_begin(const pd_pack_opts *po, pd_dst *d);
/* Release the lock (removes DST.lock) and free. */
void pd_dst_end(pd_dst *d);

/* Make the job from the item list (after shuffle and --part) and the plan (its options; the keep
 * format is not part of it), one stat per file input, and decide:
 * - --resume with a resumable DST.partial: the plan is compared with DST.partial/plan.txt as it
 *   is made; another job is refused, saying what differs; the same: *fresh = 0, go on.
 * - --resume with a complete DST: only the inputs' digest is made and compared with the
 *   manifest's: the same job exits 0 ("already complete"); another is refused unless --force.
 * - otherwise (a fresh DST.partial): the plan is written to j->plan_file, *fresh = 1; after
 *   fl_writer_open made DST.partial (not resuming), pd_job_install moves it in.
 * Prints what it refuses. Returns -1 to go on packing, else the exit status. */
int pd_dst_job(const pd_pack_opts *po, pd_dst *d, const pd_items *items, const pd_plan *plan,
               pd_job *j, int *fresh);
/* Move j->plan_file to DST.partial/plan.txt (nothing when there is none). Returns 0, or -errno
 * (printed). */
int pd_job_install(const pd_dst *d, pd_job *j);
/* Free the job; removes j->plan_file when it was not installed. */
void pd_job_free(pd_job *j);

#endif
