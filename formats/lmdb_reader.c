/* lmdb_reader.c — the LMDB backend of fl_dataset: opens data.mdb read-only without a lock file
 * (a finished dataset is immutable), keeps one read transaction for the dataset's lifetime so
 * LMDB's zero-copy pointers stay valid until close, and resolves every record once at open
 * (bounds-checked) so the hot path makes no LMDB calls at all and is safe from any thread. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "fl_dataset_impl.h"
#include "fl_lmdb.h"

struct fl_lmdb_reader {
    MDB_env *env;
    MDB_txn *txn;
};

void fl_lmdb_reader_close(fl_dataset *ds) {
    fl_lmdb_reader *r = ds->lmdb;
    if (!r) return;
    if (r->txn) mdb_txn_abort(r->txn);
    if (r->env) mdb_env_close(r->env);
    free(r);
    ds->lmdb = NULL;
}

static uint64_t key_value(const uint8_t *k) {
    uint64_t v = 0;
    for (int b = 0; b < 8; b++) v = (v << 8) | k[b];
    return v;
}

int fl_lmdb_reader_open(fl_dataset *ds, const fl_manifest *m, int dir_fd, fl_error *err) {
    const char *path = ds->file_paths[0];
    /* The file as the manifest describes it: opened relative to the directory the manifest came
     * from, kept open, its size checked before LMDB maps anything (a mapping past the end of a
     * truncated file kills the process with SIGBUS at the first touch). */
    int fd = openat(dir_fd, m->shards[0].file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return fl_error_set(err, -e, "%s: %s", path, strerror(e));
    }
    ds->lmdb_fd = fd;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        return fl_error_set(err, -e, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) return fl_error_set(err, FL_E_FORMAT, "%s: not a regular file", path);
    uint64_t size = (uint64_t)st.st_size, want = m->shards[0].bytes;
    if (size != want)
        return fl_error_set(err, size < want ? FL_E_TRUNCATED : FL_E_FORMAT,
                            "%s is %llu bytes, the manifest says %llu: %s", path,
                            (unsigned long long)size, (unsigned long long)want,
                            size < want ? "truncated" : "not the file the manifest describes");
    ds->total_bytes = size;
    fl_lmdb_reader *r = calloc(1, sizeof *r);
    if (!r) return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    ds->lmdb = r;
    /* LMDB opens by name: name the file through the directory fd we hold, so it is the same
     * directory's data.mdb even if the dataset is being replaced; the inode is compared below. */
    char via[64 + 256];
    snprintf(via, sizeof via, "/proc/self/fd/%d/%s", dir_fd, m->shards[0].file);
    const char *open_path = access(via, F_OK) == 0 ? via : path;
    /* MDB_NOTLS: the one read txn is not tied to this thread; MDB_NOLOCK: immutable data, no
     * lock file (the dataset directory may be read-only). */
    int rc = mdb_env_create(&r->env);
    if (rc == 0) rc = mdb_env_set_maxdbs(r->env, 2);
    if (rc == 0)
        rc = mdb_env_open(r->env, open_path, MDB_RDONLY | MDB_NOLOCK | MDB_NOSUBDIR | MDB_NOTLS,
                          0644);
    if (rc) return fl_error_set(err, FL_E_LMDB, "%s: cannot open LMDB environment: %s", path, mdb_strerror(rc));
    int lfd = -1;
    struct stat lst;
    if (mdb_env_get_fd(r->env, &lfd) != 0 || fstat(lfd, &lst) != 0 || lst.st_dev != st.st_dev ||
        lst.st_ino != st.st_ino)
        return fl_error_set(err, -EAGAIN,
                            "%s: the dataset was replaced while being opened: open it again", path);
    /* LMDB's own claim: every page up to the last one used must be in the file (and in the map) */
    MDB_envinfo info;
    MDB_stat es;
    rc = mdb_env_info(r->env, &info);
    if (rc == 0) rc = mdb_env_stat(r->env, &es);
    if (rc) return fl_error_set(err, FL_E_LMDB, "%s: %s", path, mdb_strerror(rc));
    uint64_t used = ((uint64_t)info.me_last_pgno + 1) * es.ms_psize;
    if (used > size)
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s is %llu bytes, LMDB's last used page ends at byte %llu: truncated",
                            path, (unsigned long long)size, (unsigned long long)used);
    if ((uint64_t)info.me_mapsize < used)
        return fl_error_set(err, FL_E_FORMAT, "%s: LMDB map (%zu bytes) smaller than its %llu used bytes",
                            path, info.me_mapsize, (unsigned long long)used);
    rc = mdb_txn_begin(r->env, NULL, MDB_RDONLY, &r->txn);
    if (rc) return fl_error_set(err, FL_E_LMDB, "%s: cannot begin read txn: %s", path, mdb_strerror(rc));
    MDB_dbi rec, meta;
    rc = mdb_dbi_open(r->txn, FL_LMDB_RECORDS_DB, 0, &rec);
    if (rc == 0) rc = mdb_dbi_open(r->txn, FL_LMDB_META_DB, 0, &meta);
    if (rc) return fl_error_set(err, FL_E_FORMAT, "%s: not a fastload LMDB dataset (%s)", path, mdb_strerror(rc));
    MDB_val k, v;
    k.mv_data = FL_LMDB_META_VERSION;
    k.mv_size = strlen(FL_LMDB_META_VERSION);
    rc = mdb_get(r->txn, meta, &k, &v);
    if (rc || v.mv_size != 4)
        return fl_error_set(err, FL_E_FORMAT, "%s: missing meta \"%s\"", path, FL_LMDB_META_VERSION);
    uint32_t ver = fl_rd32(v.mv_data);
    if (ver < FL_FORMAT_MIN_VERSION || ver > FL_FORMAT_VERSION)
        return fl_error_set(err, FL_E_VERSION,
                            "%s: LMDB dataset format version %u, this build reads versions %u to %u",
                            path, ver, FL_FORMAT_MIN_VERSION, FL_FORMAT_VERSION);
    if (ver != m->version)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: LMDB format version %u, the manifest says %u: the file belongs to "
                            "another dataset", path, ver, m->version);
    if (ver >= 2) {
        k.mv_data = FL_LMDB_META_ID;
        k.mv_size = strlen(FL_LMDB_META_ID);
        rc = mdb_get(r->txn, meta, &k, &v);
        if (rc || v.mv_size != FL_DATASET_ID_BYTES)
            return fl_error_set(err, FL_E_FORMAT, "%s: missing meta \"%s\"", path, FL_LMDB_META_ID);
        if (memcmp(v.mv_data, m->dataset_id, FL_DATASET_ID_BYTES) != 0) {
            char got[2 * FL_DATASET_ID_BYTES + 1], mid[2 * FL_DATASET_ID_BYTES + 1];
            fl_dataset_id_hex(v.mv_data, got);
            fl_dataset_id_hex(m->dataset_id, mid);
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: belongs to another dataset (id %s, the manifest's is %s)", path,
                                got, mid);
        }
    }
    const size_t hsz = ver >= 2 ? FL_LMDB_VALUE_HEADER : FL_LMDB_VALUE_HEADER_V1;
    if (m->schema.compression == FL_COMP_ZSTD) {
        k.mv_data = FL_LMDB_META_DICT;
        k.mv_size = strlen(FL_LMDB_META_DICT);
        rc = mdb_get(r->txn, meta, &k, &v);
        if (rc == 0) {
            if (v.mv_size > FL_MAX_DICT_BYTES)
                return fl_error_set(err, FL_E_FORMAT, "%s: dictionary too large", path);
            ds->lmdb_ddict = ZSTD_createDDict(v.mv_data, v.mv_size);
            if (!ds->lmdb_ddict) return fl_error_set(err, FL_E_FORMAT, "%s: unusable zstd dictionary", path);
        } else if (rc != MDB_NOTFOUND) {
            return fl_error_set(err, FL_E_LMDB, "%s: %s", path, mdb_strerror(rc));
        }
    }
    MDB_stat ms;
    rc = mdb_stat(r->txn, rec, &ms);
    if (rc) return fl_error_set(err, FL_E_LMDB, "%s: %s", path, mdb_strerror(rc));
    if (ms.ms_entries != m->records)
        return fl_error_set(err, FL_E_FORMAT, "%s: %zu records, manifest says %llu", path,
                            (size_t)ms.ms_entries, (unsigned long long)m->records);
    ds->lrec = calloc(m->records ? m->records : 1, sizeof *ds->lrec);
    if (!ds->lrec) return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    const fl_schema *s = &m->schema;
    uint64_t fixed_raw = s->encoding == FL_ENC_RAW && s->height
                             ? (uint64_t)s->height * s->width * s->channels : 0;
    MDB_cursor *cur;
    rc = mdb_cursor_open(r->txn, rec, &cur);
    if (rc) return fl_error_set(err, FL_E_LMDB, "%s: %s", path, mdb_strerror(rc));
    uint64_t i = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && i < m->records;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT), i++) {
        const char *why = NULL;
        fl_lmdb_rec *e = &ds->lrec[i];
        if (k.mv_size != 8 || key_value(k.mv_data) != i) {
            why = "key is not the record index";
        } else if (v.mv_size < hsz) {
            why = "value shorter than its header";
        } else {
            const uint8_t *p = v.mv_data;
            e->label = (int32_t)fl_rd32(p);
            e->crc32c = fl_rd32(p + 4);
            e->raw_len = fl_rd32(p + 8);
            e->height = fl_rd32(p + 12);
            e->width = fl_rd32(p + 16);
            e->name_len = fl_rd32(p + 20);
            e->format = ver >= 2 ? fl_rd32(p + 24) : (uint32_t)s->encoding;
            size_t rest = v.mv_size - hsz;
            if (e->name_len > FL_MAX_NAME_BYTES || e->name_len > rest) {
                why = "name longer than the value";
            } else if (!fl_format_allowed(s->encoding, e->format)) {
                why = "record format unknown or not allowed by the schema";
            } else {
                e->name = (const char *)p + hsz;
                e->stored = p + hsz + e->name_len;
                size_t sl = rest - e->name_len;
                e->stored_len = (uint32_t)sl;
                if (sl > FL_MAX_RECORD_BYTES || e->raw_len > FL_MAX_RECORD_BYTES)
                    why = "record length over 1 GiB";
                else if (s->compression == FL_COMP_NONE && e->raw_len != sl)
                    why = "raw length differs from stored length in an uncompressed dataset";
                else if (fixed_raw && e->raw_len != fixed_raw)
                    why = "raw length does not match the fixed image size";
                else if (s->height && (e->height != s->height || e->width != s->width))
                    why = "image size does not match the fixed schema";
                else if (e->label < 0 || (ds->num_classes && (uint32_t)e->label >= ds->num_classes))
                    why = "label out of range";
            }
        }
        if (why) {
            mdb_cursor_close(cur);
            return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %s", path, (unsigned long long)i, why);
        }
        if (e->raw_len > ds->max_raw_len) ds->max_raw_len = e->raw_len;
        if (e->stored_len > ds->max_stored_len) ds->max_stored_len = e->stored_len;
    }
    mdb_cursor_close(cur);
    if (i != m->records)
        return fl_error_set(err, FL_E_FORMAT, "%s: found %llu records, manifest says %llu", path,
                            (unsigned long long)i, (unsigned long long)m->records);
    return 0;
}
