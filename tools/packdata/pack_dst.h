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

/* What this run is: the plan text saved in DST.partial and the inputs' digest. */
typedef struct pd_job {
    char *plan; /* "fastload-pack-plan 1" text: source, options, classes, inputs */
    size_t plan_len;
    uint64_t count;  /* inputs */
    char sha256[65]; /* over the class and input lines of the plan */
} pd_job;

/* Normalise DST, refuse DST equal to, inside or around SRC, take the lock, look at DST and
 * DST.partial and refuse what must not be touched. Prints the error. Returns -1 to go on, else
 * the exit status. */
int pd_dst_begin(const pd_pack_opts *po, pd_dst *d);
/* Release the lock (removes DST.lock) and free. */
void pd_dst_end(pd_dst *d);

/* Build the job record from the item list (after shuffle and --part) and the plan.
 * Returns 0 or -ENOMEM. */
int pd_job_make(const pd_pack_opts *po, const pd_items *items, const pd_plan *plan, pd_job *j);
void pd_job_free(pd_job *j);

/* --resume: compare the job with what DST.partial recorded (or, with no resumable partial, with
 * the finished DST's manifest). Prints what differs. Returns -1 to go on packing, 0 when DST is
 * already complete for this job (reported as such), else the exit status. */
int pd_dst_decide(const pd_pack_opts *po, pd_dst *d, const pd_job *j);

#endif
