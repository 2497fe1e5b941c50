/* test_threads.c — one open dataset read from several threads at once (both backends, zstd with a
 * dictionary): every thread checks CRCs, decompresses through the shared context pool and
 * compares every record with the fixture. Run under TSan too (FL_TSAN). */
#include <pthread.h>

#include "fmt_test.h"

#define THREADS 6
#define N       400

static const fl_dataset *g_ds;

static void *reader(void *arg)
{
    uintptr_t t = (uintptr_t)arg;
    static __thread uint8_t want[1 << 16];
    uint8_t *dst = malloc(fl_dataset_max_raw_len(g_ds));
    if (!dst)
        return (void *)1;
    const fl_schema *s = fl_dataset_schema(g_ds);
    for (int round = 0; round < 3; round++)
        for (uint64_t k = 0; k < N; k++) {
            uint64_t i = (k * 7 + t * 13) % N; /* different orders per thread */
            fl_error err;
            const uint8_t *p, *pl;
            size_t len, pn;
            if (fl_dataset_get(g_ds, i, &p, &len, 1, &err) ||
                fl_dataset_payload(g_ds, i, p, len, dst, fl_dataset_max_raw_len(g_ds), &pl, &pn,
                                   &err)) {
                fprintf(stderr, "thread %lu: %s\n", (unsigned long)t, err.msg);
                free(dst);
                return (void *)1;
            }
            size_t wn = tt_payload(i, s->encoding, 28, 28, s->channels, want, sizeof want);
            if (pn != wn || memcmp(pl, want, wn) != 0) {
                fprintf(stderr, "thread %lu: record %llu differs\n", (unsigned long)t,
                        (unsigned long long)i);
                free(dst);
                return (void *)1;
            }
        }
    free(dst);
    return NULL;
}

int main(void)
{
    fl_backend backends[2] = {FL_BACKEND_SHARDS, FL_BACKEND_LMDB};
    static uint8_t dict[4000];
    for (size_t i = 0; i < sizeof dict; i++)
        dict[i] = (uint8_t)(i / 7);
    for (int b = 0; b < 2; b++) {
        fl_writer_options o = tt_options(backends[b], FL_ENC_RAW, 1);
        o.zstd_dict = dict;
        o.zstd_dict_len = sizeof dict;
        o.shard_bytes = 65536;
        const char *dst = tt_path(b ? "lmdb" : "shards");
        tt_write(dst, &o, N);
        fl_dataset *ds;
        fl_error err;
        CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
        g_ds = ds;
        pthread_t th[THREADS];
        for (uintptr_t t = 0; t < THREADS; t++)
            CHECK(pthread_create(&th[t], NULL, reader, (void *)t) == 0);
        int bad = 0;
        for (int t = 0; t < THREADS; t++) {
            void *r;
            pthread_join(th[t], &r);
            bad |= r != NULL;
        }
        CHECK(!bad);
        fl_dataset_close(ds);
    }
    printf("threads ok\n");
    return 0;
}
