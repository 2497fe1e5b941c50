/* writer_lock.c — the destination's lock (fl_writer_lock_acquire): an exclusive flock on
 * "<dst>.lock" held from open to publication, and the destination-name checks every part of the
 * writer shares. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_file.h"
#include "writer_impl.h"

/* A malloc'ed copy of dst without trailing slashes ("out/" names the same dataset as "out").
 * Refuses names that cannot be a dataset folder of their own: "", "/", ".", "..", or a last
 * component "." or "..": their ".partial" and ".lock" would land beside the wrong folder. */
int fl_wr_dst_normalise(const char *dst, char **out, fl_error *err)
{
    *out = NULL;
    if (!dst || !*dst)
        return fl_error_set(err, FL_E_INVALID, "writer: no destination");
    if (strlen(dst) > PATH_MAX - 64)
        return fl_error_set(err, FL_E_INVALID, "%s: path too long", dst);
    char *d = strdup(dst);
    if (!d)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
    size_t l = strlen(d);
    while (l > 1 && d[l - 1] == '/')
        d[--l] = '\0';
    const char *base = strrchr(d, '/');
    base = base ? base + 1 : d;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
        free(d);
        return fl_error_set(
            err, FL_E_INVALID,
            "%s: not a destination: name the dataset's own folder (e.g. %s%sdataset), "
            "not the current, parent or root folder; nothing was changed",
            dst, dst, dst[strlen(dst) - 1] == '/' ? "" : "/");
    }
    *out = d;
    return 0;
}

void fl_wr_parent_of(const char *path, char *out, size_t n)
{
    snprintf(out, n, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash)
        snprintf(out, n, ".");
    else if (slash == out)
        out[1] = '\0';
    else
        *slash = '\0';
}

/* The error for a destination whose parent folder is missing (ENOENT/ENOTDIR on create). */
int fl_wr_parent_error(const char *dst, int e, const char *what, fl_error *err)
{
    char parent[PATH_MAX];
    fl_wr_parent_of(dst, parent, sizeof parent);
    struct stat st;
    if (stat(parent, &st) != 0)
        return fl_error_set(err, -ENOENT, "cannot create %s: parent folder %s does not exist", dst,
                            parent);
    if (!S_ISDIR(st.st_mode))
        return fl_error_set(err, -ENOTDIR, "cannot create %s: %s is not a folder", dst, parent);
    return fl_error_set(err, -e, "%s: cannot create: %s", what, strerror(e));
}

static long lock_read_pid(int fd)
{
    char b[32];
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    if (n <= 0)
        return 0;
    b[n] = '\0';
    char *end;
    long pid = strtol(b, &end, 10);
    return pid > 0 && (*end == '\n' || *end == '\0') ? pid : 0;
}

int fl_writer_lock_acquire(const char *dst, fl_writer_lock **out, fl_error *err)
{
    *out = NULL;
    fl_writer_lock *l = calloc(1, sizeof *l);
    if (!l)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", dst ? dst : "");
    l->fd = -1;
    int rc = fl_wr_dst_normalise(dst, &l->dst, err);
    if (rc) {
        free(l);
        return rc;
    }
    l->path = malloc(strlen(l->dst) + sizeof LOCK_SUFFIX);
    if (!l->path) {
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
        goto fail;
    }
    sprintf(l->path, "%s%s", l->dst, LOCK_SUFFIX);
    for (int attempt = 0; attempt < 1000; attempt++) {
        int fd = open(l->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
            int e = errno;
            if (e == ENOENT || e == ENOTDIR)
                rc = fl_wr_parent_error(l->dst, e, l->path, err);
            else if (e == ELOOP)
                rc = fl_error_set(err, FL_E_INVALID,
                                  "%s: a symbolic link where the lock file of %s "
                                  "goes: remove it",
                                  l->path, l->dst);
            else
                rc = fl_error_set(err, -e, "%s: cannot create the lock file: %s", l->path,
                                  strerror(e));
            goto fail;
        }
        struct stat fst, pst;
        if (fstat(fd, &fst) || !S_ISREG(fst.st_mode)) {
            close(fd);
            rc = fl_error_set(err, FL_E_INVALID,
                              "%s: not a lock file (not a regular file): move "
                              "it away; nothing was changed",
                              l->path);
            goto fail;
        }
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            int e = errno;
            if (e != EWOULDBLOCK) {
                close(fd);
                rc = fl_error_set(err, -e, "%s: cannot lock: %s", l->path, strerror(e));
                goto fail;
            }
            /* the holder writes its pid right after locking: give it a moment */
            long pid = 0;
            for (int i = 0; i < 50 && !(pid = lock_read_pid(fd)); i++)
                usleep(2000);
            close(fd);
            if (pid)
                rc = fl_error_set(err, -EBUSY, "%s is being written by process %ld (lock: %s)",
                                  l->dst, pid, l->path);
            else
                rc = fl_error_set(err, -EBUSY, "%s is being written by another process (lock: %s)",
                                  l->dst, l->path);
            goto fail;
        }
        /* the holder we waited for may have removed the file just before we locked it: only a
         * lock on the inode the path names now counts (this makes unlink-then-unlock safe) */
        if (stat(l->path, &pst) || pst.st_ino != fst.st_ino || pst.st_dev != fst.st_dev) {
            close(fd);
            continue;
        }
        /* a lock file holds a pid line (or nothing, when its writer died before writing it):
         * anything else is somebody's file that happens to have this name */
        if (fst.st_size > 24 || (fst.st_size > 0 && !lock_read_pid(fd))) {
            close(fd);
            rc = fl_error_set(err, FL_E_INVALID,
                              "%s exists and is not a lock file of this tool: "
                              "move it away; nothing was changed",
                              l->path);
            goto fail;
        }
        /* the pid is for the message of a run that finds the lock taken; on a full disk the
         * lock works without it (and the real error comes from the data files) */
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) != n && ftruncate(fd, 0)) {
            /* nothing more to do: an empty lock file reads as "another process" */
        }
        l->fd = fd;
        *out = l;
        return 0;
    }
    rc = fl_error_set(err, -EBUSY, "%s is being written by other processes (lock: %s)", l->dst,
                      l->path);
fail:
    free(l->dst);
    free(l->path);
    free(l);
    return rc;
}

void fl_writer_lock_release(fl_writer_lock *l)
{
    if (!l)
        return;
    if (l->fd >= 0) {
        unlink(l->path); /* while still holding it: see the inode check in fl_writer_lock_acquire */
        close(l->fd);
    }
    free(l->dst);
    free(l->path);
    free(l);
}
