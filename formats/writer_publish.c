/* writer_publish.c — fl_writer_finish: the last shard, the manifest, then publication of
 * <dst>.partial as <dst> (a rename, or an atomic exchange with the dataset it replaces, whose own
 * files are then deleted). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fl_file.h"
#include "writer_impl.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* renameat2(2) through syscall(2): glibc declares it only under _GNU_SOURCE, and old ones not at
 * all. Fails with EINVAL/ENOSYS where the file system or kernel lacks the flag. */
static int rename2(const char *from, const char *to, unsigned flags)
{
#ifdef SYS_renameat2
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
#else
    (void)from, (void)to, (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

/* After an exchange, delete the replaced dataset (now at `dir`): only the files it lists, its
 * manifest and LMDB's lock file, then the folder. A file somebody added meanwhile is left, and
 * with it the folder. */
static void remove_old_dataset(const char *dir)
{
    fl_manifest m;
    fl_error e;
    char p[PATH_MAX];
    int have = fl_wr_read_manifest(dir, &m, &e) == 0;
    /* the manifest first: a folder left half-deleted must not look complete */
    snprintf(p, sizeof p, "%s/%s", dir, FL_MANIFEST_NAME);
    unlink(p);
    for (uint32_t i = 0; have && i < m.num_shards; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, m.shards[i].file);
        unlink(p);
    }
    if (have)
        fl_manifest_free(&m);
    snprintf(p, sizeof p, "%s/%s", dir, FL_LMDB_LOCK_FILE);
    unlink(p);
    rmdir(dir);
}

/* The manifest (LMDB: stored in the environment too, then its real size in manifest.json), then
 * the run's bookkeeping files removed: <dst>.partial is a complete dataset. */
static int write_manifest(fl_writer *w, const char *const *class_names, uint32_t num_classes,
                          fl_error *err)
{
    int rc = 0;
    fl_tbuf text = {0};
    fl_manifest m;
    memset(&m, 0, sizeof m);
    m.backend = w->opt.backend;
    m.schema = w->opt.schema;
    m.records = w->total;
    m.classes = (char **)class_names;
    m.num_classes = num_classes;
    m.zstd_level = w->opt.zstd_level;
    m.dict_bytes = w->dict_len;
    m.tool_version = w->tool_version;
    m.options_json = w->options_json;
    m.part_index = w->opt.part_index;
    m.part_count = w->opt.part_count;
    m.has_id = 1;
    m.version = w->version;
    m.num_fields = w->num_fields;
    memcpy(m.fields, w->fields, sizeof m.fields);
    for (uint32_t f = 0; f < w->num_fields; f++)
        if (fl_field_is_variable(w->fields[f].type))
            m.fields[f].max_count = w->field_max[f];
    memcpy(m.dataset_id, w->dataset_id, FL_DATASET_ID_BYTES);
    fl_manifest_shard lm = {.file = FL_LMDB_DATA_FILE, .records = w->total, .bytes = 0};
    if (w->lmdb) {
        /* "bytes" of data.mdb is only known after the last commit: store the manifest in the
         * environment first, then write manifest.json with the final size. */
        m.shards = &lm;
        m.num_shards = 1;
        if (fl_manifest_write(&text, &m)) {
            rc = fl_error_set(err, -ENOMEM, "%s: out of memory", w->dst);
            goto done;
        }
        rc = fl_lmdb_writer_finish(w->lmdb, text.data, text.len, err);
        w->lmdb = NULL;
        if (rc)
            goto done;
        char p[PATH_MAX];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", w->partial, FL_LMDB_DATA_FILE);
        lm.bytes = stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
        fl_tbuf_free(&text);
    } else {
        m.shards = w->done;
        m.num_shards = w->num_done;
    }
    if (fl_manifest_write(&text, &m)) {
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory", w->dst);
        goto done;
    }
    rc = fl_wr_write_file_atomic(w->partial, FL_MANIFEST_NAME, text.data, text.len, err);
    if (rc)
        goto done;
    /* the run's bookkeeping is not part of the dataset */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", w->partial, STATE_FILE);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", w->partial, DICT_FILE);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", w->partial, PLAN_FILE);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", w->partial, ID_FILE);
    unlink(p);
    fl_fsync_dir(w->partial);
done:
    fl_tbuf_free(&text);
    return rc;
}

/* <dst>.partial becomes <dst>: exchanged with the old dataset (atomic: a reader opening <dst>
 * finds the old or the new one, never neither) whose files are then deleted, or renamed where
 * there is none. */
static int publish(fl_writer *w, int have_old, fl_error *err)
{
    int rc = 0;
    /* publish: exchange with the old dataset (atomic: a reader opening <dst> finds the old or the
     * new one, never neither), or rename where there is none; then delete the old one's files */
    char parent[PATH_MAX];
    fl_wr_parent_of(w->dst, parent, sizeof parent);
    if (have_old) {
        if (rename2(w->partial, w->dst, RENAME_EXCHANGE) == 0) {
            fl_fsync_dir(parent);
            remove_old_dataset(w->partial);
        } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP || errno == EOPNOTSUPP) {
            /* no RENAME_EXCHANGE on this file system: move the old one aside under a name nobody
             * uses (never a user's "<dst>.old"), rename, then delete it */
            char old[PATH_MAX];
            struct stat ost;
            for (unsigned k = 0;; k++) {
                snprintf(old, sizeof old, "%s.old-%ld-%u", w->dst, (long)getpid(), k);
                if (lstat(old, &ost) != 0)
                    break;
            }
            if (rename(w->dst, old)) {
                int e = errno;
                rc = fl_error_set(err, -e, "%s: cannot move the old dataset aside: %s", w->dst,
                                  strerror(e));
                return rc;
            }
            if (rename(w->partial, w->dst)) {
                int e = errno;
                rename(old, w->dst);
                rc = fl_error_set(err, -e, "%s: cannot rename %s into place: %s", w->dst,
                                  w->partial, strerror(e));
                return rc;
            }
            fl_fsync_dir(parent);
            remove_old_dataset(old);
        } else {
            int e = errno;
            rc = fl_error_set(err, -e, "%s: cannot exchange %s with it: %s", w->dst, w->partial,
                              strerror(e));
            return rc;
        }
    } else {
        int r = rename2(w->partial, w->dst, RENAME_NOREPLACE);
        if (r && (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP || errno == EOPNOTSUPP))
            r = rename(w->partial, w->dst);
        /* an empty folder made for it (`mkdir out && packdata pack SRC out`) gives way: rmdir
         * removes nothing else, so a folder that is not empty stays, and so does the error */
        if (r && (errno == EEXIST || errno == ENOTEMPTY) && rmdir(w->dst) == 0) {
            r = rename2(w->partial, w->dst, RENAME_NOREPLACE);
            if (r &&
                (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP || errno == EOPNOTSUPP))
                r = rename(w->partial, w->dst);
        }
        if (r) {
            int e = errno;
            rc = e == EEXIST || e == ENOTEMPTY
                     ? fl_error_set(err, -EEXIST,
                                    "%s appeared while the dataset was written; it was "
                                    "left alone (the new dataset is in %s)",
                                    w->dst, w->partial)
                     : fl_error_set(err, -e, "%s: cannot rename %s into place: %s", w->dst,
                                    w->partial, strerror(e));
            return rc;
        }
        fl_fsync_dir(parent);
    }
    return 0;
}

int fl_writer_finish(fl_writer *w, const char *const *class_names, uint32_t num_classes,
                     fl_error *err)
{
    int rc = 0;
    fl_tbuf text = {0};
    if (w->failed) {
        rc = fl_error_set(err, w->failed, "%s: cannot finish after an earlier write error",
                          w->partial);
        goto out;
    }
    if (num_classes && w->max_label >= 0 && (uint32_t)w->max_label >= num_classes) {
        rc = fl_error_set(err, FL_E_LABEL, "%s: label %d used but only %u class names given",
                          w->dst, w->max_label, num_classes);
        goto out;
    }
    for (uint32_t i = 0; i < num_classes; i++)
        if (!class_names || !class_names[i]) {
            rc = fl_error_set(err, FL_E_INVALID, "%s: class name %u is NULL", w->dst, i);
            goto out;
        }
    if (w->shard.fd >= 0 && w->shard_count > 0) {
        rc = fl_wr_shard_finish(w, err);
        if (rc)
            goto out;
    }
    /* <dst> must still be absent or a dataset of ours (it may have changed since open); refused
     * here (every record durable), the run stays resumable */
    fl_writer_dst_info info;
    rc = fl_writer_inspect(w->dst, &info, err);
    if (rc)
        goto out;
    fl_writer_dst_info_free(&info);
    if (info.dst != FL_DST_NONE && !w->opt.overwrite) {
        rc = fl_error_set(err, -EEXIST, "%s: already exists (overwrite not requested)", w->dst);
        goto out;
    }
    if (info.dst == FL_DST_OTHER) {
        rc = fl_error_set(err, FL_E_INVALID,
                          "cannot replace %s: %s; nothing was changed (the new "
                          "dataset stays in %s: resume to publish it)",
                          w->dst, info.why, w->partial);
        goto out;
    }
    int have_old = info.dst == FL_DST_DATASET;
    rc = write_manifest(w, class_names, num_classes, err);
    if (rc == 0)
        rc = publish(w, have_old, err);
out:
    fl_tbuf_free(&text);
    if (w->lmdb)
        fl_lmdb_writer_abort(w->lmdb);
    w->lmdb = NULL;
    fl_wr_free(w);
    return rc;
}
