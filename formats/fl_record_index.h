/* fl_record_index.h — internal: the reader's in-memory index. Every record's index entry is kept
 * bit-packed, a few bytes a record instead of the 48-byte entry plus its name: records are cut
 * into segments (a shard, or a run of LMDB records), and in each segment every column (offset,
 * lengths, label, CRC, size, ...) is stored as its distance from the segment's smallest value in
 * just the bits the segment's largest distance needs. A column that is the same for every record
 * of a segment (a fixed image size, the format of a single-format set) takes no bits at all.
 * Lossless: a row reads back exactly the values it was built from. */
#ifndef FL_RECORD_INDEX_H
#define FL_RECORD_INDEX_H

#include <stdint.h>
#include <string.h>

/* The columns of a row. What OFFSET and NAME hold is the backend's business (dataset.c). */
enum {
    FL_IX_OFFSET, /* shards: the stored bytes' file offset; LMDB: the value's place in the map */
    FL_IX_STORED, /* stored_len */
    FL_IX_RAW,    /* raw_len - (stored_len - fields_len): 0 when uncompressed */
    FL_IX_LABEL,
    FL_IX_CRC,
    FL_IX_HEIGHT,
    FL_IX_WIDTH,
    FL_IX_FORMAT,
    FL_IX_FIELDS, /* fields_len */
    FL_IX_NAME,   /* LMDB: the name's length (shards: 0; names are read from the shard) */
    FL_IX_COLS
};

/* Largest width of a column: a value is read with one unaligned 8-byte load and a shift of up
 * to 7 bits. */
#define FL_IX_MAX_BITS 57u

typedef struct fl_ix_seg {
    uint64_t bit0;  /* the segment's first row, in bits from the start of the rows */
    uint64_t count; /* rows */
    uint32_t row_bits;
    uint16_t shift[FL_IX_COLS]; /* a column's first bit within a row */
    uint8_t width[FL_IX_COLS];  /* its bits (0: every row holds base) */
    int64_t base[FL_IX_COLS];   /* the segment's smallest value of the column */
} fl_ix_seg;

typedef struct fl_rindex {
    uint8_t *rows; /* the packed rows, 8 zero bytes past the last (one load may overrun) */
    uint64_t bits; /* bits used */
    size_t cap;    /* bytes allocated */
    fl_ix_seg *segs;
    uint32_t nsegs, cap_segs;
} fl_rindex;

/* The values of row i of a segment's source, one per column. */
typedef void (*fl_ix_get_fn)(const void *src, uint64_t i, int64_t v[FL_IX_COLS]);

/* Append a segment of `count` rows: get(src, i, ...) for i in [0, count) is called twice for
 * every row (once for the column ranges, once to pack). Returns 0, -ENOMEM, or -ERANGE when a
 * column spans more than 2^57 (never for validated entries). */
int fl_rindex_add(fl_rindex *x, uint64_t count, fl_ix_get_fn get, const void *src);

/* Give back the unused capacity once every segment is in. */
void fl_rindex_trim(fl_rindex *x);

/* Bytes held (rows and segment descriptors). */
size_t fl_rindex_bytes(const fl_rindex *x);

void fl_rindex_free(fl_rindex *x);

/* Column c of row i of segment s. */
static inline int64_t fl_rindex_col(const fl_rindex *x, const fl_ix_seg *s, uint64_t i, int c)
{
    uint64_t bit = s->bit0 + i * s->row_bits + s->shift[c], w;
    memcpy(&w, x->rows + (bit >> 3), 8); /* little-endian host (shard_reader.c checks) */
    return s->base[c] + (int64_t)((w >> (bit & 7)) & ((1ull << s->width[c]) - 1));
}

/* Every column of row i of segment s. */
static inline void fl_rindex_row(const fl_rindex *x, const fl_ix_seg *s, uint64_t i,
                                 int64_t v[FL_IX_COLS])
{
    for (int c = 0; c < FL_IX_COLS; c++)
        v[c] = s->width[c] ? fl_rindex_col(x, s, i, c) : s->base[c];
}

/* Where row i of segment s starts (for a prefetch). */
static inline const uint8_t *fl_rindex_addr(const fl_rindex *x, const fl_ix_seg *s, uint64_t i)
{
    return x->rows + ((s->bit0 + i * s->row_bits) >> 3);
}

#endif
