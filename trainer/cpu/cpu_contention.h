/* cpu_contention.h — is the calling thread competing for its CPU? A probe of the time a thread
 * spent runnable but waiting for a core (the kernel's run delay, /proc/thread-self/schedstat),
 * as a share of wall time over windows of at least 50 ms, with hysteresis. The CPU backend uses it
 * to run small ops on one thread while other work (decode workers, other processes) holds the
 * cores, where a partner thread descheduled at a barrier costs a time slice per op. */
#ifndef TF_CPU_CONTENTION_H
#define TF_CPU_CONTENTION_H

#include <stdint.h>

typedef struct cpu_contention {
    int64_t t0, d0; /* the window's start: monotonic ns, run delay ns (-1: no probe) */
    double share;   /* run delay / wall time of the last full window */
    int contended;  /* the current verdict */
    uint64_t windows, windows_contended;
} cpu_contention;

/* Start a probe on the calling thread (all zero, not contended). */
void cpu_contention_init(cpu_contention *c);

/* Sample the calling thread and return the verdict: contended (1) once a window's run delay
 * exceeds 15% of its wall time, uncontended (0) again once one falls under 5%; between
 * windows, the last verdict. Always 0 where the kernel has no schedstat file. */
int cpu_contention_poll(cpu_contention *c);

#endif
