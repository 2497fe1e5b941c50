/* decode_raw.c — test helper for vs_pil.sh: fl_decode a JPEG/PNG file to raw HWC bytes and print
 * "WIDTH HEIGHT".   decode_raw IN CHANNELS OUT   (exit 0 ok, 2 decode error, 1 other error) */
#include <stdio.h>
#include <stdlib.h>

#include "fl_image.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: decode_raw IN CHANNELS OUT\n");
        return 1;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "decode_raw: cannot open %s\n", argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
    if (n <= 0 || fread(data, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "decode_raw: cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(f);
    fl_decoder *d;
    fl_error err;
    fl_image img;
    if (fl_decoder_create(0, &d, &err))
        return 1;
    if (fl_decode(d, data, (size_t)n, (uint32_t)atoi(argv[2]), 0, 0, &img, &err)) {
        fprintf(stderr, "decode_raw: %s: %s\n", argv[1], err.msg);
        fl_decoder_free(d);
        free(data);
        return 2;
    }
    f = fopen(argv[3], "wb");
    for (uint32_t y = 0; f && y < img.height; y++)
        fwrite(img.pixels + y * img.stride, 1, (size_t)img.width * img.channels, f);
    if (!f || fclose(f))
        return 1;
    printf("%u %u\n", img.width, img.height);
    fl_decoder_free(d);
    free(data);
    return 0;
}
