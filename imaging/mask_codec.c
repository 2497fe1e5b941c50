/* mask_codec.c — masks (per-pixel class ids, uint8 or uint16) to and from their stored forms:
 * 8/16-bit grayscale PNG (libpng) or one zstd frame of the raw little-endian elements; palette
 * PNGs decode to their indices (VOC), and the nearest-neighbour resample that moves a mask with
 * its image without inventing class ids. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <zstd.h>

#include "fl_grow.h"
#include "fl_image.h"
#include "image_internal.h"

/* ---- encode ------------------------------------------------------------------------------ */

struct mask_out {
    uint8_t **buf;
    size_t *cap;
    size_t len;
    int oom;
    char msg[200];
};

static void mw_write(png_structp png, png_bytep data, png_size_t n)
{
    struct mask_out *o = png_get_io_ptr(png);
    if (fl_grow(o->buf, o->cap, o->len + n)) {
        o->oom = 1;
        png_error(png, "out of memory");
    }
    memcpy(*o->buf + o->len, data, n);
    o->len += n;
}

static void mw_flush(png_structp png) { (void)png; }

static void m_error(png_structp png, png_const_charp msg)
{
    struct mask_out *o = png_get_error_ptr(png);
    snprintf(o->msg, sizeof o->msg, "%s", msg);
    png_longjmp(png, 1);
}

static int encode_png(const void *pixels, uint32_t w, uint32_t h, int bits, uint8_t **out,
                      size_t *cap, size_t *out_len, fl_error *err)
{
    struct mask_out o = {out, cap, 0, 0, "unknown error"};
    png_structp png =
        png_create_write_struct(PNG_LIBPNG_VER_STRING, &o, m_error, fl_png_on_warning);
    if (!png)
        return fl_error_set(err, -ENOMEM, "encode mask PNG: out of memory");
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return fl_error_set(err, -ENOMEM, "encode mask PNG: out of memory");
    }
    uint8_t *row = NULL;
    if (setjmp(png_jmpbuf(png))) {
        free(row);
        png_destroy_write_struct(&png, &info);
        return fl_error_set(err, o.oom ? -ENOMEM : FL_E_INVALID, "encode mask PNG: %s", o.msg);
    }
    png_set_write_fn(png, &o, mw_write, mw_flush);
    png_set_IHDR(png, info, w, h, bits, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    if (bits == 16) {
        /* PNG samples are big-endian */
        row = malloc((size_t)w * 2);
        if (!row) {
            o.oom = 1;
            png_error(png, "out of memory");
        }
        const uint16_t *p = pixels;
        for (uint32_t y = 0; y < h; y++) {
            for (uint32_t x = 0; x < w; x++) {
                uint16_t v = p[(size_t)y * w + x];
                row[2 * x] = (uint8_t)(v >> 8);
                row[2 * x + 1] = (uint8_t)v;
            }
            png_write_row(png, row);
        }
    } else {
        for (uint32_t y = 0; y < h; y++)
            png_write_row(png, (png_const_bytep)pixels + (size_t)y * w);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    *out_len = o.len;
    return 0;
}

int fl_mask_encode(const void *pixels, uint32_t width, uint32_t height, fl_dtype dtype,
                   fl_mask_codec codec, int level, uint8_t **out, size_t *cap, size_t *out_len,
                   fl_error *err)
{
    if (!pixels || !width || !height || !out || !cap || !out_len)
        return fl_error_set(err, FL_E_INVALID, "encode mask: empty mask or NULL argument");
    if (dtype != FL_DTYPE_U8 && dtype != FL_DTYPE_U16)
        return fl_error_set(err, FL_E_INVALID, "encode mask: dtype must be uint8 or uint16");
    size_t elem = dtype == FL_DTYPE_U16 ? 2 : 1;
    if (codec == FL_MASK_PNG)
        return encode_png(pixels, width, height, elem == 2 ? 16 : 8, out, cap, out_len, err);
    if (codec != FL_MASK_ZSTD)
        return fl_error_set(err, FL_E_INVALID, "encode mask: unknown codec %d", (int)codec);
    size_t raw = (size_t)width * height * elem;
    size_t bound = ZSTD_compressBound(raw);
    if (fl_grow(out, cap, bound))
        return fl_error_set(err, -ENOMEM, "encode mask: out of memory");
    /* the elements are written little-endian: on a big-endian host they would need a swap */
    size_t n = ZSTD_compress(*out, *cap, pixels, raw, level ? level : 3);
    if (ZSTD_isError(n))
        return fl_error_set(err, FL_E_INVALID, "encode mask: zstd: %s", ZSTD_getErrorName(n));
    *out_len = n;
    return 0;
}

/* ---- probe / decode ---------------------------------------------------------------------- */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int fl_mask_probe(const uint8_t *data, size_t len, fl_mask_codec codec, uint32_t *width,
                  uint32_t *height, uint32_t *bits, fl_error *err)
{
    *width = *height = *bits = 0;
    if (codec == FL_MASK_ZSTD)
        return 0;
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (!data || len < 33 || memcmp(data, sig, 8) || memcmp(data + 12, "IHDR", 4))
        return fl_error_set(err, FL_E_DECODE, "mask: not a PNG file");
    *width = be32(data + 16);
    *height = be32(data + 20);
    *bits = data[24];
    return 0;
}

/* A mask decoder's reusable state. libpng's read structs are per image by design, so every
 * allocation libpng (and the zlib stream under it) makes goes to a bump arena that is reset per
 * image and grows only when an image needed more than it held; the zstd context, the row
 * scratch of the converting paths and the row pointers are grow-only too. After the first few
 * masks of a data set, a decode allocates nothing. */
struct fl_mask_decoder {
    ZSTD_DCtx *zd;
    uint8_t *arena; /* libpng's allocations for one image (16-byte aligned bump) */
    size_t arena_cap, arena_used;
    size_t arena_want; /* bytes the image at hand asked for, arena or not */
    uint8_t *scratch;  /* rows to convert (interlaced or another element size) */
    size_t scratch_cap;
    png_bytep *rows;
    size_t rows_cap;
};

int fl_mask_decoder_create(fl_mask_decoder **out, fl_error *err)
{
    fl_mask_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return fl_error_set(err, -ENOMEM, "mask decoder: out of memory");
    if (!(d->zd = ZSTD_createDCtx())) {
        free(d);
        return fl_error_set(err, -ENOMEM, "mask decoder: out of memory");
    }
    *out = d;
    return 0;
}

void fl_mask_decoder_free(fl_mask_decoder *d)
{
    if (!d)
        return;
    ZSTD_freeDCtx(d->zd);
    free(d->arena);
    free(d->scratch);
    free(d->rows);
    free(d);
}

static png_voidp arena_malloc(png_structp png, png_alloc_size_t n)
{
    fl_mask_decoder *d = png_get_mem_ptr(png);
    size_t a = (n + 15) & ~(size_t)15;
    d->arena_want += a;
    if (a <= d->arena_cap - d->arena_used) {
        void *p = d->arena + d->arena_used;
        d->arena_used += a;
        return p;
    }
    return malloc(n); /* over the arena this time: it grows before the next image */
}

static void arena_free(png_structp png, png_voidp p)
{
    fl_mask_decoder *d = png_get_mem_ptr(png);
    if (p && !((uint8_t *)p >= d->arena && (uint8_t *)p < d->arena + d->arena_cap))
        free(p);
}

/* Convert n elements of in_elem bytes at s into dst (elements of elem bytes); x0/y name the
 * first element in messages. */
static int convert_row(const uint8_t *s, size_t in_elem, uint8_t *dst, size_t elem, size_t n,
                       uint32_t y, const char *what, fl_error *err)
{
    if (in_elem == elem) {
        memcpy(dst, s, n * elem);
    } else if (in_elem == 2) { /* 16-bit PNG into uint8 */
        const uint16_t *p = (const uint16_t *)(const void *)s;
        for (size_t i = 0; i < n; i++) {
            if (p[i] > 255)
                return fl_error_set(err, FL_E_FORMAT,
                                    "%s: value %u at (%zu, %u) does not fit "
                                    "uint8 (declare the mask uint16)",
                                    what, p[i], i, y);
            dst[i] = (uint8_t)p[i];
        }
    } else { /* 8-bit PNG into uint16 */
        uint16_t *q = (uint16_t *)(void *)dst;
        for (size_t i = 0; i < n; i++)
            q[i] = s[i];
    }
    return 0;
}

static int decode_png(fl_mask_decoder *d, const uint8_t *data, size_t len, uint32_t width,
                      uint32_t height, size_t elem, uint8_t *dst, uint32_t nrows, int flags,
                      const char *what, fl_error *err)
{
    fl_png_src src = {data, len, 0, "unknown error"};
    d->arena_used = d->arena_want = 0;
    png_structp png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, &src, fl_png_on_error,
                                               fl_png_on_warning, d, arena_malloc, arena_free);
    if (!png)
        return fl_error_set(err, -ENOMEM, "%s: cannot create PNG decoder", what);
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return fl_error_set(err, -ENOMEM, "%s: cannot create PNG decoder", what);
    }
    int rc = 0;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        return fl_error_set(err, FL_E_DECODE, "%s: PNG: %s", what, src.msg);
    }
    png_set_read_fn(png, &src, fl_png_read_mem);
    png_set_user_limits(png, 65535, 65535);
    png_set_chunk_malloc_max(png, 8u << 20);
    if (flags & FL_MASK_CHECKED) {
        /* the caller verified a checksum over these bytes: the zlib stream's adler32 and the
         * chunks' CRCs (a fifth of the decode time) would only check them again */
        png_set_option(png, PNG_IGNORE_ADLER32, PNG_OPTION_ON);
        png_set_crc_action(png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
    }
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int ctype = png_get_color_type(png, info);
    int depth = png_get_bit_depth(png, info);
    if (ctype == PNG_COLOR_TYPE_RGB || ctype == PNG_COLOR_TYPE_RGB_ALPHA) {
        rc = fl_error_set(err, FL_E_FORMAT,
                          "%s: an RGB%s PNG: a mask must be a grayscale or "
                          "palette PNG of class ids (convert colour-coded masks to ids first)",
                          what, ctype == PNG_COLOR_TYPE_RGB_ALPHA ? "A" : "");
        goto done;
    }
    if (w != width || h != height) {
        rc = fl_error_set(err, FL_E_FORMAT, "%s: mask is %ux%u, its image is %ux%u", what,
                          (unsigned)w, (unsigned)h, width, height);
        goto done;
    }
    /* values, not intensities: sub-byte gray and palette indices unpacked to one byte each, not
     * scaled up; palettes not expanded; 16-bit in host (little-endian) order */
    if (depth < 8)
        png_set_packing(png);
    if (depth == 16)
        png_set_swap(png);
    if (ctype == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_strip_alpha(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    size_t in_elem = depth == 16 ? 2 : 1;
    if (rowbytes != (size_t)w * in_elem) {
        rc = fl_error_set(err, FL_E_FORMAT, "%s: PNG: unexpected row size", what);
        goto done;
    }
    if (passes > 1) {
        /* interlaced: rows come in several passes, so the whole image goes through scratch */
        if (fl_grow(&d->scratch, &d->scratch_cap, rowbytes * h) ||
            fl_grow((uint8_t **)&d->rows, &d->rows_cap, sizeof(png_bytep) * h)) {
            rc = fl_error_set(err, -ENOMEM, "%s: out of memory", what);
            goto done;
        }
        for (png_uint_32 y = 0; y < h; y++)
            d->rows[y] = d->scratch + y * rowbytes;
        png_read_image(png, d->rows);
        for (png_uint_32 y = 0; y < nrows && !rc; y++)
            rc =
                convert_row(d->rows[y], in_elem, dst + (size_t)y * w * elem, elem, w, y, what, err);
    } else if (in_elem != elem) {
        if (fl_grow(&d->scratch, &d->scratch_cap, rowbytes)) {
            rc = fl_error_set(err, -ENOMEM, "%s: out of memory", what);
            goto done;
        }
        for (png_uint_32 y = 0; y < nrows && !rc; y++) {
            png_read_row(png, d->scratch, NULL);
            rc =
                convert_row(d->scratch, in_elem, dst + (size_t)y * w * elem, elem, w, y, what, err);
        }
    } else {
        /* rows past nrows are never read: the stream's end is not reached, which is why a
         * partial decode is only offered to callers that checked the bytes */
        for (png_uint_32 y = 0; y < nrows; y++)
            png_read_row(png, dst + (size_t)y * rowbytes, NULL);
    }
done:
    png_destroy_read_struct(&png, &info, NULL);
    if (d->arena_want > d->arena_cap) {
        /* grow-only: the next image of this size allocates nothing */
        size_t cap = d->arena_cap ? d->arena_cap : 65536;
        while (cap < d->arena_want)
            cap *= 2;
        uint8_t *a = malloc(cap);
        if (a) {
            free(d->arena);
            d->arena = a;
            d->arena_cap = cap;
        }
    }
    return rc;
}

int fl_mask_decode_rows(fl_mask_decoder *d, const uint8_t *data, size_t len, fl_mask_codec codec,
                        uint32_t width, uint32_t height, fl_dtype dtype, uint32_t rows, int flags,
                        void *dst, size_t dst_cap, const char *what, fl_error *err)
{
    if (!what)
        what = "mask";
    if (!d)
        return fl_error_set(err, FL_E_INVALID, "%s: NULL mask decoder", what);
    if (dtype != FL_DTYPE_U8 && dtype != FL_DTYPE_U16)
        return fl_error_set(err, FL_E_INVALID, "%s: mask dtype must be uint8 or uint16", what);
    size_t elem = dtype == FL_DTYPE_U16 ? 2 : 1;
    if (!width || !height || !dst || (size_t)width * height * elem > dst_cap)
        return fl_error_set(err, FL_E_INVALID, "%s: no room for a %ux%u mask", what, width, height);
    if (!data || !len)
        return fl_error_set(err, FL_E_DECODE, "%s: empty mask", what);
    /* a partial decode skips the checks at the end of the stream: checked bytes only */
    if (!rows || rows > height || !(flags & FL_MASK_CHECKED))
        rows = height;
    if (codec == FL_MASK_PNG) {
        uint32_t w, h, bits;
        if (fl_mask_probe(data, len, codec, &w, &h, &bits, err))
            return fl_error_set(err, FL_E_DECODE, "%s: not a PNG file", what);
        return decode_png(d, data, len, width, height, elem, dst, rows, flags, what, err);
    }
    if (codec != FL_MASK_ZSTD)
        return fl_error_set(err, FL_E_INVALID, "%s: unknown mask codec %d", what, (int)codec);
    size_t want = (size_t)width * height * elem;
    unsigned long long fs = ZSTD_getFrameContentSize(data, len);
    if (fs == ZSTD_CONTENTSIZE_ERROR)
        return fl_error_set(err, FL_E_DECODE, "%s: not a zstd frame", what);
    if (fs != ZSTD_CONTENTSIZE_UNKNOWN && fs != want)
        return fl_error_set(err, FL_E_FORMAT, "%s: mask holds %llu bytes, a %ux%u %s mask is %zu",
                            what, fs, width, height, elem == 2 ? "uint16" : "uint8", want);
    /* a zstd frame is decoded whole whatever `rows` says: streaming part of it goes through
     * the context's window buffer and measured slower than the one-shot decode of all of it */
    size_t n = ZSTD_decompressDCtx(d->zd, dst, want, data, len);
    if (ZSTD_isError(n))
        return fl_error_set(err, FL_E_DECODE, "%s: zstd: %s", what, ZSTD_getErrorName(n));
    if (n != want)
        return fl_error_set(err, FL_E_FORMAT, "%s: mask holds %zu bytes, a %ux%u %s mask is %zu",
                            what, n, width, height, elem == 2 ? "uint16" : "uint8", want);
    return 0;
}

int fl_mask_decode(const uint8_t *data, size_t len, fl_mask_codec codec, uint32_t width,
                   uint32_t height, fl_dtype dtype, void *dst, size_t dst_cap, const char *what,
                   fl_error *err)
{
    fl_mask_decoder *d;
    int rc = fl_mask_decoder_create(&d, err);
    if (rc)
        return rc;
    rc = fl_mask_decode_rows(d, data, len, codec, width, height, dtype, 0, 0, dst, dst_cap, what,
                             err);
    fl_mask_decoder_free(d);
    return rc;
}

void fl_mask_resize_nearest(const void *src, uint32_t sw, uint32_t sh, void *dst, uint32_t dw,
                            uint32_t dh, uint32_t elem)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    for (uint32_t v = 0; v < dh; v++) {
        /* floor((v + 0.5) * sh / dh) in integers */
        uint32_t sy = (uint32_t)(((uint64_t)(2 * (uint64_t)v + 1) * sh) / (2 * (uint64_t)dh));
        const uint8_t *srow = s + (size_t)sy * sw * elem;
        uint8_t *drow = d + (size_t)v * dw * elem;
        for (uint32_t u = 0; u < dw; u++) {
            uint32_t sx = (uint32_t)(((uint64_t)(2 * (uint64_t)u + 1) * sw) / (2 * (uint64_t)dw));
            if (elem == 2)
                memcpy(drow + 2 * u, srow + 2 * sx, 2);
            else
                drow[u] = srow[sx];
        }
    }
}
