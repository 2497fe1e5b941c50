/* fuzz_common.c — helpers the dataset-reader harnesses share (fuzz_common.h). */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fuzz_make_tmpdir(char *out, size_t n, const char *what)
{
    const char *t = getenv("TMPDIR");
    snprintf(out, n, "%s/fl-fuzz-%s-XXXXXX", t && *t ? t : "/tmp", what);
    if (!mkdtemp(out))
        abort();
}

void fuzz_put_file(const char *dir, const char *name, const void *data, size_t n)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        abort();
    if (n && fwrite(data, 1, n, f) != n)
        abort();
    fclose(f);
}

void fuzz_write_seed(const char *at, fl_backend backend)
{
    fl_writer_options o;
    memset(&o, 0, sizeof o);
    o.backend = backend;
    o.schema = (fl_schema){FL_ENC_RAW, FL_COMP_ZSTD, 1, 4, 4};
    o.zstd_level = 3;
    fl_writer *w;
    fl_error err;
    if (fl_writer_open(at, &o, &w, &err))
        abort();
    for (int i = 0; i < 5; i++) {
        uint8_t px[16];
        for (int k = 0; k < 16; k++)
            px[k] = (uint8_t)(i * k);
        char nm[16];
        snprintf(nm, sizeof nm, "img%d", i);
        if (fl_writer_add(w, px, 16, i % 2, nm, 4, 4, &err))
            abort();
    }
    const char *cls[2] = {"a", "b"};
    if (fl_writer_finish(w, cls, 2, &err))
        abort();
}

int fuzz_no_stop(void *u, uint64_t i, const fl_error *e)
{
    (void)u, (void)i, (void)e;
    return 0;
}
