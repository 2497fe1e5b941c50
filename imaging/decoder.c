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
        d->flags = flags & (FL_DECODE_FAST | FL_DECODE_NO_RESTART_SKIP);
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

int fl_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels, uint32_t min_width,
              uint32_t min_height, fl_image *out, fl_error *err)
{
    fl_image_info info;
    int rc = decode_precheck(d, data, len, channels, &info, err);
    if (rc)
        return rc;
    if (info.format == FL_IMG_JPEG)
        return fl_jpeg_decode(d, data, len, channels, min_width, min_height, out, err);
    if (info.format == FL_IMG_WEBP)
        return fl_webp_decode(d, data, len, channels, out, err);
    return fl_png_decode(d, data, len, channels, out, err);
}

int fl_decode_crop_resize(fl_decoder *d, const uint8_t *data, size_t len, const fl_rect *crop,
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
