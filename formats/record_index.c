/* record_index.c — builds the reader's bit-packed in-memory index (fl_record_index.h): per
 * segment, each column's range, then every row packed at the bits those ranges need. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fl_record_index.h"

/* Bits needed for values 0..span. */
static uint8_t bits_for(uint64_t span)
{
    uint8_t b = 0;
    while (b < 64 && (span >> b))
        b++;
    return b;
}

/* Room for `bytes` bytes of rows plus the 16 bytes one row's store may touch past the last. */
static int reserve(fl_rindex *x, size_t bytes)
{
    size_t need = bytes + 16;
    if (need <= x->cap)
        return 0;
    size_t cap = x->cap + x->cap / 2;
    if (cap < need)
        cap = need;
    uint8_t *p = realloc(x->rows, cap);
    if (!p)
        return -ENOMEM;
    x->rows = p; /* not zeroed here: pages not yet written stay untouched (out of the RSS) */
    x->cap = cap;
    return 0;
}

/* OR v (under 2^57) in at bit `bit` (the rows are zero there). */
static void put_bits(uint8_t *rows, uint64_t bit, uint64_t v)
{
    uint64_t w;
    memcpy(&w, rows + (bit >> 3), 8);
    w |= v << (bit & 7);
    memcpy(rows + (bit >> 3), &w, 8);
}

int fl_rindex_add(fl_rindex *x, uint64_t count, fl_ix_get_fn get, const void *src)
{
    if (x->nsegs == x->cap_segs) {
        uint32_t cap = x->cap_segs ? x->cap_segs * 2 : 16;
        fl_ix_seg *s = realloc(x->segs, cap * sizeof *s);
        if (!s)
            return -ENOMEM;
        x->segs = s;
        x->cap_segs = cap;
    }
    fl_ix_seg *s = &x->segs[x->nsegs];
    memset(s, 0, sizeof *s);
    int64_t lo[FL_IX_COLS], hi[FL_IX_COLS], v[FL_IX_COLS];
    memset(lo, 0, sizeof lo);
    memset(hi, 0, sizeof hi);
    if (count)
        get(src, 0, lo), memcpy(hi, lo, sizeof hi);
    for (uint64_t i = 1; i < count; i++) {
        get(src, i, v);
        for (int c = 0; c < FL_IX_COLS; c++) {
            lo[c] = v[c] < lo[c] ? v[c] : lo[c];
            hi[c] = v[c] > hi[c] ? v[c] : hi[c];
        }
    }
    uint32_t row = 0;
    for (int c = 0; c < FL_IX_COLS; c++) {
        uint8_t w = bits_for((uint64_t)hi[c] - (uint64_t)lo[c]);
        if (w > FL_IX_MAX_BITS)
            return -ERANGE;
        s->base[c] = lo[c];
        s->width[c] = w;
        s->shift[c] = (uint16_t)row;
        row += w;
    }
    s->row_bits = row;
    s->count = count;
    s->bit0 = x->bits;
    uint64_t end = x->bits + count * row;
    if (reserve(x, (size_t)((end + 7) / 8)))
        return -ENOMEM;
    /* the segment's bytes (from the byte holding its first bit, which an earlier row may share:
     * kept) and the 16 a row's store may touch past them, zeroed before the rows are OR'ed in */
    size_t z0 = (size_t)((s->bit0 + 7) / 8), z1 = (size_t)((end + 7) / 8) + 16;
    memset(x->rows + z0, 0, z1 - z0);
    for (uint64_t i = 0; row && i < count; i++) {
        get(src, i, v);
        uint64_t bit = s->bit0 + i * row;
        if (row + 7 <= 128) { /* the usual case: the row in one 128-bit word, OR'ed in once */
            unsigned __int128 w = 0, old;
            for (int c = 0; c < FL_IX_COLS; c++)
                w |= (unsigned __int128)(uint64_t)(v[c] - lo[c]) << s->shift[c];
            w <<= bit & 7;
            memcpy(&old, x->rows + (bit >> 3), 16);
            old |= w;
            memcpy(x->rows + (bit >> 3), &old, 16);
            continue;
        }
        for (int c = 0; c < FL_IX_COLS; c++)
            if (s->width[c])
                put_bits(x->rows, bit + s->shift[c], (uint64_t)(v[c] - lo[c]));
    }
    x->bits = end;
    x->nsegs++;
    return 0;
}

void fl_rindex_trim(fl_rindex *x)
{
    size_t want = (size_t)((x->bits + 7) / 8) + 8;
    if (!x->rows) {
        x->rows = calloc(1, 8);
        x->cap = x->rows ? 8 : 0;
        return;
    }
    if (want < x->cap) {
        uint8_t *p = realloc(x->rows, want);
        if (p) {
            x->rows = p;
            x->cap = want;
        }
    }
    if (x->nsegs && x->nsegs < x->cap_segs) {
        fl_ix_seg *s = realloc(x->segs, x->nsegs * sizeof *s);
        if (s) {
            x->segs = s;
            x->cap_segs = x->nsegs;
        }
    }
}

size_t fl_rindex_bytes(const fl_rindex *x) { return x->cap + x->cap_segs * sizeof *x->segs; }

void fl_rindex_free(fl_rindex *x)
{
    free(x->rows);
    free(x->segs);
    memset(x, 0, sizeof *x);
}
