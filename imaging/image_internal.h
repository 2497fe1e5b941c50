/* image_internal.h — private pieces shared by the imaging sources: the decoder object with its
 * grow-only scratch buffers, the per-format decode entry points, and region resampling.
 * Not installed; nothing outside imaging/ includes it. */
#ifndef FL_IMAGE_INTERNAL_H
#define FL_IMAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <png.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "fl_image.h"

#define FL_DEFAULT_MAX_PIXELS (100ull * 1000 * 1000)

/* One grow-only byte buffer: reallocated only when a call needs more than it holds. */
typedef struct fl_buf {
    uint8_t *p;
    size_t cap;
} fl_buf;

/* Make b hold at least n bytes (contents not kept). 0 or -ENOMEM. (image_common.c) */
int fl_buf_reserve(fl_buf *b, size_t n);
void fl_buf_free(fl_buf *b);

/* jpeg_restart.c: rewrite a sequential Huffman JPEG (one scan, no restart markers yet) with a
 * restart interval of the largest divisor of the MCU row up to max_mcus (0: the row) by copying
 * its entropy-coded bits, into out (scratch: the unstuffed bits). 0 and *out_len; 1 when the
 * file is of another kind or anything is unexpected (progressive, arithmetic, a DC difference
 * its table cannot code, corrupt data...: the caller transcodes through libjpeg, which gives
 * the verdict); -ENOMEM. Every offset is bounds-checked. */
int fl_jpeg_restart_copy(fl_buf *out, fl_buf *scratch, const uint8_t *data, size_t len,
                         uint32_t max_mcus, size_t *out_len);

struct fl_jpeg_state; /* jpeg_decode.c: persistent libjpeg decompressor + error manager */

/* jpeg_entropy.c: the Huffman decoder that replaces libjpeg's for single-scan sequential files
 * (its unstuffed copy of the data and its tables, kept from image to image). */
struct fl_jpeg_entropy;
struct jpeg_decompress_struct;
struct fl_jpeg_entropy *fl_jpeg_entropy_new(void); /* NULL when out of memory */
void fl_jpeg_entropy_free(struct fl_jpeg_entropy *e);
/* Call right after jpeg_start_decompress, before any scanline is read or skipped: take over the
 * Huffman decoding of this image (ci->client_data becomes e until the image ends). 0 installed,
 * 1 not applicable (progressive, arithmetic, multi-scan, 12-bit...: libjpeg's decoder stays),
 * -ENOMEM. Corrupt data raises libjpeg's warnings through ci->err. */
int fl_jpeg_entropy_install(struct fl_jpeg_entropy *e, struct jpeg_decompress_struct *ci);
/* The entry-point index (see fl_decoder_set_jpeg_index) the next install takes its entries from
 * when it belongs to that image (index is borrowed until then; NULL: none). */
void fl_jpeg_entropy_use_index(struct fl_jpeg_entropy *e, const void *index, size_t len);
/* After an image decoded lazily: its index, when it knows more entry points than the one given
 * (*index points into e until the next install), else 0. */
size_t fl_jpeg_entropy_index(struct fl_jpeg_entropy *e, const void **index);
/* After install, before any MCU is read: libjpeg will ask for no iMCU row past imcu_row (a
 * hint: more rows are decoded right, only less efficiently). e may be NULL. */
void fl_jpeg_entropy_last_row(struct fl_jpeg_entropy *e, struct jpeg_decompress_struct *ci,
                              uint64_t imcu_row);

struct fl_decoder {
    uint64_t max_pixels;
    unsigned flags; /* FL_DECODE_* */
    fl_buf image;   /* decoded output (fl_decode result, or the crop before resampling) */
    fl_buf rows;    /* row pointers, CMYK scanlines */
    fl_buf resize;  /* fl_resize scratch */
    fl_buf stream;  /* crop decode: the JPEG rebuilt to start at a restart marker */
    struct fl_jpeg_state *jpeg;
    const void *jidx; /* fl_decoder_set_jpeg_index: for the next decode only */
    size_t jidx_len;
    int jidx_fresh; /* the last decode was a JPEG one: fl_decoder_jpeg_index may answer */
};

/* JPEG (jpeg_decode.c). Full decode at the smallest DCT scale covering min_w × min_h. */
int fl_jpeg_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels,
                   uint32_t min_w, uint32_t min_h, fl_image *out, fl_error *err);
/* Decode only the rows/columns of `crop` at a reduced DCT scale into d->image, and report the
 * exact crop window inside that buffer in its (scaled) pixel coordinates. */
int fl_jpeg_decode_crop(fl_decoder *d, const uint8_t *data, size_t len, const fl_rect *crop,
                        uint32_t out_w, uint32_t out_h, uint32_t channels, fl_image *out,
                        double win[4], fl_error *err);
/* The entry-point index the last JPEG decode on d learned (fl_decoder_jpeg_index). */
size_t fl_jpeg_learned_index(fl_decoder *d, const void **index);
void fl_jpeg_state_free(struct fl_jpeg_state *s);

/* PNG (png_decode.c). Full decode to `channels`. */
int fl_png_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels, fl_image *out,
                  fl_error *err);

/* libpng reading from memory (png_decode.c), for the image and the mask decoders: pass a
 * fl_png_src as both the io and the error pointer, with fl_png_on_error / fl_png_on_warning as
 * the error and warning functions and fl_png_read_mem as the read function. */
typedef struct fl_png_src {
    const uint8_t *data;
    size_t len, pos;
    char msg[256]; /* libpng's last error message (libpng's own limit is 196 bytes) */
} fl_png_src;
/* Copy the next n bytes; a short input is a libpng error ("file truncated"). */
void fl_png_read_mem(png_structp png, png_bytep out, png_size_t n);
/* Keep libpng's message in the fl_png_src and longjmp back to the caller's setjmp. */
void fl_png_on_error(png_structp png, png_const_charp msg);
/* Warnings (bad ancillary chunks, which libpng skips) are ignored. */
void fl_png_on_warning(png_structp png, png_const_charp msg);

/* WebP (webp_decode.c). Full decode to `channels`; FL_E_UNSUPPORTED without libwebp. */
int fl_webp_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels, fl_image *out,
                   fl_error *err);

/* resize.c: resample the window (x0, y0, w, h) of src — fractional source pixel coordinates,
 * inside [0, sw] × [0, sh] — to dw × dh. fl_resize is this with the whole image. */
int fl_resize_window(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride,
                     uint32_t channels, const double win[4], uint8_t *dst, uint32_t dw, uint32_t dh,
                     size_t dstride, int flip, void *scratch, size_t scratch_len, fl_error *err);
size_t fl_resize_window_scratch_size(uint32_t sw, uint32_t sh, const double win[4], uint32_t dw,
                                     uint32_t dh, uint32_t channels);

/* Test hook: use SIMD kernels up to `level` (3 AVX-512 with VBMI and VNNI, 2 AVX2, 1 SSSE3,
 * 0 portable C; capped by what the CPU has); all give identical bytes. Call before any resize
 * runs; not thread-safe. */
void fl_resize_set_simd_limit(int level);

/* RGB → gray with the ITU-R 601 luma weights libjpeg uses (0.299, 0.587, 0.114), fixed point.
 * In place is allowed (dst == src). (image_common.c) */
void fl_rgb_to_gray(const uint8_t *src, uint8_t *dst, size_t npix);

/* The Huffman bit reader both JPEG entropy parsers use (jpeg_entropy.c decodes, jpeg_restart.c
 * copies codes): `buf` holds up to 64 bits MSB-aligned, `cnt` of them valid; this tops it up to
 * at least 56 with one unaligned 8-byte load from `bp` (uint8_t *) and advances `bp` by the whole
 * bytes taken. The caller keeps 8 readable bytes past the data (padding) for the load. */
#define FL_BITS_REFILL(bp, buf, cnt)                                                               \
    do {                                                                                           \
        uint64_t v_;                                                                               \
        memcpy(&v_, (bp), 8);                                                                      \
        (buf) |= __builtin_bswap64(v_) >> (cnt);                                                   \
        (bp) += (63 - (cnt)) >> 3;                                                                 \
        (cnt) |= 56;                                                                               \
    } while (0)

/* The first byte at or after p in d[0, len) that starts a JPEG marker inside entropy-coded data:
 * an 0xFF not followed by 0x00 (a stuffed zero's 0xFF is data), or an 0xFF that is the last byte;
 * len when there is none. An 0xFF followed by 0xFF (fill) counts. Scans 16 bytes at a time with
 * SSE2 where the compiler has it (x86-64 always), so the stuffed 0xFFs of photographic data
 * (one byte in ~256) cost nothing; the loads stay inside d[0, len). */
static inline size_t fl_jpeg_next_marker(const uint8_t *d, size_t p, size_t len)
{
#if defined(__SSE2__)
    const __m128i ff = _mm_set1_epi8((char)0xFF), zero = _mm_setzero_si128();
    for (; p + 17 <= len; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(d + p));
        __m128i next = _mm_loadu_si128((const __m128i *)(const void *)(d + p + 1));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, ff)) &
                     ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(next, zero));
        if (m)
            return p + (size_t)__builtin_ctz(m);
    }
#endif
    for (; p < len; p++)
        if (d[p] == 0xFF && (p + 1 == len || d[p + 1] != 0x00))
            return p;
    return len;
}

#endif
