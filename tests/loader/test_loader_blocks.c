/* test_loader_blocks.c — the quasi order's coalesced extent reads (loader/block_reader.c):
 * records of 2,553 bytes (so they straddle 4 KiB pages and the shard boundaries fall inside
 * blocks) read with O_DIRECT through io_uring in quasi order: every record is delivered exactly
 * once per epoch with its own bytes and label, the stream equals the per-record pread reader's,
 * a resumed run continues it exactly, and the bytes read show no double reads (per-record
 * aligned reads of these records would read ~2x), also with two ranks, and a consumer that
 * stops taking batches does not make the I/O thread read epochs ahead that no one asked for
 * (with memory to spare, only two quasi windows past the workers). Skips (77) without io_uring. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"

#define N     960
#define H     37
#define W     23
#define C     3
#define BATCH 24

static void opts(fl_loader_options *o, fl_io_mode io)
{
    fx_options(o);
    o->order = FL_ORDER_QUASI;
    o->quasi_block = 64;
    o->quasi_window = 4;
    o->batch_size = BATCH;
    o->drop_last = 1;
    o->workers = 2;
    o->io = io;
    o->direct = 1;
    o->seed = 7;
    o->memory_max = -1;
}

/* A fake /proc under dir/name saying MemAvailable: kib, made the loader's (FL_PROC_ROOT). */
static void fake_proc(const char *dir, const char *name, unsigned kib)
{
    char root[4096], file[4200];
    snprintf(root, sizeof root, "%s/%s", dir, name);
    snprintf(file, sizeof file, "%s/proc", root);
    CHECK(mkdir(root, 0755) == 0 && mkdir(file, 0755) == 0);
    snprintf(file, sizeof file, "%s/proc/meminfo", root);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    fprintf(f, "MemAvailable: %u kB\n", kib);
    fclose(f);
    setenv("FL_PROC_ROOT", root, 1);
}

/* Every record once per epoch, with the pixels and label it was written with; run with 4 MiB of
 * expected page cache (a fake /proc/meminfo through FL_PROC_ROOT), which caps the extents read
 * ahead at 1 MiB, so the bytes read show whether a page was read twice. */
static void exactly_once(const char *dir, const char *path)
{
    fake_proc(dir, "root", 4096);
    fl_loader_options o;
    opts(&o, FL_IO_URING);
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    printf("io: %s\n", fl_loader_io_describe(L));
    CHECK(strstr(fl_loader_io_describe(L), "coalesced extents") != NULL);
    uint8_t want[H * W * C];
    uint64_t stored = 0;
    const int epochs = 4;
    for (int e = 0; e < epochs; e++) {
        static uint32_t seen[N];
        memset(seen, 0, sizeof seen);
        for (uint64_t b = 0; b < fl_loader_batches_per_epoch(L); b++) {
            fl_batch *bt;
            CHECK_OK(fl_loader_next(L, &bt, &err), &err);
            CHECK(bt->epoch == (uint64_t)e && bt->batch == b);
            for (uint32_t k = 0; k < bt->size; k++) {
                uint64_t i = bt->indices[k];
                CHECK(i < N);
                seen[i]++;
                fx_fill(i, H, W, C, want);
                CHECK(memcmp(bt->images + (size_t)k * sizeof want, want, sizeof want) == 0);
                CHECK(bt->labels[k] == fx_label(i, N, 8));
                stored += sizeof want;
            }
            fl_loader_release(L, bt);
        }
        for (uint32_t i = 0; i < N; i++)
            CHECK(seen[i] == 1);
    }
    fl_loader_stats st;
    fl_loader_stats_get(L, &st);
    /* reads ahead: at most the 1 MiB budget (+ the window in use, 0.65 MB) past the last batch
     * (~0.17 of the 9.8 MB delivered); extents add <= 2 pages each (~0.08); per-record O_DIRECT
     * reads of these records would read ~2.6x */
    double amp = (double)st.bytes_read / stored;
    printf("bytes read %llu for %llu delivered over %d epochs: %.3f\n",
           (unsigned long long)st.bytes_read, (unsigned long long)stored, epochs, amp);
    CHECK(amp >= 1.0 && amp <= 1.35);
    fl_loader_close(L);
    unsetenv("FL_PROC_ROOT");
}

/* A consumer that takes one batch and then waits: the workers fill the ring (prefetch = 4
 * batches) and stop; with 8 GB of expected page cache the byte budget allows whole epochs, but
 * the I/O thread reads no extent first used more than two windows (2 x 32 samples here) past
 * what the workers asked for: ~9 blocks of 32 records, not the two epochs (1,920 records) it
 * read before. */
static void slow_consumer(const char *dir, const char *path)
{
    fake_proc(dir, "root8g", 8000000);
    fl_loader_options o;
    opts(&o, FL_IO_URING);
    o.quasi_block = 32;
    o.quasi_window = 1;
    o.prefetch = 4; /* these small batches would get a 16-slot ring by default */
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    CHECK(strstr(fl_loader_io_describe(L), "coalesced extents") != NULL);
    fl_batch *bt;
    CHECK_OK(fl_loader_next(L, &bt, &err), &err);
    fl_loader_release(L, bt);
    usleep(300 * 1000);
    fl_loader_stats st;
    fl_loader_stats_get(L, &st);
    uint64_t half = (uint64_t)N / 2 * (H * W * C);
    printf("slow consumer: %llu bytes read after 1 batch (half an epoch: %llu)\n",
           (unsigned long long)st.bytes_read, (unsigned long long)half);
    CHECK(st.bytes_read < half);
    fl_loader_close(L);
    unsetenv("FL_PROC_ROOT");
}

/* Two ranks in quasi order: each reads its share as coalesced extents (its own contiguous run of
 * the epoch's sequence, order.h), gives the same stream as its per-record pread reader, the two
 * shares are disjoint and cover the data set each epoch (drop_last, 960 = 2 x 20 batches of 24),
 * and each rank reads about its half of the data set, not all of it (with exactly_once's 4 MiB
 * of expected page cache: 1 MiB read ahead). The run is bounded (max_batches) so what is read
 * does not depend on how far the ring got before close. */
static void two_ranks(const char *dir, const char *path)
{
    const int epochs = 3;
    char root[4096];
    snprintf(root, sizeof root, "%s/root", dir);
    setenv("FL_PROC_ROOT", root, 1);
    static uint32_t seen[N];
    memset(seen, 0, sizeof seen);
    uint64_t read_total = 0, stored = 0;
    for (uint32_t r = 0; r < 2; r++) {
        fl_loader_options o, p;
        opts(&o, FL_IO_URING);
        o.rank = r;
        o.world = 2;
        uint64_t nb = N / 2 / BATCH;
        /* the run's end: without it the ring reads ahead past the last batch by however far
         * its threads got before close, which made the figure depend on timing */
        o.max_batches = epochs * nb;
        p = o;
        p.io = FL_IO_PREAD;
        CHECK(fx_stream_hash(path, &o, epochs * nb, NULL) ==
              fx_stream_hash(path, &p, epochs * nb, NULL));
        fl_loader *L;
        fl_error err;
        CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
        CHECK(strstr(fl_loader_io_describe(L), "coalesced extents") != NULL);
        CHECK(fl_loader_batches_per_epoch(L) == nb);
        for (uint64_t b = 0; b < epochs * nb; b++) {
            fl_batch *bt;
            CHECK_OK(fl_loader_next(L, &bt, &err), &err);
            for (uint32_t k = 0; k < bt->size; k++) {
                CHECK(bt->indices[k] < N);
                seen[bt->indices[k]]++;
                stored += H * W * C;
            }
            fl_loader_release(L, bt);
        }
        fl_loader_stats st;
        fl_loader_stats_get(L, &st);
        read_total += st.bytes_read;
        fl_loader_close(L);
    }
    for (uint32_t i = 0; i < N; i++)
        CHECK(seen[i] == (uint32_t)epochs);
    unsetenv("FL_PROC_ROOT");
    /* both ranks together: the data set about once per epoch (the windows cut by the shares'
     * edge and partial pages add a little); round-robin shares
     * made each rank read every extent (2x) */
    double amp = (double)read_total / stored;
    printf("two ranks, quasi: bytes read %llu for %llu delivered: %.3f\n",
           (unsigned long long)read_total, (unsigned long long)stored, amp);
    CHECK(amp >= 1.0 && amp <= 1.5);
}

/* The extent budget is a quarter of the expected page cache shared by the node's loader
 * processes: with the fake 4 MiB of page cache one process gets 1 MiB (the 0.65 MB window fits),
 * eight (LOCAL_WORLD_SIZE=8, as torchrun sets it) get 128 KiB each: per-record reads, same stream.
 */
static void local_ranks(const char *dir, const char *path, uint64_t want)
{
    char root[4096];
    snprintf(root, sizeof root, "%s/root", dir);
    setenv("FL_PROC_ROOT", root, 1);
    const char *env[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"};
    for (int v = 0; v < 2; v++)
        for (int ranks = 1; ranks <= 8; ranks *= 8) {
            char n[8];
            snprintf(n, sizeof n, "%d", ranks);
            setenv(env[v], n, 1);
            fl_loader_options o;
            opts(&o, FL_IO_URING);
            fl_loader *L;
            fl_error err;
            CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
            int coalesced = strstr(fl_loader_io_describe(L), "coalesced extents") != NULL;
            printf("%s=%d: %s\n", env[v], ranks, fl_loader_io_describe(L));
            CHECK(coalesced == (ranks == 1));
            fl_loader_close(L);
            CHECK(fx_stream_hash(path, &o, N / BATCH, NULL) == want);
            unsetenv(env[v]);
        }
    unsetenv("FL_PROC_ROOT");
}

int main(void)
{
    char *dir = fx_tmpdir("blocks");
    fx_spec s = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_RAW,
                 .compression = FL_COMP_NONE,
                 .n = N,
                 .height = H,
                 .width = W,
                 .channels = C,
                 .classes = 8,
                 .shard_bytes = 300000};
    char *path = fx_make(dir, "raw", &s);
    fl_loader_options o;
    opts(&o, FL_IO_URING);
    uint64_t per_batch[3 * N / BATCH];
    uint64_t nb = 3 * N / BATCH;
    uint64_t h = fx_stream_hash(path, &o, nb, per_batch);
    if (h == 0) {
        printf("SKIP: io_uring unavailable\n");
        fx_rmrf(dir);
        return 77;
    }
    exactly_once(dir, path);
    slow_consumer(dir, path);
    /* the same stream as each record read on its own */
    fl_loader_options p;
    opts(&p, FL_IO_PREAD);
    CHECK(fx_stream_hash(path, &p, nb, NULL) == h);
    /* resumed in the middle of epoch 1: the same batches as the uninterrupted run */
    fl_loader_options r;
    opts(&r, FL_IO_URING);
    r.start_epoch = 1;
    r.start_batch = 5;
    uint64_t first = N / BATCH + 5, tail[3 * N / BATCH];
    fx_stream_hash(path, &r, nb - first, tail);
    CHECK(memcmp(tail, per_batch + first, (nb - first) * sizeof *tail) == 0);
    /* one worker, a queue of 1 extent read: still every record, same stream */
    fl_loader_options q;
    opts(&q, FL_IO_URING);
    q.workers = 1;
    q.queue_depth = 1;
    CHECK(fx_stream_hash(path, &q, nb, NULL) == h);
    two_ranks(dir, path);
    local_ranks(dir, path, fx_stream_hash(path, &p, N / BATCH, NULL));
    fx_rmrf(dir);
    free(dir);
    free(path);
    printf("test_loader_blocks: OK\n");
    return 0;
}
