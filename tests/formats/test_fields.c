/* test_fields.c — the record schema and fields block (fl_fields.h): every type encoded and parsed
 * back exactly, every refusal of fl_fields_validate / fl_fields_encode (box outside the image,
 * x1 < x0, NaN, mask size, `of` list length, bad UTF-8, ...), and fl_fields_parse on truncated,
 * overlong and forged blocks (FL_E_FORMAT naming the record and field, never a read past the end).
 */
#include "fmt_test.h" /* first: it sets _GNU_SOURCE */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "fl_error.h"
#include "fl_fields.h"

enum {
    F_IMAGE,
    F_LABEL,
    F_BOXES,
    F_CLS,
    F_CROWD,
    F_MASK,
    F_SCORE,
    F_EMB,
    F_ARR,
    F_BLOB,
    F_TEXT,
    F_MULTI,
    F_ZMASK,
    F_EXTRA_INT,
    NF
};

static void schema(fl_field *f)
{
    tt_fields_detection(f); /* F_IMAGE, F_LABEL, F_BOXES, F_CLS */
    f[F_CROWD] = tt_field("iscrowd", FL_FIELD_INT_LIST);
    f[F_CROWD].of = F_BOXES;
    f[F_MASK] = tt_field_mask("mask", FL_DTYPE_U8, FL_MASK_PNG);
    f[F_SCORE] = tt_field("score", FL_FIELD_FLOAT);
    f[F_EMB] = tt_field("embedding", FL_FIELD_FLOAT_VECTOR);
    f[F_EMB].ndim = 1;
    f[F_EMB].shape[0] = 5;
    f[F_ARR] = tt_field("depth", FL_FIELD_NDARRAY);
    f[F_ARR].dtype = FL_DTYPE_U16;
    f[F_ARR].ndim = 3;
    f[F_ARR].shape[0] = 2;
    f[F_ARR].shape[1] = 3;
    f[F_ARR].shape[2] = 4;
    f[F_BLOB] = tt_field("blob", FL_FIELD_BYTES);
    f[F_TEXT] = tt_field("caption", FL_FIELD_TEXT);
    f[F_MULTI] = tt_field("tags", FL_FIELD_INT_LIST);
    f[F_ZMASK] = tt_field_mask("instances", FL_DTYPE_U16, FL_MASK_ZSTD);
    f[F_EXTRA_INT] = tt_field("year", FL_FIELD_INT);
}

/* A minimal gray PNG header (signature + IHDR): enough for the checks, which never decode it. */
static size_t png_header(uint8_t *out, uint32_t w, uint32_t h, uint8_t depth)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(out, sig, 8);
    const uint8_t ihdr[25] = {0,
                              0,
                              0,
                              13,
                              'I',
                              'H',
                              'D',
                              'R',
                              (uint8_t)(w >> 24),
                              (uint8_t)(w >> 16),
                              (uint8_t)(w >> 8),
                              (uint8_t)w,
                              (uint8_t)(h >> 24),
                              (uint8_t)(h >> 16),
                              (uint8_t)(h >> 8),
                              (uint8_t)h,
                              depth,
                              0,
                              0,
                              0,
                              0,
                              0,
                              0,
                              0,
                              0};
    memcpy(out + 8, ihdr, sizeof ihdr);
    memcpy(out + 33, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
    return 45;
}

/* The values of one record of a 40x30 image. */
typedef struct rec {
    fl_field_value v[NF];
    float boxes[3][4];
    int32_t cls[3], crowd[3], tags[2];
    uint8_t png[64];
    uint8_t zmask[256];
    float score, emb[5];
    uint16_t arr[24];
    uint8_t blob[7];
    char text[32];
} rec;

static void values(rec *r)
{
    memset(r, 0, sizeof *r);
    const float b[3][4] = {{0, 0, 10, 10}, {5.5f, 2, 40, 30}, {20, 20, 20, 20}};
    memcpy(r->boxes, b, sizeof b);
    for (int i = 0; i < 3; i++)
        r->cls[i] = 7 - i, r->crowd[i] = i == 1;
    r->tags[0] = 3;
    r->tags[1] = 99;
    size_t pn = png_header(r->png, 40, 30, 8);
    uint16_t raw[30 * 40];
    for (int i = 0; i < 30 * 40; i++)
        raw[i] = (uint16_t)(i % 5 == 0 ? 300 : 0);
    size_t zn = ZSTD_compress(r->zmask, sizeof r->zmask, raw, sizeof raw, 3);
    CHECK(!ZSTD_isError(zn));
    r->score = -1.25f;
    for (int i = 0; i < 5; i++)
        r->emb[i] = (float)i / 3;
    for (int i = 0; i < 24; i++)
        r->arr[i] = (uint16_t)(i * 1000);
    memcpy(r->blob, "\0\1\2\3\xff\xfe\x7f", 7);
    strcpy(r->text, "a cat on a mat \xc3\xa9\xe2\x82\xac");
    r->v[F_BOXES] = (fl_field_value){r->boxes, sizeof r->boxes, 3, 0, 0};
    r->v[F_CLS] = (fl_field_value){r->cls, sizeof r->cls, 3, 0, 0};
    r->v[F_CROWD] = (fl_field_value){r->crowd, sizeof r->crowd, 3, 0, 0};
    r->v[F_MASK] = (fl_field_value){r->png, pn, 1, 30, 40};
    r->v[F_SCORE] = (fl_field_value){&r->score, 4, 1, 0, 0};
    r->v[F_EMB] = (fl_field_value){r->emb, sizeof r->emb, 5, 0, 0};
    r->v[F_ARR] = (fl_field_value){r->arr, sizeof r->arr, 24, 0, 0};
    r->v[F_BLOB] = (fl_field_value){r->blob, sizeof r->blob, 7, 0, 0};
    r->v[F_TEXT] = (fl_field_value){r->text, strlen(r->text), (uint32_t)strlen(r->text), 0, 0};
    r->v[F_MULTI] = (fl_field_value){r->tags, sizeof r->tags, 2, 0, 0};
    r->v[F_ZMASK] = (fl_field_value){r->zmask, zn, 1, 30, 40};
    static int32_t year = 2024;
    r->v[F_EXTRA_INT] = (fl_field_value){&year, 4, 1, 0, 0};
}

static fl_field F[NF];

static int encode(const fl_field_value *v, uint8_t **out, size_t *cap, size_t *len, fl_error *e)
{
    return fl_fields_encode(F, NF, v, 40, 30, 3, out, cap, len, e);
}

/* encode must refuse with FL_E_INVALID naming `field` (and `why` when given). */
static void refuse(const rec *r, const char *field, const char *why)
{
    uint8_t *out = NULL;
    size_t cap = 0, len = 0;
    fl_error e;
    int rc = encode(r->v, &out, &cap, &len, &e);
    EXPECTF(rc == FL_E_INVALID, "%s: encode returned %d (%s)", field, rc, e.msg);
    EXPECTF(strstr(e.msg, field) != NULL, "message '%s' does not name %s", e.msg, field);
    if (why)
        EXPECTF(strstr(e.msg, why) != NULL, "message '%s' does not say '%s'", e.msg, why);
    free(out);
}

static void test_names(void)
{
    for (int t = FL_FIELD_IMAGE; t <= FL_FIELD_TEXT; t++) {
        fl_field_type back;
        CHECK(fl_field_type_from_name(fl_field_type_name((fl_field_type)t), &back) == 0);
        EXPECT(back == (fl_field_type)t);
    }
    for (int d = FL_DTYPE_U8; d <= FL_DTYPE_F64; d++) {
        fl_dtype back;
        CHECK(fl_dtype_from_name(fl_dtype_name((fl_dtype)d), &back) == 0);
        EXPECT(back == (fl_dtype)d);
    }
    fl_field_type t;
    fl_dtype d;
    EXPECT(fl_field_type_from_name("tensor", &t) == -1);
    EXPECT(fl_dtype_from_name("uint32", &d) == -1);
    EXPECT_STR(fl_field_type_name(FL_FIELD_INT_LIST), "int_list");
    EXPECT_STR(fl_dtype_name(FL_DTYPE_F16), "float16");
    EXPECT(fl_dtype_size(FL_DTYPE_I64) == 8 && fl_dtype_size(FL_DTYPE_U16) == 2);
    EXPECT(fl_dtype_size((fl_dtype)42) == 0);
    EXPECT_STR(fl_field_type_name((fl_field_type)99), "unknown");
}

static void test_schema(void)
{
    fl_error e;
    CHECK_OK(fl_fields_validate(F, NF, &e), &e);
    EXPECT(fl_fields_label_index(F, NF) == F_LABEL);
    EXPECT(fl_fields_image_index(F, NF) == F_IMAGE);
    EXPECT(fl_fields_find(F, NF, "caption") == F_TEXT);
    EXPECT(fl_fields_find(F, NF, "nope") == -1);
    EXPECT(!fl_field_in_block(F, NF, F_IMAGE) && !fl_field_in_block(F, NF, F_LABEL));
    EXPECT(fl_field_in_block(F, NF, F_EXTRA_INT) && fl_field_in_block(F, NF, F_BOXES));
    EXPECT(!fl_fields_is_classic(F, NF));
    fl_field c[2];
    fl_fields_classic(c);
    EXPECT(fl_fields_is_classic(c, 2));
    CHECK_OK(fl_fields_validate(c, 2, &e), &e);
    fl_field renamed[2] = {c[0], c[1]};
    strcpy(renamed[1].name, "cls");
    EXPECT(!fl_fields_is_classic(renamed, 2)); /* a renamed label keeps its name: version 3 */
    /* fixed part: label-less int, 4-byte float, 5 floats, plus one length word per block field */
    EXPECT(fl_fields_min_block(F, NF) == 12 * 4 + 4 + 4 + 20);
    EXPECT(fl_field_ndarray_bytes(&F[F_ARR]) == 48);

    fl_field g[NF];
#define BAD(stmt, field, why)                                                                      \
    do {                                                                                           \
        memcpy(g, F, sizeof g);                                                                    \
        stmt;                                                                                      \
        int rc_ = fl_fields_validate(g, NF, &e);                                                   \
        EXPECTF(rc_ == FL_E_INVALID, "%s: validate returned %d", #stmt, rc_);                      \
        EXPECTF(strstr(e.msg, field) && strstr(e.msg, why), "%s: message '%s'", #stmt, e.msg);     \
    } while (0)
    BAD(strcpy(g[F_TEXT].name, "2cap"), "2cap", "bad name");
    BAD(strcpy(g[F_TEXT].name, "cap tion"), "cap tion", "bad name");
    BAD(g[F_TEXT].name[0] = 0, "field 10", "bad name");
    BAD(strcpy(g[F_TEXT].name, "boxes"), "boxes", "declared twice");
    BAD(g[F_TEXT].type = (fl_field_type)11, "caption", "unknown type");
    BAD(g[F_BOXES].dtype = FL_DTYPE_F64, "boxes", "wrong dtype");
    BAD(g[F_MASK].dtype = FL_DTYPE_I32, "mask", "uint8 or uint16");
    BAD(g[F_MASK].codec = 0, "mask", "codec");
    BAD(g[F_SCORE].codec = FL_MASK_PNG, "score", "codec");
    BAD(g[F_EMB].ndim = 0, "embedding", "shape");
    BAD(g[F_EMB].shape[0] = 0, "embedding", "size 0");
    BAD(g[F_ARR].ndim = 5, "depth", "dimensions");
    BAD(g[F_ARR].shape[3] = 2, "depth", "more entries");
    BAD(g[F_ARR].dtype = (fl_dtype)0, "depth", "dtype");
    BAD((g[F_ARR].ndim = 4, g[F_ARR].shape[3] = 1u << 26), "depth", "2^28");
    BAD(g[F_SCORE].max_count = 3, "score", "max_count");
    BAD(g[F_CLS].of = F_TEXT, "labels", "boxes field");
    BAD(g[F_CLS].of = NF, "labels", "boxes field");
    BAD(g[F_MASK].of = -1, "mask", "image field");
    BAD(g[F_SCORE].of = 0, "score", "-1");
    BAD(g[F_TEXT] = tt_field("img2", FL_FIELD_IMAGE), "img2", "second image");
    BAD(g[F_IMAGE] = tt_field("picture", FL_FIELD_BYTES), "boxes", "need an image");
#undef BAD
    EXPECT(fl_fields_validate(F, 0, &e) == FL_E_INVALID);
    fl_field many[FL_MAX_FIELDS + 1];
    for (int i = 0; i <= FL_MAX_FIELDS; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "f%d", i);
        many[i] = tt_field(nm, FL_FIELD_FLOAT);
    }
    EXPECT(fl_fields_validate(many, FL_MAX_FIELDS, &e) == 0);
    EXPECT(fl_fields_validate(many, FL_MAX_FIELDS + 1, &e) == FL_E_INVALID);
}

static void test_roundtrip(void)
{
    rec r;
    values(&r);
    uint8_t *out = NULL;
    size_t cap = 0, len = 0;
    fl_error e;
    CHECK_OK(encode(r.v, &out, &cap, &len, &e), &e);
    fl_field_value got[NF];
    CHECK_OK(fl_fields_parse(F, NF, out, len, got, "rec 0", &e), &e);
    CHECK_OK(fl_fields_check_record(F, NF, got, 40, 30, "rec 0", &e), &e);
    EXPECT(got[F_IMAGE].data == NULL && got[F_LABEL].data == NULL);
    for (int i = 0; i < NF; i++) {
        if (i == F_IMAGE || i == F_LABEL || i == F_ARR)
            continue;
        EXPECTF(got[i].len == r.v[i].len && memcmp(got[i].data, r.v[i].data, got[i].len) == 0,
                "field %s differs", F[i].name);
        EXPECTF(got[i].count == r.v[i].count, "field %s: count %u, want %u", F[i].name,
                got[i].count, r.v[i].count);
    }
    EXPECT(got[F_MASK].height == 30 && got[F_MASK].width == 40);
    EXPECT(got[F_ZMASK].height == 0); /* a zstd mask's size comes from the record */
    uint16_t back[24];
    size_t dn = ZSTD_decompress(back, sizeof back, got[F_ARR].data, got[F_ARR].len);
    EXPECT(dn == sizeof back && memcmp(back, r.arr, sizeof back) == 0);
    EXPECT(got[F_ARR].count == 24);
    /* the block is exactly [u32 len, bytes] per block field, schema order */
    uint32_t l0;
    memcpy(&l0, out, 4);
    EXPECT(l0 == sizeof r.boxes && memcmp(out + 4, r.boxes, sizeof r.boxes) == 0);

    /* empty variable fields */
    r.v[F_BOXES].len = r.v[F_CLS].len = r.v[F_CROWD].len = 0;
    r.v[F_BOXES].count = r.v[F_CLS].count = r.v[F_CROWD].count = 0;
    r.v[F_BLOB] = (fl_field_value){NULL, 0, 0, 0, 0};
    r.v[F_TEXT].len = r.v[F_TEXT].count = 0;
    CHECK_OK(encode(r.v, &out, &cap, &len, &e), &e);
    CHECK_OK(fl_fields_parse(F, NF, out, len, got, "rec 1", &e), &e);
    EXPECT(got[F_BOXES].count == 0 && got[F_TEXT].count == 0 && got[F_BLOB].len == 0);

    /* max_count bounds what a reader accepts */
    fl_field g[NF];
    memcpy(g, F, sizeof g);
    values(&r);
    CHECK_OK(encode(r.v, &out, &cap, &len, &e), &e);
    g[F_BOXES].max_count = g[F_CLS].max_count = g[F_CROWD].max_count = 2;
    int rc = fl_fields_parse(g, NF, out, len, got, "shard-00000.fls: record 5", &e);
    EXPECT(rc == FL_E_FORMAT && strstr(e.msg, "record 5") && strstr(e.msg, "max_count"));
    g[F_BOXES].max_count = g[F_CLS].max_count = g[F_CROWD].max_count = 3;
    EXPECT(fl_fields_parse(g, NF, out, len, got, "r", &e) == 0);
    free(out);
}

static void test_refusals(void)
{
    rec r;
    float nan = nanf("");
#define WITH(stmt, field, why)                                                                     \
    do {                                                                                           \
        values(&r);                                                                                \
        stmt;                                                                                      \
        refuse(&r, field, why);                                                                    \
    } while (0)
    WITH(r.boxes[1][2] = 40.5f, "boxes", "outside the 40x30 image");
    WITH(r.boxes[1][3] = 31, "boxes", "outside");
    WITH(r.boxes[0][0] = -1, "boxes", "left of or above");
    WITH((r.boxes[0][0] = 9, r.boxes[0][2] = 8), "boxes", "x1 < x0");
    WITH(r.boxes[2][3] = 19, "boxes", "y1 < y0");
    WITH(r.boxes[2][1] = nan, "boxes", "not finite");
    WITH(r.boxes[2][1] = INFINITY, "boxes", "not finite");
    WITH(r.score = nan, "score", "finite");
    WITH(r.emb[4] = -INFINITY, "embedding", "finite");
    WITH(r.v[F_BOXES].count = 2, "boxes", "count");
    WITH(r.v[F_BOXES].len = 20, "boxes", "whole number");
    WITH((r.v[F_CLS].len = 8, r.v[F_CLS].count = 2), "labels", "2 values for the 3 boxes");
    WITH((r.v[F_CROWD].len = 16, r.v[F_CROWD].count = 4), "iscrowd", "4 values for the 3 boxes");
    WITH(r.v[F_SCORE].len = 8, "score", "wrong length");
    WITH(r.v[F_EMB].len = 16, "embedding", "wrong length");
    WITH(r.v[F_EXTRA_INT].len = 0, "year", "wrong length");
    WITH(r.v[F_ARR].len = 46, "depth", "need 48");
    WITH(r.v[F_MASK].height = 31, "mask", "size differs");
    WITH((png_header(r.png, 41, 30, 8), r.v[F_MASK].width = 41), "mask", "41x30 mask for a 40x30");
    WITH(png_header(r.png, 40, 30, 16), "mask", "16-bit");
    WITH(r.png[25] = 2, "mask", "grayscale");
    WITH(r.png[1] = 'X', "mask", "not a PNG");
    WITH(r.v[F_ZMASK].height = 29, "instances", "size differs");
    WITH((r.v[F_ZMASK].height = 20, r.v[F_ZMASK].width = 60), "instances", "for a 40x30 image");
    WITH(r.zmask[0] ^= 0xff, "instances", "zstd");
    /* mask bombs: a 20,000 x 20,000 PNG header, a zstd frame claiming 2^30 elements */
    WITH((png_header(r.png, 20000, 20000, 8), r.v[F_MASK].width = r.v[F_MASK].height = 20000),
         "mask", "100 megapixels");
    WITH((memcpy(r.zmask, "\x28\xb5\x2f\xfd\xe0\x00\x00\x00\x40\x00\x00\x00\x00\x03\x00\x10\x00",
                 17),
          r.v[F_ZMASK].len = 17),
         "instances", "100 megapixels");
    WITH(r.text[3] = (char)0xc3, "caption", "UTF-8"); /* truncated sequence */
    WITH((r.text[0] = (char)0xc0, r.text[1] = (char)0xaf), "caption", "UTF-8"); /* overlong */
    WITH((r.text[0] = (char)0xed, r.text[1] = (char)0xa0, r.text[2] = (char)0x80), "caption",
         "UTF-8"); /* a surrogate */
    WITH(r.v[F_TEXT].count = 3, "caption", "count");
    WITH(r.v[F_BLOB].data = NULL, "blob", "no data");
#undef WITH
}

/* parse: every prefix of a good block, every forged length word, trailing bytes. */
static void test_parse_damage(void)
{
    rec r;
    values(&r);
    uint8_t *out = NULL;
    size_t cap = 0, len = 0;
    fl_error e;
    CHECK_OK(encode(r.v, &out, &cap, &len, &e), &e);
    fl_field_value got[NF];
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1); /* exact size: ASan sees any read past the end */
        memcpy(cut, out, n);
        int rc = fl_fields_parse(F, NF, cut, n, got, "shard-00002.fls: record 9", &e);
        EXPECTF(rc == FL_E_FORMAT && strstr(e.msg, "record 9"), "prefix %zu: rc %d (%s)", n, rc,
                e.msg);
        free(cut);
    }
    uint8_t *big = malloc(len + 1);
    memcpy(big, out, len);
    big[len] = 0;
    int rc = fl_fields_parse(F, NF, big, len + 1, got, "record 3", &e);
    EXPECT(rc == FL_E_FORMAT && strstr(e.msg, "past its last field"));
    free(big);
    /* each length word: too long, too short, huge */
    size_t pos = 0;
    for (int i = 0; i < NF; i++) {
        if (!fl_field_in_block(F, NF, (uint32_t)i))
            continue;
        uint32_t l;
        memcpy(&l, out + pos, 4);
        const uint32_t forged[] = {l + 1, l ? l - 1 : 1, 0xffffffffu, (uint32_t)(len - pos)};
        for (size_t k = 0; k < sizeof forged / sizeof forged[0]; k++) {
            uint8_t *b = malloc(len);
            memcpy(b, out, len);
            memcpy(b + pos, &forged[k], 4);
            rc = fl_fields_parse(F, NF, b, len, got, "record 4", &e);
            EXPECTF(rc == FL_E_FORMAT, "field %s length %u: rc %d", F[i].name, forged[k], rc);
            free(b);
        }
        pos += 4 + l;
    }
    /* a NaN patched into the score, a lone continuation byte into the text */
    pos = 0;
    for (int i = 0; i < NF; i++) {
        if (!fl_field_in_block(F, NF, (uint32_t)i))
            continue;
        uint32_t l;
        memcpy(&l, out + pos, 4);
        if (i == F_SCORE || i == F_TEXT || i == F_BOXES) {
            uint8_t *b = malloc(len);
            memcpy(b, out, len);
            if (i == F_TEXT)
                b[pos + 4] = 0x80;
            else {
                float nan = nanf("");
                memcpy(b + pos + 4 + (i == F_BOXES ? 8 : 0), &nan, 4);
            }
            rc = fl_fields_parse(F, NF, b, len, got, "record 6", &e);
            EXPECTF(rc == FL_E_FORMAT && strstr(e.msg, F[i].name), "%s: rc %d (%s)", F[i].name, rc,
                    e.msg);
            free(b);
        }
        pos += 4 + l;
    }
    /* a box past the image is caught against the record's size */
    CHECK_OK(fl_fields_parse(F, NF, out, len, got, "record 7", &e), &e);
    rc = fl_fields_check_record(F, NF, got, 39, 30, "record 7", &e);
    EXPECT(rc == FL_E_INVALID && strstr(e.msg, "boxes") && strstr(e.msg, "record 7"));
    rc = fl_fields_check_record(F, NF, got, 40, 29, "record 7", &e);
    EXPECT(rc == FL_E_INVALID);
    /* the schema without the image field: no block at all parses as empty values */
    fl_field only[2] = {tt_field("x", FL_FIELD_INT), tt_field("y", FL_FIELD_FLOAT)};
    float y = 2.5f;
    fl_field_value ov[2] = {{NULL, 0, 0, 0, 0}, {&y, 4, 1, 0, 0}};
    CHECK_OK(fl_fields_encode(only, 2, ov, 0, 0, 1, &out, &cap, &len, &e), &e);
    EXPECT(len == 8);
    CHECK_OK(fl_fields_parse(only, 2, out, len, ov, "r", &e), &e);
    EXPECT(ov[1].len == 4 && ov[0].data == NULL);
    free(out);
}

int main(void)
{
    schema(F);
    test_names();
    test_schema();
    test_roundtrip();
    test_refusals();
    test_parse_damage();
    return fl_check_status();
}
