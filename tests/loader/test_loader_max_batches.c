/* test_loader_max_batches.c — the max_batches option: a loader started at (epoch, batch) with
 * max_batches = m delivers the m batches an unbounded loader delivers from there (JPEG, RRC +
 * flip, random order, across an epoch boundary; io_uring, pread and memory reads), reads and
 * decodes no record past them (stats.bytes_read is exactly the stored bytes of the delivered
 * batches' records, and stays so), then fl_loader_next returns FL_E_RANGE, again on a second call,
 * with the position at the end; without the option the workers read ahead (bytes_read grows past
 * that sum), which is what the option saves a DataLoader worker reading a run of batches. */
#include <string.h>
#include <unistd.h>

#include "fixture.h"

#define NB 40 /* batches of the reference stream */

/* Stored bytes of the records of batch b. */
static uint64_t batch_bytes(fl_loader *L, const fl_batch *b)
{
    const fl_dataset *ds = fl_loader_dataset(L);
    uint64_t sum = 0;
    for (uint32_t k = 0; k < b->size; k++) {
        fl_record_info info;
        fl_error err;
        CHECK_OK(fl_dataset_record_info(ds, b->indices[k], &info, &err), &err);
        sum += info.stored_len;
    }
    return sum;
}

static uint64_t bytes_read(fl_loader *L)
{
    fl_loader_stats st;
    fl_loader_stats_get(L, &st);
    return st.bytes_read;
}

/* m batches from ticket `first` (epoch first / bpe, batch first % bpe) with max_batches = m:
 * the reference's batches, nothing read past them, then FL_E_RANGE. */
static void run(const char *path, fl_loader_options o, const uint64_t *ref, uint64_t bpe,
                uint64_t first, uint64_t m)
{
    o.start_epoch = first / bpe;
    o.start_batch = first % bpe;
    o.max_batches = m;
    fl_loader *L = fx_loader(path, &o);
    if (!L)
        return; /* io_uring refused here */
    fl_error err;
    uint64_t want = 0;
    for (uint64_t i = 0; i < m; i++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        CHECK(b->epoch * bpe + b->batch == first + i);
        CHECK(fx_batch_hash(b) == ref[first + i]);
        want += batch_bytes(L, b);
        fl_loader_release(L, b);
    }
    /* every read of a delivered batch was counted before the batch was handed over */
    CHECK(bytes_read(L) == want);
    fl_batch *b = NULL;
    CHECK(fl_loader_next(L, &b, &err) == FL_E_RANGE && b == NULL);
    CHECK(strstr(err.msg, "max_batches") != NULL);
    CHECK(fl_loader_next(L, &b, &err) == FL_E_RANGE);
    uint64_t pe, pb;
    fl_loader_position(L, &pe, &pb);
    CHECK(pe * bpe + pb == first + m);
    usleep(50000); /* a worker that went on would have read by now */
    CHECK(bytes_read(L) == want);
    fl_loader_stats st;
    fl_loader_stats_get(L, &st);
    CHECK(st.batches == m);
    printf("io %d, from %llu, %llu batches: %llu bytes read, none past them\n", (int)o.io,
           (unsigned long long)first, (unsigned long long)m, (unsigned long long)want);
    fl_loader_close(L);
}

int main(void)
{
    char *dir = fx_tmpdir("maxb");
    fx_spec j = fx_jpeg_spec(120);
    char *jpg = fx_make(dir, "jpeg", &j);
    fl_loader_options o;
    fx_options(&o);
    CHECK(o.max_batches == 0); /* the default: no end */
    o.batch_size = 8;
    o.queue_depth = 3; /* several runs a batch */
    o.order = FL_ORDER_RANDOM;
    o.augment = FL_AUG_RRC;
    o.flip = 1;
    o.out_height = o.out_width = 24;
    o.seed = 11;
    o.workers = 3;
    uint64_t ref[NB];
    fx_stream_hash(jpg, &o, NB, ref);
    fl_loader *L = fx_loader(jpg, &o);
    uint64_t bpe = fl_loader_batches_per_epoch(L);
    fl_loader_close(L);
    CHECK(bpe == 15 && NB > 2 * bpe);

    static const fl_io_mode io[] = {FL_IO_URING, FL_IO_PREAD, FL_IO_MEMORY};
    for (size_t i = 0; i < sizeof io / sizeof io[0]; i++) {
        o.io = io[i];
        run(jpg, o, ref, bpe, 0, 1);
        run(jpg, o, ref, bpe, 3, 5);           /* inside epoch 0 */
        run(jpg, o, ref, bpe, bpe + 11, 9);    /* across the end of epoch 1 */
        run(jpg, o, ref, bpe, 2 * bpe - 1, 1); /* the last batch of an epoch */
        run(jpg, o, ref, bpe, 1, 2 * bpe + 2); /* more than an epoch */
    }

    /* Without the option the workers fill the ring ahead of the caller: after 2 batches they read
     * records of later batches (polled: they do so as soon as they run). */
    o.io = FL_IO_PREAD;
    o.max_batches = 0;
    L = fx_loader(jpg, &o);
    fl_error err;
    uint64_t want = 0;
    for (int i = 0; i < 2; i++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        want += batch_bytes(L, b);
        fl_loader_release(L, b);
    }
    for (int t = 0; t < 500 && bytes_read(L) <= want; t++)
        usleep(10000);
    CHECK(bytes_read(L) > want);
    fl_loader_close(L);

    free(jpg);
    fx_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
