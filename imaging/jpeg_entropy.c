/* jpeg_entropy.c — a faster Huffman decoder for single-scan sequential JPEGs, installed in place
 * of libjpeg's own (cinfo->entropy->decode_mcu) after jpeg_start_decompress. The entropy-coded
 * data is first copied with its stuffed zeros removed and its restart intervals located, so the
 * bit reader refills 8 bytes at a time without looking for markers, and a restart is a jump to a
 * known offset; one table look-up resolves a code together with its extra bits. libjpeg-turbo
 * 2.1.5 takes its slow bit-by-bit path for every MCU of a file with restart markers, the files the
 * crop decode reads fastest. Restart intervals of up to PAIR_MAX_MCUS MCUs are decoded two at a
 * time (decode_pair), symbol by symbol in turn: a Huffman decoder is bound by each symbol's wait
 * for the one before it, and two independent intervals give the CPU two such chains to overlap.
 * The bit reader refills on every symbol, without a branch (a data-dependent refill branch
 * mispredicts). The coefficients are libjpeg's: same zigzag order (including its
 * tolerance of run-lengths past coefficient 63), same DC prediction and restart resets; corrupt
 * data raises the same warnings libjpeg raises (bad Huffman code, premature end of data, restart
 * marker out of sequence), which the caller's error manager turns into errors.
 * Files without restart markers are one bit stream, so no MCU can be decoded without those
 * before it; instead the decoder notes its state (bit offset and DC predictors) every `step`-th
 * MCU as it goes (an entry-point index), and decodes lazily: an MCU libjpeg discards (rows
 * above a crop) or will not inverse-DCT (columns beside it) is decoded only when a later MCU
 * needs the bits before it. With the index of an earlier decode of the same file (the loader
 * keeps one per record: fl_decoder_set_jpeg_index), a needed MCU is reached from the nearest
 * entry point at or before it, so rows above the crop and most columns beside it are never
 * Huffman-decoded at all; and the crop's rows are decoded two at a time (pair_rows: row r's
 * needed MCUs and row r + 1's, each from its own entry point, through decode_two, as restart
 * intervals are). */
#include <errno.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
/* jpeglib.h's private half: the entropy decoder and input controller interfaces */
#include <jpegint.h>

#include "image_internal.h"

#define FAST_BITS     10
#define PAD_BYTES     320 /* one block reads at most 64 codes of 31 bits before the check */
#define CACHE_TABLES  8
#define PAIR_MAX_MCUS 16 /* restart intervals up to this many MCUs are decoded in pairs */

/* A decoding table. fast[] maps the next FAST_BITS bits to a packed entry: bits 0-7 the bits
 * consumed (code and extra bits), 8-15 the zero run before the coefficient (EOB: RUN_EOB), 16-31
 * the coefficient (DC: the difference); 0 when the code and its extra bits are longer. */
#define RUN_EOB 0x80
typedef struct ftab {
    int32_t fast[1 << FAST_BITS];
    uint16_t
        look[1 << FAST_BITS]; /* codes up to FAST_BITS long: (length << 8) | symbol, 0: longer */
    int32_t maxcode[17];      /* largest code of each length, -1: none */
    int32_t valoff[17];       /* symbol index = valoff[len] + code */
    uint8_t val[256];
    uint32_t nval;
    int ac;
    uint8_t key[17 + 256]; /* the JHUFF_TBL it was built from (bits, huffval) */
    uint32_t keylen;
} ftab;

struct fl_jpeg_entropy {
    fl_buf data; /* entropy-coded bytes, unstuffed, then PAD_BYTES zeros */
    fl_buf ivl;  /* uint32 start offset of each restart interval (one when no restarts) */
    uint32_t nivl;
    ftab tabs[CACHE_TABLES]; /* built tables, reused while the files' tables stay the same */
    uint32_t ntabs, next_evict;
    const ftab *dc[D_MAX_BLOCKS_IN_MCU], *ac[D_MAX_BLOCKS_IN_MCU];
    uint8_t comp[D_MAX_BLOCKS_IN_MCU];
    uint32_t nblk;
    /* the bit reader: up to 64 bits MSB-aligned in buf, cnt of them valid, refilled from bp */
    const uint8_t *bp;
    uint64_t buf;
    uint32_t cnt;
    uint64_t end_bits; /* where the current interval's data ends, in bits from data.p */
    uint32_t cur;      /* current interval */
    uint32_t to_go;    /* MCUs left in it */
    /* Paired decoding (decode_pair): two intervals of one MCU row decoded together into coef */
    fl_buf coef;        /* 2 * restart_interval MCUs of coefficients, zero outside a pair */
    int pairing;        /* this image may pair (restart intervals of at most PAIR_MAX_MCUS) */
    uint32_t pair_left; /* MCUs of the decoded pair still to hand to libjpeg */
    uint32_t pair_pos;  /* the next of them */
    uint64_t mcu_n;     /* MCUs handed to libjpeg so far in this image */
    int32_t pred[MAX_COMPS_IN_SCAN];
    int dead; /* a warning was tolerated by the error manager: the rest decodes as zeros */
    JBLOCK dummy;
    /* Lazy decoding with entry points (files without restart markers; see the top) */
    int lazy;          /* this image decodes lazily */
    uint64_t pos;      /* the MCU the bit reader is at */
    uint32_t mpr;      /* MCUs per row */
    uint32_t col;      /* column of the MCU libjpeg asks for next */
    fl_buf ix;         /* jidx_head, then ix_cap jidx_entry */
    uint32_t ix_known; /* entries known (given or learned); entry 0 always */
    uint32_t ix_given; /* of them, from the caller's index */
    uint32_t ix_cap;
    uint32_t step;    /* MCUs between entries */
    uint64_t mcus;    /* in the scan */
    uint64_t next_cp; /* the MCU whose entry is to be noted next (UINT64_MAX: none) */
    const void *use;  /* the caller's index for the next image (fl_jpeg_entropy_use_index) */
    size_t use_len;
    /* Row pairs (lazy decoding with an index): the run of MCUs libjpeg needs in row r and the
     * one in row r + 1, each reached from its own entry point, decoded together (decode_two)
     * into `runs` and handed out as libjpeg asks for them */
    int row_pairs;         /* this image may pair rows */
    fl_buf runs;           /* two runs of run_len MCUs of coefficients */
    uint64_t run_a, run_b; /* the first MCU of each */
    uint32_t run_len;      /* 0: none buffered */
    uint64_t row;          /* MCU row of the MCU libjpeg asks for next */
    uint64_t last_row;     /* the last MCU row libjpeg will ask for (a hint), UINT64_MAX: unknown */
};

/* The entry-point index (the bytes fl_jpeg_entropy_index hands out and use_index takes back):
 * a head saying which file it belongs to, then entry i, the bit reader's state at MCU i * step. */
#define JIDX_MAGIC   0x3158444au /* "JDX1" */
#define JIDX_ENTRIES 128         /* at most this many entries an image (about 1.5 KiB) */
typedef struct jidx_head {
    uint32_t magic;
    uint32_t bytes; /* unstuffed entropy-coded bytes */
    uint64_t mcus;  /* MCUs in the scan */
    uint64_t hash;  /* of the geometry and the data's first and last bytes */
    uint32_t step;
    uint32_t n; /* entries */
} jidx_head;
typedef struct jidx_entry {
    uint32_t bit;    /* offset in the unstuffed data */
    int16_t pred[4]; /* DC predictors, modulo 2^16 (all a JCOEF keeps) */
} jidx_entry;

static inline jidx_head *ix_head(struct fl_jpeg_entropy *e) { return (jidx_head *)e->ix.p; }
static inline jidx_entry *ix_entries(struct fl_jpeg_entropy *e)
{
    return (jidx_entry *)(void *)(e->ix.p + sizeof(jidx_head));
}

/* libjpeg's zigzag order with 16 extra entries: a corrupt run that overshoots coefficient 63
 * lands on 63, as in libjpeg. */
static const uint8_t natural_order[64 + 16] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33,
    40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36,
    29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54,
    47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

static inline int32_t extend(uint32_t x, uint32_t s)
{
    return s == 0 ? 0 : x < (1u << (s - 1)) ? (int32_t)x - (int32_t)(1u << s) + 1 : (int32_t)x;
}

/* The packed entry of symbol sym with extra bits x: run and value as decode_mcu uses them. */
static inline int32_t entry(int ac, uint32_t sym, uint32_t x, uint32_t len)
{
    if (!ac)
        return (int32_t)((uint32_t)extend(x, sym) << 16 | len);
    uint32_t r = sym >> 4, s = sym & 15;
    if (s == 0) /* ZRL: fifteen zeros and a zero; any other run without a size ends the block */
        return (int32_t)((r == 15 ? 15u : RUN_EOB) << 8 | len);
    return (int32_t)((uint32_t)extend(x, s) << 16 | r << 8 | len);
}

/* Build t from a libjpeg table (already validated by jpeg_make_d_derived_tbl). 0 or -1. */
static int ftab_build(ftab *t, const JHUFF_TBL *h, int ac)
{
    uint32_t n = 0;
    for (int l = 1; l <= 16; l++)
        n += h->bits[l];
    if (n > 256)
        return -1;
    memset(t->fast, 0, sizeof t->fast);
    memset(t->look, 0, sizeof t->look);
    memcpy(t->val, h->huffval, n);
    t->nval = n;
    t->ac = ac;
    uint32_t code = 0, k = 0;
    for (uint32_t l = 1; l <= 16; l++) {
        t->valoff[l] = (int32_t)k - (int32_t)code;
        for (uint32_t i = 0; i < h->bits[l]; i++, k++, code++) {
            if (code >= (1u << l))
                return -1;
            uint32_t sym = h->huffval[k], s = ac ? sym & 15 : sym;
            if (s > 15)
                return -1;
            if (l <= FAST_BITS)
                for (uint32_t j = 0; j < (1u << (FAST_BITS - l)); j++)
                    t->look[(code << (FAST_BITS - l)) | j] = (uint16_t)(l << 8 | sym);
            if (l + s > FAST_BITS)
                continue;
            for (uint32_t x = 0; x < (1u << s); x++) {
                uint32_t rest = FAST_BITS - l - s, at = ((code << s) | x) << rest;
                int32_t e = entry(ac, sym, x, l + s);
                for (uint32_t j = 0; j < (1u << rest); j++)
                    t->fast[at + j] = e;
            }
        }
        t->maxcode[l] = h->bits[l] ? (int32_t)code - 1 : -1;
        code <<= 1;
    }
    t->key[0] = (uint8_t)ac;
    memcpy(t->key + 1, h->bits + 1, 16);
    memcpy(t->key + 17, h->huffval, n);
    t->keylen = 17 + n;
    return 0;
}

/* The table for h, from the cache or built into it; a slot in `busy` (the tables this image
 * already uses) is never evicted. */
static const ftab *table_get(struct fl_jpeg_entropy *e, const JHUFF_TBL *h, int ac, uint32_t *busy)
{
    if (!h)
        return NULL;
    uint8_t key[17 + 256];
    uint32_t n = 0;
    for (int l = 1; l <= 16; l++)
        n += h->bits[l];
    if (n > 256)
        return NULL;
    key[0] = (uint8_t)ac;
    memcpy(key + 1, h->bits + 1, 16);
    memcpy(key + 17, h->huffval, n);
    uint32_t i;
    for (i = 0; i < e->ntabs; i++)
        if (e->tabs[i].keylen == 17 + n && !memcmp(e->tabs[i].key, key, 17 + n))
            goto found;
    if (e->ntabs < CACHE_TABLES) {
        i = e->ntabs++;
    } else {
        for (uint32_t t = 0;; t++) { /* an image uses at most 8 tables: one slot is free */
            if (t == CACHE_TABLES)
                return NULL;
            i = e->next_evict++ % CACHE_TABLES;
            if (!(*busy & (1u << i)))
                break;
        }
    }
    if (ftab_build(&e->tabs[i], h, ac)) {
        e->tabs[i].keylen = 0;
        return NULL;
    }
found:
    *busy |= 1u << i;
    return &e->tabs[i];
}

/* A code and its extra bits longer than the fast table: the code from the code-only table (or,
 * longer still, by its canonical value), then its extra bits. */
static int32_t decode_slow(const ftab *t, uint64_t buf)
{
    uint32_t e = t->look[buf >> (64 - FAST_BITS)], l, sym;
    if (e) {
        l = e >> 8;
        sym = e & 255;
    } else {
        for (l = FAST_BITS + 1;; l++) {
            if (l > 16)
                return 0;
            int32_t code = (int32_t)(buf >> (64 - l));
            if (code <= t->maxcode[l]) {
                int32_t i = t->valoff[l] + code;
                if (i < 0 || (uint32_t)i >= t->nval)
                    return 0;
                sym = t->val[i];
                break;
            }
        }
    }
    uint32_t s = t->ac ? sym & 15 : sym;
    uint32_t x = s ? (uint32_t)((buf << l) >> (64 - s)) : 0;
    return entry(t->ac, sym, x, l + s);
}

/* Note a corrupt stream the way libjpeg does; the caller's emit_message normally longjmps. */
static boolean warn(j_decompress_ptr ci, struct fl_jpeg_entropy *e, int code)
{
    e->dead = 1;
    WARNMS(ci, code);
    return TRUE;
}

#define REFILL() FL_BITS_REFILL(bp, buf, cnt)

/* The rest of one AC code of stream S once its table entry x_ is known: consume its bits, then
 * goto `end` after the block's last coefficient (EOB or past 63), else store the coefficient. */
#define AC_APPLY(S, x_, end)                                                                       \
    do {                                                                                           \
        buf##S <<= (x_)&255;                                                                       \
        cnt##S -= (x_)&255;                                                                        \
        uint32_t r_ = ((uint32_t)(x_) >> 8) & 255;                                                 \
        if (r_ == RUN_EOB)                                                                         \
            goto end;                                                                              \
        k##S += r_;                                                                                \
        o##S[natural_order[k##S]] = (JCOEF)((x_) >> 16);                                           \
        if (++k##S >= 64)                                                                          \
            goto end;                                                                              \
    } while (0)

/* One AC code of stream S (bit reader bp##S, buf##S, cnt##S; next coefficient k##S of block
 * o##S) with table ac: goto `end` after the block's last coefficient (EOB or past 63), return
 * -1 on a bad code. The same steps as decode_mcu's AC loop. */
#define AC_STEP(S, end)                                                                            \
    do {                                                                                           \
        FL_BITS_REFILL(bp##S, buf##S, cnt##S);                                                     \
        int32_t x_ = ac->fast[buf##S >> (64 - FAST_BITS)];                                         \
        if (!x_ && !(x_ = decode_slow(ac, buf##S)))                                                \
            return -1;                                                                             \
        AC_APPLY(S, x_, end);                                                                      \
    } while (0)

/* AC_STEP without the refill: right after an AC_STEP, whose refill left at least 56 bits and
 * whose code took at most FAST_BITS of them (a longer one refills again below). */
#define AC_STEP2(S, end)                                                                           \
    do {                                                                                           \
        int32_t x_ = ac->fast[buf##S >> (64 - FAST_BITS)];                                         \
        if (!x_) {                                                                                 \
            FL_BITS_REFILL(bp##S, buf##S, cnt##S);                                                 \
            if (!(x_ = decode_slow(ac, buf##S)))                                                   \
                return -1;                                                                         \
        }                                                                                          \
        AC_APPLY(S, x_, end);                                                                      \
    } while (0)

/* The DC code of stream S with table dc into o##S[0] (predictor pred##S[c]); -1 on a bad code. */
#define DC_STEP(S)                                                                                 \
    do {                                                                                           \
        FL_BITS_REFILL(bp##S, buf##S, cnt##S);                                                     \
        int32_t x_ = dc->fast[buf##S >> (64 - FAST_BITS)];                                         \
        if (!x_ && !(x_ = decode_slow(dc, buf##S)))                                                \
            return -1;                                                                             \
        buf##S <<= x_ & 255;                                                                       \
        cnt##S -= x_ & 255;                                                                        \
        pred##S[c] = (int32_t)((uint32_t)pred##S[c] + (uint32_t)(x_ >> 16));                       \
        o##S[0] = (JCOEF)pred##S[c];                                                               \
    } while (0)

/* One of the two bit streams decode_two decodes together: its reader state (bit reader,
 * predictors, where its data ends), then `skip` MCUs to decode and discard, then `keep` MCUs to
 * decode into `out` (keep * nblk blocks, zero beforehand). */
typedef struct chain {
    const uint8_t *bp;
    uint64_t buf;
    uint32_t cnt;
    int32_t pred[MAX_COMPS_IN_SCAN];
    uint64_t end_bits;
    uint32_t skip, keep;
    JCOEF *out;
} chain;

/* Chain C alone from its MCU m on (of skip + keep), kept blocks into out; its state moves on.
 * 0, or -1 as decode_two. */
static int decode_alone(struct fl_jpeg_entropy *e, chain *C, uint32_t m, JCOEF *out)
{
    const uint8_t *base = e->data.p, *bpa = C->bp;
    uint64_t bufa = C->buf, enda = C->end_bits;
    uint32_t cnta = C->cnt;
    int32_t preda[MAX_COMPS_IN_SCAN];
    memcpy(preda, C->pred, sizeof preda);
    JBLOCK sink_a;
    for (; m < C->skip + C->keep; m++) {
        int keepa = m >= C->skip;
        for (uint32_t b = 0; b < e->nblk; b++) {
            JCOEF *oa = keepa ? out : sink_a;
            const ftab *dc = e->dc[b], *ac = e->ac[b];
            uint32_t c = e->comp[b];
            DC_STEP(a);
            uint32_t ka = 1;
            for (;;) {
                AC_STEP(a, a_end);
                AC_STEP2(a, a_end);
            }
        a_end:
            if ((uint64_t)(bpa - base) * 8 - cnta > enda)
                return -1;
            out += keepa ? DCTSIZE2 : 0;
        }
    }
    C->bp = bpa, C->buf = bufa, C->cnt = cnta;
    memcpy(C->pred, preda, sizeof preda);
    return 0;
}

/* Decode chains A and B together, symbol by symbol in turn: the two bit streams are
 * independent, so their symbol-by-symbol dependency chains, which bound a Huffman decoder,
 * overlap in the CPU; when one is done the other goes on alone. Same coefficients as decode_mcu
 * gives. The chains' states move on to where they end. 0, or -1 on a bad code or a read past a
 * stream's data (the caller then decodes one MCU at a time with decode_mcu, which raises
 * libjpeg's warning at the MCU where it occurs; the outputs are then not all zero). */
static int decode_two(struct fl_jpeg_entropy *e, chain *A, chain *B)
{
    const uint8_t *base = e->data.p;
    const uint8_t *bpa = A->bp, *bpb = B->bp;
    uint64_t bufa = A->buf, bufb = B->buf, enda = A->end_bits, endb = B->end_bits;
    uint32_t cnta = A->cnt, cntb = B->cnt;
    int32_t preda[MAX_COMPS_IN_SCAN], predb[MAX_COMPS_IN_SCAN];
    memcpy(preda, A->pred, sizeof preda);
    memcpy(predb, B->pred, sizeof predb);
    JBLOCK sink_a, sink_b; /* where skipped MCUs' blocks go */
    const uint32_t na = A->skip + A->keep, nb = B->skip + B->keep;
    const uint32_t both = na < nb ? na : nb;
    JCOEF *outa = A->out, *outb = B->out;
    uint32_t m = 0;
    for (; m < both; m++) {
        int keepa = m >= A->skip, keepb = m >= B->skip;
        for (uint32_t b = 0; b < e->nblk; b++) {
            JCOEF *oa = keepa ? outa : sink_a, *ob = keepb ? outb : sink_b;
            const ftab *dc = e->dc[b], *ac = e->ac[b];
            uint32_t c = e->comp[b];
            DC_STEP(a);
            DC_STEP(b);
            uint32_t ka = 1, kb = 1;
            for (;;) {
                AC_STEP(a, a_end);
                AC_STEP(b, b_end);
                AC_STEP2(a, a_end);
                AC_STEP2(b, b_end);
            }
        a_end:
            for (;;) {
                AC_STEP(b, done);
                AC_STEP2(b, done);
            }
        b_end:
            for (;;) {
                AC_STEP(a, done);
                AC_STEP2(a, done);
            }
        done:
            if ((uint64_t)(bpa - base) * 8 - cnta > enda ||
                (uint64_t)(bpb - base) * 8 - cntb > endb)
                return -1; /* read past a stream's data */
            outa += keepa ? DCTSIZE2 : 0;
            outb += keepb ? DCTSIZE2 : 0;
        }
    }
    A->bp = bpa, A->buf = bufa, A->cnt = cnta;
    B->bp = bpb, B->buf = bufb, B->cnt = cntb;
    memcpy(A->pred, preda, sizeof preda);
    memcpy(B->pred, predb, sizeof predb);
    /* the longer chain alone */
    return decode_alone(e, A, m, outa) || decode_alone(e, B, m, outb) ? -1 : 0;
}

/* Decode restart intervals cur+1 and cur+2 (n MCUs each, both whole inside e->data) together
 * into e->coef (decode_two): each interval starts byte-aligned with its predictors at zero. 0 or
 * -1 as decode_two. */
static int decode_pair(struct fl_jpeg_entropy *e, uint32_t n)
{
    const uint32_t *iv = (const uint32_t *)e->ivl.p;
    uint32_t ia = e->cur + 1, ib = e->cur + 2;
    JCOEF *out = (JCOEF *)e->coef.p;
    chain A = {.bp = e->data.p + iv[ia], .end_bits = iv[ia + 1] * 8ull, .keep = n, .out = out};
    chain B = {.bp = e->data.p + iv[ib],
               .end_bits = iv[ib + 1] * 8ull,
               .keep = n,
               .out = out + (size_t)n * e->nblk * DCTSIZE2};
    return decode_two(e, &A, &B);
}

/* Note the bit reader's state as entry point ix_known (the MCU at e->pos starts it). */
static void note_entry(struct fl_jpeg_entropy *e)
{
    jidx_entry *en = ix_entries(e) + e->ix_known;
    en->bit = (uint32_t)((uint64_t)(e->bp - e->data.p) * 8 - e->cnt);
    for (int c = 0; c < MAX_COMPS_IN_SCAN && c < 4; c++)
        en->pred[c] = (int16_t)(uint16_t)(uint32_t)e->pred[c];
    e->ix_known++;
    e->next_cp = e->ix_known < e->ix_cap ? (uint64_t)e->ix_known * e->step : UINT64_MAX;
}

/* Decode the MCU at the bit reader into mcu (NULL: discard it). 0, or libjpeg's warning code
 * for corrupt data. */
static inline __attribute__((always_inline)) int mcu_decode(struct fl_jpeg_entropy *e,
                                                            JBLOCKROW *mcu)
{
    if (e->pos == e->next_cp)
        note_entry(e);
    const uint8_t *bp = e->bp, *base = e->data.p;
    uint64_t buf = e->buf;
    uint32_t cnt = e->cnt;
    for (uint32_t b = 0; b < e->nblk; b++) {
        JCOEF *blk = mcu ? mcu[b][0] : e->dummy;
        const ftab *dc = e->dc[b], *ac = e->ac[b];
        REFILL();
        int32_t x = dc->fast[buf >> (64 - FAST_BITS)];
        if (!x && !(x = decode_slow(dc, buf)))
            return JWRN_HUFF_BAD_CODE;
        buf <<= x & 255;
        cnt -= x & 255;
        uint32_t c = e->comp[b];
        /* unsigned: a crafted run of large differences wraps instead of overflowing */
        e->pred[c] = (int32_t)((uint32_t)e->pred[c] + (uint32_t)(x >> 16));
        blk[0] = (JCOEF)e->pred[c];
        for (uint32_t k = 1; k < 64;) {
            REFILL();
            x = ac->fast[buf >> (64 - FAST_BITS)];
            if (!x && !(x = decode_slow(ac, buf)))
                return JWRN_HUFF_BAD_CODE;
            buf <<= x & 255;
            cnt -= x & 255;
            uint32_t r = ((uint32_t)x >> 8) & 255;
            if (r == RUN_EOB)
                break;
            k += r;
            blk[natural_order[k]] = (JCOEF)(x >> 16);
            k++;
        }
        if ((uint64_t)(bp - base) * 8 - cnt > e->end_bits)
            return JWRN_HIT_MARKER; /* read past the interval's data */
    }
    e->bp = bp;
    e->buf = buf;
    e->cnt = cnt;
    e->pos++;
    return 0;
}

/* Bring the bit reader to MCU n (not yet decoded: e->pos != n): from where it is when that is
 * at or after the nearest entry point before n, else from that entry point, decoding and
 * discarding the MCUs in between. 0 or a warning code. */
static int seek(struct fl_jpeg_entropy *e, uint64_t n)
{
    uint64_t i = n / e->step;
    if (i >= e->ix_known)
        i = e->ix_known - 1;
    if (e->pos > n || e->pos < i * e->step) {
        const jidx_entry *en = ix_entries(e) + i;
        e->bp = e->data.p + (en->bit >> 3);
        e->buf = 0;
        e->cnt = 0;
        FL_BITS_REFILL(e->bp, e->buf, e->cnt);
        e->buf <<= en->bit & 7;
        e->cnt -= en->bit & 7;
        for (int c = 0; c < MAX_COMPS_IN_SCAN && c < 4; c++)
            e->pred[c] = en->pred[c];
        e->pos = i * e->step;
    }
    while (e->pos < n) {
        int w = mcu_decode(e, NULL);
        if (w)
            return w;
    }
    return 0;
}

/* MCU n (at the bit reader, the first MCU of row r's run [n, n + len) of needed columns):
 * decode that run together with row r + 1's run [n + mpr, n + mpr + len), the latter from the
 * nearest entry point before it, into e->runs; the bit reader then stands after row r + 1's
 * run. 0, or -1 when the rows cannot be paired or the data is corrupt (nothing changed: the
 * caller decodes MCU by MCU, which raises the warning where it occurs). */
static int pair_rows(struct fl_jpeg_entropy *e, uint64_t n, uint64_t r, uint32_t len)
{
    uint64_t m = n + e->mpr;
    if (r + 1 > e->last_row || m + len > e->next_cp || m + len > e->mcus ||
        m / e->step >= e->ix_known)
        return -1; /* row r + 1 not needed or not there, or its run not behind known entries */
    size_t nb = (size_t)e->nblk * DCTSIZE2, bytes = 2 * (size_t)len * nb * sizeof(JCOEF);
    if (fl_buf_reserve(&e->runs, bytes))
        return -1;
    memset(e->runs.p, 0, bytes);
    const uint32_t *iv = (const uint32_t *)e->ivl.p;
    JCOEF *out = (JCOEF *)e->runs.p;
    chain A = {.bp = e->bp,
               .buf = e->buf,
               .cnt = e->cnt,
               .end_bits = e->end_bits,
               .keep = len,
               .out = out};
    memcpy(A.pred, e->pred, sizeof A.pred);
    uint64_t i = m / e->step;
    const jidx_entry *en = ix_entries(e) + i;
    chain B = {.bp = e->data.p + (en->bit >> 3),
               .end_bits = iv[1] * 8ull,
               .skip = (uint32_t)(m - i * e->step),
               .keep = len,
               .out = out + (size_t)len * nb};
    FL_BITS_REFILL(B.bp, B.buf, B.cnt);
    B.buf <<= en->bit & 7;
    B.cnt -= en->bit & 7;
    for (int c = 0; c < MAX_COMPS_IN_SCAN && c < 4; c++)
        B.pred[c] = en->pred[c];
    if (decode_two(e, &A, &B))
        return -1;
    e->bp = B.bp;
    e->buf = B.buf;
    e->cnt = B.cnt;
    memcpy(e->pred, B.pred, sizeof e->pred);
    e->pos = m + len;
    e->run_a = n;
    e->run_b = m;
    e->run_len = len;
    return 0;
}

/* Hand MCU k of buffered run `which` (0: run_a, 1: run_b) to libjpeg. */
static boolean serve_run(struct fl_jpeg_entropy *e, JBLOCKROW *mcu, int which, uint64_t k)
{
    size_t nb = (size_t)e->nblk * DCTSIZE2;
    const JCOEF *src = (const JCOEF *)e->runs.p + ((size_t)which * e->run_len + k) * nb;
    for (uint32_t b = 0; b < e->nblk; b++)
        memcpy(mcu[b][0], src + (size_t)b * DCTSIZE2, sizeof(JBLOCK));
    return TRUE;
}

static boolean decode_mcu(j_decompress_ptr ci, JBLOCKROW *mcu)
{
    struct fl_jpeg_entropy *e = ci->client_data;
    if (e->dead)
        return TRUE; /* blocks stay zero, as libjpeg's after insufficient data */
    if (e->lazy) {
        /* libjpeg asks for every MCU in order; it discards those of skipped rows (mcu NULL)
         * and inverse-DCTs only the columns of the crop (jdcoefct.c's decompress_onepass tests
         * the same bounds), so the others need no coefficients. Without a given index, every
         * MCU of a row libjpeg reads is still decoded: then a crop decode reads what libjpeg's
         * would, and refuses the same damaged files. */
        uint64_t n = e->mcu_n++, r = e->row;
        uint32_t col = e->col;
        if (col + 1 == e->mpr) {
            e->col = 0;
            e->row++;
        } else {
            e->col = col + 1;
        }
        JDIMENSION c0 = ci->master->first_iMCU_col, c1 = ci->master->last_iMCU_col;
        if (!mcu || (e->ix_given > 1 && (col < c0 || col > c1)))
            return TRUE;
        if (e->run_len) {
            if (n - e->run_a < e->run_len)
                return serve_run(e, mcu, 0, n - e->run_a);
            if (n - e->run_b < e->run_len)
                return serve_run(e, mcu, 1, n - e->run_b);
        }
        int w = e->pos == n ? 0 : seek(e, n);
        if (w)
            return warn(ci, e, w);
        if (e->row_pairs && col == c0 && e->ix_given > 1) {
            if (pair_rows(e, n, r, c1 - c0 + 1) == 0)
                return serve_run(e, mcu, 0, 0);
            e->row_pairs = 1; /* corrupt or past the index: MCU by MCU from here */
        }
        w = mcu_decode(e, mcu);
        return w ? warn(ci, e, w) : TRUE;
    }
    if (ci->restart_interval) {
        if (!e->pair_left && e->to_go == 0 && e->pairing && e->cur + 2 < e->nivl &&
            e->mcu_n + 2ull * ci->restart_interval <=
                (uint64_t)ci->MCUs_per_row * ci->MCU_rows_in_scan) {
            /* the second may start the next MCU row, which libjpeg may never ask for: then it
             * was decoded for nothing; if corrupt, decode_mcu takes over before it */
            if (decode_pair(e, ci->restart_interval) == 0) {
                e->cur += 2;
                e->pair_left = 2 * ci->restart_interval;
                e->pair_pos = 0;
            } else {
                e->pairing = 0; /* corrupt: one by one from here, warnings where they occur */
            }
        }
        if (e->pair_left) {
            size_t nb = (size_t)e->nblk * DCTSIZE2;
            JCOEF *src = (JCOEF *)e->coef.p + e->pair_pos * nb;
            for (uint32_t b = 0; b < e->nblk; b++)
                if (mcu)
                    memcpy(mcu[b][0], src + (size_t)b * DCTSIZE2, sizeof(JBLOCK));
            memset(src, 0, nb * sizeof(JCOEF));
            e->pair_pos++;
            e->pair_left--;
            e->mcu_n++;
            return TRUE;
        }
        if (e->to_go == 0) { /* next interval: byte-aligned, predictors reset */
            if (++e->cur >= e->nivl)
                return warn(ci, e, JWRN_MUST_RESYNC);
            const uint32_t *iv = (const uint32_t *)e->ivl.p;
            e->bp = e->data.p + iv[e->cur];
            e->buf = 0;
            e->cnt = 0;
            e->end_bits = iv[e->cur + 1] * 8ull;
            memset(e->pred, 0, sizeof e->pred);
            e->to_go = ci->restart_interval;
        }
        e->to_go--;
    }
    int w = mcu_decode(e, mcu);
    if (w)
        return warn(ci, e, w);
    e->mcu_n++;
    return TRUE;
}

/* Copy the entropy-coded data at src (stuffed zeros removed) into e->data and note where each
 * of at most max_ivl restart intervals starts. Returns the offset in src of the marker that ends
 * the data (len when the data runs to the end), or (size_t)-1 when out of memory. A restart
 * marker out of sequence ends the data there, so decoding past it raises libjpeg's resync
 * warning. */
static size_t unstuff(struct fl_jpeg_entropy *e, const uint8_t *src, size_t len, uint64_t max_ivl,
                      int restarts)
{
    if (fl_buf_reserve(&e->data, len + PAD_BYTES) ||
        fl_buf_reserve(&e->ivl, (max_ivl + 1) * sizeof(uint32_t)))
        return (size_t)-1;
    uint32_t *iv = (uint32_t *)e->ivl.p;
    uint8_t *o = e->data.p;
    size_t on = 0, p = 0, end = len;
    iv[0] = 0;
    e->nivl = 1;
    for (;;) {
        size_t at;
#if defined(__SSE2__)
        /* 16 bytes at a time up to the next 0xFF; o has room for the bytes stored past it (the
         * output never runs ahead of the input, and the input has 16 more bytes) */
        const __m128i ff = _mm_set1_epi8((char)0xFF);
        for (; p + 16 <= len; p += 16, on += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(src + p));
            _mm_storeu_si128((__m128i *)(void *)(o + on), v);
            unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, ff));
            if (m) {
                unsigned k = (unsigned)__builtin_ctz(m);
                on += k;
                p += k;
                at = p;
                goto at_ff;
            }
        }
#endif
        const uint8_t *q = memchr(src + p, 0xFF, len - p);
        at = q ? (size_t)(q - src) : len;
        memcpy(o + on, src + p, at - p);
        on += at - p;
#if defined(__SSE2__)
    at_ff:
#endif
        if (at + 1 >= len)
            break; /* no marker: the data runs to the end (or ends on a lone 0xFF) */
        uint8_t m = src[at + 1];
        if (m == 0x00) {
            o[on++] = 0xFF;
            p = at + 2;
        } else if (m == 0xFF) {
            p = at + 1; /* fill byte before a marker */
        } else if (restarts && e->nivl < max_ivl && m == 0xD0 + ((e->nivl - 1) & 7)) {
            iv[e->nivl++] = (uint32_t)on;
            p = at + 2;
        } else {
            end = at;
            break;
        }
    }
    iv[e->nivl] = (uint32_t)on; /* the end of the last interval */
    memset(o + on, 0, PAD_BYTES);
    return end;
}

struct fl_jpeg_entropy *fl_jpeg_entropy_new(void)
{
    return calloc(1, sizeof(struct fl_jpeg_entropy));
}

void fl_jpeg_entropy_free(struct fl_jpeg_entropy *e)
{
    if (!e)
        return;
    fl_buf_free(&e->data);
    fl_buf_free(&e->ivl);
    fl_buf_free(&e->coef);
    fl_buf_free(&e->ix);
    fl_buf_free(&e->runs);
    free(e);
}

/* What identifies the file an index belongs to: its MCU geometry and the first and last 64
 * bytes of its entropy-coded data (FNV-1a). */
static uint64_t index_hash(const struct fl_jpeg_entropy *e, uint32_t bytes, uint32_t mpr)
{
    uint64_t h = 14695981039346656037ull;
    uint32_t geo[3] = {e->nblk, mpr, bytes};
    const uint8_t *g = (const uint8_t *)geo;
    for (size_t i = 0; i < sizeof geo; i++)
        h = (h ^ g[i]) * 1099511628211ull;
    uint32_t k = bytes < 64 ? bytes : 64;
    for (uint32_t i = 0; i < k; i++)
        h = (h ^ e->data.p[i]) * 1099511628211ull;
    for (uint32_t i = bytes - k; i < bytes; i++)
        h = (h ^ e->data.p[i]) * 1099511628211ull;
    return h;
}

/* Set up lazy decoding for this image (a file without restart markers whose MCUs libjpeg asks
 * for in rows of mpr), with the entries of the caller's index when it is this file's: checked
 * against the head and for offsets inside the data, in order. 0 or -ENOMEM. */
static int index_setup(struct fl_jpeg_entropy *e, struct jpeg_decompress_struct *ci, uint64_t mcus,
                       const void *use, size_t use_len)
{
    e->ix_known = e->ix_given = e->ix_cap = 0;
    e->next_cp = UINT64_MAX;
    const uint32_t *iv = (const uint32_t *)e->ivl.p;
    uint64_t bytes = iv[e->nivl];
    JDIMENSION c0 = ci->master->first_iMCU_col, c1 = ci->master->last_iMCU_col;
    if (ci->restart_interval || bytes >= (1u << 29) || mcus == 0 || ci->MCUs_per_row == 0 ||
        c0 > c1 || c1 >= ci->MCUs_per_row)
        return 0;
    uint32_t step = (uint32_t)((mcus + JIDX_ENTRIES - 1) / JIDX_ENTRIES);
    if (step < 2)
        step = 2;
    uint32_t cap = (uint32_t)((mcus + step - 1) / step);
    if (fl_buf_reserve(&e->ix, sizeof(jidx_head) + (size_t)cap * sizeof(jidx_entry)))
        return -ENOMEM;
    jidx_head *h = ix_head(e);
    *h = (jidx_head){.magic = JIDX_MAGIC,
                     .bytes = (uint32_t)bytes,
                     .mcus = mcus,
                     .hash = index_hash(e, (uint32_t)bytes, ci->MCUs_per_row),
                     .step = step};
    jidx_entry *en = ix_entries(e);
    memset(en, 0, sizeof *en); /* entry 0: the start, predictors zero */
    e->ix_known = 1;
    const jidx_head *u = use;
    if (use && use_len >= sizeof *u && u->magic == h->magic && u->bytes == h->bytes &&
        u->mcus == h->mcus && u->hash == h->hash && u->step == h->step && u->n >= 1 &&
        u->n <= cap && use_len >= sizeof *u + (size_t)u->n * sizeof(jidx_entry)) {
        const jidx_entry *ue = (const jidx_entry *)(const void *)((const uint8_t *)use + sizeof *u);
        uint32_t n = 1;
        while (n < u->n && ue[n].bit >= ue[n - 1].bit && ue[n].bit <= bytes * 8)
            n++;
        if (ue[0].bit == 0)
            memcpy(en, ue, (size_t)n * sizeof *en);
        else
            n = 1;
        e->ix_known = n;
    }
    e->ix_given = e->ix_known;
    e->ix_cap = cap;
    e->step = step;
    e->next_cp = e->ix_known < cap ? (uint64_t)e->ix_known * step : UINT64_MAX;
    e->mpr = ci->MCUs_per_row;
    e->mcus = mcus;
    e->lazy = 1;
    e->row_pairs = 1;
    e->row = 0;
    e->run_len = 0;
    e->last_row = UINT64_MAX;
    return 0;
}

void fl_jpeg_entropy_last_row(struct fl_jpeg_entropy *e, struct jpeg_decompress_struct *ci,
                              uint64_t imcu_row)
{
    if (!e || !e->lazy || ci->client_data != e)
        return;
    /* an iMCU row is one MCU row of an interleaved scan, v_samp_factor block rows of a
       one-component scan */
    uint64_t per = ci->comps_in_scan > 1 ? 1 : (uint64_t)ci->cur_comp_info[0]->v_samp_factor;
    e->last_row = (imcu_row + 1) * per - 1;
}

void fl_jpeg_entropy_use_index(struct fl_jpeg_entropy *e, const void *index, size_t len)
{
    e->use = index;
    e->use_len = index ? len : 0;
}

size_t fl_jpeg_entropy_index(struct fl_jpeg_entropy *e, const void **index)
{
    *index = NULL;
    if (!e || !e->lazy || e->ix_known <= e->ix_given)
        return 0;
    ix_head(e)->n = e->ix_known;
    *index = e->ix.p;
    return sizeof(jidx_head) + (size_t)e->ix_known * sizeof(jidx_entry);
}

int fl_jpeg_entropy_install(struct fl_jpeg_entropy *e, struct jpeg_decompress_struct *ci)
{
    const void *use = e->use; /* for this image only */
    size_t use_len = e->use_len;
    e->use = NULL;
    e->use_len = 0;
    e->lazy = 0;
    if (ci->progressive_mode || ci->arith_code || ci->data_precision != 8 || !ci->entropy ||
        !ci->inputctl || ci->inputctl->has_multiple_scans ||
        ci->comps_in_scan != ci->num_components || ci->blocks_in_MCU < 1 ||
        ci->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU || ci->unread_marker != 0 || !ci->src)
        return 1;
    e->nblk = (uint32_t)ci->blocks_in_MCU;
    uint32_t busy = 0;
    for (uint32_t b = 0; b < e->nblk; b++) {
        int c = ci->MCU_membership[b];
        if (c < 0 || c >= ci->comps_in_scan)
            return 1;
        const jpeg_component_info *cp = ci->cur_comp_info[c];
        if (cp->dc_tbl_no < 0 || cp->dc_tbl_no >= NUM_HUFF_TBLS || cp->ac_tbl_no < 0 ||
            cp->ac_tbl_no >= NUM_HUFF_TBLS)
            return 1;
        e->dc[b] = table_get(e, ci->dc_huff_tbl_ptrs[cp->dc_tbl_no], 0, &busy);
        e->ac[b] = table_get(e, ci->ac_huff_tbl_ptrs[cp->ac_tbl_no], 1, &busy);
        if (!e->dc[b] || !e->ac[b])
            return 1;
        e->comp[b] = (uint8_t)c;
    }
    struct jpeg_source_mgr *src = ci->src;
    uint64_t mcus = (uint64_t)ci->MCUs_per_row * ci->MCU_rows_in_scan;
    uint64_t max_ivl =
        ci->restart_interval ? (mcus + ci->restart_interval - 1) / ci->restart_interval : 1;
    if (src->bytes_in_buffer > UINT32_MAX || max_ivl > mcus + 1)
        return 1;
    size_t end =
        unstuff(e, src->next_input_byte, src->bytes_in_buffer, max_ivl, ci->restart_interval != 0);
    if (end == (size_t)-1)
        return -ENOMEM;
    /* libjpeg's marker reader continues at the marker after the data (EOI), as after its own
     * Huffman decoder */
    src->next_input_byte += end;
    src->bytes_in_buffer -= end;
    const uint32_t *iv = (const uint32_t *)e->ivl.p;
    e->cur = 0;
    e->bp = e->data.p;
    e->buf = 0;
    e->cnt = 0;
    e->end_bits = iv[1] * 8ull;
    e->to_go = ci->restart_interval;
    memset(e->pred, 0, sizeof e->pred);
    e->dead = 0;
    e->pair_left = e->pair_pos = 0;
    e->mcu_n = 0;
    e->pairing = 0;
    e->pos = 0;
    e->col = 0;
    int rc = index_setup(e, ci, mcus, use, use_len);
    if (rc)
        return rc;
    if (ci->restart_interval && ci->restart_interval <= PAIR_MAX_MCUS && e->nivl > 2) {
        size_t bytes = 2 * (size_t)ci->restart_interval * e->nblk * sizeof(JBLOCK);
        if (fl_buf_reserve(&e->coef, bytes))
            return -ENOMEM;
        memset(e->coef.p, 0, bytes);
        e->pairing = 1;
    }
    ci->client_data = e;
    ci->entropy->decode_mcu = decode_mcu;
    return 0;
}
