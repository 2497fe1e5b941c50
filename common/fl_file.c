/* fl_file.c — whole writes and reads, reading a whole file, directory fsync, dirname (see
 * fl_file.h). */
#include "fl_file.h"

#include "fl_error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fl_write_all(int fd, const void *buf, size_t n) {
    const uint8_t *b = buf;
    while (n) {
        ssize_t r = write(fd, b, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) return -EIO;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* read(2) (off < 0) or pread(2) at `off` until n bytes, end of file or an error. */
static int read_loop(int fd, void *buf, size_t n, int64_t off, size_t *got) {
    uint8_t *b = buf;
    size_t k = 0;
    int rc = 0;
    while (k < n) {
        ssize_t r = off < 0 ? read(fd, b + k, n - k) : pread(fd, b + k, n - k, (off_t)(off + (int64_t)k));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0) break;
        k += (size_t)r;
    }
    *got = k;
    return rc;
}

int fl_read_full(int fd, void *buf, size_t n, size_t *got) { return read_loop(fd, buf, n, -1, got); }

int fl_pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got) {
    return read_loop(fd, buf, n, (int64_t)off, got);
}

int fl_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

char *fl_dir_of(const char *path) {
    const char *s = strrchr(path, '/');
    if (!s) return strdup(".");
    if (s == path) return strdup("/");
    return strndup(path, (size_t)(s - path));
}

static int fail(fl_read_step *step, fl_read_step what, int code) {
    if (step) *step = what;
    return code;
}

int fl_read_file_at(int dirfd, const char *path, size_t max, unsigned flags, uint8_t **buf,
                    size_t *cap, size_t *len, fl_read_step *step) {
    *len = 0;
    if (step) *step = FL_READ_DONE;
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | ((flags & FL_READ_NONBLOCK) ? O_NONBLOCK : 0));
    if (fd < 0) return fail(step, FL_READ_OPEN, -errno);
    struct stat st;
    int rc = 0;
    fl_read_step what = FL_READ_DONE;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        what = FL_READ_STAT;
    } else if ((flags & FL_READ_REGULAR) && !S_ISREG(st.st_mode)) {
        rc = -EISDIR;
        what = FL_READ_NOT_REGULAR;
    } else if (st.st_size < 0 || (uint64_t)st.st_size > max) {
        *len = (size_t)st.st_size;
        rc = -EFBIG;
        what = FL_READ_TOO_LARGE;
    }
    if (rc) {
        close(fd);
        return fail(step, what, rc);
    }
    size_t n = (size_t)st.st_size;
    size_t have = cap ? *cap : 0;
    if (!*buf || have < n + 1) {
        size_t want = n + 1;
        if (cap && want < 2 * have) want = 2 * have; /* a reused buffer grows geometrically */
        uint8_t *b = realloc(*buf, want);
        if (!b) {
            close(fd);
            *len = n;
            return fail(step, FL_READ_ALLOC, -ENOMEM);
        }
        *buf = b;
        if (cap) *cap = want;
    }
    size_t got;
    rc = fl_read_full(fd, *buf, n, &got);
    close(fd);
    *len = got;
    if (rc) return fail(step, FL_READ_READ, rc);
    if (got < n && !(flags & FL_READ_SHORT_OK)) return fail(step, FL_READ_SHRANK, FL_E_TRUNCATED);
    (*buf)[got] = 0;
    return 0;
}
