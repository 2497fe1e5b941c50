/* resize_raw.c — test helper for vs_pil.sh: fl_resize of a raw HWC uint8 file.
 *   resize_raw IN W H CH OUT DW DH FLIP   (exit 0 ok, 1 error) */
#include <stdio.h>
#include <stdlib.h>

#include "fl_image.h"

int main(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: resize_raw IN W H CH OUT DW DH FLIP\n");
        return 1;
    }
    uint32_t w = (uint32_t)atoi(argv[2]), h = (uint32_t)atoi(argv[3]), ch = (uint32_t)atoi(argv[4]);
    uint32_t dw = (uint32_t)atoi(argv[6]), dh = (uint32_t)atoi(argv[7]);
    size_t n = (size_t)w * h * ch, m = (size_t)dw * dh * ch;
    uint8_t *src = malloc(n), *dst = malloc(m);
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(src, 1, n, f) != n) {
        fprintf(stderr, "resize_raw: cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(f);
    fl_error err;
    if (fl_resize(src, w, h, (size_t)w * ch, ch, dst, dw, dh, (size_t)dw * ch, atoi(argv[8]), NULL,
                  0, &err)) {
        fprintf(stderr, "resize_raw: %s\n", err.msg);
        return 1;
    }
    f = fopen(argv[5], "wb");
    if (!f || fwrite(dst, 1, m, f) != m || fclose(f)) {
        fprintf(stderr, "resize_raw: cannot write %s\n", argv[5]);
        return 1;
    }
    free(src);
    free(dst);
    return 0;
}
