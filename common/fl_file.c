/* fl_file.c — whole writes and reads, reading a whole file, directory fsync, dirname (see
 * fl_file.h). */
#include "fl_file.h"

#include "fl_error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fl_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *b = buf;
    while (n) {
        ssize_t r = write(fd, b, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -EIO;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* read(2) (off < 0) or pread(2) at `off` until n bytes, end of file or an error. */
static int read_loop(int fd, void *buf, size_t n, int64_t off, size_t *got)
{
    uint8_t *b = buf;
    size_t k = 0;
    int rc = 0;
    while (k < n) {
        ssize_t r =
            off < 0 ? read(fd, b + k, n - k) : pread(fd, b + k, n - k, (off_t)(off + (int64_t)k));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        k += (size_t)r;
    }
    *got = k;
    return rc;
}

int fl_read_full(int fd, void *buf, size_t n, size_t *got)
{
    return read_loop(fd, buf, n, -1, got);
}

int fl_pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got)
{
    return read_loop(fd, buf, n, (int64_t)off, got);
}

int fl_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

char *fl_dir_of(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return strdup(".");
    if (s == path)
        return strdup("/");
    return strndup(path, (size_t)(s - path));
}

static int fail(fl_read_step *step, fl_read_step what, int code)
{
    if (step)
        *step = what;
    return code;
}

int fl_open_regular_at(int dirfd, const char *path, unsigned flags, struct stat *st)
{
    int fd =
        openat(dirfd, path,
               O_RDONLY | O_CLOEXEC | O_NONBLOCK | ((flags & FL_OPEN_NOFOLLOW) ? O_NOFOLLOW : 0));
    if (fd < 0)
        return -errno;
    struct stat s;
    int rc = 0;
    if (fstat(fd, &s) != 0)
        rc = -errno;
    else if (!S_ISREG(s.st_mode))
        rc = -EISDIR;
    else {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
            rc = -errno;
    }
    if (rc) {
        close(fd);
        return rc;
    }
    if (st)
        *st = s;
    return fd;
}

int fl_read_file_at(int dirfd, const char *path, size_t max, unsigned flags, uint8_t **buf,
                    size_t *cap, size_t *len, fl_read_step *step)
{
    *len = 0;
    if (step)
        *step = FL_READ_DONE;
    int fd =
        openat(dirfd, path, O_RDONLY | O_CLOEXEC | ((flags & FL_READ_NONBLOCK) ? O_NONBLOCK : 0));
    if (fd < 0)
        return fail(step, FL_READ_OPEN, -errno);
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
        if (cap && want < 2 * have)
            want = 2 * have; /* a reused buffer grows geometrically */
        uint8_t *b = realloc(*buf, want);
        if (!b) {
            close(fd);
            *len = n;
            return fail(step, FL_READ_ALLOC, -ENOMEM);
        }
        *buf = b;
        if (cap)
            *cap = want;
    }
    size_t got;
    rc = fl_read_full(fd, *buf, n, &got);
    close(fd);
    *len = got;
    if (rc)
        return fail(step, FL_READ_READ, rc);
    if (got < n && !(flags & FL_READ_SHORT_OK))
        return fail(step, FL_READ_SHRANK, FL_E_TRUNCATED);
    (*buf)[got] = 0;
    return 0;
}

int fl_file_clobbers(const char *out, const char *in)
{
    struct stat is, os, ps;
    if (!out || !in || stat(in, &is) != 0)
        return 0;
    char *real = realpath(out, NULL); /* NULL: out does not exist yet (or is a dangling link) */
    if (real && stat(real, &os) == 0 && os.st_dev == is.st_dev && os.st_ino == is.st_ino) {
        free(real);
        return 1;
    }
    if (!S_ISDIR(is.st_mode)) {
        free(real);
        return 0;
    }
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", real ? real : out);
    free(real);
    char *slash = strrchr(parent, '/');
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else if (slash == parent)
        parent[1] = '\0';
    else
        *slash = '\0';
    return stat(parent, &ps) == 0 && ps.st_dev == is.st_dev && ps.st_ino == is.st_ino;
}

/* The folder part of `path` resolved (realpath) and its last component, trailing slashes
 * dropped; 0, or -1 when the folder does not exist or the name is too long. */
static int split_resolved(const char *path, char *dir, size_t dirlen, char *name, size_t namelen)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return -1;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    char *slash = strrchr(p, '/');
    const char *base = slash ? slash + 1 : p;
    if (snprintf(name, namelen, "%s", base) >= (int)namelen)
        return -1;
    if (!slash)
        snprintf(p, sizeof p, ".");
    else if (slash == p)
        p[1] = '\0';
    else
        *slash = '\0';
    char *real = realpath(p, NULL);
    if (!real)
        return -1;
    int too_long = snprintf(dir, dirlen, "%s", real) >= (int)dirlen;
    free(real);
    return too_long ? -1 : 0;
}

int fl_file_same_name(const char *a, const char *b)
{
    if (!a || !b)
        return 0;
    struct stat as, bs;
    if (stat(a, &as) == 0 && stat(b, &bs) == 0)
        return as.st_dev == bs.st_dev && as.st_ino == bs.st_ino;
    char ad[PATH_MAX], bd[PATH_MAX], an[NAME_MAX + 1], bn[NAME_MAX + 1];
    if (split_resolved(a, ad, sizeof ad, an, sizeof an) ||
        split_resolved(b, bd, sizeof bd, bn, sizeof bn))
        return 0;
    return !strcmp(ad, bd) && !strcmp(an, bn);
}

/* ---- the durable write (see the table in fl_file.h) ------------------------------------------ */

const char *fl_write_step_name(fl_write_step step)
{
    switch (step) {
    case FL_WRITE_DONE: return "";
    case FL_WRITE_NOT_FILE: return "refuse";
    case FL_WRITE_OPEN: return "create";
    case FL_WRITE_WRITE: return "write";
    case FL_WRITE_SYNC: return "fsync";
    case FL_WRITE_CLOSE: return "close";
    case FL_WRITE_RENAME: return "rename into place";
    case FL_WRITE_SYNC_DIR: return "sync the directory of";
    }
    return "write";
}

static int set_step(fl_write_step *step, fl_write_step s, int rc)
{
    if (step)
        *step = s;
    return rc;
}

static void writer_release(fl_file_writer *w)
{
    free(w->path);
    free(w->tmp);
    w->path = w->tmp = NULL;
    w->fd = -1;
}

/* How `path` is written: 1 in place, 0 through a temporary renamed onto *target (malloc'ed: path,
 * or a symlink's resolved target), or -errno (*step says why). */
static int classify_target(const char *path, char **target, fl_write_step *step)
{
    struct stat ls, st;
    *target = NULL;
    if (lstat(path, &ls) != 0) {
        if (errno != ENOENT)
            return set_step(step, FL_WRITE_OPEN, -errno);
        return (*target = strdup(path)) ? 0 : set_step(step, FL_WRITE_OPEN, -ENOMEM);
    }
    if (S_ISLNK(ls.st_mode)) {
        if (stat(path, &st) != 0) {
            if (errno == ENOENT)
                return 1; /* dangling: open(O_CREAT) creates its target */
            return set_step(step, FL_WRITE_OPEN, -errno);
        }
    } else {
        st = ls;
    }
    if (S_ISDIR(st.st_mode))
        return set_step(step, FL_WRITE_NOT_FILE, -EISDIR);
    if (S_ISSOCK(st.st_mode))
        return set_step(step, FL_WRITE_NOT_FILE, -ENXIO);
    if (!S_ISREG(st.st_mode))
        return 1; /* device, FIFO */
    if (!S_ISLNK(ls.st_mode))
        return (*target = strdup(path)) ? 0 : set_step(step, FL_WRITE_OPEN, -ENOMEM);
    /* a symlink to a regular file: replace the final target, keep the link; a target realpath
     * cannot name (a /proc magic link to a deleted file) is written in place */
    *target = realpath(path, NULL);
    return *target ? 0 : 1;
}

int fl_file_begin(const char *path, unsigned mode, fl_file_writer *w, fl_write_step *step)
{
    *w = (fl_file_writer){.fd = -1};
    set_step(step, FL_WRITE_DONE, 0);
    char *target;
    int how = classify_target(path, &target, step);
    if (how < 0)
        return how;
    if (how == 1) {
        if (!(w->path = strdup(path)))
            return set_step(step, FL_WRITE_OPEN, -ENOMEM);
        w->in_place = 1;
        w->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, (mode_t)mode);
        if (w->fd < 0) {
            int rc = -errno;
            writer_release(w);
            return set_step(step, FL_WRITE_OPEN, rc);
        }
        return 0;
    }
    w->path = target;
    size_t n = strlen(target) + sizeof ".tmp";
    if (!(w->tmp = malloc(n))) {
        writer_release(w);
        return set_step(step, FL_WRITE_OPEN, -ENOMEM);
    }
    snprintf(w->tmp, n, "%s.tmp", target);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (w->fd < 0) {
        int rc = -errno;
        writer_release(w);
        return set_step(step, FL_WRITE_OPEN, rc);
    }
    return 0;
}

void fl_file_abort(fl_file_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp)
        unlink(w->tmp);
    writer_release(w);
}

int fl_file_commit(fl_file_writer *w, fl_write_step *step)
{
    set_step(step, FL_WRITE_DONE, 0);
    struct stat st;
    int regular = fstat(w->fd, &st) == 0 && S_ISREG(st.st_mode);
    int rc = 0;
    fl_write_step at = FL_WRITE_DONE;
    if (regular && fsync(w->fd) != 0)
        rc = -errno, at = FL_WRITE_SYNC;
    if (close(w->fd) != 0 && !rc)
        rc = -errno, at = FL_WRITE_CLOSE;
    w->fd = -1;
    if (!rc && w->tmp && rename(w->tmp, w->path) != 0)
        rc = -errno, at = FL_WRITE_RENAME;
    if (rc) {
        fl_file_abort(w);
        return set_step(step, at, rc);
    }
    if (w->tmp) {
        /* until the directory is synced, a crash may lose the new name */
        char *dir = fl_dir_of(w->path);
        rc = dir ? fl_fsync_dir(dir) : -ENOMEM;
        free(dir);
        if (rc == -EINVAL)
            rc = 0; /* a file system that cannot sync directories */
        if (rc)
            set_step(step, FL_WRITE_SYNC_DIR, rc);
    }
    writer_release(w);
    return rc;
}

int fl_file_replace(const char *path, const void *data, size_t len, unsigned mode,
                    fl_write_step *step)
{
    fl_file_writer w;
    int rc = fl_file_begin(path, mode, &w, step);
    if (rc)
        return rc;
    if ((rc = fl_write_all(w.fd, data, len))) {
        fl_file_abort(&w);
        return set_step(step, FL_WRITE_WRITE, rc);
    }
    return fl_file_commit(&w, step);
}
