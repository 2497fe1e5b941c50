/* jpeg_restart.c — restart markers added to a sequential Huffman JPEG by copying its
 * entropy-coded bits: each Huffman symbol is decoded only to find where it ends and copied as
 * it was, with the file's own tables; at each restart the bits are padded to a byte, a RST
 * marker is written and the first DC difference of each component is re-coded against a zero
 * predictor. No coefficient is stored, dequantized or transformed, so the cost is about one
 * Huffman decode (the libjpeg transcode, jpeg_read_coefficients + jpeg_write_coefficients,
 * measured over twice a full decode). The coefficients, and so the pixels, are the file's. */
#include <string.h>

#include "image_internal.h"

#define FAST_BITS 11

typedef struct huff {
    uint16_t look[1 << 9]; /* the next 9 bits -> (code length << 8) | symbol; 0: a longer code */
    int32_t maxcode[17];   /* largest code of each length (-1: none) */
    int32_t valoff[17];    /* symbol index = valoff[len] + code */
    uint8_t val[256];
    uint32_t nval;
    uint16_t fast[1 << FAST_BITS]; /* AC: code + extra bits within FAST_BITS -> (their length
                                    * << 8) | coefficients advanced (0: end of block); 0: slow */
    uint16_t ehufco[256];          /* encoding: code and length of each symbol (length 0: absent) */
    uint8_t ehufsi[256];
    int defined;
} huff;

static inline uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* A DHT table from its 16 counts and symbols; 0, or -1 when the counts do not make a code. */
static int huff_build(huff *t, const uint8_t *counts, const uint8_t *vals, uint32_t n)
{
    memset(t, 0, sizeof *t);
    memcpy(t->val, vals, n);
    t->nval = n;
    uint32_t code = 0, k = 0;
    for (uint32_t l = 1; l <= 16; l++) {
        t->valoff[l] = (int32_t)k - (int32_t)code;
        for (uint32_t i = 0; i < counts[l - 1]; i++, k++, code++) {
            if (code >= (1u << l))
                return -1;
            uint8_t s = vals[k];
            t->ehufco[s] = (uint16_t)code;
            t->ehufsi[s] = (uint8_t)l;
            if (l <= 9)
                for (uint32_t j = 0; j < (1u << (9 - l)); j++)
                    t->look[(code << (9 - l)) | j] = (uint16_t)(l << 8 | s);
        }
        t->maxcode[l] = counts[l - 1] ? (int32_t)code - 1 : -1;
        code <<= 1;
    }
    /* the AC view: a whole (code, extra bits) pair resolved by one look-up */
    for (uint32_t x = 0; x < (1u << FAST_BITS); x++) {
        uint32_t e = t->look[x >> (FAST_BITS - 9)];
        if (!e)
            continue;
        uint32_t l = e >> 8, rs = e & 255, r = rs >> 4, sz = rs & 15;
        if (l + sz > FAST_BITS)
            continue;
        uint32_t adv = sz ? r + 1 : r == 15 ? 16 : 0;
        t->fast[x] = (uint16_t)((l + sz) << 8 | adv);
    }
    t->defined = 1;
    return 0;
}

/* Decode the symbol at the top of w (32 bits, MSB first): its code length, or 0 when invalid. */
static inline uint32_t huff_decode(const huff *t, uint32_t w, uint32_t *sym)
{
    uint32_t e = t->look[w >> 23];
    if (e) {
        *sym = e & 255;
        return e >> 8;
    }
    for (uint32_t l = 10; l <= 16; l++) {
        int32_t code = (int32_t)(w >> (32 - l));
        if (code <= t->maxcode[l]) {
            int32_t i = t->valoff[l] + code;
            if (i < 0 || (uint32_t)i >= t->nval)
                return 0;
            *sym = t->val[i];
            return l;
        }
    }
    return 0;
}

/* The output bit stream: bits accumulate MSB first; every 0xFF byte is followed by a stuffed 0. */
typedef struct bitw {
    uint8_t *p;
    size_t n;
    uint64_t acc;
    uint32_t nacc;
} bitw;

static inline void put(bitw *b, uint32_t v, uint32_t n)
{
    b->acc = (b->acc << n) | (v & ((1ull << n) - 1));
    b->nacc += n;
    while (b->nacc >= 8) {
        b->nacc -= 8;
        uint8_t c = (uint8_t)(b->acc >> b->nacc);
        b->p[b->n++] = c;
        if (c == 0xFF)
            b->p[b->n++] = 0;
    }
}

static inline void pad_byte(bitw *b)
{
    uint32_t n = (8 - b->nacc % 8) % 8; /* padding bits are ones */
    if (n)
        put(b, (1u << n) - 1, n);
}

static inline uint32_t peek32(const uint8_t *s, uint64_t pos)
{
    uint64_t v;
    memcpy(&v, s + (pos >> 3), 8);
    v = __builtin_bswap64(v); /* the stream is MSB first (x86, ARM: little-endian loads) */
    return (uint32_t)((v << (pos & 7)) >> 32);
}

/* Copy bits [a, e) of the unstuffed input to the output: 32 at a time, the four bytes they
 * complete stored at once unless one of them is 0xFF (stuffed one by one). */
static inline void copy_bits(bitw *b, const uint8_t *cb, uint64_t a, uint64_t e)
{
    for (; e - a >= 32; a += 32) {
        b->acc = (b->acc << 32) | peek32(cb, a);
        uint32_t w = (uint32_t)(b->acc >> b->nacc); /* nacc < 8 pending bits stay below */
        if (((~w - 0x01010101u) & w & 0x80808080u) == 0) {
            w = __builtin_bswap32(w);
            memcpy(b->p + b->n, &w, 4);
            b->n += 4;
        } else {
            for (int k = 3; k >= 0; k--) {
                uint8_t c = (uint8_t)(w >> (8 * k));
                b->p[b->n++] = c;
                if (c == 0xFF)
                    b->p[b->n++] = 0;
            }
        }
    }
    if (e > a)
        put(b, peek32(cb, a) >> (32 - (e - a)), (uint32_t)(e - a));
}

static inline uint32_t nbits(int32_t v)
{
    uint32_t a = (uint32_t)(v < 0 ? -v : v), n = 0;
    while (a)
        n++, a >>= 1;
    return n;
}

int fl_jpeg_restart_copy(fl_buf *out, fl_buf *scratch, const uint8_t *data, size_t len,
                         uint32_t max_mcus, size_t *out_len)
{
    if (len < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return 1;
    huff dc[4], ac[4];
    for (int i = 0; i < 4; i++)
        dc[i].defined = ac[i].defined = 0;
    size_t pos = 2, sos = 0, entropy = 0;
    uint32_t nf = 0, ns = 0, w = 0, h = 0, maxh = 1, maxv = 1;
    uint8_t cid[4], hs[4], vs[4], sel[4], td[4], ta[4];
    while (!entropy) {
        while (pos + 1 < len && data[pos] == 0xFF && data[pos + 1] == 0xFF)
            pos++; /* fill */
        if (pos + 4 > len || data[pos] != 0xFF)
            return 1;
        uint32_t m = data[pos + 1], seglen = be16(data + pos + 2);
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD9) || seglen < 2 || pos + 2 + seglen > len)
            return 1;
        const uint8_t *seg = data + pos + 4;
        uint32_t sl = seglen - 2;
        if (m == 0xC0 || m == 0xC1) { /* baseline / extended sequential Huffman */
            if (nf || sl < 6 || seg[0] != 8)
                return 1;
            h = be16(seg + 1);
            w = be16(seg + 3);
            nf = seg[5];
            if (nf < 1 || nf > 4 || sl < 6 + 3 * nf || !w || !h)
                return 1;
            for (uint32_t c = 0; c < nf; c++) {
                cid[c] = seg[6 + 3 * c];
                hs[c] = seg[7 + 3 * c] >> 4;
                vs[c] = seg[7 + 3 * c] & 15;
                if (hs[c] < 1 || hs[c] > 4 || vs[c] < 1 || vs[c] > 4)
                    return 1;
                if (hs[c] > maxh)
                    maxh = hs[c];
                if (vs[c] > maxv)
                    maxv = vs[c];
            }
        } else if ((m >= 0xC2 && m <= 0xCB && m != 0xC4 && m != 0xC8) || (m >= 0xCD && m <= 0xCF)) {
            return 1; /* progressive, lossless, arithmetic: the libjpeg transcode handles them */
        } else if (m == 0xC4) {
            for (uint32_t q = 0; q < sl;) {
                if (q + 17 > sl)
                    return 1;
                uint32_t tc = seg[q] >> 4, th = seg[q] & 15, n = 0;
                for (int i = 0; i < 16; i++)
                    n += seg[q + 1 + i];
                if (tc > 1 || th > 3 || n > 256 || q + 17 + n > sl)
                    return 1;
                if (huff_build(tc ? &ac[th] : &dc[th], seg + q + 1, seg + q + 17, n))
                    return 1;
                q += 17 + n;
            }
        } else if (m == 0xDD) {
            if (sl != 2 || be16(seg))
                return 1; /* restart markers already: libjpeg path */
        } else if (m == 0xDA) {
            if (!nf || sl < 1)
                return 1;
            ns = seg[0];
            if (ns != nf || sl != 1 + 2 * ns + 3)
                return 1; /* one scan of every component */
            for (uint32_t i = 0; i < ns; i++) {
                uint32_t c = 0;
                while (c < nf && cid[c] != seg[1 + 2 * i])
                    c++;
                if (c == nf)
                    return 1;
                sel[i] = (uint8_t)c;
                td[i] = seg[2 + 2 * i] >> 4;
                ta[i] = seg[2 + 2 * i] & 15;
                if (td[i] > 3 || ta[i] > 3 || !dc[td[i]].defined || !ac[ta[i]].defined)
                    return 1;
            }
            const uint8_t *sp = seg + 1 + 2 * ns;
            if (sp[0] != 0 || sp[1] != 63 || sp[2] != 0)
                return 1; /* sequential: Ss 0, Se 63 */
            sos = pos;
            entropy = pos + 2 + seglen;
        }
        pos += 2 + seglen;
    }
    if (nf == 1)
        maxh = maxv = 1; /* one component: MCU = one block */
    uint32_t per_row = (w + 8 * maxh - 1) / (8 * maxh), rows = (h + 8 * maxv - 1) / (8 * maxv);
    uint64_t total = (uint64_t)per_row * rows;
    uint32_t ri = per_row;
    if (max_mcus)
        for (ri = max_mcus < per_row ? max_mcus : per_row; per_row % ri; ri--) {
        }
    if (ri > 65535)
        return 1;
    /* blocks of one MCU, in scan order: their component's scan index */
    uint8_t blk[10];
    uint32_t nblk = 0;
    for (uint32_t i = 0; i < ns; i++) {
        uint32_t c = sel[i], nb = nf == 1 ? 1 : (uint32_t)hs[c] * vs[c];
        if (nblk + nb > 10)
            return 1;
        for (uint32_t b = 0; b < nb; b++)
            blk[nblk++] = (uint8_t)i;
    }
    /* the entropy-coded segment with its stuffed zeros removed; it ends at the first marker.
     * Zero padding: one block reads at most 64 codes of 31 bits past where it starts, and the
     * position is checked after every block */
    if (fl_buf_reserve(scratch, len - entropy + 320))
        return -1;
    uint8_t *cb = scratch->p;
    size_t cn = 0, p = entropy, end;
    for (;;) {
        const uint8_t *q = memchr(data + p, 0xFF, len - p);
        size_t at = q ? (size_t)(q - data) : len;
        memcpy(cb + cn, data + p, at - p);
        cn += at - p;
        if (!q || at + 1 >= len)
            return 1; /* no EOI: libjpeg decides */
        if (data[at + 1] == 0x00) {
            cb[cn++] = 0xFF;
            p = at + 2;
            continue;
        }
        end = at;
        break;
    }
    memset(cb + cn, 0, 320);
    while (end + 1 < len && data[end + 1] == 0xFF)
        end++; /* fill bytes before the marker */
    if (end + 1 >= len || data[end + 1] != 0xD9)
        return 1; /* DNL, RST or a second scan */
    uint64_t intervals = (total + ri - 1) / ri;
    if (fl_buf_reserve(out, 2 * len + intervals * 40 + 4096))
        return -1;
    bitw b = {out->p, 0, 0, 0};
    /* SOI, the segments up to the scan (any DRI of interval 0 dropped), a DRI, the SOS */
    b.p[b.n++] = 0xFF;
    b.p[b.n++] = 0xD8;
    for (size_t q = 2, mlen; q < sos; q += mlen) {
        while (data[q] == 0xFF && data[q + 1] == 0xFF)
            q++;
        mlen = 2 + be16(data + q + 2);
        if (data[q + 1] == 0xDD)
            continue;
        memcpy(b.p + b.n, data + q, mlen);
        b.n += mlen;
    }
    const uint8_t dri[6] = {0xFF, 0xDD, 0, 4, (uint8_t)(ri >> 8), (uint8_t)ri};
    memcpy(b.p + b.n, dri, 6);
    b.n += 6;
    memcpy(b.p + b.n, data + sos, entropy - sos);
    b.n += entropy - sos;
    /* Interval by interval: parse the Huffman codes only to find where each block ends and
     * where the first DC difference of each component lies; the interval's bits are then copied
     * in bulk around those few codes, which are re-coded against a zero predictor. */
    uint64_t bits = (uint64_t)cn * 8, at = 0;
    int32_t pred[4] = {0};
    struct {
        uint64_t s, e;
        int32_t v;
        uint32_t t;
    } patch[4];
    /* the reader: up to 64 bits MSB-aligned in buf (cnt of them valid), refilled 8 bytes at a
     * time from bp (the 320 zero bytes after the data keep those loads inside the buffer) */
    const uint8_t *bp = cb;
    uint64_t buf = 0;
    uint32_t cnt = 0;
#define REFILL() FL_BITS_REFILL(bp, buf, cnt)
#define BITPOS() ((uint64_t)(bp - cb) * 8 - cnt)
    for (uint64_t mcu = 0, g = 0; mcu < total; g++) {
        uint64_t start = at, mend = mcu + ri < total ? mcu + ri : total;
        uint32_t npatch = 0, seen = 0;
        for (; mcu < mend; mcu++) {
            for (uint32_t k = 0; k < nblk; k++) {
                uint32_t i = blk[k], s, l;
                const huff *d = &dc[td[i]], *a = &ac[ta[i]];
                if (cnt < 32)
                    REFILL();
                uint32_t v = (uint32_t)(buf >> 32);
                if (!(l = huff_decode(d, v, &s)) || s > 11)
                    return 1;
                int32_t diff = 0;
                if (s) {
                    uint32_t x = (v << l) >> (32 - s);
                    diff = x < (1u << (s - 1)) ? (int32_t)x - (int32_t)(1u << s) + 1 : (int32_t)x;
                }
                if (!(seen & (1u << i))) { /* first block of the component in this interval */
                    seen |= 1u << i;
                    if (pred[i]) { /* its predictor becomes 0 at the restart */
                        uint64_t at0 = BITPOS();
                        patch[npatch++] =
                            (__typeof__(patch[0])){at0, at0 + l + s, pred[i] + diff, td[i]};
                    }
                }
                pred[i] += diff;
                buf <<= l + s;
                cnt -= l + s;
                uint32_t c = 1;
                while (c < 64) {
                    REFILL(); /* every code, no branch: a refill branch on the data mispredicts */
                    uint32_t e = a->fast[buf >> (64 - FAST_BITS)], adv;
                    if (e) {
                        buf <<= e >> 8;
                        cnt -= e >> 8;
                        adv = e & 255;
                    } else {
                        if (!(l = huff_decode(a, (uint32_t)(buf >> 32), &s)))
                            return 1;
                        uint32_t r = s >> 4;
                        s &= 15;
                        buf <<= l + s;
                        cnt -= l + s;
                        adv = s ? r + 1 : r == 15 ? 16 : 0;
                    }
                    if (!adv)
                        break; /* end of block */
                    c += adv;
                }
                if (c > 64 || BITPOS() > bits)
                    return 1; /* corrupt, or ran past the data */
            }
        }
        at = BITPOS();
        if (g) {
            pad_byte(&b);
            b.p[b.n++] = 0xFF;
            b.p[b.n++] = (uint8_t)(0xD0 + ((g - 1) & 7));
        }
        uint64_t from = start;
        for (uint32_t j = 0; j < npatch; j++) {
            const huff *d = &dc[patch[j].t];
            int32_t nd = patch[j].v;
            uint32_t sz = nbits(nd);
            if (sz > 11 || !d->ehufsi[sz])
                return 1; /* no code for it: libjpeg path */
            copy_bits(&b, cb, from, patch[j].s);
            put(&b, d->ehufco[sz], d->ehufsi[sz]);
            if (sz)
                put(&b, (uint32_t)(nd < 0 ? nd - 1 : nd), sz);
            from = patch[j].e;
        }
        copy_bits(&b, cb, from, at);
    }
#undef REFILL
#undef BITPOS
    pad_byte(&b);
    b.p[b.n++] = 0xFF;
    b.p[b.n++] = 0xD9;
    *out_len = b.n;
    return 0;
}
