/* webp_decode.c — WebP decoding with libwebp from memory (lossy, lossless, alpha; still images
 * only) into the decoder's grow-only scratch, as 8-bit RGB or gray. Alpha is dropped, as for PNG.
 * Built without libwebp (FL_HAVE_WEBP undefined), every call fails with FL_E_UNSUPPORTED and a
 * message saying how to get WebP support, so the rest of the build is unchanged. */
#include <errno.h>
#include <string.h>

#include "image_internal.h"

#ifdef FL_HAVE_WEBP
#include <webp/decode.h>

static const char *status_text(VP8StatusCode st)
{
    switch (st) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "corrupt bitstream";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "file truncated (not enough data)";
    default: return "unknown error";
    }
}

int fl_image_can_decode(fl_image_format f)
{
    return f == FL_IMG_JPEG || f == FL_IMG_PNG || f == FL_IMG_WEBP;
}

int fl_webp_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels, fl_image *out,
                   fl_error *err)
{
    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg))
        return fl_error_set(err, FL_E_UNSUPPORTED, "WebP: libwebp version mismatch");
    VP8StatusCode st = WebPGetFeatures(data, len, &cfg.input);
    if (st != VP8_STATUS_OK)
        return fl_error_set(err, FL_E_DECODE, "WebP: %s", status_text(st));
    if (cfg.input.has_animation)
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "an animated WebP image: not supported (only still images are read)");
    uint32_t w = (uint32_t)cfg.input.width, h = (uint32_t)cfg.input.height;
    if (!w || !h)
        return fl_error_set(err, FL_E_DECODE, "WebP: zero width or height");
    if ((uint64_t)w * h > d->max_pixels)
        return fl_error_set(err, FL_E_TOO_LARGE, "WebP: %ux%u over the pixel limit %llu", w, h,
                            (unsigned long long)d->max_pixels);
    size_t stride = (size_t)w * 3;
    if (fl_buf_reserve(&d->image, stride * h))
        return fl_error_set(err, -ENOMEM, "WebP: out of memory for %ux%u", w, h);
    /* MODE_RGB: libwebp writes straight into our scratch; alpha (if any) is not applied */
    cfg.output.colorspace = MODE_RGB;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = d->image.p;
    cfg.output.u.RGBA.stride = (int)stride;
    cfg.output.u.RGBA.size = stride * h;
    st = WebPDecode(data, len, &cfg);
    WebPFreeDecBuffer(&cfg.output);
    if (st == VP8_STATUS_OUT_OF_MEMORY)
        return fl_error_set(err, -ENOMEM, "WebP: out of memory");
    if (st != VP8_STATUS_OK)
        return fl_error_set(err, FL_E_DECODE, "WebP: %s", status_text(st));
    if (channels == 1) {
        fl_rgb_to_gray(d->image.p, d->image.p, (size_t)w * h);
        stride = w;
    }
    out->pixels = d->image.p;
    out->width = w;
    out->height = h;
    out->channels = channels;
    out->stride = stride;
    return 0;
}

#else

int fl_image_can_decode(fl_image_format f) { return f == FL_IMG_JPEG || f == FL_IMG_PNG; }

int fl_webp_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels, fl_image *out,
                   fl_error *err)
{
    (void)d, (void)data, (void)len, (void)channels, (void)out;
    return fl_error_set(err, FL_E_UNSUPPORTED,
                        "a WebP image: this build has no WebP support "
                        "(install libwebp-dev and rebuild fastload)");
}

#endif
