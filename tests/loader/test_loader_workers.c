/* test_loader_workers.c — fl_loader_workers and fl_loader_set_workers: the count of started
 * decode workers; the number at work changed while batches stream (down to 1, up again) leaves
 * the stream byte-identical to a one-worker loader's (JPEG, RRC + flip, random order, across an
 * epoch boundary); a count outside [1, started] is refused with FL_E_INVALID and changes
 * nothing; closing a loader with parked workers returns. */
#include <string.h>
#include <unistd.h>

#include "fixture.h"

#define NB 24

int main(void)
{
    char *dir = fx_tmpdir("workers");
    fx_spec j = fx_jpeg_spec(120);
    char *jpg = fx_make(dir, "jpeg", &j);
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 8;
    o.queue_depth = 2; /* several runs a batch: workers hand batches over often */
    o.order = FL_ORDER_RANDOM;
    o.augment = FL_AUG_RRC;
    o.flip = 1;
    o.out_height = o.out_width = 24;
    o.seed = 5;
    o.workers = 1;
    uint64_t ref[NB];
    fx_stream_hash(jpg, &o, NB, ref);

    o.workers = 3;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(jpg, &o, &L, &err), &err);
    CHECK(fl_loader_workers(L) == 3);
    CHECK(fl_loader_batches_per_epoch(L) < NB); /* the stream crosses an epoch boundary */
    CHECK(fl_loader_set_workers(L, 0, &err) == FL_E_INVALID && strstr(err.msg, "3"));
    CHECK(fl_loader_set_workers(L, 4, &err) == FL_E_INVALID);
    static const uint32_t at[NB] = {[2] = 1, [7] = 3, [11] = 2, [15] = 1, [20] = 3};
    for (int i = 0; i < NB; i++) {
        if (at[i])
            CHECK_OK(fl_loader_set_workers(L, at[i], &err), &err);
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        CHECK(fx_batch_hash(b) == ref[i]);
        fl_loader_release(L, b);
    }
    CHECK_OK(fl_loader_set_workers(L, 1, &err), &err);
    usleep(20000); /* let the others park */
    fl_loader_close(L);

    /* workers 0: one per online CPU */
    o.workers = 0;
    CHECK_OK(fl_loader_create(jpg, &o, &L, &err), &err);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(fl_loader_workers(L) == (uint32_t)(cpus > 0 ? cpus : 1));
    fl_loader_close(L);

    free(jpg);
    fx_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
