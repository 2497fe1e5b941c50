/* cpu_contention.c — the run-delay probe of cpu_contention.h. */
#include "cpu_contention.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WINDOW_NS  50000000LL /* 50 ms */
#define ENTER_FRAC 0.15
#define LEAVE_FRAC 0.05

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* the calling thread's run delay in ns ("on-CPU ns, waiting ns, slices"), -1 when unreadable */
static int64_t run_delay_ns(void)
{
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char b[128];
    ssize_t r = read(fd, b, sizeof b - 1);
    close(fd);
    if (r <= 0)
        return -1;
    b[r] = 0;
    unsigned long long on_cpu, waiting;
    if (sscanf(b, "%llu %llu", &on_cpu, &waiting) != 2)
        return -1;
    return (int64_t)waiting;
}

void cpu_contention_init(cpu_contention *c)
{
    memset(c, 0, sizeof *c);
    c->t0 = now_ns();
    c->d0 = run_delay_ns();
}

int cpu_contention_poll(cpu_contention *c)
{
    if (c->d0 < 0)
        return 0;
    int64_t t = now_ns();
    if (t - c->t0 < WINDOW_NS)
        return c->contended;
    int64_t d = run_delay_ns();
    if (d < 0)
        return c->contended = 0;
    c->share = (double)(d - c->d0) / (double)(t - c->t0);
    c->t0 = t;
    c->d0 = d;
    if (c->share > ENTER_FRAC)
        c->contended = 1;
    else if (c->share < LEAVE_FRAC)
        c->contended = 0;
    c->windows++;
    c->windows_contended += (uint64_t)c->contended;
    return c->contended;
}
