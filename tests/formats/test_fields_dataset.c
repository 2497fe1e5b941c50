/* test_fields_dataset.c — format version 3: a dataset with every field type (boxes, int lists of
 * them, a PNG and a zstd mask, int, float, float vector, ndarray, bytes, text) written and read
 * back exactly, shards and LMDB, compressed and not; a tensor-only set (no image, encoding none);
 * max_count in the manifest; resume keeps the counts and refuses other fields naming the
 * difference; corrupt fields blocks caught by the CRC and, with the CRC patched to match, by the
 * parse (FL_E_FORMAT naming the file and record); datasets packed in parts must share fields. */
#include <zstd.h>

#include "fmt_test.h"
#include "fl_fields.h"
#include "fl_shard.h"

enum {
    F_IMAGE,
    F_LABEL,
    F_BOXES,
    F_CLS,
    F_MASK,
    F_ZMASK,
    F_SCORE,
    F_EMB,
    F_ARR,
    F_BLOB,
    F_TEXT,
    F_YEAR,
    NF
};

static fl_field F[NF];

static void schema(void)
{
    tt_fields_detection(F); /* F_IMAGE, F_LABEL, F_BOXES, F_CLS */
    F[F_MASK] = tt_field_mask("mask", FL_DTYPE_U8, FL_MASK_PNG);
    F[F_ZMASK] = tt_field_mask("instances", FL_DTYPE_U16, FL_MASK_ZSTD);
    F[F_SCORE] = tt_field("score", FL_FIELD_FLOAT);
    F[F_EMB] = tt_field("embedding", FL_FIELD_FLOAT_VECTOR);
    F[F_EMB].ndim = 1;
    F[F_EMB].shape[0] = 3;
    F[F_ARR] = tt_field("depth", FL_FIELD_NDARRAY);
    F[F_ARR].dtype = FL_DTYPE_F32;
    F[F_ARR].ndim = 2;
    F[F_ARR].shape[0] = 4;
    F[F_ARR].shape[1] = 5;
    F[F_BLOB] = tt_field("blob", FL_FIELD_BYTES);
    F[F_TEXT] = tt_field("caption", FL_FIELD_TEXT);
    F[F_YEAR] = tt_field("year", FL_FIELD_INT);
}

/* Record i's values (image i of tt_payload: height 10 + i % 5, width 20 + i % 7). */
typedef struct rvals {
    fl_field_value v[NF];
    float boxes[8][4];
    int32_t cls[8];
    uint8_t png[64];
    uint8_t zmask[512];
    float score, emb[3], arr[20];
    uint8_t blob[40];
    char text[64];
    int32_t year;
} rvals;

static size_t png_header(uint8_t *out, uint32_t w, uint32_t h)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(out, sig, 8);
    const uint8_t ihdr[25] = {0, 0, 0,          13, 'I', 'H', 'D', 'R', 0, 0, 0, (uint8_t)w, 0,
                              0, 0, (uint8_t)h, 8,  0,   0,   0,   0,   0, 0, 0, 0};
    memcpy(out + 8, ihdr, sizeof ihdr);
    memcpy(out + 33, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
    return 45;
}

static uint32_t rec_h(uint64_t i) { return 10 + (uint32_t)(i % 5); }
static uint32_t rec_w(uint64_t i) { return 20 + (uint32_t)(i % 7); }

static void rec_values(uint64_t i, rvals *r)
{
    memset(r, 0, sizeof *r);
    uint32_t h = rec_h(i), w = rec_w(i), nb = (uint32_t)(i % 8); /* 0..7 boxes */
    for (uint32_t b = 0; b < nb; b++) {
        r->boxes[b][0] = (float)b;
        r->boxes[b][1] = 0.5f * (float)b;
        r->boxes[b][2] = (float)(w - b);
        r->boxes[b][3] = (float)h;
        r->cls[b] = (int32_t)(i + b) % 3;
    }
    r->v[F_BOXES] = (fl_field_value){r->boxes, nb * 16u, nb, 0, 0};
    r->v[F_CLS] = (fl_field_value){r->cls, nb * 4u, nb, 0, 0};
    r->v[F_MASK] = (fl_field_value){r->png, png_header(r->png, w, h), 1, h, w};
    uint16_t raw[15 * 27];
    for (uint32_t k = 0; k < h * w; k++)
        raw[k] = (uint16_t)((k + i) % 7 == 0 ? 1000 + i : 0);
    size_t zn = ZSTD_compress(r->zmask, sizeof r->zmask, raw, h * w * 2u, 3);
    CHECK(!ZSTD_isError(zn));
    r->v[F_ZMASK] = (fl_field_value){r->zmask, zn, 1, h, w};
    r->score = (float)i / 7.0f;
    r->v[F_SCORE] = (fl_field_value){&r->score, 4, 1, 0, 0};
    for (int k = 0; k < 3; k++)
        r->emb[k] = (float)(i * 3 + (uint64_t)k);
    r->v[F_EMB] = (fl_field_value){r->emb, 12, 3, 0, 0};
    for (int k = 0; k < 20; k++)
        r->arr[k] = (float)k * 0.25f + (float)i;
    r->v[F_ARR] = (fl_field_value){r->arr, 80, 20, 0, 0};
    uint32_t bl = (uint32_t)(i * 5 % 41);
    for (uint32_t k = 0; k < bl; k++)
        r->blob[k] = (uint8_t)(k * 31 + i);
    r->v[F_BLOB] = (fl_field_value){r->blob, bl, bl, 0, 0};
    snprintf(r->text, sizeof r->text, "record %llu \xc3\xa9t\xc3\xa9", (unsigned long long)i);
    r->v[F_TEXT] = (fl_field_value){r->text, strlen(r->text), (uint32_t)strlen(r->text), 0, 0};
    r->year = 1900 + (int32_t)i;
    r->v[F_YEAR] = (fl_field_value){&r->year, 4, 1, 0, 0};
}

static fl_writer_options v3_options(fl_backend b, int zstd)
{
    fl_writer_options o = tt_options(b, FL_ENC_JPEG, zstd);
    o.fields = F;
    o.num_fields = NF;
    o.shard_bytes = 24 << 10;
    return o;
}

static void add_v3(fl_writer *w, const fl_writer_options *o, uint64_t from, uint64_t to)
{
    uint8_t *block = NULL;
    size_t cap = 0, blen = 0;
    fl_error err;
    for (uint64_t i = from; i < to; i++) {
        rvals r;
        rec_values(i, &r);
        CHECK_OK(fl_fields_encode(F, NF, r.v, rec_w(i), rec_h(i), 3, &block, &cap, &blen, &err),
                 &err);
        tt_add_fields_record(w, i, rec_h(i), rec_w(i), block, blen);
    }
    (void)o;
    free(block);
}

/* Every record's payload and every field exactly as written. */
static void check_v3(const char *dir, uint64_t n)
{
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(dir, &ds, &err), &err);
    CHECK(fl_dataset_format_version(ds) == 3);
    CHECK(fl_dataset_num_fields(ds) == NF);
    const fl_field *df = fl_dataset_fields(ds);
    for (int f = 0; f < NF; f++) {
        fl_field a = df[f], b = F[f];
        a.max_count = b.max_count = 0;
        EXPECTF(memcmp(&a, &b, sizeof a) == 0, "field %d (%s) differs after the manifest", f,
                F[f].name);
    }
    EXPECT(df[F_BOXES].max_count == (n >= 8 ? 7 : n - 1) &&
           df[F_CLS].max_count == df[F_BOXES].max_count);
    EXPECT(df[F_SCORE].max_count == 0);
    static uint8_t want[1 << 16];
    uint8_t *dst = malloc(fl_dataset_max_raw_len(ds) + 1);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *p, *pl;
        size_t len, pn;
        CHECK_OK(fl_dataset_get(ds, i, &p, &len, 1, &err), &err);
        fl_record_info info;
        CHECK_OK(fl_dataset_record_info(ds, i, &info, &err), &err);
        CHECK(info.fields_len > 0 && info.fields_len < info.stored_len);
        size_t wn = tt_payload(i, FL_ENC_JPEG, 28, 28, 3, want, sizeof want);
        CHECK_OK(fl_dataset_payload(ds, i, p, len, dst, fl_dataset_max_raw_len(ds), &pl, &pn, &err),
                 &err);
        CHECK(pn == wn && memcmp(pl, want, wn) == 0);
        fl_field_value v[NF];
        CHECK_OK(fl_dataset_record_fields(ds, i, p, len, v, &err), &err);
        rvals r;
        rec_values(i, &r);
        for (int f = 0; f < NF; f++) {
            if (f == F_IMAGE || f == F_LABEL || f == F_ARR)
                continue;
            EXPECTF(v[f].len == r.v[f].len && memcmp(v[f].data, r.v[f].data, v[f].len) == 0 &&
                        v[f].count == r.v[f].count,
                    "record %llu field %s differs", (unsigned long long)i, F[f].name);
        }
        EXPECT(v[F_MASK].height == rec_h(i) && v[F_ZMASK].width == rec_w(i));
        int32_t label;
        memcpy(&label, v[F_LABEL].data, 4);
        EXPECT(label == tt_label(i) && v[F_LABEL].count == 1);
        EXPECT(v[F_IMAGE].len == len - info.fields_len && v[F_IMAGE].height == rec_h(i));
        float arr[20];
        CHECK_OK(fl_dataset_ndarray(ds, F_ARR, &v[F_ARR], arr, sizeof arr, &err), &err);
        EXPECT(memcmp(arr, r.arr, sizeof arr) == 0);
        EXPECT(fl_dataset_ndarray(ds, F_SCORE, &v[F_SCORE], arr, sizeof arr, &err) == FL_E_RANGE);
        EXPECT(fl_dataset_ndarray(ds, F_ARR, &v[F_ARR], arr, 79, &err) == FL_E_RANGE);
        /* the wrong length is refused, never read past */
        EXPECT(fl_dataset_record_fields(ds, i, p, len - 1, v, &err) == FL_E_FORMAT);
    }
    free(dst);
    uint64_t bad = 9;
    CHECK_OK(fl_dataset_verify(ds, NULL, NULL, &bad, &err), &err);
    CHECK(bad == 0);
    fl_dataset_close(ds);
}

static void roundtrip(fl_backend b, int zstd)
{
    char name[64];
    snprintf(name, sizeof name, "v3-%d-%d", (int)b, zstd);
    fl_writer_options o = v3_options(b, zstd);
    fl_writer *w;
    fl_error err;
    CHECK_OK(fl_writer_open(tt_path(name), &o, &w, &err), &err);
    add_v3(w, &o, 0, 60);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    check_v3(tt_path(name), 60);
}

/* A bad block is refused naming the record and field; the writer stays usable. */
static void writer_refusals(void)
{
    fl_writer_options o = v3_options(FL_BACKEND_SHARDS, 0);
    fl_writer *w;
    fl_error err;
    CHECK_OK(fl_writer_open(tt_path("refuse"), &o, &w, &err), &err);
    rvals r;
    rec_values(5, &r);
    uint8_t *block = NULL;
    size_t cap = 0, blen = 0;
    CHECK_OK(fl_fields_encode(F, NF, r.v, rec_w(5), rec_h(5), 3, &block, &cap, &blen, &err), &err);
    uint8_t jpeg[64];
    size_t n = tt_payload(5, FL_ENC_JPEG, 28, 28, 3, jpeg, sizeof jpeg);
    fl_record_in in = {.format = FL_ENC_JPEG,
                       .stored = jpeg,
                       .stored_len = n,
                       .fields_block = block,
                       .fields_len = blen,
                       .name = "x.jpg",
                       .height = rec_h(5),
                       .width = rec_w(5)};
    in.fields_len = blen - 1;
    EXPECT(fl_writer_add_record(w, &in, &err) == FL_E_INVALID && strstr(err.msg, "x.jpg"));
    in.fields_len = blen;
    in.width = rec_w(5) - 1; /* the boxes and masks no longer fit */
    EXPECT(fl_writer_add_record(w, &in, &err) == FL_E_INVALID && strstr(err.msg, "field"));
    in.width = rec_w(5);
    EXPECT(fl_writer_add(w, jpeg, n, 0, "classic.jpg", rec_h(5), rec_w(5), &err) == FL_E_INVALID);
    CHECK_OK(fl_writer_add_record(w, &in, &err), &err);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(tt_path("refuse"), &ds, &err), &err);
    CHECK(fl_dataset_count(ds) == 1);
    fl_dataset_close(ds);
    /* fields the schema does not allow, and a classic dataset taking no block */
    fl_field g[NF];
    memcpy(g, F, sizeof g);
    g[F_CLS].of = F_TEXT;
    o.fields = g;
    EXPECT(fl_writer_open(tt_path("refuse2"), &o, &w, &err) == FL_E_INVALID &&
           strstr(err.msg, "labels"));
    fl_writer_options c = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    CHECK_OK(fl_writer_open(tt_path("classic"), &c, &w, &err), &err);
    EXPECT(fl_writer_add_record(w, &in, &err) == FL_E_INVALID);
    fl_writer_abort(w);
    free(block);
}

/* No image at all: encoding none, the fields block is the whole record. */
static void tensor_only(fl_backend b)
{
    fl_field t[3] = {tt_field("x", FL_FIELD_NDARRAY), tt_field("y", FL_FIELD_FLOAT),
                     tt_field("cls", FL_FIELD_INT)};
    t[0].dtype = FL_DTYPE_I16;
    t[0].ndim = 1;
    t[0].shape[0] = 6;
    fl_writer_options o = tt_options(b, FL_ENC_JPEG, 0);
    o.schema = (fl_schema){FL_ENC_NONE, FL_COMP_NONE, 0, 0, 0};
    o.fields = t;
    o.num_fields = 3;
    fl_writer *w;
    fl_error err;
    const char *dir = tt_path(b == FL_BACKEND_LMDB ? "tensor-lmdb" : "tensor");
    CHECK_OK(fl_writer_open(dir, &o, &w, &err), &err);
    uint8_t *block = NULL;
    size_t cap = 0, blen = 0;
    for (int i = 0; i < 10; i++) {
        int16_t x[6];
        for (int k = 0; k < 6; k++)
            x[k] = (int16_t)(i * 100 - k);
        float y = (float)i * 1.5f;
        fl_field_value v[3] = {{x, 12, 6, 0, 0}, {&y, 4, 1, 0, 0}, {0}};
        CHECK_OK(fl_fields_encode(t, 3, v, 0, 0, 3, &block, &cap, &blen, &err), &err);
        fl_record_in in = {.format = FL_ENC_NONE,
                           .fields_block = block,
                           .fields_len = blen,
                           .label = i % 2,
                           .name = "t"};
        CHECK_OK(fl_writer_add_record(w, &in, &err), &err);
    }
    const char *cls[2] = {"even", "odd"};
    CHECK_OK(fl_writer_finish(w, cls, 2, &err), &err);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dir, &ds, &err), &err);
    CHECK(fl_dataset_schema(ds)->encoding == FL_ENC_NONE);
    for (uint64_t i = 0; i < 10; i++) {
        const uint8_t *p;
        size_t len;
        CHECK_OK(fl_dataset_get(ds, i, &p, &len, 1, &err), &err);
        fl_record_info info;
        CHECK_OK(fl_dataset_record_info(ds, i, &info, &err), &err);
        CHECK(info.fields_len == len && info.format == FL_ENC_NONE && info.height == 0);
        CHECK(info.label == (int32_t)(i % 2));
        fl_field_value v[3];
        CHECK_OK(fl_dataset_record_fields(ds, i, p, len, v, &err), &err);
        int16_t x[6];
        CHECK_OK(fl_dataset_ndarray(ds, 0, &v[0], x, sizeof x, &err), &err);
        CHECK(x[0] == (int16_t)(i * 100) && x[5] == (int16_t)(i * 100 - 5));
        float y;
        memcpy(&y, v[1].data, 4);
        CHECK(y == (float)i * 1.5f);
    }
    uint64_t bad;
    CHECK_OK(fl_dataset_verify(ds, NULL, NULL, &bad, &err), &err);
    fl_dataset_close(ds);
    free(block);
    /* none needs fields without an image, and no compression */
    o.fields = NULL;
    o.num_fields = 0;
    EXPECT(fl_writer_open(tt_path("none-classic"), &o, &w, &err) == FL_E_INVALID);
}

/* Resume keeps the counts of the kept records; other fields are refused naming the change. */
static void resume(fl_backend b)
{
    const char *dst = tt_path(b == FL_BACKEND_LMDB ? "resume-lmdb" : "resume");
    fl_writer_options o = v3_options(b, 1);
    fl_writer *w;
    fl_error err;
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    add_v3(w, &o, 0, 40); /* boxes up to 7 */
    fl_writer_abort(w);
    fl_field g[NF];
    memcpy(g, F, sizeof g);
    g[F_YEAR].type = FL_FIELD_FLOAT;
    g[F_YEAR].dtype = FL_DTYPE_F32;
    o.fields = g;
    o.resume = 1;
    int rc = fl_writer_open(dst, &o, &w, &err);
    EXPECTF(rc == FL_E_INVALID && strstr(err.msg, "\"year\" (int)") && strstr(err.msg, "(float)"),
            "resume with another field type: %d %s", rc, err.msg);
    o.num_fields = NF - 1;
    rc = fl_writer_open(dst, &o, &w, &err);
    EXPECTF(rc == FL_E_INVALID && strstr(err.msg, "\"year\"") && strstr(err.msg, "gone"),
            "resume without a field: %d %s", rc, err.msg);
    o.fields = F;
    o.num_fields = NF;
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    uint64_t kept = fl_writer_resume_count(w);
    CHECK(kept > 8 && kept <= 40);
    /* records after the resume hold at most one box: the manifest's 7 come from the kept ones */
    static uint8_t buf[1 << 16];
    uint8_t *block = NULL;
    size_t cap = 0, blen = 0;
    for (uint64_t i = kept; i < 50; i++) {
        rvals r;
        rec_values(i, &r);
        uint32_t nb = i % 2;
        r.v[F_BOXES].len = nb * 16;
        r.v[F_BOXES].count = nb;
        r.v[F_CLS].len = nb * 4;
        r.v[F_CLS].count = nb;
        CHECK_OK(fl_fields_encode(F, NF, r.v, rec_w(i), rec_h(i), 3, &block, &cap, &blen, &err),
                 &err);
        size_t n = tt_payload(i, FL_ENC_JPEG, 28, 28, 3, buf, sizeof buf);
        fl_record_in in = {.format = FL_ENC_JPEG,
                           .stored = buf,
                           .stored_len = n,
                           .fields_block = block,
                           .fields_len = blen,
                           .label = tt_label(i),
                           .name = "r",
                           .height = rec_h(i),
                           .width = rec_w(i)};
        CHECK_OK(fl_writer_add_record(w, &in, &err), &err);
    }
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    free(block);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    EXPECTF(fl_dataset_fields(ds)[F_BOXES].max_count == 7, "max_count %u after resume",
            fl_dataset_fields(ds)[F_BOXES].max_count);
    fl_dataset_close(ds);
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    CHECK(a && b);
    char buf[1 << 15];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        CHECK(fwrite(buf, 1, n, b) == n);
    fclose(a);
    fclose(b);
}

typedef struct seen {
    uint64_t index;
    int code;
    char msg[768];
} seen;

static int remember(void *u, uint64_t i, const fl_error *e)
{
    seen *s = u;
    s->index = i;
    s->code = e->code;
    snprintf(s->msg, sizeof s->msg, "%s", e->msg);
    return 0;
}

/* A record's fields block damaged: the CRC catches it; with the CRC patched to match (plain index
 * entries), the parse does, naming the record. */
static void corrupt_blocks(void)
{
    fl_shard_compress_index = 0;
    fl_writer_options o = v3_options(FL_BACKEND_SHARDS, 0);
    o.shard_bytes = 1 << 30;
    fl_writer *w;
    fl_error err;
    const char *good = tt_path("corrupt");
    CHECK_OK(fl_writer_open(good, &o, &w, &err), &err);
    add_v3(w, &o, 0, 12);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    fl_shard_compress_index = 1;
    char shard[PATH_MAX + 64], manifest[PATH_MAX + 64];
    snprintf(shard, sizeof shard, "%s/shard-00000.fls", good);
    snprintf(manifest, sizeof manifest, "%s/manifest.json", good);
    size_t n;
    uint8_t *orig = tt_slurp(shard, &n);
    fl_shard_view v;
    CHECK_OK(fl_shard_open(shard, &v, &err), &err);
    const uint64_t rec = 9;
    fl_record_info r;
    fl_shard_entry(&v, rec, &r, NULL, NULL);
    uint64_t index_off = (uint64_t)(v.index - v.map) + rec * v.entry_size;
    fl_shard_close(&v);
    /* patch byte k of record 9's block (its first length word, or the last byte of the caption,
     * before the year), with or without the CRC fixed */
    struct {
        size_t at; /* offset in the block */
        uint8_t value;
        const char *why;
    } patches[] = {{0, 0xff, "claimed"}, {3, 0x7f, "claimed"}, {r.fields_len - 9, 0xff, "UTF-8"}};
    for (size_t k = 0; k < sizeof patches / sizeof patches[0]; k++) {
        for (int fix_crc = 0; fix_crc <= 1; fix_crc++) {
            uint8_t *m = malloc(n);
            memcpy(m, orig, n);
            uint8_t *block = m + r.offset + r.stored_len - r.fields_len;
            block[patches[k].at] = patches[k].value;
            if (fix_crc) {
                uint32_t crc = fl_crc32c(0, m + r.offset, r.stored_len);
                fl_wr32(m + index_off + FLI_CRC, crc);
                /* the index block's CRC in the footer, then the footer's own */
                uint8_t *f = m + n - FL_SHARD_FOOTER_SIZE;
                uint64_t io = fl_rd64(f + FLF_INDEX_OFFSET), is = fl_rd64(f + FLF_INDEX_STORED);
                fl_wr32(f + FLF_INDEX_CRC, fl_crc32c(0, m + io, is));
                fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
            }
            tt_spit(shard, m, n);
            free(m);
            fl_dataset *ds;
            CHECK_OK(fl_dataset_open(good, &ds, &err), &err);
            seen s = {0, 0, ""};
            uint64_t bad = 0;
            int rc = fl_dataset_verify(ds, remember, &s, &bad, &err);
            EXPECTF(rc == FL_E_CHECKSUM && bad == 1 && s.index == rec,
                    "patch %zu crc %d: rc %d bad %llu", k, fix_crc, rc, (unsigned long long)bad);
            if (fix_crc)
                EXPECTF(s.code == FL_E_FORMAT && strstr(s.msg, "shard-00000.fls: record 9") &&
                            strstr(s.msg, patches[k].why),
                        "patch %zu: %d %s", k, s.code, s.msg);
            else
                EXPECTF(s.code == FL_E_CHECKSUM, "patch %zu: %d %s", k, s.code, s.msg);
            const uint8_t *p;
            size_t len;
            CHECK_OK(fl_dataset_get(ds, rec, &p, &len, 0, &err), &err);
            fl_field_value vals[NF];
            if (fix_crc)
                EXPECT(fl_dataset_record_fields(ds, rec, p, len, vals, &err) == FL_E_FORMAT &&
                       strstr(err.msg, "record 9"));
            fl_dataset_close(ds);
        }
    }
    /* an index entry whose fields_len exceeds its record (CRC of the index fixed): open refuses */
    uint8_t *m = malloc(n);
    memcpy(m, orig, n);
    fl_wr32(m + index_off + FLI_FIELDS_LEN, r.stored_len + 1);
    uint8_t *f = m + n - FL_SHARD_FOOTER_SIZE;
    fl_wr32(f + FLF_INDEX_CRC,
            fl_crc32c(0, m + fl_rd64(f + FLF_INDEX_OFFSET), fl_rd64(f + FLF_INDEX_STORED)));
    fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
    tt_spit(shard, m, n);
    fl_dataset *ds;
    int rc = fl_dataset_open(good, &ds, &err);
    EXPECTF(rc == FL_E_FORMAT && strstr(err.msg, "record 9") && strstr(err.msg, "fields block"),
            "fields_len past the record: %d %s", rc, err.msg);
    fl_wr32(m + index_off + FLI_FIELDS_LEN, 3); /* shorter than the fixed fields */
    fl_wr32(f + FLF_INDEX_CRC,
            fl_crc32c(0, m + fl_rd64(f + FLF_INDEX_OFFSET), fl_rd64(f + FLF_INDEX_STORED)));
    fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
    tt_spit(shard, m, n);
    rc = fl_dataset_open(good, &ds, &err);
    EXPECTF(rc == FL_E_FORMAT && strstr(err.msg, "shorter"), "short fields_len: %d %s", rc,
            err.msg);
    free(m);
    tt_spit(shard, orig, n);
    /* the manifest: a max_count below a shard's counts, an unknown type, fields in a v2 manifest */
    size_t mn;
    char *mt = (char *)tt_slurp(manifest, &mn);
    const char *edits[][3] = {
        {"\"max_count\": 7", "\"max_count\": 6", "max_count"},
        /* far above any record: a loader would size its batch slots from it */
        {"\"max_count\": 7", "\"max_count\": 268435456", "damaged or crafted"},
        {"\"type\": \"float_vector\"", "\"type\": \"vector\"", "unknown \"type\""},
        {"\"format_version\": 3", "\"format_version\": 2", "version 2 manifest"},
        {"\"of\": \"boxes\"", "\"of\": \"nothing\"", "names no field"},
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        char *at = strstr(mt, edits[k][0]);
        CHECK(at);
        char *t = malloc(mn + 64);
        size_t pre = (size_t)(at - mt);
        memcpy(t, mt, pre);
        strcpy(t + pre, edits[k][1]);
        strcat(t, at + strlen(edits[k][0]));
        tt_spit(manifest, (uint8_t *)t, strlen(t));
        free(t);
        rc = fl_dataset_open(good, &ds, &err);
        EXPECTF(rc == FL_E_FORMAT && strstr(err.msg, edits[k][2]), "manifest edit %zu: %d %s", k,
                rc, err.msg);
    }
    /* the shard header's count and the manifest crafted together (header CRC recomputed): no
     * record's fields block could hold 2^28 boxes, so open refuses before a loader sizes from it */
    {
        uint8_t *h = malloc(n);
        memcpy(h, orig, n);
        fl_wr32(h + FLH_FIELD_MAX + 4 * F_BOXES, 268435456u);
        fl_wr32(h + FLH_HEADER_CRC, 0);
        fl_wr32(h + FLH_HEADER_CRC, fl_crc32c(0, h, 4096));
        tt_spit(shard, h, n);
        free(h);
        char *at = strstr(mt, "\"max_count\": 7");
        CHECK(at);
        char *t = malloc(mn + 64);
        size_t pre = (size_t)(at - mt);
        memcpy(t, mt, pre);
        strcpy(t + pre, "\"max_count\": 268435456");
        strcat(t, at + strlen("\"max_count\": 7"));
        tt_spit(manifest, (uint8_t *)t, strlen(t));
        free(t);
        rc = fl_dataset_open(good, &ds, &err);
        EXPECTF(rc == FL_E_FORMAT && strstr(err.msg, "largest record's fields block"),
                "header + manifest max_count 2^28: %d %s", rc, err.msg);
        tt_spit(shard, orig, n);
    }
    tt_spit(manifest, (uint8_t *)mt, mn);
    free(mt);
    free(orig);
    CHECK_OK(fl_dataset_open(good, &ds, &err), &err);
    fl_dataset_close(ds);
}

/* --part datasets open as one only with the same fields; counts are the largest of the parts. */
static void parts(void)
{
    char root[PATH_MAX];
    snprintf(root, sizeof root, "%s", tt_path("parts"));
    CHECK(mkdir(root, 0755) == 0);
    fl_error err;
    for (uint32_t p = 0; p < 2; p++) {
        fl_writer_options o = v3_options(FL_BACKEND_SHARDS, 0);
        o.part_index = p;
        o.part_count = 2;
        char dst[PATH_MAX + 16];
        snprintf(dst, sizeof dst, "%s/part-%u", root, p);
        fl_writer *w;
        CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
        add_v3(w, &o, p * 5, p * 5 + 5); /* part 0: up to 4 boxes, part 1: up to 7 */
        CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    }
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(root, &ds, &err), &err);
    CHECK(fl_dataset_count(ds) == 10 && fl_dataset_format_version(ds) == 3);
    EXPECT(fl_dataset_fields(ds)[F_BOXES].max_count == 7);
    EXPECT(strstr(fl_dataset_manifest_json(ds), "\"fields\"") != NULL);
    uint64_t bad;
    CHECK_OK(fl_dataset_verify(ds, NULL, NULL, &bad, &err), &err);
    fl_dataset_close(ds);
    /* part 1 with another field name */
    char mp[PATH_MAX + 32];
    snprintf(mp, sizeof mp, "%s/part-1/manifest.json", root);
    size_t mn;
    char *mt = (char *)tt_slurp(mp, &mn);
    char *at = strstr(mt, "\"caption\"");
    CHECK(at);
    memcpy(at, "\"captioN\"", 9);
    tt_spit(mp, (uint8_t *)mt, mn);
    free(mt);
    int rc = fl_dataset_open(root, &ds, &err);
    EXPECTF(rc == FL_E_FORMAT && strstr(err.msg, "fields differ"), "parts with other fields: %d %s",
            rc, err.msg);
    (void)copy_file;
}

int main(void)
{
    schema();
    setenv("FL_WRITER_KEEP_CACHE", "1", 1);
    roundtrip(FL_BACKEND_SHARDS, 0);
    roundtrip(FL_BACKEND_SHARDS, 1);
    roundtrip(FL_BACKEND_LMDB, 0);
    roundtrip(FL_BACKEND_LMDB, 1);
    writer_refusals();
    tensor_only(FL_BACKEND_SHARDS);
    tensor_only(FL_BACKEND_LMDB);
    resume(FL_BACKEND_SHARDS);
    resume(FL_BACKEND_LMDB);
    corrupt_blocks();
    parts();
    return fl_check_status();
}
