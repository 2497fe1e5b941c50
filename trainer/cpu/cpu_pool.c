/* cpu_pool.c — fixed thread pool with a generation counter (see cpu_pool.h). Workers sleep on a
 * condition variable between jobs; the caller runs thread 0's share itself. */
#include "cpu_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct scratch {
    float *p;
    size_t n;
} scratch;

struct cpu_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t start_cv, done_cv;
    unsigned long gen;
    int pending;
    int stop;
    cpu_pool_fn fn;
    void *arg;
    scratch *scr; /* n * CPU_POOL_SLOTS */
};

typedef struct worker_arg {
    cpu_pool *p;
    int tid;
} worker_arg;

static void *worker_main(void *a)
{
    worker_arg *wa = a;
    cpu_pool *p = wa->p;
    int tid = wa->tid;
    free(wa);
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->start_cv, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        cpu_pool_fn fn = p->fn;
        void *arg = p->arg;
        pthread_mutex_unlock(&p->mu);
        fn(arg, tid, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

cpu_pool *cpu_pool_create(int nthreads)
{
    if (nthreads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        nthreads = c > 0 ? (int)c : 1;
    }
    if (nthreads > 256)
        nthreads = 256;
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = nthreads;
    p->scr = calloc((size_t)nthreads * CPU_POOL_SLOTS, sizeof *p->scr);
    p->threads = calloc((size_t)nthreads, sizeof *p->threads);
    if (!p->scr || !p->threads) {
        free(p->scr);
        free(p->threads);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    for (int t = 1; t < nthreads; t++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa ||
            (wa->p = p, wa->tid = t, pthread_create(&p->threads[t], NULL, worker_main, wa))) {
            free(wa);
            p->n = t; /* run with the threads we got */
            break;
        }
    }
    return p;
}

int cpu_pool_threads(const cpu_pool *p) { return p ? p->n : 1; }

void cpu_pool_run(cpu_pool *p, cpu_pool_fn fn, void *arg)
{
    if (!p || p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->pending = p->n - 1;
    p->gen++;
    pthread_cond_broadcast(&p->start_cv);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static scratch g_fallback[CPU_POOL_SLOTS];

float *cpu_pool_scratch(cpu_pool *p, int tid, int slot, size_t n)
{
    scratch *s = p ? &p->scr[(size_t)tid * CPU_POOL_SLOTS + slot] : &g_fallback[slot];
    if (n == 0)
        n = 1;
    if (s->n < n) {
        free(s->p);
        /* 64-byte alignment keeps GEMM panels on cache lines */
        if (posix_memalign((void **)&s->p, 64, n * sizeof(float))) {
            s->p = NULL;
            s->n = 0;
            return NULL;
        }
        s->n = n;
    }
    return s->p;
}

void cpu_pool_free(cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->start_cv);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n; t++)
        pthread_join(p->threads[t], NULL);
    for (int i = 0; i < p->n * CPU_POOL_SLOTS; i++)
        free(p->scr[i].p);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p->scr);
    free(p->threads);
    free(p);
}
