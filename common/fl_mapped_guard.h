/* fl_mapped_guard.h — reading a file mapping that another process may shrink. A page of a
 * MAP_SHARED file mapping that lies past the file's end (the file was truncated, or rewritten in
 * place by a tool that truncates first, after it was mapped) raises SIGBUS when it is touched,
 * and SIGBUS's default action kills the process: a training script whose data set changed under
 * it would die without a message. fl_mapped_run runs a function that reads a mapping under a
 * guard: such a fault on the calling thread ends the function early and is returned as an error,
 * which the caller words (naming its file and record).
 *
 * The guard is one process-wide SIGBUS handler, installed on first use (or by
 * fl_mapped_guard_install) and chained to the handler that was there before (a SIGBUS outside a
 * guarded call goes on to it, or to the default action: the process dies as it would have). A
 * thread's guarded call is found through one thread-local pointer; nothing else happens per call
 * but a sigsetjmp (no system call). */
#ifndef FL_MAPPED_GUARD_H
#define FL_MAPPED_GUARD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Install the guard's handler now, or again when another has replaced it since (e.g. PyTorch's,
 * in a DataLoader worker forked after the guard was installed): the one found is then the one
 * chained to. fl_mapped_run installs it on first use; a loader reading a mapping calls this when
 * it is created. Returns 0 or -errno. */
int fl_mapped_guard_install(void);

/* Run fn(arg) on the calling thread; a SIGBUS raised by it on this thread abandons it where it
 * stands. fn must only read the mapping and write memory of the caller's: it is left by a jump,
 * so it must hold no lock, allocation or other state that needs undoing (a copy, a checksum).
 * Calls may not nest. Returns 0 when fn returned, FL_E_TRUNCATED when it faulted, or -errno
 * when the handler could not be installed (fn was not run). */
int fl_mapped_run(void (*fn)(void *arg), void *arg);

/* memcpy(dst, src, n) under the guard: 0 or FL_E_TRUNCATED (dst then holds an unknown part). */
int fl_mapped_copy(void *dst, const void *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif
