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
 * marker out of sequence), which the caller's error manager turns into errors. */
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
};

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

/* Decode restart intervals cur+1 and cur+2 (n MCUs each, both whole inside e->data) together
 * into e->coef: the two bit streams are independent (each interval starts byte-aligned with its
 * predictors at zero), so their symbol-by-symbol dependency chains, which bound a Huffman
 * decoder, overlap in the CPU. Same coefficients as decode_mcu gives. 0, or -1 on any bad code
 * or overrun (the caller then decodes them one by one with decode_mcu, which raises libjpeg's
 * warning at the MCU where it occurs; e->coef is then not all zero). */
static int decode_pair(struct fl_jpeg_entropy *e, uint32_t n)
{
    const uint32_t *iv = (const uint32_t *)e->ivl.p;
    const uint8_t *base = e->data.p;
    uint32_t ia = e->cur + 1, ib = e->cur + 2;
    const uint8_t *bpa = base + iv[ia], *bpb = base + iv[ib];
    uint64_t bufa = 0, bufb = 0, enda = iv[ia + 1] * 8ull, endb = iv[ib + 1] * 8ull;
    uint32_t cnta = 0, cntb = 0;
    int32_t preda[MAX_COMPS_IN_SCAN] = {0}, predb[MAX_COMPS_IN_SCAN] = {0};
    JCOEF *oa = (JCOEF *)e->coef.p, *ob = oa + (size_t)n * e->nblk * DCTSIZE2;
    for (uint32_t m = 0; m < n; m++) {
        for (uint32_t b = 0; b < e->nblk; b++, oa += DCTSIZE2, ob += DCTSIZE2) {
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
                return -1; /* read past an interval's data */
        }
    }
    return 0;
}

static boolean decode_mcu(j_decompress_ptr ci, JBLOCKROW *mcu)
{
    struct fl_jpeg_entropy *e = ci->client_data;
    if (e->dead)
        return TRUE; /* blocks stay zero, as libjpeg's after insufficient data */
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
    const uint8_t *bp = e->bp, *base = e->data.p;
    uint64_t buf = e->buf;
    uint32_t cnt = e->cnt;
    for (uint32_t b = 0; b < e->nblk; b++) {
        JCOEF *blk = mcu ? mcu[b][0] : e->dummy;
        const ftab *dc = e->dc[b], *ac = e->ac[b];
        REFILL();
        int32_t x = dc->fast[buf >> (64 - FAST_BITS)];
        if (!x && !(x = decode_slow(dc, buf)))
            return warn(ci, e, JWRN_HUFF_BAD_CODE);
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
                return warn(ci, e, JWRN_HUFF_BAD_CODE);
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
            return warn(ci, e, JWRN_HIT_MARKER); /* read past the interval's data */
    }
    e->bp = bp;
    e->buf = buf;
    e->cnt = cnt;
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
    free(e);
}

int fl_jpeg_entropy_install(struct fl_jpeg_entropy *e, struct jpeg_decompress_struct *ci)
{
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
