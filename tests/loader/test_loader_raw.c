/* test_loader_raw.c — the sequential raw path: with no augmentation every batch holds exactly
 * the stored pixels and labels of its records, in order, for uncompressed and zstd shards and
 * for LMDB; epochs follow each other; the tail is padded by wrap-around or dropped; positions,
 * counts and stats are right; a gray dataset can be read as RGB; quasi-random order mixes the
 * classes of a class-sorted dataset within a batch; FL_IO_AUTO reads small datasets into memory
 * (memory_max); bad options are refused by name. */
#include <string.h>

#include "fixture.h"
#include "pinned.h"

static void check_stream(const char *path, const fx_spec *s, fl_io_mode io, int drop_last)
{
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 12;
    o.io = io;
    o.drop_last = drop_last;
    fl_loader *L = fx_loader(path, &o);
    if (!L)
        return;
    fl_error err;
    uint64_t bpe = fl_loader_batches_per_epoch(L);
    CHECK(bpe == (drop_last ? s->n / 12 : (s->n + 11) / 12));
    CHECK(fl_loader_samples_per_epoch(L) == bpe * 12);
    size_t sb = (size_t)s->height * s->width * s->channels;
    for (uint64_t e = 0; e < 2; e++)
        for (uint64_t bt = 0; bt < bpe; bt++) {
            uint64_t pe, pb;
            fl_loader_position(L, &pe, &pb);
            CHECK(pe == e && pb == bt);
            fl_batch *b;
            CHECK_OK(fl_loader_next(L, &b, &err), &err);
            CHECK(b->epoch == e && b->batch == bt && b->size == 12);
            CHECK(b->last_in_epoch == (bt + 1 == bpe));
            CHECK(b->height == s->height && b->width == s->width && b->channels == s->channels);
            for (uint32_t k = 0; k < b->size; k++)
                fx_check_sample(b, k, s, (bt * 12 + k) % s->n); /* wrap-around padding */
            fl_loader_release(L, b);
        }
    fl_loader_stats st;
    fl_loader_stats_get(L, &st);
    CHECK(st.batches == 2 * bpe && st.images == 2 * bpe * 12);
    CHECK(st.bytes_read > 0 && st.skipped == 0);
    CHECK(st.pinned_bytes >= (uint64_t)(o.workers + 2) * 12 * sb);
    if (s->backend == FL_BACKEND_SHARDS && io == FL_IO_PREAD)
        CHECK(strcmp(st.io_backend, "pread") == 0);
    if (s->backend == FL_BACKEND_LMDB || io == FL_IO_MMAP)
        CHECK(strcmp(st.io_backend, "mmap") == 0);
    if (s->backend == FL_BACKEND_SHARDS && io == FL_IO_URING)
        CHECK(strcmp(st.io_backend, "io_uring") == 0);
    /* a dataset this small is read into memory by FL_IO_AUTO (LMDB is always mapped) */
    if (s->backend == FL_BACKEND_SHARDS && (io == FL_IO_MEMORY || io == FL_IO_AUTO))
        CHECK(strcmp(st.io_backend, "memory") == 0);
    printf("%s backend, io %d: %s, %llu batches, %llu bytes read\n",
           s->backend == FL_BACKEND_LMDB ? "LMDB" : "shards", (int)io, st.io_backend,
           (unsigned long long)st.batches, (unsigned long long)st.bytes_read);
    fl_loader_close(L);
}

/* FL_IO_AUTO reads a dataset into memory only up to memory_max bytes (default: 256 MiB and
 * 1/16 of RAM), never with memory_max < 0 or with O_DIRECT. */
static void auto_memory_policy(const char *path)
{
    struct {
        int64_t memory_max;
        int direct;
        int in_memory;
    } cases[] = {{0, 0, 1}, {-1, 0, 0}, {1, 0, 0}, {1 << 30, 0, 1}, {0, 1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fl_loader_options o;
        fx_options(&o);
        o.memory_max = cases[i].memory_max;
        o.direct = cases[i].direct;
        fl_loader *L;
        fl_error err;
        CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
        fl_loader_stats st;
        fl_loader_stats_get(L, &st);
        CHECK((strcmp(st.io_backend, "memory") == 0) == cases[i].in_memory);
        fl_loader_close(L);
    }
}

static void gray_as_rgb(const char *path, const fx_spec *s)
{
    fl_loader_options o;
    fx_options(&o);
    o.channels = 3;
    o.batch_size = 4;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    fl_batch *b;
    CHECK_OK(fl_loader_next(L, &b, &err), &err);
    CHECK(b->channels == 3);
    for (uint32_t k = 0; k < 4; k++)
        for (uint32_t y = 0; y < s->height; y++)
            for (uint32_t x = 0; x < s->width; x++)
                for (uint32_t c = 0; c < 3; c++)
                    CHECK(b->images[(((size_t)k * s->height + y) * s->width + x) * 3 + c] ==
                          fx_pixel(k, y, x, 0));
    fl_loader_release(L, b);
    fl_loader_close(L);
}

/* Default options (pinned = 1): the CUDA runtime is looked up at run time; without a GPU the
 * ring falls back to page-aligned memory and batches are the same. Device mode without a GPU
 * is refused cleanly; with one (tests/gpu/check.sh runs this test on the GPU machine) its device
 * copies must equal the host batches. */
static void pinned_default(const char *path, const fx_spec *s)
{
    fl_loader_options o;
    fl_loader_options_init(&o);
    o.batch_size = 5;
    o.workers = 1;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    fl_batch *b;
    CHECK_OK(fl_loader_next(L, &b, &err), &err);
    size_t sb = (size_t)s->height * s->width * s->channels;
    uint8_t *want = malloc(sb);
    fx_fill(4, s->height, s->width, s->channels, want);
    CHECK(memcmp(b->images + 4 * sb, want, sb) == 0);
    CHECK(((uintptr_t)b->images & 4095) == 0);
    CHECK(b->device_images == NULL);
    free(want);
    fl_loader_release(L, b);
    fl_loader_close(L);
    /* With a GPU present (a CUDA runtime that counts at least one device) device mode must
     * work; without one it must be refused. */
    fl_cuda probe;
    int ndev = 0;
    int have_gpu =
        fl_cuda_load(&probe, NULL, 0) == 0 && probe.GetDeviceCount(&ndev) == 0 && ndev > 0;
    o.device = 0;
    int rc = fl_loader_create(path, &o, &L, &err);
    if (have_gpu)
        CHECK_OK(rc, &err);
    if (rc == 0) {
        /* the device copy holds the same bytes as the host batch */
        fl_cuda cu;
        CHECK(fl_cuda_load(&cu, NULL, 0) == 0);
        for (int i = 0; i < 3; i++) {
            CHECK_OK(fl_loader_next(L, &b, &err), &err);
            CHECK(b->device_images != NULL && b->device_labels != NULL && b->event != NULL);
            size_t bytes = (size_t)b->size * sb;
            uint8_t *back = malloc(bytes);
            int32_t labels[5];
            CHECK(cu.EventSynchronize(b->event) == 0);
            CHECK(cu.MemcpyAsync(back, b->device_images, bytes, 2, b->stream) == 0);
            CHECK(cu.MemcpyAsync(labels, b->device_labels, sizeof labels, 2, b->stream) == 0);
            CHECK(cu.StreamSynchronize(b->stream) == 0);
            CHECK(memcmp(back, b->images, bytes) == 0);
            CHECK(memcmp(labels, b->labels, sizeof labels) == 0);
            free(back);
            fl_loader_release(L, b);
        }
        fl_loader_close(L);
        printf("device mode: device copies equal the host batches\n");
    } else {
        printf("device mode refused as expected: %s\n", err.msg);
        CHECK(rc == FL_E_UNSUPPORTED && L == NULL);
    }
}

/* The dataset is sorted by class: sequential batches hold one or two classes, quasi-random
 * batches (blocks of 8 shuffled, then windows of 8 blocks shuffled) hold many. */
static double mean_classes(const char *path, fl_order order)
{
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 32;
    o.order = order;
    o.quasi_block = 8;
    o.quasi_window = 8;
    o.seed = 1;
    o.drop_last = 1;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    uint64_t bpe = fl_loader_batches_per_epoch(L), distinct = 0;
    for (uint64_t b = 0; b < bpe; b++) {
        fl_batch *bt;
        CHECK_OK(fl_loader_next(L, &bt, &err), &err);
        int seen[16] = {0};
        for (uint32_t k = 0; k < bt->size; k++)
            distinct += !seen[bt->labels[k]]++;
        fl_loader_release(L, bt);
    }
    fl_loader_close(L);
    return (double)distinct / bpe;
}

static void quasi_mixes(const char *dir)
{
    fx_spec s = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_RAW,
                 .compression = FL_COMP_NONE,
                 .n = 1024,
                 .height = 2,
                 .width = 2,
                 .channels = 1,
                 .classes = 16,
                 .shard_bytes = 1 << 20};
    char *p = fx_make(dir, "sorted", &s);
    double seq = mean_classes(p, FL_ORDER_SEQUENTIAL), quasi = mean_classes(p, FL_ORDER_QUASI),
           rnd = mean_classes(p, FL_ORDER_RANDOM);
    printf(
        "classes per batch of 32 (16 classes, sorted): sequential %.2f, quasi %.2f, random %.2f\n",
        seq, quasi, rnd);
    CHECK(seq < 1.6);
    CHECK(quasi >= 5.0);
    CHECK(rnd >= 10.0);
    free(p);
}

static void bad_options(const char *path)
{
    fl_loader_options o;
    fx_options(&o);
    fl_loader *L;
    fl_error err;
    o.batch_size = 0;
    CHECK(fl_loader_create(path, &o, &L, &err) == FL_E_INVALID && L == NULL);
    CHECK(strstr(err.msg, "batch_size"));
    fx_options(&o);
    o.rank = 2;
    o.world = 2;
    CHECK(fl_loader_create(path, &o, &L, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "rank"));
    fx_options(&o);
    o.io = FL_IO_MMAP;
    o.direct = 1;
    CHECK(fl_loader_create(path, &o, &L, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "direct"));
    fx_options(&o);
    o.io = FL_IO_MEMORY;
    o.direct = 1;
    CHECK(fl_loader_create(path, &o, &L, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "direct") && strstr(err.msg, "FL_IO_MEMORY"));
    fx_options(&o);
    o.io = (fl_io_mode)5;
    CHECK(fl_loader_create(path, &o, &L, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "io mode"));
    fx_options(&o);
    CHECK(fl_loader_create("/nonexistent/fastload-dataset", &o, &L, &err) < 0 && L == NULL);
    /* holding every slot and asking for more is refused, not a deadlock */
    fx_options(&o);
    o.prefetch = 2;
    o.batch_size = 4;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    fl_batch *b1, *b2, *b3;
    CHECK_OK(fl_loader_next(L, &b1, &err), &err);
    CHECK_OK(fl_loader_next(L, &b2, &err), &err);
    CHECK(fl_loader_next(L, &b3, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "release"));
    fl_loader_release(L, b1);
    CHECK_OK(fl_loader_next(L, &b3, &err), &err);
    CHECK(b3->batch == 2);
    fl_loader_close(L); /* with unreleased batches */
}

int main(void)
{
    char *dir = fx_tmpdir("raw");
    fx_spec s = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_RAW,
                 .compression = FL_COMP_NONE,
                 .n = 101,
                 .height = 9,
                 .width = 7,
                 .channels = 3,
                 .classes = 5,
                 .shard_bytes = 4096};
    char *p = fx_make(dir, "plain", &s);
    check_stream(p, &s, FL_IO_AUTO, 0);
    check_stream(p, &s, FL_IO_PREAD, 1);
    check_stream(p, &s, FL_IO_URING, 0);
    check_stream(p, &s, FL_IO_MMAP, 1);
    check_stream(p, &s, FL_IO_MEMORY, 1);
    auto_memory_policy(p);
    bad_options(p);
    pinned_default(p, &s);
    free(p);

    s.compression = FL_COMP_ZSTD;
    p = fx_make(dir, "zstd", &s);
    check_stream(p, &s, FL_IO_AUTO, 1);
    free(p);

    s.backend = FL_BACKEND_LMDB;
    p = fx_make(dir, "lmdb", &s);
    if (p)
        check_stream(p, &s, FL_IO_AUTO, 0);
    free(p);

    fx_spec g = s;
    g.backend = FL_BACKEND_SHARDS;
    g.channels = 1;
    p = fx_make(dir, "gray", &g);
    check_stream(p, &g, FL_IO_AUTO, 0);
    gray_as_rgb(p, &g);
    free(p);

    quasi_mixes(dir);
    fx_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
