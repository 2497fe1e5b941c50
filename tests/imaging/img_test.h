/* img_test.h — helpers for the imaging tests: fl_check.h's checks, synthetic images, and JPEG/PNG
 * writers built directly on libjpeg/libpng (so tests can make CMYK, progressive, 4:2:2,
 * 16-bit, palette and RGBA files that fl_encode_* does not produce). */
#ifndef FL_IMG_TEST_H
#define FL_IMG_TEST_H

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

#include "fl_check.h" /* EXPECT, EXPECT_RC: counted; main ends with return fl_check_status() */
#include "fl_image.h"

/* A smooth photo-like image: gradients plus low-frequency waves, deterministic. */
static inline uint8_t *synth_image(uint32_t w, uint32_t h, uint32_t ch)
{
    uint8_t *p = malloc((size_t)w * h * ch);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t c = 0; c < ch; c++) {
                double v = 128 + 60 * sin((x + 7.0 * c) / 17.0) * cos((y + 3.0 * c) / 23.0) +
                           50.0 * ((double)x / w - 0.5) +
                           40.0 * ((double)y / h - 0.5) * (c == 1 ? -1 : 1);
                p[((size_t)y * w + x) * ch + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

static inline double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++)
        se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    if (se == 0)
        return 99.0;
    return 10 * log10(255.0 * 255.0 / (se / n));
}

static inline int max_abs_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    int m = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        if (d > m)
            m = d;
    }
    return m;
}

static inline double mean_abs_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += abs((int)a[i] - (int)b[i]);
    return s / n;
}

/* ---- JPEG writer via the libjpeg API ---------------------------------------------------- */
struct tj_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
};
static void tj_error_exit(j_common_ptr c) { longjmp(((struct tj_err *)c->err)->jb, 1); }

/* Encode w×h pixels with `comps` components in color space `cs` (JCS_RGB, JCS_GRAYSCALE,
 * JCS_CMYK). hs/vs: luma sampling factors (2,2 = 4:2:0; 2,1 = 4:2:2; 1,1 = 4:4:4).
 * Returns malloc'ed bytes (free()), NULL on error. */
static inline uint8_t *write_jpeg(const uint8_t *pix, uint32_t w, uint32_t h, int comps,
                                  J_COLOR_SPACE cs, int quality, int hs, int vs, int progressive,
                                  size_t *len)
{
    struct jpeg_compress_struct ci;
    struct tj_err je;
    unsigned char *buf = NULL;
    unsigned long blen = 0;
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = tj_error_exit;
    if (setjmp(je.jb)) {
        jpeg_destroy_compress(&ci);
        free(buf);
        return NULL;
    }
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &buf, &blen);
    ci.image_width = w;
    ci.image_height = h;
    ci.input_components = comps;
    ci.in_color_space = cs;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    if (comps == 3) {
        ci.comp_info[0].h_samp_factor = hs;
        ci.comp_info[0].v_samp_factor = vs;
    }
    if (progressive)
        jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < h) {
        JSAMPROW row = (JSAMPROW)(pix + (size_t)ci.next_scanline * w * comps);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    uint8_t *out = malloc(blen);
    memcpy(out, buf, blen);
    free(buf);
    *len = blen;
    return out;
}

/* ---- PNG writer via libpng ---------------------------------------------------------------- */
struct png_mem {
    uint8_t *p;
    size_t len, cap;
};
static void pm_write(png_structp png, png_bytep d, png_size_t n)
{
    struct png_mem *m = png_get_io_ptr(png);
    if (m->len + n > m->cap) {
        m->cap = (m->len + n) * 2;
        m->p = realloc(m->p, m->cap);
    }
    memcpy(m->p + m->len, d, n);
    m->len += n;
}
static void pm_flush(png_structp png) { (void)png; }

/* rows: h rows of packed samples as libpng expects them (16-bit big-endian). palette/trns
 * optional (for PNG_COLOR_TYPE_PALETTE). Returns malloc'ed bytes. */
static inline uint8_t *write_png(const uint8_t *pix, size_t stride, uint32_t w, uint32_t h,
                                 int depth, int ctype, const png_color *pal, int npal,
                                 const uint8_t *trns, int ntrns, int interlace, size_t *len)
{
    struct png_mem m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(m.p);
        return NULL;
    }
    png_set_write_fn(png, &m, pm_write, pm_flush);
    png_set_IHDR(png, info, w, h, depth, ctype,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (pal)
        png_set_PLTE(png, info, pal, npal);
    if (trns)
        png_set_tRNS(png, info, trns, ntrns, NULL);
    png_write_info(png, info);
    png_bytep *rows = malloc(sizeof(png_bytep) * h);
    for (uint32_t y = 0; y < h; y++)
        rows[y] = (png_bytep)(pix + y * stride);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    *len = m.len;
    return m.p;
}

#endif
