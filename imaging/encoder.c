/* encoder.c — JPEG (TurboJPEG tjCompress2 into a reused buffer) and PNG (libpng to memory)
 * encoding of 1- or 3-channel HWC images. One fl_encoder per thread. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <turbojpeg.h>

#include "image_internal.h"

struct fl_encoder {
    tjhandle tj;
    unsigned char *jpeg; /* tjAlloc'ed, grown with tjBufSize, never reallocated by TurboJPEG */
    unsigned long jpeg_cap;
    fl_buf png;
    size_t png_len;
    int png_oom;
    char png_msg[256];
};

int fl_encoder_create(fl_encoder **out, fl_error *err) {
    if (!out) return fl_error_set(err, FL_E_INVALID, "fl_encoder_create: NULL out");
    fl_encoder *e = calloc(1, sizeof *e);
    if (!e) return fl_error_set(err, -ENOMEM, "fl_encoder_create: out of memory");
    *out = e;
    return 0;
}

void fl_encoder_free(fl_encoder *e) {
    if (!e) return;
    if (e->tj) tjDestroy(e->tj);
    tjFree(e->jpeg);
    fl_buf_free(&e->png);
    free(e);
}

static int check_image(const fl_image *img, const char *what, fl_error *err) {
    if (!img || !img->pixels || img->width == 0 || img->height == 0 ||
        (img->channels != 1 && img->channels != 3) ||
        img->stride < (size_t)img->width * img->channels)
        return fl_error_set(err, FL_E_INVALID, "%s: need a non-empty 1- or 3-channel image", what);
    return 0;
}

int fl_encode_jpeg(fl_encoder *e, const fl_image *img, int quality, const uint8_t **out,
                   size_t *out_len, fl_error *err) {
    int rc = check_image(img, "encode JPEG", err);
    if (rc) return rc;
    if (quality < 1 || quality > 100)
        return fl_error_set(err, FL_E_INVALID, "encode JPEG: quality %d not in 1..100", quality);
    if (img->width > 65500 || img->height > 65500 || img->stride > 0x7fffffff)
        return fl_error_set(err, FL_E_UNSUPPORTED, "encode JPEG: %ux%u over the JPEG limit 65500",
                            img->width, img->height);
    if (!e->tj && !(e->tj = tjInitCompress()))
        return fl_error_set(err, -ENOMEM, "encode JPEG: %s", tjGetErrorStr2(NULL));
    int gray = img->channels == 1;
    int samp = gray ? TJSAMP_GRAY : quality >= 95 ? TJSAMP_444 : TJSAMP_420;
    unsigned long need = tjBufSize((int)img->width, (int)img->height, samp);
    if (need == (unsigned long)-1) return fl_error_set(err, FL_E_INVALID, "encode JPEG: bad size");
    if (need > e->jpeg_cap) {
        tjFree(e->jpeg);
        e->jpeg = tjAlloc((int)need);
        e->jpeg_cap = e->jpeg ? need : 0;
        if (!e->jpeg) return fl_error_set(err, -ENOMEM, "encode JPEG: out of memory");
    }
    unsigned long len = e->jpeg_cap;
    if (tjCompress2(e->tj, img->pixels, (int)img->width, (int)img->stride, (int)img->height,
                    gray ? TJPF_GRAY : TJPF_RGB, &e->jpeg, &len, samp, quality,
                    TJFLAG_NOREALLOC | TJFLAG_ACCURATEDCT) != 0)
        return fl_error_set(err, FL_E_DECODE, "encode JPEG: %s", tjGetErrorStr2(e->tj));
    *out = e->jpeg;
    *out_len = len;
    return 0;
}

static void png_write_mem(png_structp png, png_bytep data, png_size_t n) {
    fl_encoder *e = png_get_io_ptr(png);
    if (e->png_len + n > e->png.cap) {
        size_t cap = e->png.cap ? e->png.cap : 65536;
        while (cap < e->png_len + n) cap *= 2;
        uint8_t *p = realloc(e->png.p, cap);
        if (!p) {
            e->png_oom = 1;
            png_error(png, "out of memory");
        }
        e->png.p = p;
        e->png.cap = cap;
    }
    memcpy(e->png.p + e->png_len, data, n);
    e->png_len += n;
}

static void png_flush_mem(png_structp png) { (void)png; }

static void png_enc_error(png_structp png, png_const_charp msg) {
    fl_encoder *e = png_get_error_ptr(png);
    snprintf(e->png_msg, sizeof e->png_msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_enc_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

int fl_encode_png(fl_encoder *e, const fl_image *img, const uint8_t **out, size_t *out_len,
                  fl_error *err) {
    int rc = check_image(img, "encode PNG", err);
    if (rc) return rc;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, e, png_enc_error, png_enc_warning);
    if (!png) return fl_error_set(err, -ENOMEM, "encode PNG: out of memory");
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return fl_error_set(err, -ENOMEM, "encode PNG: out of memory");
    }
    e->png_len = 0;
    e->png_oom = 0;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return fl_error_set(err, e->png_oom ? -ENOMEM : FL_E_INVALID, "encode PNG: %s", e->png_msg);
    }
    png_set_write_fn(png, e, png_write_mem, png_flush_mem);
    png_set_IHDR(png, info, img->width, img->height, 8,
                 img->channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (uint32_t y = 0; y < img->height; y++)
        png_write_row(png, img->pixels + (size_t)y * img->stride);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    *out = e->png.p;
    *out_len = e->png_len;
    return 0;
}
