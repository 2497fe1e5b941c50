/* test_loader_fields.c — the loader delivers every field of a format-version-3 data set (written
 * here with fl_writer_add_record: image, label, boxes, int lists aligned to the boxes and not,
 * uint8 PNG and uint16 zstd masks, float, float vector, ndarray, bytes, text, a second int):
 *   - with no augmentation every field equals what was written, record by record;
 *   - RRC + flip, every io mode (io_uring, pread, memory, mmap, LMDB) and 1 or 3 workers give
 *     identical batches (every field and count hashed);
 *   - over 3 epochs of RRC + flip every box wholly inside its crop equals the extent of its
 *     object in the delivered mask within 1 px, a cut box holds its visible mask, the aligned
 *     lists follow their boxes, masks hold only ids that were written, padding rows are zeros;
 *   - a loader resumed mid-epoch delivers what the uninterrupted one did;
 *   - the object crop keeps at least one box of every sample that has boxes (box_min_visible 0);
 *   - a data set without images delivers its fields;
 *   - on_corrupt skip replaces a record with a damaged fields block, every field included;
 *   - one changed box changes the stream's hash. */
#define _GNU_SOURCE /* asprintf */
#include <math.h>
#include <string.h>

#include "fixture.h"
#include "fl_fields.h"
#include "fl_image.h"

enum {
    F_IMAGE,
    F_LABEL,
    F_BOXES,
    F_CLS,
    F_CROWD,
    F_TAGS,
    F_MASK,
    F_SCORE,
    F_EMB,
    F_ARR,
    F_BLOB,
    F_TEXT,
    F_EXTRA,
    F_MASK16,
    NF
};
#define N      37
#define IH     40
#define IW     48
#define MAXOBJ 4

static void schema(fl_field *f)
{
    memset(f, 0, NF * sizeof *f);
    static const struct {
        const char *name;
        fl_field_type t;
        fl_dtype d;
    } S[NF] = {
        {"image", FL_FIELD_IMAGE, FL_DTYPE_U8},       {"label", FL_FIELD_INT, FL_DTYPE_I32},
        {"boxes", FL_FIELD_BOXES, FL_DTYPE_F32},      {"labels", FL_FIELD_INT_LIST, FL_DTYPE_I32},
        {"iscrowd", FL_FIELD_INT_LIST, FL_DTYPE_I32}, {"tags", FL_FIELD_INT_LIST, FL_DTYPE_I32},
        {"mask", FL_FIELD_MASK, FL_DTYPE_U8},         {"score", FL_FIELD_FLOAT, FL_DTYPE_F32},
        {"emb", FL_FIELD_FLOAT_VECTOR, FL_DTYPE_F32}, {"arr", FL_FIELD_NDARRAY, FL_DTYPE_I16},
        {"blob", FL_FIELD_BYTES, FL_DTYPE_U8},        {"caption", FL_FIELD_TEXT, FL_DTYPE_U8},
        {"extra", FL_FIELD_INT, FL_DTYPE_I32},        {"mask16", FL_FIELD_MASK, FL_DTYPE_U16}};
    for (int i = 0; i < NF; i++) {
        snprintf(f[i].name, sizeof f[i].name, "%s", S[i].name);
        f[i].type = S[i].t;
        f[i].dtype = S[i].d;
        f[i].of = -1;
    }
    f[F_CLS].of = F_BOXES;
    f[F_CROWD].of = F_BOXES;
    f[F_MASK].of = F_IMAGE;
    f[F_MASK].codec = FL_MASK_PNG;
    f[F_MASK16].of = F_IMAGE;
    f[F_MASK16].codec = FL_MASK_ZSTD;
    f[F_EMB].ndim = 1;
    f[F_EMB].shape[0] = 3;
    f[F_ARR].ndim = 2;
    f[F_ARR].shape[0] = 2;
    f[F_ARR].shape[1] = 3;
}

/* Record i's content: nobj rectangles (object j: id j + 1 in the u8 mask, 1000 + j in the u16
 * one; class (i + j) % 5; iscrowd 100 + j), disjoint (one per quadrant). */
typedef struct rec {
    uint32_t nobj;
    float boxes[MAXOBJ * 4];
    int32_t cls[MAXOBJ], crowd[MAXOBJ];
    int32_t tags[3];
    uint32_t ntags;
    uint8_t mask[IH * IW];
    uint16_t mask16[IH * IW];
    float score, emb[3];
    int16_t arr[6];
    char blob[8], text[16];
    uint32_t nblob;
    int32_t extra;
} rec;

static void make_rec(uint64_t i, rec *r, int bump)
{
    memset(r, 0, sizeof *r);
    r->nobj = (uint32_t)(i % (MAXOBJ + 1));
    for (uint32_t j = 0; j < r->nobj; j++) {
        uint32_t qx = (j % 2) * (IW / 2), qy = (j / 2) * (IH / 2);
        uint32_t w = 4 + (uint32_t)((i * 7 + j * 3) % 16), h = 4 + (uint32_t)((i * 5 + j) % 14);
        uint32_t x0 = qx + 1 + (uint32_t)((i + j) % (IW / 2 - w - 1));
        uint32_t y0 = qy + 1 + (uint32_t)((i * 3 + j) % (IH / 2 - h - 1));
        for (uint32_t y = y0; y < y0 + h; y++)
            for (uint32_t x = x0; x < x0 + w; x++) {
                r->mask[y * IW + x] = (uint8_t)(j + 1);
                r->mask16[y * IW + x] = (uint16_t)(1000 + j);
            }
        r->boxes[4 * j] = (float)x0 + (bump && j == 0 ? 0.5f : 0);
        r->boxes[4 * j + 1] = (float)y0;
        r->boxes[4 * j + 2] = (float)(x0 + w);
        r->boxes[4 * j + 3] = (float)(y0 + h);
        r->cls[j] = (int32_t)((i + j) % 5);
        r->crowd[j] = (int32_t)(100 + j);
    }
    r->ntags = (uint32_t)(i % 4);
    for (uint32_t t = 0; t < r->ntags; t++)
        r->tags[t] = (int32_t)(i * 10 + t);
    r->score = (float)i * 0.25f - 3;
    for (int k = 0; k < 3; k++)
        r->emb[k] = (float)(i + k) / 7.0f;
    for (int k = 0; k < 6; k++)
        r->arr[k] = (int16_t)(i * 100 - k * 33);
    r->nblob = (uint32_t)(i % 9);
    for (uint32_t k = 0; k < r->nblob; k++)
        r->blob[k] = (char)(i + k * 17);
    snprintf(r->text, sizeof r->text, "rec %llu", (unsigned long long)i);
    r->extra = -(int32_t)i;
}

static char *make_set(const char *dir, const char *name, fl_backend backend, int bump)
{
    char *path;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        exit(1);
    fl_field f[NF];
    schema(f);
    fl_writer_options wo;
    memset(&wo, 0, sizeof wo);
    wo.backend = backend;
    wo.schema.encoding = FL_ENC_RAW;
    wo.schema.compression = FL_COMP_ZSTD;
    wo.schema.channels = 3;
    wo.schema.height = IH;
    wo.schema.width = IW;
    wo.zstd_level = 3;
    wo.shard_bytes = 16384; /* several shards */
    wo.tool_version = "test";
    wo.fields = f;
    wo.num_fields = NF;
    fl_writer *w;
    fl_error err;
    int rc = fl_writer_open(path, &wo, &w, &err);
    if (rc == FL_E_UNSUPPORTED && backend == FL_BACKEND_LMDB) {
        printf("LMDB not in this build: skipped\n");
        free(path);
        return NULL;
    }
    CHECK_OK(rc, &err);
    uint8_t *px = malloc(IH * IW * 3), *blk = NULL, *m8 = NULL, *m16 = NULL;
    size_t bcap = 0, blen = 0, c8 = 0, l8 = 0, c16 = 0, l16 = 0;
    rec r;
    for (uint64_t i = 0; i < N; i++) {
        make_rec(i, &r, bump && i == 6);
        fx_fill(i, IH, IW, 3, px);
        CHECK_OK(fl_mask_encode(r.mask, IW, IH, FL_DTYPE_U8, FL_MASK_PNG, 0, &m8, &c8, &l8, &err),
                 &err);
        CHECK_OK(
            fl_mask_encode(r.mask16, IW, IH, FL_DTYPE_U16, FL_MASK_ZSTD, 0, &m16, &c16, &l16, &err),
            &err);
        fl_field_value v[NF];
        memset(v, 0, sizeof v);
        v[F_BOXES] = (fl_field_value){r.boxes, 16 * (size_t)r.nobj, r.nobj, 0, 0};
        v[F_CLS] = (fl_field_value){r.cls, 4 * (size_t)r.nobj, r.nobj, 0, 0};
        v[F_CROWD] = (fl_field_value){r.crowd, 4 * (size_t)r.nobj, r.nobj, 0, 0};
        v[F_TAGS] = (fl_field_value){r.tags, 4 * (size_t)r.ntags, r.ntags, 0, 0};
        v[F_MASK] = (fl_field_value){m8, l8, 1, IH, IW};
        v[F_MASK16] = (fl_field_value){m16, l16, 1, IH, IW};
        v[F_SCORE] = (fl_field_value){&r.score, 4, 1, 0, 0};
        v[F_EMB] = (fl_field_value){r.emb, 12, 3, 0, 0};
        v[F_ARR] = (fl_field_value){r.arr, 12, 1, 0, 0};
        v[F_BLOB] = (fl_field_value){r.blob, r.nblob, r.nblob, 0, 0};
        v[F_TEXT] = (fl_field_value){r.text, strlen(r.text), (uint32_t)strlen(r.text), 0, 0};
        v[F_EXTRA] = (fl_field_value){&r.extra, 4, 1, 0, 0};
        CHECK_OK(fl_fields_encode(f, NF, v, IW, IH, 3, &blk, &bcap, &blen, &err), &err);
        char nm[32];
        snprintf(nm, sizeof nm, "r%03llu", (unsigned long long)i);
        fl_record_in in = {.format = FL_ENC_RAW,
                           .stored = px,
                           .stored_len = IH * IW * 3,
                           .raw_len = IH * IW * 3,
                           .compressed = 0,
                           .fields_block = blk,
                           .fields_len = blen,
                           .label = (int32_t)(i % 3),
                           .name = nm,
                           .height = IH,
                           .width = IW};
        CHECK_OK(fl_writer_add_record(w, &in, &err), &err);
    }
    const char *names[] = {"a", "b", "c"};
    CHECK_OK(fl_writer_finish(w, names, 3, &err), &err);
    free(px);
    free(blk);
    free(m8);
    free(m16);
    return path;
}

static const fl_batch_field *field(const fl_batch *b, const char *name)
{
    for (uint32_t i = 0; i < b->num_fields; i++)
        if (!strcmp(b->fields[i].name, name))
            return &b->fields[i];
    fprintf(stderr, "no field %s in the batch\n", name);
    exit(1);
}

static size_t per_sample(const fl_batch_field *f) { return f->bytes / f->shape[0]; }

/* Every field, and counts, of every sample: FNV over the batch's arrays. */
static uint64_t batch_hash(const fl_batch *b)
{
    uint64_t h = fx_batch_hash(b);
    for (uint32_t i = 0; i < b->num_fields; i++) {
        const fl_batch_field *f = &b->fields[i];
        h = fx_hash(h, f->data, f->bytes);
        if (f->counts)
            h = fx_hash(h, f->counts, 4 * (size_t)b->size);
    }
    return h;
}

static uint64_t stream(const char *path, const fl_loader_options *o, uint32_t nb, uint64_t *each)
{
    return fx_stream_hash_by(path, o, nb, each, batch_hash);
}

static void exactness(const char *path)
{
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 8;
    o.order = FL_ORDER_SEQUENTIAL;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    uint8_t px[IH * IW * 3];
    rec r;
    uint32_t seen = 0;
    for (int bi = 0; bi < 5; bi++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        CHECK(b->num_fields == NF && !strcmp(b->fields[F_BOXES].name, "boxes"));
        const fl_batch_field *bx = field(b, "boxes"), *cl = field(b, "labels"),
                             *cr = field(b, "iscrowd"), *tg = field(b, "tags"),
                             *mk = field(b, "mask"), *m16 = field(b, "mask16"),
                             *sc = field(b, "score"), *em = field(b, "emb"), *ar = field(b, "arr"),
                             *bl = field(b, "blob"), *tx = field(b, "caption"),
                             *ex = field(b, "extra");
        CHECK(bx->ndim == 3 && bx->shape[1] == MAXOBJ && bx->shape[2] == 4 && bx->counts);
        CHECK(mk->ndim == 3 && mk->shape[1] == IH && mk->shape[2] == IW &&
              mk->dtype == FL_DTYPE_U8);
        CHECK(m16->dtype == FL_DTYPE_U16 && ar->ndim == 3 && ar->shape[1] == 2 &&
              ar->shape[2] == 3);
        CHECK(b->fields[F_IMAGE].data == (void *)b->images &&
              b->fields[F_LABEL].data == (void *)b->labels);
        for (uint32_t k = 0; k < b->size; k++) {
            uint64_t i = b->indices[k];
            make_rec(i, &r, 0);
            fx_fill(i, IH, IW, 3, px);
            EXPECTF(!memcmp(b->images + (size_t)k * sizeof px, px, sizeof px), "record %llu: image",
                    (unsigned long long)i);
            EXPECT(b->labels[k] == (int32_t)(i % 3));
            EXPECTF(bx->counts[k] == (int32_t)r.nobj && cl->counts[k] == (int32_t)r.nobj &&
                        cr->counts[k] == (int32_t)r.nobj,
                    "record %llu: %d boxes, wrote %u", (unsigned long long)i, bx->counts[k],
                    r.nobj);
            const float *B = (const float *)((const uint8_t *)bx->data + k * per_sample(bx));
            EXPECTF(!memcmp(B, r.boxes, 16 * (size_t)r.nobj), "record %llu: boxes",
                    (unsigned long long)i);
            for (size_t z = 4 * (size_t)r.nobj; z < 4 * MAXOBJ; z++)
                EXPECT(B[z] == 0);
            EXPECT(
                !memcmp((const uint8_t *)cl->data + k * per_sample(cl), r.cls, 4 * (size_t)r.nobj));
            EXPECT(!memcmp((const uint8_t *)cr->data + k * per_sample(cr), r.crowd,
                           4 * (size_t)r.nobj));
            EXPECT(tg->counts[k] == (int32_t)r.ntags &&
                   !memcmp((const uint8_t *)tg->data + k * per_sample(tg), r.tags,
                           4 * (size_t)r.ntags));
            EXPECTF(!memcmp((const uint8_t *)mk->data + k * per_sample(mk), r.mask, sizeof r.mask),
                    "record %llu: mask", (unsigned long long)i);
            EXPECT(!memcmp((const uint8_t *)m16->data + k * per_sample(m16), r.mask16,
                           sizeof r.mask16));
            EXPECT(!memcmp((const uint8_t *)sc->data + k * 4, &r.score, 4));
            EXPECT(!memcmp((const uint8_t *)em->data + k * 12, r.emb, 12));
            EXPECT(!memcmp((const uint8_t *)ar->data + k * 12, r.arr, 12));
            EXPECT(bl->counts[k] == (int32_t)r.nblob &&
                   !memcmp((const uint8_t *)bl->data + k * per_sample(bl), r.blob, r.nblob));
            EXPECT(tx->counts[k] == (int32_t)strlen(r.text) &&
                   !memcmp((const uint8_t *)tx->data + k * per_sample(tx), r.text, strlen(r.text)));
            EXPECT(!memcmp((const uint8_t *)ex->data + k * 4, &r.extra, 4));
            seen++;
        }
        fl_loader_release(L, b);
    }
    EXPECT(seen == 40);
    fl_loader_close(L);
}

static void aug_options(fl_loader_options *o)
{
    fx_options(o);
    o->batch_size = 8;
    o->order = FL_ORDER_RANDOM;
    o->augment = FL_AUG_RRC;
    o->scale_min = 0.3f;
    o->flip = 1;
    o->out_height = 32;
    o->out_width = 36;
    o->seed = 11;
}

static void io_modes(const char *path, const char *lmdb)
{
    fl_loader_options o;
    aug_options(&o);
    uint64_t ref = 0;
    const fl_io_mode modes[] = {FL_IO_PREAD, FL_IO_URING, FL_IO_MEMORY, FL_IO_MMAP};
    for (int m = 0; m < 4; m++)
        for (uint32_t wk = 1; wk <= 3; wk += 2) {
            o.io = modes[m];
            o.workers = wk;
            uint64_t h = stream(path, &o, 12, NULL);
            if (!h)
                continue; /* no io_uring here */
            if (!ref)
                ref = h;
            EXPECTF(h == ref, "io mode %d, %u workers: another stream", (int)modes[m], wk);
        }
    /* quasi order read as coalesced extents against per-record reads of the same order */
    o.order = FL_ORDER_QUASI;
    o.quasi_block = 4;
    o.quasi_window = 2;
    o.io = FL_IO_PREAD;
    uint64_t q = stream(path, &o, 12, NULL);
    o.io = FL_IO_URING;
    uint64_t qu = stream(path, &o, 12, NULL);
    EXPECT(!qu || qu == q);
    if (lmdb) {
        o.order = FL_ORDER_RANDOM;
        o.io = FL_IO_AUTO;
        for (uint32_t wk = 1; wk <= 3; wk += 2) {
            o.workers = wk;
            EXPECTF(stream(lmdb, &o, 12, NULL) == ref, "LMDB, %u workers: another stream", wk);
        }
    }
}

static int extent(const uint8_t *m, uint32_t ow, uint32_t oh, uint32_t id, int e[4])
{
    e[0] = (int)ow, e[1] = (int)oh, e[2] = e[3] = 0;
    int any = 0;
    for (uint32_t v = 0; v < oh; v++)
        for (uint32_t u = 0; u < ow; u++)
            if (m[v * ow + u] == id) {
                any = 1;
                e[0] = (int)u < e[0] ? (int)u : e[0];
                e[1] = (int)v < e[1] ? (int)v : e[1];
                e[2] = (int)u + 1 > e[2] ? (int)u + 1 : e[2];
                e[3] = (int)v + 1 > e[3] ? (int)v + 1 : e[3];
            }
    return any;
}

static void consistency(const char *path)
{
    fl_loader_options o;
    aug_options(&o);
    o.workers = 2;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    uint32_t ow = 36, oh = 32, inside = 0, cut = 0, dropped = 0;
    rec r;
    for (uint64_t bi = 0; bi < 3 * fl_loader_batches_per_epoch(L); bi++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        const fl_batch_field *bx = field(b, "boxes"), *cl = field(b, "labels"),
                             *cr = field(b, "iscrowd"), *mk = field(b, "mask"),
                             *m16 = field(b, "mask16");
        for (uint32_t k = 0; k < b->size; k++) {
            make_rec(b->indices[k], &r, 0);
            const uint8_t *M = (const uint8_t *)mk->data + k * per_sample(mk);
            const uint16_t *M16 =
                (const uint16_t *)((const uint8_t *)m16->data + k * per_sample(m16));
            for (uint32_t p = 0; p < ow * oh; p++) {
                EXPECT(M[p] <= r.nobj);
                EXPECT(M16[p] == (M[p] ? 999 + M[p] : 0)); /* the two masks moved alike */
            }
            int32_t n = bx->counts[k];
            EXPECT(n >= 0 && n <= (int32_t)r.nobj && cl->counts[k] == n && cr->counts[k] == n);
            dropped += r.nobj - (uint32_t)n;
            const float *B = (const float *)((const uint8_t *)bx->data + k * per_sample(bx));
            const int32_t *C = (const int32_t *)((const uint8_t *)cl->data + k * per_sample(cl));
            const int32_t *R = (const int32_t *)((const uint8_t *)cr->data + k * per_sample(cr));
            for (int32_t j = 0; j < n; j++) {
                uint32_t obj = (uint32_t)(R[j] - 100); /* the aligned list names the object */
                CHECK(obj < r.nobj);
                EXPECT(C[j] == r.cls[obj]);
                const float *t = B + 4 * j;
                EXPECT(t[0] >= 0 && t[2] <= ow && t[1] >= 0 && t[3] <= oh && t[0] <= t[2] &&
                       t[1] <= t[3]);
                int e[4];
                int any = extent(M, ow, oh, obj + 1, e);
                int whole = t[0] > 0 && t[1] > 0 && t[2] < ow && t[3] < oh;
                if (whole) {
                    inside++;
                    EXPECTF(any && fabsf(e[0] - t[0]) <= 1 && fabsf(e[1] - t[1]) <= 1 &&
                                fabsf(e[2] - t[2]) <= 1 && fabsf(e[3] - t[3]) <= 1,
                            "record %llu object %u: box (%.2f %.2f %.2f %.2f), mask (%d %d %d %d)",
                            (unsigned long long)b->indices[k], obj, t[0], t[1], t[2], t[3], e[0],
                            e[1], e[2], e[3]);
                } else if (any) {
                    cut++;
                    EXPECT(e[0] >= t[0] - 0.5f && e[1] >= t[1] - 0.5f && e[2] <= t[2] + 0.5f &&
                           e[3] <= t[3] + 0.5f);
                }
            }
            for (int32_t j = n; j < MAXOBJ; j++)
                EXPECT(B[4 * j] == 0 && B[4 * j + 3] == 0 && C[j] == 0 && R[j] == 0);
        }
        fl_loader_release(L, b);
    }
    EXPECTF(inside > 40 && cut > 10 && dropped > 5, "too few cases: %u inside, %u cut, %u dropped",
            inside, cut, dropped);
    fl_loader_close(L);
}

static void resume(const char *path)
{
    fl_loader_options o;
    aug_options(&o);
    uint64_t all[10], tail[6];
    stream(path, &o, 10, all); /* 5 batches an epoch (37 / 8, wrapped) */
    o.start_epoch = 0;
    o.start_batch = 4;
    stream(path, &o, 6, tail);
    for (int i = 0; i < 6; i++)
        EXPECTF(tail[i] == all[4 + i], "resumed batch %d differs", 4 + i);
}

static void object_crop(const char *path)
{
    fl_loader_options o;
    aug_options(&o);
    o.augment = FL_AUG_OBJECT_CROP;
    o.scale_min = 0.1f;
    o.scale_max = 0.5f;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    rec r;
    uint32_t with = 0;
    for (int bi = 0; bi < 15; bi++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        const fl_batch_field *bx = field(b, "boxes");
        for (uint32_t k = 0; k < b->size; k++) {
            make_rec(b->indices[k], &r, 0);
            if (r.nobj) {
                with++;
                EXPECTF(bx->counts[k] >= 1, "record %llu: the object crop kept no box",
                        (unsigned long long)b->indices[k]);
            }
        }
        fl_loader_release(L, b);
    }
    EXPECT(with > 50);
    fl_loader_close(L);
    /* refused without boxes: a classification set */
    fl_loader *L2;
    char *dir = fx_tmpdir("fields-cls");
    fx_spec s = {FL_BACKEND_SHARDS, FL_ENC_RAW, FL_COMP_NONE, 8, 8, 8, 3, 2, 0, 0};
    char *cls = fx_make(dir, "cls", &s);
    EXPECT(fl_loader_create(cls, &o, &L2, &err) == FL_E_INVALID);
    fx_rmrf(dir);
    free(dir);
    free(cls);
}

/* on_corrupt skip: a record whose fields block was damaged on disk is replaced by the next one,
 * all of its fields included. */
static void corrupt_skip(const char *dir)
{
    char *path = make_set(dir, "damaged", FL_BACKEND_SHARDS, 0);
    fl_dataset *ds;
    fl_error err;
    fl_record_info info;
    CHECK_OK(fl_dataset_open(path, &ds, &err), &err);
    CHECK_OK(fl_dataset_record_info(ds, 3, &info, &err), &err);
    char *shard = strdup(fl_dataset_shard_path(ds, info.shard));
    fl_dataset_close(ds);
    FILE *f = fopen(shard, "r+b");
    CHECK(f);
    long at = (long)(info.offset + info.stored_len - 2); /* inside the fields block */
    CHECK(fseek(f, at, SEEK_SET) == 0);
    int c = fgetc(f);
    CHECK(fseek(f, at, SEEK_SET) == 0);
    fputc(c ^ 0x5a, f);
    fclose(f);
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 8;
    o.order = FL_ORDER_SEQUENTIAL;
    o.on_corrupt = FL_CORRUPT_SKIP;
    fl_loader *L;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    fl_batch *b;
    CHECK_OK(fl_loader_next(L, &b, &err), &err);
    EXPECT(b->skipped == 1 && b->indices[3] == 4 && b->indices[4] == 4);
    const fl_batch_field *tx = field(b, "caption"), *bx = field(b, "boxes");
    EXPECT(!memcmp((const uint8_t *)tx->data + 3 * per_sample(tx),
                   (const uint8_t *)tx->data + 4 * per_sample(tx), per_sample(tx)) &&
           tx->counts[3] == tx->counts[4] && bx->counts[3] == bx->counts[4] &&
           !memcmp((const uint8_t *)bx->data + 3 * per_sample(bx),
                   (const uint8_t *)bx->data + 4 * per_sample(bx), per_sample(bx)));
    fl_loader_release(L, b);
    fl_loader_close(L);
    o.on_corrupt = FL_CORRUPT_ERROR;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    EXPECT(fl_loader_next(L, &b, &err) == FL_E_CHECKSUM && strstr(err.msg, "record 3"));
    fl_loader_close(L);
    free(shard);
    free(path);
}

static int32_t label_twice(int i) { return i * 2; }

/* A data set of tensors only (no image): label, float vector, ndarray. */
static void no_image(const char *dir)
{
    char *path;
    if (asprintf(&path, "%s/tensors", dir) < 0)
        exit(1);
    fl_error err;
    CHECK_OK(fx_write_tensor_set(path, "test", label_twice, &err), &err);
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 5;
    o.order = FL_ORDER_SEQUENTIAL;
    fl_loader *L;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    for (int bi = 0; bi < 2; bi++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        CHECK(b->num_fields == 3 && b->height == 0 && b->fields[0].data == (void *)b->labels);
        for (uint32_t k = 0; k < 5; k++) {
            int i = (int)b->indices[k];
            EXPECT(b->labels[k] == i * 2);
            const float *x = (const float *)b->fields[1].data + 5 * k;
            const double *t = (const double *)b->fields[2].data + 4 * k;
            EXPECT(x[0] == (float)(i * 5) && x[4] == (float)(i * 5 + 4));
            EXPECT(t[0] == i && t[3] == i + 1.5);
        }
        fl_loader_release(L, b);
    }
    fl_loader_close(L);
    o.augment = FL_AUG_RRC;
    EXPECT(fl_loader_create(path, &o, &L, &err) == FL_E_INVALID);
    free(path);
}

int main(void)
{
    char *dir = fx_tmpdir("fields");
    char *path = make_set(dir, "set", FL_BACKEND_SHARDS, 0);
    char *lmdb = make_set(dir, "set.lmdb", FL_BACKEND_LMDB, 0);
    exactness(path);
    io_modes(path, lmdb);
    consistency(path);
    resume(path);
    object_crop(path);
    no_image(dir);
    corrupt_skip(dir);
    /* one box moved by half a pixel: another stream */
    char *bumped = make_set(dir, "bumped", FL_BACKEND_SHARDS, 1);
    fl_loader_options o;
    aug_options(&o);
    EXPECT(stream(path, &o, 5, NULL) != stream(bumped, &o, 5, NULL));
    o.augment = FL_AUG_NONE;
    o.flip = 0;
    o.out_height = o.out_width = 0;
    EXPECT(stream(path, &o, 5, NULL) != stream(bumped, &o, 5, NULL));
    fx_rmrf(dir);
    free(dir);
    free(path);
    free(lmdb);
    free(bumped);
    return fl_check_status();
}
