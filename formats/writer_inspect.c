/* writer_inspect.c — what is at <dst> and <dst>.partial (fl_writer_inspect): a dataset this
 * writer made, a resumable or stale partial run, or somebody else's files (never touched); and the
 * clearing of a partial directory that is wholly ours. */
#define _GNU_SOURCE /* statx */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_file.h"
#include "writer_impl.h"

/* A name this writer creates inside "<dst>.partial" (and ".tmp" versions of them). */
static int partial_name_ours(const char *n)
{
    static const char *const fixed[] = {STATE_FILE,       DICT_FILE,        "dataset.id",
                                        PLAN_FILE,        FL_MANIFEST_NAME, FL_LMDB_DATA_FILE,
                                        FL_LMDB_LOCK_FILE};
    size_t l = strlen(n);
    if (l > 4 && !strcmp(n + l - 4, ".tmp"))
        l -= 4;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (l == strlen(fixed[i]) && !strncmp(n, fixed[i], l))
            return 1;
    /* shard-NNNNN.fls: at least five digits */
    if (l < 15 || strncmp(n, "shard-", 6) || strncmp(n + l - 4, ".fls", 4))
        return 0;
    for (size_t i = 6; i < l - 4; i++)
        if (n[i] < '0' || n[i] > '9')
            return 0;
    return 1;
}

/* `d` (a folder) is the root of a mount: statx's STATX_ATTR_MOUNT_ROOT where the kernel reports
 * it (5.8 on; it also sees a bind mount of a folder of the same file system), else its device
 * differs from its parent's. */
static int is_mount_root(const char *d)
{
#ifdef STATX_ATTR_MOUNT_ROOT
    struct statx sx;
    if (statx(AT_FDCWD, d, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) == 0 &&
        (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
        return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
#endif
    char up[PATH_MAX + 4];
    snprintf(up, sizeof up, "%s/..", d);
    struct stat a, b;
    return stat(d, &a) == 0 && stat(up, &b) == 0 && a.st_dev != b.st_dev;
}

/* Parse "<dir>/manifest.json" as a fastload manifest. 0, -ENOENT, or FL_E_FORMAT-ish codes with
 * the reason in err. */
int fl_wr_read_manifest(const char *dir, fl_manifest *m, fl_error *err)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, FL_MANIFEST_NAME);
    uint8_t *text = NULL;
    size_t len = 0;
    int rc = fl_wr_read_small_file(p, (size_t)256 << 20, &text, &len);
    if (rc)
        return fl_error_set(err, rc, "%s: %s", p, rc == FL_E_FORMAT ? "too large" : strerror(-rc));
    rc = fl_manifest_parse((const char *)text, len, p, m, err);
    free(text);
    return rc;
}

/* An existing folder with nothing in it (not even hidden files); 0 when it cannot be listed. */
static int dir_is_empty(const char *d)
{
    DIR *dir = opendir(d);
    if (!dir)
        return 0;
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(dir)))
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(dir);
    return empty;
}

int fl_writer_inspect(const char *dst, fl_writer_dst_info *info, fl_error *err)
{
    memset(info, 0, sizeof *info);
    char *d = NULL;
    int rc = fl_wr_dst_normalise(dst, &d, err);
    if (rc)
        return rc;
    char partial[PATH_MAX];
    snprintf(partial, sizeof partial, "%s.partial", d);
    struct stat st;
    /* <dst>: a dataset of ours is a folder with our manifest and nothing else but its files */
    if (lstat(d, &st) == 0) {
        info->dst = FL_DST_OTHER;
        fl_manifest m;
        fl_error e;
        if (S_ISLNK(st.st_mode)) {
            snprintf(info->why, sizeof info->why, "%.400s is a symbolic link, not a dataset folder",
                     d);
        } else if (!S_ISDIR(st.st_mode)) {
            snprintf(info->why, sizeof info->why, "%.400s is not a folder", d);
        } else if (is_mount_root(d)) {
            /* the dataset is built in <dst>.partial beside it and renamed into place: that would
             * fill the parent's file system, then fail (EBUSY) at the rename */
            snprintf(info->why, sizeof info->why,
                     "%.250s is a mount point, which the finished dataset (built beside it in "
                     "%.250s.partial, on the parent's file system) cannot be renamed over; pack "
                     "into a folder inside it, e.g. %.250s/dataset",
                     d, d, d);
        } else if ((rc = fl_wr_read_manifest(d, &m, &e)) == -ENOENT) {
            if (dir_is_empty(d))
                info->dst = FL_DST_NONE; /* made for the dataset: publishing removes it first */
            else
                snprintf(info->why, sizeof info->why, "%.400s is not a fastload dataset (no %s)", d,
                         FL_MANIFEST_NAME);
        } else if (rc) {
            snprintf(info->why, sizeof info->why, "%.400s is not a fastload dataset (%.500s)", d,
                     e.msg);
        } else {
            rc = 0;
            info->dst = FL_DST_DATASET;
            info->records = m.records;
            DIR *dir = opendir(d);
            struct dirent *de;
            while (dir && (de = readdir(dir))) {
                const char *n = de->d_name;
                if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, FL_MANIFEST_NAME))
                    continue;
                int listed = !strcmp(n, FL_LMDB_LOCK_FILE) && m.backend == FL_BACKEND_LMDB;
                for (uint32_t i = 0; i < m.num_shards && !listed; i++)
                    listed = !strcmp(n, m.shards[i].file);
                char p[PATH_MAX + 512];
                snprintf(p, sizeof p, "%s/%s", d, n);
                struct stat fs;
                if (!listed || lstat(p, &fs) || !S_ISREG(fs.st_mode)) {
                    info->dst = FL_DST_OTHER;
                    snprintf(info->why, sizeof info->why,
                             "%.400s holds %.400s, which is not part of the dataset%s", d, p,
                             listed ? " (not a regular file)" : "");
                    break;
                }
            }
            if (dir)
                closedir(dir);
            else if (info->dst == FL_DST_DATASET) {
                info->dst = FL_DST_OTHER;
                snprintf(info->why, sizeof info->why, "%.400s: cannot list: %s", d,
                         strerror(errno));
            }
            fl_manifest_free(&m);
        }
        rc = 0;
    } else if (errno != ENOENT) {
        int e = errno;
        rc = fl_error_set(err, -e, "%s: %s", d, strerror(e));
        goto out;
    }
    /* <dst>.partial: only names this writer creates */
    if (lstat(partial, &st) == 0) {
        info->partial = FL_PARTIAL_STALE;
        if (!S_ISDIR(st.st_mode)) {
            info->partial = FL_PARTIAL_OTHER;
            snprintf(info->partial_why, sizeof info->partial_why, "%.400s is not a folder",
                     partial);
        } else {
            DIR *dir = opendir(partial);
            struct dirent *de;
            while (dir && (de = readdir(dir))) {
                const char *n = de->d_name;
                if (!strcmp(n, ".") || !strcmp(n, ".."))
                    continue;
                char p[PATH_MAX + 512];
                snprintf(p, sizeof p, "%s/%s", partial, n);
                struct stat fs;
                if (!partial_name_ours(n) || lstat(p, &fs) || !S_ISREG(fs.st_mode)) {
                    info->partial = FL_PARTIAL_OTHER;
                    snprintf(info->partial_why, sizeof info->partial_why,
                             "%.400s holds %.400s, which this tool did not write", partial, p);
                    break;
                }
            }
            if (dir)
                closedir(dir);
            else {
                info->partial = FL_PARTIAL_OTHER;
                snprintf(info->partial_why, sizeof info->partial_why, "%.400s: cannot list: %s",
                         partial, strerror(errno));
            }
        }
        if (info->partial == FL_PARTIAL_STALE) {
            char p[PATH_MAX + 512];
            uint8_t *t = NULL;
            size_t n = 0;
            snprintf(p, sizeof p, "%s/%s", partial, STATE_FILE);
            int src = fl_wr_read_small_file(p, 1 << 16, &t, &n);
            if (src == 0) {
                fl_jdoc *doc = NULL;
                fl_error e;
                if (fl_jparse((const char *)t, n, p, &doc, &e) == 0 &&
                    fl_jget(fl_jroot(doc), "backend")) {
                    info->partial = FL_PARTIAL_RESUMABLE;
                } else {
                    info->partial = FL_PARTIAL_OTHER;
                    snprintf(info->partial_why, sizeof info->partial_why,
                             "%.400s is not a state file of this tool", p);
                }
                fl_jfree(doc);
                free(t);
            }
            if (info->partial == FL_PARTIAL_RESUMABLE) {
                snprintf(p, sizeof p, "%s/%s", partial, PLAN_FILE);
                src = fl_wr_read_small_file(p, (size_t)1 << 30, &t, &n);
                if (src == 0) {
                    info->plan = (char *)t;
                    info->plan_len = n;
                } else if (src != -ENOENT) {
                    rc = fl_error_set(err, src, "%s: cannot read: %s", p, fl_strerror(src));
                    goto out;
                }
            }
        }
    } else if (errno != ENOENT) {
        int e = errno;
        rc = fl_error_set(err, -e, "%s: %s", partial, strerror(e));
    }
out:
    free(d);
    if (rc)
        fl_writer_dst_info_free(info);
    return rc;
}

void fl_writer_dst_info_free(fl_writer_dst_info *info)
{
    if (!info)
        return;
    free(info->plan);
    info->plan = NULL;
    info->plan_len = 0;
}

/* Delete the files of a partial directory (all of them ours: checked by the caller) and the
 * directory. state.json goes first, so an interrupted clear is not taken for a resumable run. */
int fl_wr_clear_partial(const char *partial)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", partial, STATE_FILE);
    unlink(p);
    DIR *d = opendir(partial);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!partial_name_ours(e->d_name))
            continue;
        snprintf(p, sizeof p, "%s/%s", partial, e->d_name);
        unlink(p);
    }
    closedir(d);
    return rmdir(partial) ? -errno : 0;
}

int fl_writer_remove_partial(const char *dst, fl_error *err)
{
    fl_writer_dst_info info;
    int rc = fl_writer_inspect(dst, &info, err);
    if (rc)
        return rc;
    fl_writer_dst_info_free(&info);
    if (info.partial == FL_PARTIAL_NONE)
        return 0;
    if (info.partial == FL_PARTIAL_OTHER)
        return fl_error_set(err, FL_E_INVALID, "%s; nothing was removed", info.partial_why);
    char partial[PATH_MAX];
    char *d = NULL;
    rc = fl_wr_dst_normalise(dst, &d, err);
    if (rc)
        return rc;
    snprintf(partial, sizeof partial, "%s.partial", d);
    free(d);
    rc = fl_wr_clear_partial(partial);
    if (rc)
        return fl_error_set(err, rc, "%s: cannot remove: %s", partial, strerror(-rc));
    return 0;
}
