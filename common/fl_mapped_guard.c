/* fl_mapped_guard.c — the SIGBUS guard of fl_mapped_guard.h: one process-wide handler, chained
 * to the previous one, that jumps back into the guarded call of the faulting thread. */
#include "fl_mapped_guard.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "fl_error.h"

/* The guarded call of this thread, NULL outside one. initial-exec: the handler reads it without
 * calling into the dynamic linker (libfastload is also loaded with dlopen, by Python's ctypes). */
static __thread sigjmp_buf *volatile guard_jb __attribute__((tls_model("initial-exec")));

static struct sigaction previous; /* the handler before ours */

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    sigjmp_buf *jb = guard_jb;
    if (jb) {
        guard_jb = NULL;
        siglongjmp(*jb, 1); /* SA_NODEFER: SIGBUS is not blocked here, no mask to restore */
    }
    /* Not ours: what was there before us. */
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
        previous.sa_sigaction(sig, si, uc);
        return;
    }
    if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler != SIG_DFL &&
        previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* The default action: restore it and raise (a fault's SIGBUS cannot be ignored anyway) */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, NULL);
    raise(SIGBUS);
}

static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int installed;

int fl_mapped_guard_install(void)
{
    pthread_mutex_lock(&install_mu);
    struct sigaction cur;
    int rc = 0;
    if (sigaction(SIGBUS, NULL, &cur) != 0) {
        rc = -errno;
    } else if (!((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus)) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        previous = cur; /* never ours: chaining to ourselves would loop */
        if (sigaction(SIGBUS, &sa, NULL) != 0)
            rc = -errno;
    }
    atomic_store(&installed, rc == 0);
    pthread_mutex_unlock(&install_mu);
    return rc;
}

int fl_mapped_run(void (*fn)(void *arg), void *arg)
{
    if (!atomic_load_explicit(&installed, memory_order_acquire)) {
        int rc = fl_mapped_guard_install();
        if (rc)
            return rc;
    }
    sigjmp_buf jb;
    if (sigsetjmp(jb, 0))
        return FL_E_TRUNCATED; /* the handler cleared guard_jb */
    guard_jb = &jb;
    atomic_signal_fence(memory_order_seq_cst);
    fn(arg);
    atomic_signal_fence(memory_order_seq_cst);
    guard_jb = NULL;
    return 0;
}

typedef struct copy_args {
    void *dst;
    const void *src;
    size_t n;
} copy_args;

static void copy_fn(void *arg)
{
    copy_args *a = arg;
    memcpy(a->dst, a->src, a->n);
}

int fl_mapped_copy(void *dst, const void *src, size_t n)
{
    copy_args a = {dst, src, n};
    return fl_mapped_run(copy_fn, &a);
}
