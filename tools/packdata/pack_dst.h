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
 * starts, the file its whole plan was written to. */
typedef struct pd_job {
    char *head; /* the plan's version, source and option lines (the input lines are not kept) */
    size_t head_len;
    uint64_t count;  /* inputs */
    char sha256[65]; /* over the class and input lines of the plan */
    char *plan_file; /* "DST.partial.plan": the whole plan of a fresh run, until kept */
    /* the plan's short form, head + "inputs\tCOUNT\tSHA256\n": DST.partial/plan.txt (the
     * writer reads plan.txt whole whenever it inspects DST.partial: it must stay small) */
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
 * - --resume with a resumable DST.partial: the job's short form is compared with its plan.txt
 *   (an older packdata's whole plan: line by line as it is made); another job is refused,
 *   saying what differs (from DST.partial.plan, the earlier whole plan); the same: *fresh = 0.
 * - --resume with a complete DST: only the inputs' digest is made and compared with the
 *   manifest's: the same job exits 0 ("already complete"); another is refused unless --force.
 * - otherwise (a fresh DST.partial): the whole plan is written to j->plan_file
 *   (DST.partial.plan), *fresh = 1; the writer saves j->summary as plan.txt; once it has made
 *   DST.partial, pd_job_keep keeps the file for later --resume runs.
 * Prints what it refuses. Returns -1 to go on packing, else the exit status. */
int pd_dst_job(const pd_pack_opts *po, pd_dst *d, const pd_items *items, const pd_plan *plan,
               pd_job *j, int *fresh);
/* DST.partial.plan now belongs to DST.partial: pd_job_free leaves it. */
void pd_job_keep(pd_job *j);
/* DST.partial is complete or gone: remove DST.partial.plan. */
void pd_job_done(const pd_dst *d);
/* Free the job; removes j->plan_file unless kept. */
void pd_job_free(pd_job *j);

#endif
