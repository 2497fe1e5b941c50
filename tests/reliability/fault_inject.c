/* fault_inject.c — an LD_PRELOAD shim that injects I/O faults without root: ENOSPC on writes
 * to matching files after a byte budget, and EIO on reads of a matching file at/after an offset.
 * Used by the reliability tests (the scripts in tests/reliability/); documented in
 * docs/RELIABILITY.md.
 *
 * Environment (read once, at load time):
 *   FL_FAULT_PATH=SUBSTR         files whose absolute path (the name given to open/openat/creat,
 *                                made absolute from the cwd or dirfd) contains SUBSTR are
 *                                "write-faulted"
 *   FL_FAULT_ENOSPC_AFTER=BYTES  once BYTES bytes in total were written to write-faulted files,
 *                                write/pwrite/writev/pwritev on them fail with ENOSPC (the write
 *                                that crosses the budget is short, as on a real full disk), and
 *                                fsync/fdatasync on them fail with ENOSPC too
 *   FL_FAULT_EIO_PATH=SUBSTR     files whose absolute path contains SUBSTR are "read-faulted"
 *   FL_FAULT_EIO_OFFSET=BYTES    read/pread/readv/preadv of a read-faulted file whose byte range
 *                                reaches BYTES fail with EIO (default 0: every read)
 *   FL_FAULT_REPORT=FILE         one line is appended to FILE the first time a fault fires on an
 *                                fd (a short write counts): "ENOSPC <path>" / "EIO <path>
 * <offset>", so a test can tell the fault really happened; and at exit, when FL_FAULT_ENOSPC_AFTER
 * is set, "WRITTEN <bytes>": the bytes the process wrote to write-faulted files (a run with a huge
 * budget measures where the budgets of real runs can fall) Limits: only calls through libc's
 * dynamic symbols are seen — io_uring, mmap and stdio's own internal reads/writes bypass it; fds
 * duplicated with dup/fcntl are not tracked, and a tracked fd closed other than by close() (fclose
 * after fdopen) keeps its mark until open reuses it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FD 65536
enum { F_WRITE = 1, F_READ = 2 };

static _Atomic unsigned char fd_flags[MAX_FD];
static _Atomic unsigned char fd_reported[MAX_FD];
static const char *w_path, *r_path, *report_path;
static long long enospc_after = -1; /* -1: no ENOSPC fault */
static long long eio_offset;
static _Atomic long long written; /* bytes written to write-faulted files so far */

#define REAL(ret, name, args) static ret(*real_##name) args
REAL(int, open, (const char *, int, ...));
REAL(int, open64, (const char *, int, ...));
REAL(int, openat, (int, const char *, int, ...));
REAL(int, openat64, (int, const char *, int, ...));
REAL(int, creat, (const char *, mode_t));
REAL(int, creat64, (const char *, mode_t));
REAL(int, __open_2, (const char *, int));
REAL(int, __open64_2, (const char *, int));
REAL(int, __openat_2, (int, const char *, int));
REAL(int, __openat64_2, (int, const char *, int));
REAL(int, close, (int));
REAL(ssize_t, write, (int, const void *, size_t));
REAL(ssize_t, pwrite, (int, const void *, size_t, off_t));
REAL(ssize_t, pwrite64, (int, const void *, size_t, off64_t));
REAL(ssize_t, writev, (int, const struct iovec *, int));
REAL(ssize_t, pwritev, (int, const struct iovec *, int, off_t));
REAL(ssize_t, pwritev64, (int, const struct iovec *, int, off64_t));
REAL(int, fsync, (int));
REAL(int, fdatasync, (int));
REAL(ssize_t, read, (int, void *, size_t));
REAL(ssize_t, pread, (int, void *, size_t, off_t));
REAL(ssize_t, pread64, (int, void *, size_t, off64_t));
REAL(ssize_t, readv, (int, const struct iovec *, int));
REAL(ssize_t, preadv, (int, const struct iovec *, int, off_t));
REAL(ssize_t, preadv64, (int, const struct iovec *, int, off64_t));
REAL(ssize_t, __read_chk, (int, void *, size_t, size_t));
REAL(ssize_t, __pread_chk, (int, void *, size_t, off_t, size_t));
REAL(ssize_t, __pread64_chk, (int, void *, size_t, off64_t, size_t));

static void *sym(const char *name) { return dlsym(RTLD_NEXT, name); }

__attribute__((constructor)) static void fault_init(void)
{
#define LOAD(name) real_##name = sym(#name)
    LOAD(open);
    LOAD(open64);
    LOAD(openat);
    LOAD(openat64);
    LOAD(creat);
    LOAD(creat64);
    LOAD(__open_2);
    LOAD(__open64_2);
    LOAD(__openat_2);
    LOAD(__openat64_2);
    LOAD(close);
    LOAD(write);
    LOAD(pwrite);
    LOAD(pwrite64);
    LOAD(writev);
    LOAD(pwritev);
    LOAD(pwritev64);
    LOAD(fsync);
    LOAD(fdatasync);
    LOAD(read);
    LOAD(pread);
    LOAD(pread64);
    LOAD(readv);
    LOAD(preadv);
    LOAD(preadv64);
    LOAD(__read_chk);
    LOAD(__pread_chk);
    LOAD(__pread64_chk);
#undef LOAD
    const char *s;
    w_path = getenv("FL_FAULT_PATH");
    if (w_path && !*w_path)
        w_path = NULL;
    if ((s = getenv("FL_FAULT_ENOSPC_AFTER")) && *s)
        enospc_after = strtoll(s, NULL, 0);
    r_path = getenv("FL_FAULT_EIO_PATH");
    if (r_path && !*r_path)
        r_path = NULL;
    if ((s = getenv("FL_FAULT_EIO_OFFSET")) && *s)
        eio_offset = strtoll(s, NULL, 0);
    report_path = getenv("FL_FAULT_REPORT");
    if (report_path && !*report_path)
        report_path = NULL;
}

/* Lazily resolve when called before the constructor ran (another constructor doing I/O). */
#define ENSURE(name)                                                                               \
    do {                                                                                           \
        if (!real_##name)                                                                          \
            real_##name = sym(#name);                                                              \
    } while (0)

/* The path an open call names, made absolute (relative to the cwd or to dirfd), so a pattern
 * like "/data/out" matches however the program spelled the path; ".." is not folded. */
static const char *full_path(int dirfd, const char *path, char *buf, size_t cap)
{
    if (!path || path[0] == '/')
        return path;
    char base[PATH_MAX];
    if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base))
            return path;
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = readlink(link, base, sizeof base - 1);
        if (n <= 0)
            return path;
        base[n] = 0;
    }
    snprintf(buf, cap, "%s/%s", base, path);
    return buf;
}

static void track_at(int fd, int dirfd, const char *path)
{
    if (fd < 0 || fd >= MAX_FD)
        return;
    char buf[2 * PATH_MAX];
    if ((w_path && enospc_after >= 0) || r_path)
        path = full_path(dirfd, path, buf, sizeof buf);
    unsigned char f = 0;
    if (path && w_path && enospc_after >= 0 && strstr(path, w_path))
        f |= F_WRITE;
    if (path && r_path && strstr(path, r_path))
        f |= F_READ;
    atomic_store(&fd_flags[fd], f);
    atomic_store(&fd_reported[fd], 0);
}

static void track(int fd, const char *path) { track_at(fd, AT_FDCWD, path); }

static int flags_of(int fd) { return fd >= 0 && fd < MAX_FD ? atomic_load(&fd_flags[fd]) : 0; }

/* Append one line to FL_FAULT_REPORT the first time fault `bit` fires on fd. */
static void report(int fd, unsigned char bit, const char *what, long long off)
{
    if (!report_path || fd < 0 || fd >= MAX_FD)
        return;
    if (atomic_fetch_or(&fd_reported[fd], bit) & bit)
        return;
    ENSURE(open);
    ENSURE(write);
    ENSURE(close);
    char link[64], path[512], line[700];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    path[n > 0 ? n : 0] = 0;
    int len = off >= 0 ? snprintf(line, sizeof line, "%s %s %lld\n", what, path, off)
                       : snprintf(line, sizeof line, "%s %s\n", what, path);
    int rfd = real_open(report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (rfd < 0)
        return;
    if (real_write(rfd, line, (size_t)len) < 0) { /* nothing to do */
    }
    real_close(rfd);
}

__attribute__((destructor)) static void fault_fini(void)
{
    if (!report_path || enospc_after < 0)
        return;
    ENSURE(open);
    ENSURE(write);
    ENSURE(close);
    char line[64];
    int len = snprintf(line, sizeof line, "WRITTEN %lld\n", (long long)atomic_load(&written));
    int rfd = real_open(report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (rfd < 0)
        return;
    if (real_write(rfd, line, (size_t)len) < 0) { /* nothing to do */
    }
    real_close(rfd);
}

/* How many of n bytes a write to fd may write: n (no fault), fewer (the budget runs out inside
 * this write) or -1 with errno = ENOSPC (budget spent). */
static ssize_t write_allow(int fd, size_t n)
{
    if (!(flags_of(fd) & F_WRITE))
        return (ssize_t)n;
    long long before = atomic_load(&written);
    for (;;) {
        long long left = enospc_after - before;
        if (left <= 0 && n > 0) {
            report(fd, F_WRITE, "ENOSPC", -1);
            errno = ENOSPC;
            return -1;
        }
        long long take = (long long)n < left ? (long long)n : left;
        if (atomic_compare_exchange_weak(&written, &before, before + take)) {
            if (take < (long long)n)
                report(fd, F_WRITE, "ENOSPC", -1); /* short write */
            return (ssize_t)take;
        }
    }
}

static int sync_allow(int fd)
{
    if ((flags_of(fd) & F_WRITE) && atomic_load(&written) >= enospc_after) {
        report(fd, F_WRITE, "ENOSPC", -1);
        errno = ENOSPC;
        return -1;
    }
    return 0;
}

/* 1 when reading n bytes of fd at off must fail with EIO (off < 0: the file position). */
static int read_fails(int fd, size_t n, long long off)
{
    if (!(flags_of(fd) & F_READ))
        return 0;
    if (off < 0)
        off = lseek(fd, 0, SEEK_CUR);
    if (off < 0 || n == 0 || off + (long long)n <= eio_offset)
        return 0;
    report(fd, F_READ, "EIO", off);
    errno = EIO;
    return 1;
}

static size_t iov_len(const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++)
        n += iov[i].iov_len;
    return n;
}

/* ---- open family ---------------------------------------------------------------------------- */
#define MODE_ARG(flags, mode)                                                                      \
    mode_t mode = 0;                                                                               \
    if ((flags) & (O_CREAT | __O_TMPFILE)) {                                                       \
        va_list ap;                                                                                \
        va_start(ap, flags);                                                                       \
        mode = va_arg(ap, mode_t);                                                                 \
        va_end(ap);                                                                                \
    }

/* One open-family wrapper: `pre` reads the mode argument where the call has one, the real call
 * opens, `mark` records the new fd by its path (track: from the cwd; track_at: from dirfd). */
#define WRAP_OPEN(name, params, args, pre, mark)                                                   \
    int name params                                                                                \
    {                                                                                              \
        pre;                                                                                       \
        ENSURE(name);                                                                              \
        int fd = real_##name args;                                                                 \
        mark;                                                                                      \
        return fd;                                                                                 \
    }

WRAP_OPEN(open, (const char *path, int flags, ...), (path, flags, mode), MODE_ARG(flags, mode),
          track(fd, path))
WRAP_OPEN(open64, (const char *path, int flags, ...), (path, flags, mode), MODE_ARG(flags, mode),
          track(fd, path))
WRAP_OPEN(openat, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode),
          MODE_ARG(flags, mode), track_at(fd, dirfd, path))
WRAP_OPEN(openat64, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode),
          MODE_ARG(flags, mode), track_at(fd, dirfd, path))
WRAP_OPEN(creat, (const char *path, mode_t mode), (path, mode), (void)0, track(fd, path))
WRAP_OPEN(creat64, (const char *path, mode_t mode), (path, mode), (void)0, track(fd, path))
WRAP_OPEN(__open_2, (const char *path, int flags), (path, flags), (void)0, track(fd, path))
WRAP_OPEN(__open64_2, (const char *path, int flags), (path, flags), (void)0, track(fd, path))
WRAP_OPEN(__openat_2, (int dirfd, const char *path, int flags), (dirfd, path, flags), (void)0,
          track_at(fd, dirfd, path))
WRAP_OPEN(__openat64_2, (int dirfd, const char *path, int flags), (dirfd, path, flags), (void)0,
          track_at(fd, dirfd, path))

int close(int fd)
{
    ENSURE(close);
    if (fd >= 0 && fd < MAX_FD)
        atomic_store(&fd_flags[fd], 0);
    return real_close(fd);
}

/* ---- writes ------------------------------------------------------------------------------------
 */
ssize_t write(int fd, const void *buf, size_t n)
{
    ENSURE(write);
    ssize_t k = write_allow(fd, n);
    return k < 0 ? -1 : real_write(fd, buf, (size_t)k);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    ENSURE(pwrite);
    ssize_t k = write_allow(fd, n);
    return k < 0 ? -1 : real_pwrite(fd, buf, (size_t)k, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    ENSURE(pwrite64);
    ssize_t k = write_allow(fd, n);
    return k < 0 ? -1 : real_pwrite64(fd, buf, (size_t)k, off);
}

/* Vectored writes: a short budget writes the first k bytes through plain (p)write. */
static ssize_t vec_write(int fd, const struct iovec *iov, int cnt, long long off, int positioned)
{
    size_t n = iov_len(iov, cnt);
    ssize_t k = write_allow(fd, n);
    if (k < 0)
        return -1;
    if ((size_t)k == n)
        return -2; /* caller does the real call */
    size_t done = 0;
    for (int i = 0; i < cnt && done < (size_t)k; i++) {
        size_t m = iov[i].iov_len < (size_t)k - done ? iov[i].iov_len : (size_t)k - done;
        ssize_t r = positioned ? real_pwrite64(fd, iov[i].iov_base, m, off + (long long)done)
                               : real_write(fd, iov[i].iov_base, m);
        if (r < 0)
            return done ? (ssize_t)done : -1;
        done += (size_t)r;
        if ((size_t)r < m)
            break;
    }
    return (ssize_t)done;
}

/* One vectored-write wrapper: vec_write decides; -2 from it means the whole write is allowed. */
#define WRAP_WRITEV(name, params, off, positioned, args)                                           \
    ssize_t name params                                                                            \
    {                                                                                              \
        ENSURE(name);                                                                              \
        ENSURE(write);                                                                             \
        ENSURE(pwrite64);                                                                          \
        ssize_t r = vec_write(fd, iov, cnt, off, positioned);                                      \
        return r == -2 ? real_##name args : r;                                                     \
    }

WRAP_WRITEV(writev, (int fd, const struct iovec *iov, int cnt), 0, 0, (fd, iov, cnt))
WRAP_WRITEV(pwritev, (int fd, const struct iovec *iov, int cnt, off_t off), off, 1,
            (fd, iov, cnt, off))
WRAP_WRITEV(pwritev64, (int fd, const struct iovec *iov, int cnt, off64_t off), off, 1,
            (fd, iov, cnt, off))

int fsync(int fd)
{
    ENSURE(fsync);
    return sync_allow(fd) ? -1 : real_fsync(fd);
}

int fdatasync(int fd)
{
    ENSURE(fdatasync);
    return sync_allow(fd) ? -1 : real_fdatasync(fd);
}

/* ---- reads -------------------------------------------------------------------------------------
 */
ssize_t read(int fd, void *buf, size_t n)
{
    ENSURE(read);
    return read_fails(fd, n, -1) ? -1 : real_read(fd, buf, n);
}

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    ENSURE(__read_chk);
    return read_fails(fd, n, -1) ? -1 : real___read_chk(fd, buf, n, buflen);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    ENSURE(pread);
    return read_fails(fd, n, off) ? -1 : real_pread(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
    ENSURE(pread64);
    return read_fails(fd, n, off) ? -1 : real_pread64(fd, buf, n, off);
}

ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
    ENSURE(__pread_chk);
    return read_fails(fd, n, off) ? -1 : real___pread_chk(fd, buf, n, off, buflen);
}

ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
    ENSURE(__pread64_chk);
    return read_fails(fd, n, off) ? -1 : real___pread64_chk(fd, buf, n, off, buflen);
}

ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    ENSURE(readv);
    return read_fails(fd, iov_len(iov, cnt), -1) ? -1 : real_readv(fd, iov, cnt);
}

ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    ENSURE(preadv);
    return read_fails(fd, iov_len(iov, cnt), off) ? -1 : real_preadv(fd, iov, cnt, off);
}

ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    ENSURE(preadv64);
    return read_fails(fd, iov_len(iov, cnt), off) ? -1 : real_preadv64(fd, iov, cnt, off);
}
