/* fl_grow.h — the grow-only scratch buffer every layer reuses across records (decoded pixels,
 * encoded masks, archive members): one growth rule, so a buffer reused for many records reaches
 * its steady size after a few doublings and is never shrunk. Header-only, like fl_clock.h: the
 * libraries (whose internal symbols are hidden) and the tools use the same code. */
#ifndef FL_GROW_H
#define FL_GROW_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Make the caller-owned buffer (*buf, *cap bytes; NULL/0 to start) hold at least `need` bytes:
 * nothing when it already does, else realloc to the first power-of-two multiple of 4096 (or of
 * the current capacity) that is >= need. The contents up to the old capacity are kept.
 * Returns 0, or -ENOMEM with *buf and *cap unchanged (the caller still frees *buf). */
static inline int fl_grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    uint8_t *b = (uint8_t *)realloc(*buf, n);
    if (!b)
        return -ENOMEM;
    *buf = b;
    *cap = n;
    return 0;
}

#endif
