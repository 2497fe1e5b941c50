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

uint64_t fx_stream_hash(const char *path, const fl_loader_options *o, uint64_t nb,
                        uint64_t *per_batch)
{
    fl_loader *L;
    fl_error err;
    int rc = fl_loader_create(path, o, &L, &err);
    if (rc == FL_E_UNSUPPORTED && o->io == FL_IO_URING) {
        printf("io_uring unavailable here (%s): variant skipped\n", err.msg);
        return 0;
    }
    CHECK_OK(rc, &err);
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < nb; i++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        uint64_t bh = fx_batch_hash(b);
        if (per_batch)
            per_batch[i] = bh;
        h = fx_hash(h, &bh, sizeof bh);
        fl_loader_release(L, b);
    }
    fl_loader_close(L);
    return h;
}

void fx_options(fl_loader_options *o)
{
    fl_loader_options_init(o);
    o->pinned = 0;
    o->batch_size = 16;
    o->workers = 2;
}
