/* fuzz_sources.c — libFuzzer harness for packdata's source parsers: IDX (in memory and through
 * the gzip reader), CIFAR-10/100 batches, list, CSV and JSONL files under --root, and CSV / JSONL
 * with --field values (int, float, float_vector, int_list, text: no file paths), with or without
 * --no-image. The first byte picks the parser; the rest is the untrusted input. A list item whose
 * path leads out of --root (absolute elsewhere, or climbing with ..) is a finding: the parsers must
 * refuse it. Built against packdata_core (tools/packdata). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "packdata.h"

/* Put bytes in an anonymous file and return its /proc path (the parsers read paths). */
static int as_file(const uint8_t *d, size_t n, char *path, size_t cap)
{
    int fd = memfd_create("fuzz", 0);
    if (fd < 0)
        return -1;
    if (n && write(fd, d, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0] % 9;
    data++;
    size--;
    pd_items items;
    pd_items_init(&items);
    fl_error err;
    pd_reject_ctx rc = {.skip = size ? data[0] & 1 : 0, .silent = 1};
    pd_source_opts so;
    memset(&so, 0, sizeof so);
    so.num_classes = -1;
    so.max_pixels = 1u << 20;
    char *names[3] = {"cat", "dog", "bird"};
    if (size && (data[size - 1] & 1)) {
        so.class_names = names;
        so.n_class_names = 3;
    }
    char path[64];
    int fd;
    switch (mode) {
    case 0: { /* IDX in memory: 2-byte split point, then images | labels */
        if (size < 2)
            break;
        size_t cut = ((size_t)data[0] << 8 | data[1]);
        const uint8_t *rest = data + 2;
        size_t rn = size - 2;
        if (cut > rn)
            cut = rn;
        if (pd_idx_parse(rest, cut, rest + cut, rn - cut, "img", "lab", so.max_pixels, &items,
                         &err) == 0) {
            for (size_t i = 0; i < items.n; i++) { /* touch every pixel the items point at */
                volatile uint8_t s = 0;
                const pd_item *it = &items.v[i];
                for (size_t k = 0; k < (size_t)it->width * it->height; k++)
                    s ^= it->pixels[k];
                (void)s;
            }
        }
        break;
    }
    case 1:
    case 2: pd_cifar_parse(data, size, "batch.bin", mode == 2, size & 1, &items, &err); break;
    case 3:
        if ((fd = as_file(data, size, path, sizeof path)) < 0)
            break;
        so.root = "/tmp";
        pd_src_list(path, &so, &rc, &items, &err);
        close(fd);
        break;
    case 4:
        if ((fd = as_file(data, size, path, sizeof path)) < 0)
            break;
        so.root = "/tmp";
        so.path_column = "path";
        so.label_column = "label";
        pd_src_csv(path, &so, &rc, &items, &err);
        close(fd);
        break;
    case 5: { /* the gzip reader used for .gz IDX files, bounded output */
        if ((fd = as_file(data, size, path, sizeof path)) < 0)
            break;
        uint8_t *out = NULL;
        size_t n = 0;
        if (pd_read_file(path, 1, 1u << 20, &out, &n, &err) == 0)
            free(out);
        close(fd);
        break;
    }
    case 6: /* JSONL: {"path": ..., "label": ...} a line */
        if ((fd = as_file(data, size, path, sizeof path)) < 0)
            break;
        so.root = "/tmp";
        pd_src_jsonl(path, &so, &rc, &items, &err);
        close(fd);
        break;
    case 7: /* CSV with --field columns; --no-image when the first byte's bit 1 is set */
    case 8: /* JSONL with --field keys, the same */
        if ((fd = as_file(data, size, path, sizeof path)) < 0)
            break;
        static const char *specs[] = {"n:int", "v:float", "emb:float_vector:3", "tags:int_list",
                                      "cap:text"};
        for (uint32_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
            so.field_specs[i] = specs[i];
        so.n_field_specs = sizeof specs / sizeof specs[0];
        so.no_image = size && (data[0] & 2);
        so.root = "/tmp";
        so.path_column = "path";
        so.label_column = "label";
        if (mode == 7)
            pd_src_csv(path, &so, &rc, &items, &err);
        else
            pd_src_jsonl(path, &so, &rc, &items, &err);
        close(fd);
        break;
    }
    if (mode >= 3 && mode != 5 && !so.no_image) /* nothing outside --root got through */
        for (size_t i = 0; i < items.n; i++)
            if (pd_items_name(&items, i) && pd_path_leaves(so.root, pd_items_name(&items, i)))
                abort();
    pd_items_free(&items);
    return 0;
}
