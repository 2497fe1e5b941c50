/* test_loader_ranks.c — data-parallel shares through the loader: for world = 3 and several
 * epochs, each rank gets the same number of full batches; with drop_last the shares are
 * disjoint, otherwise they cover the epoch and only the wrap-around padding repeats; every
 * batch carries the labels of its records; shuffled shares change from epoch to epoch. */
#include <string.h>

#include "fixture.h"

static void shares(const char *path, const fx_spec *s, int drop_last, fl_order order)
{
    const uint32_t world = 3, B = 8;
    uint32_t *count = calloc(s->n, sizeof *count);
    uint64_t first[3] = {0};
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        memset(count, 0, s->n * sizeof *count);
        uint64_t per = 0;
        for (uint32_t r = 0; r < world; r++) {
            fl_loader_options o;
            fx_options(&o);
            o.batch_size = B;
            o.rank = r;
            o.world = world;
            o.drop_last = drop_last;
            o.order = order;
            o.seed = 17;
            o.start_epoch = epoch;
            fl_loader *L;
            fl_error err;
            CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
            uint64_t bpe = fl_loader_batches_per_epoch(L);
            if (r == 0)
                per = bpe;
            CHECK(bpe == per);
            for (uint64_t b = 0; b < bpe; b++) {
                fl_batch *bt;
                CHECK_OK(fl_loader_next(L, &bt, &err), &err);
                CHECK(bt->epoch == epoch && bt->size == B);
                for (uint32_t k = 0; k < B; k++) {
                    CHECK(bt->indices[k] < s->n);
                    CHECK(bt->labels[k] == fx_label(bt->indices[k], s->n, s->classes));
                    count[bt->indices[k]]++;
                }
                if (b == 0 && epoch == 0)
                    first[r] = bt->indices[0] * s->n + bt->indices[1];
                if (b == 0 && epoch == 1 && order != FL_ORDER_SEQUENTIAL)
                    CHECK(first[r] != bt->indices[0] * s->n + bt->indices[1]);
                fl_loader_release(L, bt);
            }
            fl_loader_close(L);
        }
        uint64_t covered = 0, dup = 0, total = per * B * world;
        for (uint64_t i = 0; i < s->n; i++) {
            covered += count[i] > 0;
            dup += count[i] > 1 ? count[i] - 1 : 0;
        }
        if (drop_last) {
            CHECK(dup == 0);
            CHECK(covered == total && total <= s->n && s->n - total < world * B);
        } else {
            CHECK(covered == s->n);
            CHECK(dup == total - s->n && total - s->n < world * B);
        }
    }
    free(count);
}

int main(void)
{
    char *dir = fx_tmpdir("ranks");
    fx_spec s = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_RAW,
                 .compression = FL_COMP_NONE,
                 .n = 103,
                 .height = 4,
                 .width = 4,
                 .channels = 1,
                 .classes = 4,
                 .shard_bytes = 1024};
    char *p = fx_make(dir, "raw", &s);
    for (int drop = 0; drop < 2; drop++) {
        shares(p, &s, drop, FL_ORDER_RANDOM);
        shares(p, &s, drop, FL_ORDER_QUASI);
        shares(p, &s, drop, FL_ORDER_SEQUENTIAL);
    }
    printf("rank shares equal; disjoint with drop_last, covering otherwise\n");
    free(p);
    fx_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
