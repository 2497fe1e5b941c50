/* test_lmdb_index.c — the LMDB record index (meta "record_index", SPEC.md "LMDB backend"): a set
 * written with it and one written without it (as before it existed) open and read back the same
 * records; a crafted or damaged index (header CRC, counts, the records database's shape, a chunk
 * missing, its CRC, its zstd frame, an entry placing a value outside the used pages, a label out
 * of range, a chunk's first value disagreeing with its entry) is refused naming data.mdb and the
 * record; an index of a later layout is ignored (the records are walked); entries swapped inside a
 * chunk are caught by the payload CRC on access. Values inline and in overflow pages, written in
 * one run or aborted and resumed, read back the same as the walk finds them. */
#include <lmdb.h>
#include <zstd.h>

#include "corrupt.h"
#include "fl_lmdb.h"

enum { N = 17000 }; /* two chunks: 16,384 + 616 */

static char data_path[PATH_MAX + 300];

static const char *data_of(const char *dir)
{
    snprintf(data_path, sizeof data_path, "%s/data.mdb", dir);
    return data_path;
}

/* Run `fn` in a write transaction on dir's data.mdb (meta database). */
static void with_meta(const char *dir, void (*fn)(MDB_txn *, MDB_dbi, void *), void *arg)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta;
    struct stat st;
    CHECK(stat(data_of(dir), &st) == 0);
    CHECK(mdb_env_create(&env) == 0);
    CHECK(mdb_env_set_maxdbs(env, 2) == 0);
    CHECK(mdb_env_set_mapsize(env, (size_t)st.st_size * 2 + (16u << 20)) == 0);
    CHECK(mdb_env_open(env, data_of(dir), MDB_NOSUBDIR | MDB_NOLOCK, 0644) == 0);
    CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
    CHECK(mdb_dbi_open(txn, FL_LMDB_META_DB, 0, &meta) == 0);
    fn(txn, meta, arg);
    CHECK(mdb_txn_commit(txn) == 0);
    mdb_env_close(env);
    /* the manifest's "bytes" follows the file (LMDB may have added pages) */
    CHECK(stat(data_of(dir), &st) == 0);
    char man[PATH_MAX + 300];
    snprintf(man, sizeof man, "%s/manifest.json", dir);
    size_t n;
    char *t = (char *)tt_slurp(man, &n);
    char *b = strstr(t, "\"file\": \"data.mdb\"");
    CHECK(b);
    b = strstr(b, "\"bytes\": ");
    CHECK(b);
    b += 9;
    char *e = b;
    while (*e >= '0' && *e <= '9')
        e++;
    char *out = malloc(n + 32);
    int k = snprintf(out, n + 32, "%.*s%llu%s", (int)(b - t), t, (unsigned long long)st.st_size, e);
    tt_spit(man, out, (size_t)k);
    free(out);
    free(t);
}

typedef struct edit {
    const char *key;
    uint8_t *val; /* NULL: delete the key */
    size_t len;
} edit;

static void put_fn(MDB_txn *txn, MDB_dbi meta, void *arg)
{
    edit *e = arg;
    MDB_val k = {strlen(e->key), (void *)e->key}, v = {e->len, e->val};
    CHECK((e->val ? mdb_put(txn, meta, &k, &v, 0) : mdb_del(txn, meta, &k, NULL)) == 0);
}

static void get_fn(MDB_txn *txn, MDB_dbi meta, void *arg)
{
    edit *e = arg;
    MDB_val k = {strlen(e->key), (void *)e->key}, v;
    e->val = NULL;
    if (mdb_get(txn, meta, &k, &v) != 0)
        return;
    e->val = malloc(v.mv_size);
    memcpy(e->val, v.mv_data, v.mv_size);
    e->len = v.mv_size;
}

static uint8_t *meta_get(const char *dir, const char *key, size_t *len)
{
    edit e = {key, NULL, 0};
    with_meta(dir, get_fn, &e);
    *len = e.len;
    return e.val;
}

static void meta_put(const char *dir, const char *key, uint8_t *val, size_t len)
{
    edit e = {key, val, len};
    with_meta(dir, put_fn, &e);
}

/* The header of `dir`'s index changed by `fn` (its CRC made again unless keep_crc). */
static void edit_header(const char *dir, size_t off, uint64_t add, int keep_crc)
{
    size_t n;
    uint8_t *h = meta_get(dir, FL_LMDB_META_INDEX, &n);
    CHECK(h && n == FL_LMDB_INDEX_HEADER);
    if (off == 16 || off == 32)
        fl_wr64(h + off, fl_rd64(h + off) + add);
    else
        fl_wr32(h + off, fl_rd32(h + off) + (uint32_t)add);
    if (!keep_crc)
        fl_wr32(h + 48, fl_crc32c(0, h, 48));
    meta_put(dir, FL_LMDB_META_INDEX, h, n);
    free(h);
}

/* Chunk c of dir's index, decompressed: *cnt entries. */
static uint8_t *chunk_get(const char *dir, unsigned c, size_t *cnt)
{
    char key[64];
    snprintf(key, sizeof key, "%s.%u", FL_LMDB_META_INDEX, c);
    size_t n;
    uint8_t *z = meta_get(dir, key, &n);
    CHECK(z && n > 4);
    uint8_t *raw = malloc(FL_LMDB_INDEX_CHUNK * FL_LMDB_INDEX_ENTRY);
    size_t r = ZSTD_decompress(raw, FL_LMDB_INDEX_CHUNK * FL_LMDB_INDEX_ENTRY, z + 4, n - 4);
    CHECK(!ZSTD_isError(r) && r % FL_LMDB_INDEX_ENTRY == 0);
    CHECK(fl_crc32c(0, raw, r) == fl_rd32(z));
    free(z);
    *cnt = r / FL_LMDB_INDEX_ENTRY;
    return raw;
}

static void chunk_put(const char *dir, unsigned c, const uint8_t *raw, size_t cnt)
{
    char key[64];
    snprintf(key, sizeof key, "%s.%u", FL_LMDB_META_INDEX, c);
    size_t bytes = cnt * FL_LMDB_INDEX_ENTRY, cap = 4 + ZSTD_compressBound(bytes);
    uint8_t *z = malloc(cap);
    size_t zn = ZSTD_compress(z + 4, cap - 4, raw, bytes, 3);
    CHECK(!ZSTD_isError(zn));
    fl_wr32(z, fl_crc32c(0, raw, bytes));
    meta_put(dir, key, z, 4 + zn);
    free(z);
}

/* Every record of a and b the same (info, name, stored bytes). */
static void same_records(const char *a, const char *b)
{
    fl_dataset *da, *db;
    fl_error err;
    CHECK_OK(fl_dataset_open(a, &da, &err), &err);
    CHECK_OK(fl_dataset_open(b, &db, &err), &err);
    CHECK(fl_dataset_count(da) == fl_dataset_count(db));
    for (uint64_t i = 0; i < fl_dataset_count(da); i++) {
        fl_record_info ra, rb;
        CHECK_OK(fl_dataset_record_info(da, i, &ra, &err), &err);
        CHECK_OK(fl_dataset_record_info(db, i, &rb, &err), &err);
        CHECK(ra.label == rb.label && ra.crc32c == rb.crc32c && ra.raw_len == rb.raw_len &&
              ra.stored_len == rb.stored_len && ra.height == rb.height && ra.width == rb.width &&
              ra.format == rb.format && ra.fields_len == rb.fields_len && ra.offset == 0);
        const uint8_t *pa, *pb;
        size_t na, nb, la, lb;
        CHECK_OK(fl_dataset_get(da, i, &pa, &na, 1, &err), &err);
        CHECK_OK(fl_dataset_get(db, i, &pb, &nb, 1, &err), &err);
        CHECK(na == nb && memcmp(pa, pb, na) == 0);
        const char *sa = fl_dataset_record_name(da, i, &la),
                   *sb = fl_dataset_record_name(db, i, &lb);
        CHECK(sa && sb && la == lb && memcmp(sa, sb, la) == 0);
    }
    fl_dataset_close(da);
    fl_dataset_close(db);
}

/* Values of 20 to 3,020 bytes (JPEG fixtures): inline and in overflow pages, over 5 batches of
 * 4,096 and 2 chunks; once written in one run, once aborted after `cut` records and resumed (the
 * chunks stored before the abort are kept). Each reads back the same as a set without the
 * index. */
static void mixed_sizes(uint64_t cut)
{
    enum { M = 18000 };
    fl_writer_options o = tt_options(FL_BACKEND_LMDB, FL_ENC_JPEG, 0);
    o.resume = 1;
    char name[64];
    snprintf(name, sizeof name, "mixed-%llu", (unsigned long long)cut);
    const char *dst = tt_path(name), *walk = tt_path("mixed-walk");
    fl_writer *w;
    fl_error err;
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    tt_add(w, &o, 0, cut);
    if (cut < M) {
        fl_writer_abort(w);
        CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
        CHECK(fl_writer_resume_count(w) == cut);
        tt_add(w, &o, cut, M);
    }
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    size_t n;
    uint8_t *h = meta_get(dst, FL_LMDB_META_INDEX, &n);
    CHECK(h && fl_rd64(h + 16) == M);
    free(h);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    tt_check_all(ds, M);
    fl_dataset_close(ds);
    if (cut == M) {
        fl_lmdb_write_index = 0;
        tt_write(walk, &o, M);
        fl_lmdb_write_index = 1;
    }
    same_records(dst, walk);
    printf("mixed sizes, cut at %-8llu -> every record as walked\n", (unsigned long long)cut);
}

static void expect_opens(const char *dir, const char *what)
{
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(dir, &ds, &err), &err);
    tt_check_all(ds, N);
    fl_dataset_close(ds);
    printf("%-28s -> opens, every record checked\n", what);
}

int main(void)
{
    fl_writer_options o = tt_options(FL_BACKEND_LMDB, FL_ENC_RAW, 1);
    const char *idx = tt_path("idx"), *walk = tt_path("walk"), *bad = tt_path("bad");
    tt_write(idx, &o, N);
    fl_lmdb_write_index = 0; /* as written before the record index */
    tt_write(walk, &o, N);
    fl_lmdb_write_index = 1;

    size_t n, cnt;
    uint8_t *h = meta_get(idx, FL_LMDB_META_INDEX, &n);
    CHECK(h && n == FL_LMDB_INDEX_HEADER && fl_rd32(h) == FL_LMDB_INDEX_VERSION &&
          fl_rd64(h + 16) == N && fl_rd32(h + 48) == fl_crc32c(0, h, 48));
    free(h);
    CHECK(meta_get(walk, FL_LMDB_META_INDEX, &n) == NULL);
    uint8_t *c1 = chunk_get(idx, 1, &cnt);
    CHECK(cnt == N - FL_LMDB_INDEX_CHUNK);
    free(c1);
    CHECK(meta_get(idx, FL_LMDB_META_INDEX ".2", &n) == NULL);
    expect_opens(idx, "with the record index");
    expect_opens(walk, "without (walked)");
    same_records(idx, walk);
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open_summary(idx, &ds, &err), &err);
    CHECK(fl_dataset_count(ds) == N);
    fl_dataset_close(ds);

    /* the header */
    copy_dir(idx, bad);
    edit_header(bad, 12, 1, 1);
    expect_open_fail(bad, FL_E_FORMAT, "meta \"record_index\": bad header", "header CRC");
    copy_dir(idx, bad);
    edit_header(bad, 16, (uint64_t)-1, 0);
    expect_open_fail(bad, FL_E_FORMAT, "record index of 16999 records, the database holds 17000",
                     "header record count");
    copy_dir(idx, bad);
    edit_header(bad, 32, 1, 0);
    expect_open_fail(bad, FL_E_FORMAT, "record index made for another state", "header leaf pages");
    copy_dir(idx, bad);
    edit_header(bad, 8, 1, 0);
    expect_open_fail(bad, FL_E_FORMAT, "bad header", "header chunk size");
    copy_dir(idx, bad);
    edit_header(bad, 0, 1, 0); /* a later layout: not read, the records are walked */
    expect_opens(bad, "header of a later layout");

    /* the chunks */
    copy_dir(idx, bad);
    meta_put(bad, FL_LMDB_META_INDEX ".1", NULL, 0);
    expect_open_fail(bad, FL_E_FORMAT, "\"record_index.1\" (records 16384..16999): missing",
                     "chunk missing");
    copy_dir(idx, bad);
    uint8_t *z = meta_get(bad, FL_LMDB_META_INDEX ".0", &n);
    z[0] ^= 1;
    meta_put(bad, FL_LMDB_META_INDEX ".0", z, n);
    expect_open_fail(bad, FL_E_CHECKSUM, "\"record_index.0\" (records 0..16383): CRC mismatch",
                     "chunk CRC");
    copy_dir(idx, bad);
    memset(z + 4, 0x5A, n - 4);
    meta_put(bad, FL_LMDB_META_INDEX ".0", z, n);
    expect_open_fail(bad, FL_E_DECODE, "record_index.0", "chunk not a zstd frame");
    free(z);

    /* entries (the chunk's CRC made again: what a crafted index would do) */
    struct stat st;
    CHECK(stat(data_of(idx), &st) == 0);
    uint8_t *c0 = chunk_get(idx, 0, &cnt);
    CHECK(cnt == FL_LMDB_INDEX_CHUNK);
    uint8_t *e = malloc(cnt * FL_LMDB_INDEX_ENTRY);
    memcpy(e, c0, cnt * FL_LMDB_INDEX_ENTRY);
    fl_wr64(e + 5 * FL_LMDB_INDEX_ENTRY, (uint64_t)st.st_size * 4); /* past any page written */
    copy_dir(idx, bad);
    chunk_put(bad, 0, e, cnt);
    expect_open_fail(bad, FL_E_FORMAT,
                     "record 5: record index: value outside the file's used pages",
                     "entry past the used pages");
    memcpy(e, c0, cnt * FL_LMDB_INDEX_ENTRY);
    fl_wr32(e + 7 * FL_LMDB_INDEX_ENTRY + 16, 3);
    copy_dir(idx, bad);
    chunk_put(bad, 0, e, cnt);
    expect_open_fail(bad, FL_E_FORMAT, "record 7: record index: label out of range",
                     "entry label out of range");
    memcpy(e, c0, cnt * FL_LMDB_INDEX_ENTRY);
    fl_wr64(e, fl_rd64(c0 + FL_LMDB_INDEX_ENTRY)); /* record 0 placed at record 1's value */
    copy_dir(idx, bad);
    chunk_put(bad, 0, e, cnt);
    expect_open_fail(bad, FL_E_FORMAT,
                     "record 0: record index: the record index and the value's header disagree",
                     "first entry misplaced");
    /* records 3 and 4 placed at each other's values: the payload CRC says so on access */
    memcpy(e, c0, cnt * FL_LMDB_INDEX_ENTRY);
    fl_wr64(e + 3 * FL_LMDB_INDEX_ENTRY, fl_rd64(c0 + 4 * FL_LMDB_INDEX_ENTRY));
    fl_wr64(e + 4 * FL_LMDB_INDEX_ENTRY, fl_rd64(c0 + 3 * FL_LMDB_INDEX_ENTRY));
    copy_dir(idx, bad);
    chunk_put(bad, 0, e, cnt);
    CHECK_OK(fl_dataset_open(bad, &ds, &err), &err);
    const uint8_t *p;
    size_t len;
    CHECK_OK(fl_dataset_get(ds, 2, &p, &len, 1, &err), &err);
    CHECK(fl_dataset_get(ds, 3, &p, &len, 1, &err) == FL_E_CHECKSUM);
    printf("%-28s -> %s\n", "entries 3 and 4 swapped", err.msg);
    uint64_t nbad = 0;
    CHECK(fl_dataset_verify(ds, NULL, NULL, &nbad, &err) == FL_E_CHECKSUM && nbad == 2);
    fl_dataset_close(ds);
    free(e);
    free(c0);
    mixed_sizes(18000);
    mixed_sizes(16500); /* chunk 0 stored by the abort */
    mixed_sizes(4097);  /* mid-batch, no chunk stored */
    printf("lmdb index ok\n");
    return fl_check_status();
}
