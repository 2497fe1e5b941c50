/* image_common.c — the leaf helpers every imaging source shares (decoder.c, the per-format
 * decoders, encoder.c): grow-only scratch buffers and RGB → gray. Calls nothing else in
 * imaging/, so the format decoders depend on it and not on decoder.c, which calls them. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "image_internal.h"

int fl_buf_reserve(fl_buf *b, size_t n)
{
    if (n <= b->cap)
        return 0;
    /* Grow geometrically so a run of slightly larger images does not reallocate every time. */
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < n)
        cap = cap > SIZE_MAX / 2 ? n : cap * 2;
    void *p = malloc(cap);
    if (!p)
        return -ENOMEM;
    free(b->p);
    b->p = p;
    b->cap = cap;
    return 0;
}

void fl_buf_free(fl_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

void fl_rgb_to_gray(const uint8_t *src, uint8_t *dst, size_t npix)
{
    /* 16-bit fixed point weights summing to 65536: 0.299, 0.587, 0.114 (as libjpeg). */
    for (size_t i = 0; i < npix; i++) {
        uint32_t y = 19595u * src[3 * i] + 38470u * src[3 * i + 1] + 7471u * src[3 * i + 2];
        dst[i] = (uint8_t)((y + 32768u) >> 16);
    }
}
