/* decoder.c — the fl_decoder object: pixel limit, grow-only scratch buffers (image_common.c)
 * reused across calls, and the format dispatch for fl_decode / fl_decode_crop_resize. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

int fl_decoder_create(uint64_t max_pixels, fl_decoder **out, fl_error *err)
{
    if (!out)
        return fl_error_set(err, FL_E_INVALID, "fl_decoder_create: NULL out");
    fl_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return fl_error_set(err, -ENOMEM, "fl_decoder_create: out of memory");
    d->max_pixels = max_pixels ? max_pixels : FL_DEFAULT_MAX_PIXELS;
    *out = d;
    return 0;
}

void fl_decoder_set_flags(fl_decoder *d, unsigned flags)
{
    if (d)
        d->flags = flags & (FL_DECODE_FAST | FL_DECODE_NO_RESTART_SKIP | FL_DECODE_LIBJPEG_HUFFMAN);
}

void fl_decoder_free(fl_decoder *d)
{
    if (!d)
        return;
    fl_jpeg_state_free(d->jpeg);
    fl_buf_free(&d->image);
    fl_buf_free(&d->rows);
    fl_buf_free(&d->resize);
    fl_buf_free(&d->stream);
    free(d);
}

/* Probe, check channels and the pixel limit: shared front door of both decode calls. */
static int decode_precheck(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels,
                           fl_image_info *info, fl_error *err)
{
    if (!d)
        return fl_error_set(err, FL_E_INVALID, "decode: NULL decoder");
    if (channels != 1 && channels != 3)
        return fl_error_set(err, FL_E_INVALID, "decode: channels must be 1 or 3 (got %u)",
                            channels);
    int rc = fl_image_probe(data, len, info, err);
    if (rc)
        return rc;
    /* Refuse before libjpeg/libpng allocate anything for the declared size. */
    if ((uint64_t)info->width * info->height > d->max_pixels)
        return fl_error_set(
            err, FL_E_TOO_LARGE, "image declares %ux%u = %llu pixels, over the limit of %llu",
            info->width, info->height, (unsigned long long)info->width * info->height,
            (unsigned long long)d->max_pixels);
    return 0;
}

void fl_decoder_set_jpeg_index(fl_decoder *d, const void *index, size_t len)
{
    if (!d)
        return;
    d->jidx = index && len ? index : NULL;
    d->jidx_len = d->jidx ? len : 0;
}

size_t fl_decoder_jpeg_index(fl_decoder *d, const void **index)
{
    if (!index)
        return 0;
    *index = NULL;
    return d ? fl_jpeg_learned_index(d, index) : 0;
}

/* The index set for this decode is used (or dropped) by it; what it learns is fresh for
 * fl_decoder_jpeg_index only when it decodes a JPEG. */
static void index_begin(fl_decoder *d) { d->jidx_fresh = 0; }

static void index_end(fl_decoder *d)
{
    d->jidx = NULL;
    d->jidx_len = 0;
}

int fl_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels, uint32_t min_width,
              uint32_t min_height, fl_image *out, fl_error *err)
{
    fl_image_info info;
    if (d)
        index_begin(d);
    int rc = decode_precheck(d, data, len, channels, &info, err);
    if (rc == 0 && info.format == FL_IMG_JPEG)
        rc = fl_jpeg_decode(d, data, len, channels, min_width, min_height, out, err);
    else if (rc == 0 && info.format == FL_IMG_WEBP)
        rc = fl_webp_decode(d, data, len, channels, out, err);
    else if (rc == 0)
        rc = fl_png_decode(d, data, len, channels, out, err);
    if (d)
        index_end(d);
    return rc;
}

static int decode_crop_resize(fl_decoder *d, const uint8_t *data, size_t len, const fl_rect *crop,
                              uint32_t out_width, uint32_t out_height, uint32_t channels, int flip,
                              uint8_t *dst, fl_error *err);

int fl_decode_crop_resize(fl_decoder *d, const uint8_t *data, size_t len, const fl_rect *crop,
                          uint32_t out_width, uint32_t out_height, uint32_t channels, int flip,
                          uint8_t *dst, fl_error *err)
{
    if (d)
        index_begin(d);
    int rc =
        decode_crop_resize(d, data, len, crop, out_width, out_height, channels, flip, dst, err);
    if (d)
        index_end(d);
    return rc;
}

static int decode_crop_resize(fl_decoder *d, const uint8_t *data, size_t len, const fl_rect *crop,
                              uint32_t out_width, uint32_t out_height, uint32_t channels, int flip,
                              uint8_t *dst, fl_error *err)
{
    fl_image_info info;
    int rc = decode_precheck(d, data, len, channels, &info, err);
    if (rc)
        return rc;
    if (!crop || !dst || out_width == 0 || out_height == 0)
        return fl_error_set(err, FL_E_INVALID,
                            "decode_crop_resize: NULL crop/dst or zero output size");
    if (crop->width == 0 || crop->height == 0 || crop->x >= info.width || crop->y >= info.height ||
        crop->width > info.width - crop->x || crop->height > info.height - crop->y)
        return fl_error_set(err, FL_E_RANGE, "crop %ux%u+%u+%u outside the %ux%u image",
                            crop->width, crop->height, crop->x, crop->y, info.width, info.height);
    fl_image img;
    double win[4];
    if (info.format == FL_IMG_JPEG) {
        rc = fl_jpeg_decode_crop(d, data, len, crop, out_width, out_height, channels, &img, win,
                                 err);
    } else {
        rc = info.format == FL_IMG_WEBP ? fl_webp_decode(d, data, len, channels, &img, err)
                                        : fl_png_decode(d, data, len, channels, &img, err);
        win[0] = crop->x;
        win[1] = crop->y;
        win[2] = crop->width;
        win[3] = crop->height;
        /* the crop was checked against the probed size: a file whose frame disagrees with its
         * header (a crafted WebP canvas) must not make the resampler read outside the pixels */
        if (!rc && (img.width != info.width || img.height != info.height))
            return fl_error_set(err, FL_E_DECODE, "%s: decodes to %ux%u but its header says %ux%u",
                                info.format == FL_IMG_WEBP ? "WebP" : "PNG", img.width, img.height,
                                info.width, info.height);
    }
    if (rc)
        return rc;
    size_t need =
        fl_resize_window_scratch_size(img.width, img.height, win, out_width, out_height, channels);
    if (fl_buf_reserve(&d->resize, need))
        return fl_error_set(err, -ENOMEM, "decode_crop_resize: out of memory for resize scratch");
    return fl_resize_window(img.pixels, img.width, img.height, img.stride, channels, win, dst,
                            out_width, out_height, (size_t)out_width * channels, flip, d->resize.p,
                            d->resize.cap, err);
}

/* The first scan of a JPEG: 1 when it holds every component of the frame (a sequential file
 * libjpeg decodes a row of blocks at a time), 0 when it does not or cannot be found (libjpeg
 * then buffers the whole image's coefficients, as for a progressive file). */
static int jpeg_single_scan(const uint8_t *p, size_t len, uint32_t components)
{
    size_t pos = 2;
    while (pos + 4 <= len && p[pos] == 0xFF) {
        while (pos < len && p[pos] == 0xFF)
            pos++;
        if (pos + 3 > len)
            return 0;
        uint8_t m = p[pos++];
        if (m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7))
            continue;
        size_t seg = (size_t)p[pos] << 8 | p[pos + 1];
        if (m == 0xDA)
            return seg >= 3 && p[pos + 2] == components;
        if (seg < 2)
            return 0;
        pos += seg;
    }
    return 0;
}

uint64_t fl_decode_crop_resize_bytes(const uint8_t *data, size_t len, const fl_rect *crop,
                                     uint32_t out_width, uint32_t out_height, uint32_t channels)
{
    fl_image_info ii;
    fl_error e;
    if (!data || !crop || !crop->width || !crop->height || fl_image_probe(data, len, &ii, &e))
        return 0;
    uint64_t W = ii.width, H = ii.height, nc = ii.components ? ii.components : 4;
    uint64_t dw = W, dh = H; /* the pixels decoded before resampling */
    uint64_t codec;          /* the codec's own allocations */
    uint64_t dec_ch = channels == 1 && nc < 3 ? 1 : 3;
    if (ii.format == FL_IMG_JPEG) {
        uint64_t num = 8; /* the DCT scale fl_jpeg_decode_crop picks (n/8) */
        for (uint64_t n = 1; n < 8; n *= 2)
            if (crop->width * n >= (uint64_t)out_width * 8 &&
                crop->height * n >= (uint64_t)out_height * 8) {
                num = n;
                break;
            }
        /* the crop at that scale, widened to whole iMCUs (16 columns) and one column a side */
        dw = (crop->width * num + 7) / 8 + 2 * 16 + 2;
        dh = (crop->height * num + 7) / 8 + 2;
        dec_ch = channels;
        /* coefficients: the whole image (2 bytes a sample, blocks padded to iMCUs) when the
         * file is progressive or its first scan lacks components, else an iMCU row; plus the
         * sample rows around it; CMYK rows; up to 4x the file for copies of its entropy-coded
         * bytes (the stream rebuilt from a restart marker, an unstuffed copy and the offsets
         * of its restart intervals) */
        uint64_t bw = (W + 31) / 8, bh = (H + 31) / 8;
        codec = ii.progressive || !jpeg_single_scan(data, len, ii.components) ? bw * bh * 128 * nc
                                                                              : bw * 4 * 128 * nc;
        codec += (W + 32) * 48 * nc + 4 * (uint64_t)len + 4 * (W + 32);
    } else if (ii.format == FL_IMG_PNG) {
        /* libpng's row and previous row (up to 8 bytes a pixel) and zlib's window */
        codec = 2 * (W * 8 + 1) + 64 * 1024;
    } else {
        /* libwebp into our RGB buffer: a lossless image (or a lossy one's alpha) decodes to
         * 4-byte ARGB pixels (+ cache rows), the alpha plane takes a byte a pixel; a simple lossy
         * file ("VP8 ") needs macroblock-row caches only */
        int simple_lossy = len >= 16 && !memcmp(data + 12, "VP8 ", 4);
        dec_ch = 3;
        codec = (simple_lossy ? 0 : W * H * 5) + (W + 64) * 1024;
    }
    if (dw > W + 34)
        dw = W + 34;
    if (dh > H + 2)
        dh = H + 2;
    uint64_t pixels = dw * dh * dec_ch + dh * sizeof(void *);
    uint64_t rs = fl_resize_scratch_size((uint32_t)dw, (uint32_t)dh, out_width ? out_width : 1,
                                         out_height ? out_height : 1, channels);
    return pixels + codec + rs + 64 * 1024;
}

size_t fl_decoder_trim(fl_decoder *d, size_t max_held)
{
    if (!d)
        return 0;
    fl_buf *bufs[] = {&d->image, &d->rows, &d->resize, &d->stream};
    size_t held = 0;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        held += bufs[i]->cap;
    if (held <= max_held)
        return held;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        fl_buf_free(bufs[i]);
    return 0;
}
