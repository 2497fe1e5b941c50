/* fl_clock.h — the one monotonic clock of fastload (common/): seconds since an arbitrary start,
 * for durations, rates and timeouts in every layer (loader statistics, readers' I/O wait, tools'
 * timings and progress bars, the trainer's reports and the MPI communicator's waits). */
#ifndef FL_CLOCK_H
#define FL_CLOCK_H

#include <time.h>

/* CLOCK_MONOTONIC in seconds (never goes back; not wall-clock time). */
static inline double fl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
