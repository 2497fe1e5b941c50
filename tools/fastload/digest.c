/* digest.c — `fastload digest`: a SHA-256 per batch (images, labels, then every other field of
 * the schema in schema order: its data, then its counts when it has them) and of the whole
 * stream, so scripts and tests can check that two runs delivered byte-identical batches. A
 * classification data set has no other field: its digests are those of images and labels. */
#include <stdio.h>
#include <string.h>

#include "fastload.h"
#include "fastload_cli.h"
#include "run_options.h"
#include "sha256.h"

/* Labels are hashed as int32 little-endian whatever the host order, so digests compare across
 * machines and with the Python binding (labels.astype('<i4').tobytes()). */
static void hash_labels(sha256_ctx *a, sha256_ctx *b, const int32_t *labels, uint32_t n)
{
    uint8_t buf[4096];
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)labels[i];
        buf[k++] = (uint8_t)v;
        buf[k++] = (uint8_t)(v >> 8);
        buf[k++] = (uint8_t)(v >> 16);
        buf[k++] = (uint8_t)(v >> 24);
        if (k == sizeof buf || i + 1 == n) {
            sha256_update(a, buf, k);
            sha256_update(b, buf, k);
            k = 0;
        }
    }
}

int cmd_digest(const fl_cli_tool *tool, int argc, char **argv)
{
    run_options ro;
    int rc = run_options_parse(tool, RUN_DIGEST, argc, argv, &ro);
    if (rc)
        return rc == 1 ? 0 : 2;
    fl_error err = {0};
    fl_loader *L = NULL;
    if (fl_loader_create(ro.path, &ro.opt, &L, &err)) {
        /* The library names its option fields; tell a command-line user which flag sets them. */
        const char *hint = (!ro.opt.out_height && strstr(err.msg, "vary in size"))
                               ? " (pass --size S or WxH)"
                               : "";
        fprintf(stderr, "fastload digest: error: %s%s\n",
                err.msg[0] ? err.msg : fl_strerror(err.code), hint);
        return 1;
    }
    if (fl_loader_batches_per_epoch(L) == 0) {
        fprintf(stderr, "fastload digest: error: %s: no batches per epoch for rank %u\n", ro.path,
                ro.opt.rank);
        fl_loader_close(L);
        return 1;
    }
    run_bound_loader(L, &ro, fl_loader_batches_per_epoch(L));
    sha256_ctx stream;
    sha256_init(&stream);
    uint64_t batches = 0, epochs_done = 0;
    int status = 0;
    while (epochs_done < ro.epochs && (!ro.max_batches || batches < ro.max_batches)) {
        fl_batch *b;
        if (fl_loader_next(L, &b, &err)) {
            fprintf(stderr, "fastload digest: error: %s\n",
                    err.msg[0] ? err.msg : fl_strerror(err.code));
            status = 1;
            break;
        }
        sha256_ctx one;
        sha256_init(&one);
        size_t n = (size_t)b->size * b->height * b->width * b->channels;
        sha256_update(&one, b->images, n);
        sha256_update(&stream, b->images, n);
        hash_labels(&one, &stream, b->labels, b->size);
        /* the other fields as the host holds them (little-endian where this tool runs) */
        for (uint32_t i = 0; i < b->num_fields; i++) {
            const fl_batch_field *f = &b->fields[i];
            if (f->data == (void *)b->images || f->data == (void *)b->labels)
                continue;
            sha256_update(&one, f->data, f->bytes);
            sha256_update(&stream, f->data, f->bytes);
            if (f->counts)
                hash_labels(&one, &stream, f->counts, b->size);
        }
        uint8_t d[32];
        char hex[65];
        sha256_final(&one, d);
        sha256_hex(d, hex);
        printf("%llu %llu %u %s\n", (unsigned long long)b->epoch, (unsigned long long)b->batch,
               b->size, hex);
        batches++;
        if (b->last_in_epoch)
            epochs_done++;
        fl_loader_release(L, b);
    }
    if (!status) {
        uint8_t d[32];
        char hex[65];
        sha256_final(&stream, d);
        sha256_hex(d, hex);
        printf("stream %s\n", hex);
    }
    fl_loader_close(L);
    return status;
}
