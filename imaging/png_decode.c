/* png_decode.c — PNG decoding with libpng from memory: any bit depth, palette, gray, alpha and
 * interlacing, converted to 8-bit gray or RGB. Alpha is dropped (not composited), as PIL's
 * convert("RGB") does: transparent pixels keep the colour stored under them. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <png.h>

#include "image_internal.h"

void fl_png_read_mem(png_structp png, png_bytep out, png_size_t n)
{
    fl_png_src *s = png_get_io_ptr(png);
    if (n > s->len - s->pos)
        png_error(png, "unexpected end of data (file truncated)");
    memcpy(out, s->data + s->pos, n);
    s->pos += n;
}

void fl_png_on_error(png_structp png, png_const_charp msg)
{
    fl_png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

void fl_png_on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

int fl_png_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels, fl_image *out,
                  fl_error *err)
{
    fl_png_src src = {data, len, 0, "unknown error"};
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, fl_png_on_error, fl_png_on_warning);
    if (!png)
        return fl_error_set(err, -ENOMEM, "PNG: cannot create decoder");
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return fl_error_set(err, -ENOMEM, "PNG: cannot create decoder");
    }
    int rc = 0;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        return fl_error_set(err, FL_E_DECODE, "PNG: %s", src.msg);
    }
    png_set_read_fn(png, &src, fl_png_read_mem);
    /* Second guard behind the probe's pixel check; ancillary chunks capped too. */
    uint64_t lim = d->max_pixels < 0x7fffffffu ? d->max_pixels : 0x7fffffffu;
    png_set_user_limits(png, (png_uint_32)lim, (png_uint_32)lim);
    png_set_chunk_malloc_max(png, 8u << 20);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if ((uint64_t)w * h > d->max_pixels) {
        rc = fl_error_set(err, FL_E_TOO_LARGE, "PNG: %ux%u over the pixel limit %llu", w, h,
                          (unsigned long long)d->max_pixels);
        goto done;
    }
    int ctype = png_get_color_type(png, info);
    png_set_expand(png);      /* palette → RGB, gray < 8 bit → 8 bit, tRNS → alpha */
    png_set_strip_16(png);    /* 16 → 8 bit: keep the high byte */
    png_set_strip_alpha(png); /* drop alpha (see file comment) */
    int src_gray = !(ctype & PNG_COLOR_MASK_COLOR) && ctype != PNG_COLOR_TYPE_PALETTE;
    if (src_gray && channels == 3)
        png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    uint32_t dec_ch = png_get_channels(png, info);
    if (dec_ch != 1 && dec_ch != 3) {
        rc = fl_error_set(err, FL_E_UNSUPPORTED, "PNG: %u channels after conversion", dec_ch);
        goto done;
    }
    size_t dec_stride = (size_t)w * dec_ch;
    if (png_get_rowbytes(png, info) != dec_stride) {
        rc = fl_error_set(err, FL_E_UNSUPPORTED, "PNG: unexpected row size");
        goto done;
    }
    if (fl_buf_reserve(&d->image, dec_stride * h) ||
        fl_buf_reserve(&d->rows, sizeof(png_bytep) * h)) {
        rc = fl_error_set(err, -ENOMEM, "PNG: out of memory for %ux%u", w, h);
        goto done;
    }
    png_bytepp rows = (png_bytepp)(void *)d->rows.p;
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = d->image.p + (size_t)y * dec_stride;
    png_read_image(png, rows);
    /* Trailing chunks after IDAT are not needed; a truncated file has already failed above. */
    if (dec_ch == 3 && channels == 1)
        fl_rgb_to_gray(d->image.p, d->image.p, (size_t)w * h);
    out->pixels = d->image.p;
    out->width = w;
    out->height = h;
    out->channels = channels;
    out->stride = (size_t)w * channels;
done:
    png_destroy_read_struct(&png, &info, NULL);
    return rc;
}
