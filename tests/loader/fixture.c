/* fixture.c — dataset fixtures and stream hashing for the loader tests; see fixture.h. */
#define _GNU_SOURCE
#include "fixture.h"

#include <ftw.h>
#include <string.h>
#include <unistd.h>

#include "fl_image.h"

char *fx_tmpdir(const char *tag)
{
    const char *t = getenv("TMPDIR");
    char *p = NULL;
    if (asprintf(&p, "%s/fl-%s-XXXXXX", t && *t ? t : "/tmp", tag) < 0 || !mkdtemp(p)) {
        perror("mkdtemp");
        exit(1);
    }
    return p;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

void fx_rmrf(const char *dir) { nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

void fx_size(const fx_spec *s, uint64_t i, uint32_t *h, uint32_t *w)
{
    if (s->vary_size) {
        *h = s->height + (uint32_t)(i * 7 % 23);
        *w = s->width + (uint32_t)(i * 13 % 31);
    } else {
        *h = s->height;
        *w = s->width;
    }
}

void fx_fill(uint64_t i, uint32_t h, uint32_t w, uint32_t c, uint8_t *px)
{
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t k = 0; k < c; k++)
                px[((size_t)y * w + x) * c + k] = fx_pixel(i, y, x, k);
}

char *fx_make(const char *dir, const char *name, const fx_spec *s)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        exit(1);
    fl_writer_options wo;
    memset(&wo, 0, sizeof wo);
    wo.backend = s->backend;
    wo.schema.encoding = s->encoding;
    wo.schema.compression = s->compression;
    wo.schema.channels = s->channels;
    wo.schema.height = s->vary_size ? 0 : s->height;
    wo.schema.width = s->vary_size ? 0 : s->width;
    wo.zstd_level = 3;
    wo.shard_bytes = s->shard_bytes;
    wo.tool_version = "test";
    fl_writer *w;
    fl_error err;
    int rc = fl_writer_open(path, &wo, &w, &err);
    if (rc == FL_E_UNSUPPORTED && s->backend == FL_BACKEND_LMDB) {
        printf("LMDB backend not available in this build (%s): that part is skipped\n", err.msg);
        free(path);
        return NULL;
    }
    CHECK_OK(rc, &err);
    fl_encoder *enc = NULL;
    if (s->encoding == FL_ENC_JPEG)
        CHECK_OK(fl_encoder_create(&enc, &err), &err);
    uint32_t mh = s->height + 23, mw = s->width + 31;
    uint8_t *px = malloc((size_t)mh * mw * s->channels);
    for (uint64_t i = 0; i < s->n; i++) {
        uint32_t h, wd;
        fx_size(s, i, &h, &wd);
        fx_fill(i, h, wd, s->channels, px);
        char nm[64];
        snprintf(nm, sizeof nm, "rec%06llu", (unsigned long long)i);
        int32_t label = fx_label(i, s->n, s->classes);
        if (s->encoding == FL_ENC_RAW) {
            CHECK_OK(fl_writer_add(w, px, (size_t)h * wd * s->channels, label, nm, h, wd, &err),
                     &err);
        } else {
            fl_image img = {px, wd, h, s->channels, (size_t)wd * s->channels};
            const uint8_t *jpg;
            size_t jlen;
            CHECK_OK(fl_encode_jpeg(enc, &img, 90, &jpg, &jlen, &err), &err);
            CHECK_OK(fl_writer_add(w, jpg, jlen, label, nm, h, wd, &err), &err);
        }
    }
    free(px);
    fl_encoder_free(enc);
    char **names = calloc(s->classes, sizeof *names);
    for (uint32_t c = 0; c < s->classes; c++)
        if (asprintf(&names[c], "class%u", c) < 0)
            exit(1);
    CHECK_OK(fl_writer_finish(w, (const char *const *)names, s->classes, &err), &err);
    for (uint32_t c = 0; c < s->classes; c++)
        free(names[c]);
    free(names);
    return path;
}

uint64_t fx_batch_hash(const fl_batch *b)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = fx_hash(h, b->images, (size_t)b->size * b->height * b->width * b->channels);
    h = fx_hash(h, b->labels, b->size * sizeof *b->labels);
    h = fx_hash(h, b->indices, b->size * sizeof *b->indices);
    h = fx_hash(h, &b->epoch, sizeof b->epoch);
    h = fx_hash(h, &b->batch, sizeof b->batch);
    return h;
}

fl_loader *fx_loader(const char *path, const fl_loader_options *o)
{
    fl_loader *L;
    fl_error err;
    int rc = fl_loader_create(path, o, &L, &err);
    if (rc == FL_E_UNSUPPORTED && o->io == FL_IO_URING) {
        printf("io_uring unavailable here (%s): variant skipped\n", err.msg);
        return NULL;
    }
    CHECK_OK(rc, &err);
    return L;
}

uint64_t fx_stream_hash_by(const char *path, const fl_loader_options *o, uint64_t nb,
                           uint64_t *per_batch, uint64_t (*hash)(const fl_batch *))
{
    fl_loader *L = fx_loader(path, o);
    if (!L)
        return 0;
    fl_error err;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < nb; i++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        uint64_t bh = hash(b);
        if (per_batch)
            per_batch[i] = bh;
        h = fx_hash(h, &bh, sizeof bh);
        fl_loader_release(L, b);
    }
    fl_loader_close(L);
    return h;
}

uint64_t fx_stream_hash(const char *path, const fl_loader_options *o, uint64_t nb,
                        uint64_t *per_batch)
{
    return fx_stream_hash_by(path, o, nb, per_batch, fx_batch_hash);
}

void fx_check_sample(const fl_batch *b, uint32_t k, const fx_spec *s, uint64_t i)
{
    size_t sb = (size_t)s->height * s->width * s->channels;
    uint8_t *want = malloc(sb);
    CHECK(want);
    CHECK(b->indices[k] == i);
    CHECK(b->labels[k] == fx_label(i, s->n, s->classes));
    fx_fill(i, s->height, s->width, s->channels, want);
    CHECK(memcmp(b->images + k * sb, want, sb) == 0);
    free(want);
}

int fx_write_tensor_set(const char *path, const char *tool_version, int32_t (*label)(int i),
                        fl_error *err)
{
    fl_field f[3];
    memset(f, 0, sizeof f);
    snprintf(f[0].name, sizeof f[0].name, "y");
    f[0].type = FL_FIELD_INT, f[0].dtype = FL_DTYPE_I32, f[0].of = -1;
    snprintf(f[1].name, sizeof f[1].name, "x");
    f[1].type = FL_FIELD_FLOAT_VECTOR, f[1].dtype = FL_DTYPE_F32, f[1].of = -1;
    f[1].ndim = 1, f[1].shape[0] = 5;
    snprintf(f[2].name, sizeof f[2].name, "t");
    f[2].type = FL_FIELD_NDARRAY, f[2].dtype = FL_DTYPE_F64, f[2].of = -1;
    f[2].ndim = 1, f[2].shape[0] = 4;
    fl_writer_options wo;
    memset(&wo, 0, sizeof wo);
    wo.backend = FL_BACKEND_SHARDS;
    wo.schema.encoding = FL_ENC_NONE;
    wo.schema.compression = FL_COMP_NONE;
    wo.tool_version = tool_version;
    wo.fields = f;
    wo.num_fields = 3;
    fl_writer *w;
    int rc = fl_writer_open(path, &wo, &w, err);
    if (rc)
        return rc;
    uint8_t *blk = NULL;
    size_t cap = 0, len = 0;
    for (int i = 0; i < 10 && rc == 0; i++) {
        float x[5];
        double t[4];
        for (int k = 0; k < 5; k++)
            x[k] = (float)(i * 5 + k);
        for (int k = 0; k < 4; k++)
            t[k] = i + k * 0.5;
        fl_field_value v[3] = {{0}, {x, sizeof x, 5, 0, 0}, {t, sizeof t, 1, 0, 0}};
        rc = fl_fields_encode(f, 3, v, 0, 0, 3, &blk, &cap, &len, err);
        fl_record_in in = {.format = FL_ENC_NONE,
                           .stored = "",
                           .fields_block = blk,
                           .fields_len = len,
                           .label = label(i)};
        if (rc == 0)
            rc = fl_writer_add_record(w, &in, err);
    }
    free(blk);
    if (rc) {
        fl_writer_abort(w);
        return rc;
    }
    return fl_writer_finish(w, NULL, 0, err);
}

void fx_options(fl_loader_options *o)
{
    fl_loader_options_init(o);
    o->pinned = 0;
    o->batch_size = 16;
    o->workers = 2;
}
