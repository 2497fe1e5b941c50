/* test_loader_determinism.c — same seed, same batches: a shuffled, augmented (RRC + flip)
 * stream is byte-identical with 1, 2 and 8 workers, io_uring, pread and mmap, buffered and
 * O_DIRECT, shards and LMDB, for raw+zstd and JPEG records, with the JPEG entry-point indexes
 * on (the default; used from the second epoch), off and within a small limit; a loader created at
 * a saved position
 * continues exactly as the uninterrupted run (resume), also for quasi order and rank 1 of 2. */
#include <string.h>

#include "fixture.h"

#define NB 26

typedef struct variant {
    const char *name;
    uint32_t workers;
    fl_io_mode io;
    int direct;
    int lmdb;
    uint32_t prefetch, queue_depth; /* 0: defaults */
    int64_t jpeg_index_memory;      /* 0: default */
} variant;

static void matrix(const char *shards, const char *lmdb, const fl_loader_options *base,
                   const char *what)
{
    uint64_t ref[NB];
    fl_loader_options o = *base;
    o.workers = 1;
    o.io = FL_IO_PREAD;
    uint64_t h0 = fx_stream_hash(shards, &o, NB, ref);
    static const variant vs[] = {
        {"2 workers", 2, FL_IO_PREAD, 0, 0},
        {"8 workers", 8, FL_IO_PREAD, 0, 0},
        {"io_uring", 2, FL_IO_URING, 0, 0},
        {"io_uring O_DIRECT", 3, FL_IO_URING, 1, 0},
        {"pread O_DIRECT", 2, FL_IO_PREAD, 1, 0},
        {"mmap", 2, FL_IO_MMAP, 0, 0},
        {"memory", 2, FL_IO_MEMORY, 0, 0},
        {"memory, 8 workers", 8, FL_IO_MEMORY, 0, 0},
        {"auto", 2, FL_IO_AUTO, 0, 0},
        {"LMDB", 2, FL_IO_AUTO, 0, 1},
        /* a one-slot ring and one-sample chunks: maximal hand-offs between threads */
        {"8 workers, prefetch 1, chunks of 1", 8, FL_IO_URING, 0, 0, 1, 1},
        {"3 workers, prefetch 2, chunks of 3", 3, FL_IO_PREAD, 0, 0, 2, 3},
        /* JPEG entry-point indexes (kept from a record's first decode, used from the second
         * epoch on) change nothing: off, and a limit that only a few records' indexes fit */
        {"JPEG indexes off", 2, FL_IO_PREAD, 0, 0, 0, 0, -1},
        {"JPEG indexes within 8 KiB", 3, FL_IO_URING, 0, 0, 0, 0, 8192},
    };
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        if (vs[i].lmdb && !lmdb)
            continue;
        o = *base;
        o.workers = vs[i].workers;
        o.io = vs[i].io;
        o.direct = vs[i].direct;
        o.prefetch = vs[i].prefetch;
        o.jpeg_index_memory = vs[i].jpeg_index_memory;
        if (vs[i].queue_depth)
            o.queue_depth = vs[i].queue_depth;
        uint64_t h = fx_stream_hash(vs[i].lmdb ? lmdb : shards, &o, NB, NULL);
        if (h == 0)
            continue; /* io_uring not allowed here */
        if (h != h0) {
            fprintf(stderr, "%s: %s differs from 1 worker/pread/shards\n", what, vs[i].name);
            exit(1);
        }
    }
    /* a different seed gives a different stream */
    o = *base;
    o.seed ^= 1;
    CHECK(fx_stream_hash(shards, &o, NB, NULL) != h0);

    /* resume at (1, 3) and at the middle of epoch 0 */
    uint64_t bpe;
    {
        fl_loader *L;
        fl_error err;
        CHECK_OK(fl_loader_create(shards, base, &L, &err), &err);
        bpe = fl_loader_batches_per_epoch(L);
        /* stop after 5 batches, save the position */
        for (int i = 0; i < 5; i++) {
            fl_batch *b;
            CHECK_OK(fl_loader_next(L, &b, &err), &err);
            fl_loader_release(L, b);
        }
        uint64_t e, bt;
        fl_loader_position(L, &e, &bt);
        CHECK(e * bpe + bt == 5);
        fl_loader_close(L);
        o = *base;
        o.start_epoch = e;
        o.start_batch = bt;
        uint64_t rest[NB];
        fx_stream_hash(shards, &o, NB - 5, rest);
        CHECK(memcmp(rest, ref + 5, (NB - 5) * sizeof *rest) == 0);
    }
    CHECK(bpe + 3 < NB);
    o = *base;
    o.start_epoch = 1;
    o.start_batch = 3;
    uint64_t rest[NB];
    fx_stream_hash(shards, &o, NB - bpe - 3, rest);
    CHECK(memcmp(rest, ref + bpe + 3, (NB - bpe - 3) * sizeof *rest) == 0);
    printf("%s: identical across workers, I/O modes and backends; resume exact\n", what);
}

int main(void)
{
    char *dir = fx_tmpdir("det");
    fx_spec s = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_RAW,
                 .compression = FL_COMP_ZSTD,
                 .n = 200,
                 .height = 32,
                 .width = 40,
                 .channels = 3,
                 .classes = 4,
                 .shard_bytes = 64 * 1024};
    char *raw = fx_make(dir, "raw", &s);
    s.backend = FL_BACKEND_LMDB;
    char *raw_lmdb = fx_make(dir, "raw-lmdb", &s);

    fx_spec j = fx_jpeg_spec(100);
    char *jpg = fx_make(dir, "jpeg", &j);
    j.backend = FL_BACKEND_LMDB;
    char *jpg_lmdb = fx_make(dir, "jpeg-lmdb", &j);

    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 16;
    o.order = FL_ORDER_RANDOM;
    o.augment = FL_AUG_RRC;
    o.flip = 1;
    o.out_height = o.out_width = 24;
    o.seed = 7;
    matrix(raw, raw_lmdb, &o, "raw zstd, random, RRC+flip");

    o.order = FL_ORDER_QUASI;
    o.quasi_block = 8;
    o.quasi_window = 4;
    o.rank = 1;
    o.world = 2;
    o.batch_size = 8;
    o.augment = FL_AUG_CENTER;
    matrix(raw, raw_lmdb, &o, "raw zstd, quasi, rank 1/2, center+flip");

    fx_options(&o);
    o.batch_size = 8;
    o.order = FL_ORDER_RANDOM;
    o.augment = FL_AUG_RRC;
    o.flip = 1;
    o.out_height = 20;
    o.out_width = 28;
    o.seed = 99;
    matrix(jpg, jpg_lmdb, &o, "JPEG (varying sizes), random, RRC+flip");

    free(raw);
    free(raw_lmdb);
    free(jpg);
    free(jpg_lmdb);
    fx_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
