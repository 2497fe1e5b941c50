/* test_record_index.c — the reader's packed in-memory index (fl_record_index.h) and what it
 * replaced: rows read back exactly (every column width from 0 to 57 bits, negative values,
 * several segments); through the reader, every record's info equals its on-disk index entry
 * (shards with a compressed and a plain index, several shards, an empty shard's neighbours;
 * LMDB past one segment); names read back from the shard's index block on first use, from many
 * threads at once; the label field's bytes from the label table and, for labels too large for
 * it, from the index block; fl_dataset_open_summary keeps no index and refuses record access. */
#include "fmt_test.h"

#include <pthread.h>

#include "fl_dataset_impl.h"
#include "fl_shard.h"

/* ---- the packed rows on their own ----------------------------------------------------------- */

typedef struct rows_src {
    const int64_t (*v)[FL_IX_COLS];
} rows_src;

static void rows_get(const void *src, uint64_t i, int64_t v[FL_IX_COLS])
{
    memcpy(v, ((const rows_src *)src)->v[i], sizeof(int64_t) * FL_IX_COLS);
}

static void test_rows(void)
{
    enum { N = 1000 };
    static int64_t a[3][N][FL_IX_COLS];
    uint64_t s = 7;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < N; i++)
            for (int c = 0; c < FL_IX_COLS; c++) {
                uint64_t r = tt_rng(&s);
                int64_t v;
                switch (c) {
                case FL_IX_OFFSET: v = (int64_t)(r & ((1ull << 57) - 1)); break; /* 57 bits */
                case FL_IX_CRC: v = (int64_t)(uint32_t)r; break;
                case FL_IX_RAW: v = (int64_t)(r % 2001) - 1000; break; /* negative too */
                case FL_IX_FORMAT: v = 3; break;                       /* constant: 0 bits */
                case FL_IX_LABEL: v = 1000 + (int64_t)(r % 2); break;  /* 1 bit */
                default: v = (int64_t)(r % (1u << (c + g))); break;
                }
                a[g][i][c] = v;
            }
    fl_rindex x;
    memset(&x, 0, sizeof x);
    for (int g = 0; g < 3; g++) {
        rows_src src = {(const int64_t(*)[FL_IX_COLS])a[g]};
        CHECK(fl_rindex_add(&x, g == 1 ? 0 : N, rows_get, &src) == 0); /* an empty segment too */
    }
    fl_rindex_trim(&x);
    CHECK(x.nsegs == 3 && x.segs[1].count == 0);
    EXPECT(x.segs[0].width[FL_IX_OFFSET] == 57 && x.segs[0].width[FL_IX_FORMAT] == 0 &&
           x.segs[0].width[FL_IX_LABEL] == 1 && x.segs[0].width[FL_IX_CRC] == 32);
    for (int g = 0; g < 3; g += 2)
        for (int i = 0; i < N; i++) {
            int64_t v[FL_IX_COLS];
            fl_rindex_row(&x, &x.segs[g], (uint64_t)i, v);
            for (int c = 0; c < FL_IX_COLS; c++)
                EXPECTF(v[c] == a[g][i][c], "segment %d row %d column %d: %lld, want %lld", g, i, c,
                        (long long)v[c], (long long)a[g][i][c]);
        }
    /* a column spanning more than 57 bits is refused, not truncated */
    static int64_t wide[2][FL_IX_COLS];
    wide[1][FL_IX_OFFSET] = (int64_t)(1ull << 58);
    rows_src src = {(const int64_t(*)[FL_IX_COLS])wide};
    EXPECT(fl_rindex_add(&x, 2, rows_get, &src) == -ERANGE);
    fl_rindex_free(&x);
}

/* ---- through the reader --------------------------------------------------------------------- */

/* Every record's info equals its entry in the shard file (read with the shard reader itself). */
static void check_entries(const fl_dataset *ds)
{
    fl_error err;
    uint64_t i = 0;
    for (uint32_t s = 0; s < fl_dataset_num_shards(ds); s++) {
        fl_shard_view v;
        CHECK_OK(fl_shard_open(fl_dataset_shard_path(ds, s), &v, &err), &err);
        for (uint64_t k = 0; k < v.count; k++, i++) {
            fl_record_info want, got;
            memset(&want, 0, sizeof want); /* padding compared too */
            memset(&got, 0, sizeof got);
            fl_shard_entry(&v, k, &want, NULL, NULL);
            want.shard = s;
            CHECK_OK(fl_dataset_record_info(ds, i, &got, &err), &err);
            EXPECTF(memcmp(&want, &got, sizeof want) == 0, "record %llu: info differs",
                    (unsigned long long)i);
        }
        fl_shard_close(&v);
    }
    CHECK(i == fl_dataset_count(ds));
}

typedef struct names_job {
    const fl_dataset *ds;
    uint64_t n;
    int bad;
} names_job;

static void *names_thread(void *arg)
{
    names_job *j = arg;
    char want[128];
    for (uint64_t i = 0; i < j->n; i++) {
        uint64_t r = (i * 7919) % j->n; /* each thread in another order */
        size_t nl;
        const char *nm = fl_dataset_record_name(j->ds, r, &nl);
        tt_name(r, want, sizeof want);
        if (!nm || nl != strlen(want) || memcmp(nm, want, nl) != 0)
            j->bad++;
    }
    return NULL;
}

/* Names from 4 threads on a fresh open: each shard's block is loaded once and shared. */
static void check_names_threads(const char *dst, uint64_t n)
{
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    pthread_t t[4];
    names_job j[4];
    for (int k = 0; k < 4; k++) {
        j[k] = (names_job){ds, n, 0};
        CHECK(pthread_create(&t[k], NULL, names_thread, &j[k]) == 0);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(t[k], NULL);
        EXPECTF(j[k].bad == 0, "thread %d: %d names wrong", k, j[k].bad);
    }
    fl_dataset_close(ds);
}

/* The label field's 4 bytes equal the record's label. */
static void check_label_fields(const fl_dataset *ds)
{
    fl_error err;
    fl_field_value vals[FL_MAX_FIELDS];
    int lf = fl_fields_label_index(fl_dataset_fields(ds), fl_dataset_num_fields(ds));
    CHECK(lf >= 0);
    for (uint64_t i = 0; i < fl_dataset_count(ds); i++) {
        fl_record_info ri;
        const uint8_t *p;
        size_t len;
        CHECK_OK(fl_dataset_record_info(ds, i, &ri, &err), &err);
        CHECK_OK(fl_dataset_get(ds, i, &p, &len, 1, &err), &err);
        CHECK_OK(fl_dataset_record_fields(ds, i, p, len, vals, &err), &err);
        int32_t l;
        CHECK(vals[lf].data && vals[lf].len == 4);
        memcpy(&l, vals[lf].data, 4);
        EXPECTF(l == ri.label, "record %llu: label field %d, label %d", (unsigned long long)i, l,
                ri.label);
    }
}

static void check_summary(const char *dst, uint64_t n, uint32_t shards)
{
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open_summary(dst, &ds, &err), &err);
    EXPECT(fl_dataset_count(ds) == n);
    EXPECT(fl_dataset_num_shards(ds) == shards);
    EXPECT(fl_dataset_num_classes(ds) == 3);
    EXPECT(fl_dataset_max_stored_len(ds) > 0);
    EXPECT(ds->ix.nsegs == 0 && ds->ix.rows == NULL); /* nothing per record */
    fl_record_info ri;
    const uint8_t *p;
    size_t len = 9;
    EXPECT_RC(fl_dataset_record_info(ds, 0, &ri, &err), FL_E_UNSUPPORTED, &err);
    EXPECT(strstr(err.msg, "summary") != NULL);
    EXPECT_RC(fl_dataset_get(ds, 0, &p, &len, 1, &err), FL_E_UNSUPPORTED, &err);
    EXPECT_RC(fl_dataset_record_info(ds, n, &ri, &err), FL_E_RANGE, &err);
    EXPECT(fl_dataset_record_name(ds, 0, &len) == NULL && len == 0);
    uint64_t bad = 7;
    EXPECT_RC(fl_dataset_verify(ds, NULL, NULL, &bad, &err), FL_E_UNSUPPORTED, &err);
    fl_dataset_prefetch_info(ds, 0);
    fl_dataset_close(ds);
}

/* A shard dataset of n fixture records, index compressed or not, small shards. */
static void shard_case(const char *name, int compress_index, uint64_t n)
{
    const char *dst = tt_path(name);
    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    o.shard_bytes = 64 << 10;
    fl_shard_compress_index = compress_index;
    tt_write(dst, &o, n);
    fl_shard_compress_index = 1;
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    CHECK(fl_dataset_num_shards(ds) > 3);
    EXPECT(ds->ix.nsegs == fl_dataset_num_shards(ds));
    /* no decompressed index block is kept after the open */
    for (uint32_t s = 0; s < fl_dataset_num_shards(ds); s++)
        EXPECT(ds->shards[s].index_heap == NULL && ds->shard_index[s] == NULL);
    EXPECT(ds->num_label_values == 3);
    check_entries(ds);
    tt_check_all(ds, n); /* payloads, infos, names, verify */
    check_label_fields(ds);
    EXPECT(fl_rindex_bytes(&ds->ix) < n * 16); /* fixture: ~ 12 bytes a record */
    uint32_t shards = fl_dataset_num_shards(ds);
    fl_dataset_close(ds);
    check_names_threads(dst, n);
    check_summary(dst, n, shards);
}

/* Labels with no class list, too large for the label table: read back from the index block. */
static void big_labels_case(void)
{
    const char *dst = tt_path("biglabels");
    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    o.shard_bytes = 16 << 10;
    fl_writer *w;
    fl_error err;
    uint8_t buf[4096];
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    for (uint64_t i = 0; i < 40; i++) {
        size_t n = tt_payload(i, FL_ENC_JPEG, 0, 0, 3, buf, sizeof buf);
        char name[128];
        tt_name(i, name, sizeof name);
        CHECK_OK(
            fl_writer_add(w, buf, n, i % 2 ? 5000000 + (int32_t)i : (int32_t)i, name, 8, 8, &err),
            &err);
    }
    CHECK_OK(fl_writer_finish(w, NULL, 0, &err), &err);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    EXPECT(ds->label_values == NULL);
    check_entries(ds);
    check_label_fields(ds);
    fl_dataset_close(ds);
}

static void lmdb_case(uint64_t n)
{
    const char *dst = tt_path("lmdb");
    fl_writer_options o = tt_options(FL_BACKEND_LMDB, FL_ENC_JPEG, 1);
    tt_write(dst, &o, n);
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    EXPECT(ds->ix.nsegs == (n + FL_LMDB_SEG - 1) / FL_LMDB_SEG);
    tt_check_all(ds, n);
    check_label_fields(ds);
    fl_dataset_close(ds);
    check_names_threads(dst, n);
    check_summary(dst, n, 1);
}

int main(void)
{
    test_rows();
    shard_case("zindex", 1, 600);
    shard_case("plainindex", 0, 600);
    big_labels_case();
    lmdb_case(FL_LMDB_SEG + 100); /* two segments */
    return fl_check_status();
}
