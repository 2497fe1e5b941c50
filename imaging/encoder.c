/* encoder.c — JPEG (TurboJPEG tjCompress2 into a reused buffer) and PNG (libpng to memory)
 * encoding of 1- or 3-channel HWC images. One fl_encoder per thread. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <turbojpeg.h>

#include "image_internal.h"

struct fl_encoder {
    tjhandle tj;
    unsigned char *jpeg; /* tjAlloc'ed, grown with tjBufSize, never reallocated by TurboJPEG */
    unsigned long jpeg_cap;
    fl_buf png;
    size_t png_len;
    fl_buf rst;         /* fl_jpeg_add_restarts output */
    fl_buf rst_scratch; /* its unstuffed entropy-coded bits (fl_jpeg_restart_copy) */
    int png_oom;
    char png_msg[256];
};

int fl_encoder_create(fl_encoder **out, fl_error *err)
{
    if (!out)
        return fl_error_set(err, FL_E_INVALID, "fl_encoder_create: NULL out");
    fl_encoder *e = calloc(1, sizeof *e);
    if (!e)
        return fl_error_set(err, -ENOMEM, "fl_encoder_create: out of memory");
    *out = e;
    return 0;
}

void fl_encoder_free(fl_encoder *e)
{
    if (!e)
        return;
    if (e->tj)
        tjDestroy(e->tj);
    tjFree(e->jpeg);
    fl_buf_free(&e->png);
    fl_buf_free(&e->rst);
    fl_buf_free(&e->rst_scratch);
    free(e);
}

static int check_image(const fl_image *img, const char *what, fl_error *err)
{
    if (!img || !img->pixels || img->width == 0 || img->height == 0 ||
        (img->channels != 1 && img->channels != 3) ||
        img->stride < (size_t)img->width * img->channels)
        return fl_error_set(err, FL_E_INVALID, "%s: need a non-empty 1- or 3-channel image", what);
    return 0;
}

int fl_encode_jpeg(fl_encoder *e, const fl_image *img, int quality, const uint8_t **out,
                   size_t *out_len, fl_error *err)
{
    int rc = check_image(img, "encode JPEG", err);
    if (rc)
        return rc;
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
    if (need == (unsigned long)-1)
        return fl_error_set(err, FL_E_INVALID, "encode JPEG: bad size");
    if (need > e->jpeg_cap) {
        tjFree(e->jpeg);
        e->jpeg = tjAlloc((int)need);
        e->jpeg_cap = e->jpeg ? need : 0;
        if (!e->jpeg)
            return fl_error_set(err, -ENOMEM, "encode JPEG: out of memory");
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

static void png_write_mem(png_structp png, png_bytep data, png_size_t n)
{
    fl_encoder *e = png_get_io_ptr(png);
    if (e->png_len + n > e->png.cap) {
        size_t cap = e->png.cap ? e->png.cap : 65536;
        while (cap < e->png_len + n)
            cap *= 2;
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

static void png_enc_error(png_structp png, png_const_charp msg)
{
    fl_encoder *e = png_get_error_ptr(png);
    snprintf(e->png_msg, sizeof e->png_msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_enc_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

int fl_encode_png(fl_encoder *e, const fl_image *img, const uint8_t **out, size_t *out_len,
                  fl_error *err)
{
    int rc = check_image(img, "encode PNG", err);
    if (rc)
        return rc;
    png_structp png =
        png_create_write_struct(PNG_LIBPNG_VER_STRING, e, png_enc_error, png_enc_warning);
    if (!png)
        return fl_error_set(err, -ENOMEM, "encode PNG: out of memory");
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

/* ---- Lossless rewrite with restart markers (every MCU row starts an interval) -------------- */

struct rst_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
};

static void rst_error_exit(j_common_ptr c)
{
    struct rst_err *e = (struct rst_err *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings that mean missing or damaged coefficients are errors (as in the decoder). */
static void rst_emit_message(j_common_ptr c, int level)
{
    if (level >= 0)
        return;
    switch (c->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_MUST_RESYNC: rst_error_exit(c); break;
    default: break;
    }
}

static void rst_output_message(j_common_ptr c) { (void)c; }

/* Destination manager writing into the encoder's grow-only buffer. */
struct rst_dest {
    struct jpeg_destination_mgr pub;
    fl_buf *buf;
    size_t len;
    int oom;
};

static void rst_init_destination(j_compress_ptr c)
{
    struct rst_dest *d = (struct rst_dest *)c->dest;
    d->pub.next_output_byte = d->buf->p;
    d->pub.free_in_buffer = d->buf->cap;
}

static boolean rst_empty_output_buffer(j_compress_ptr c)
{
    struct rst_dest *d = (struct rst_dest *)c->dest;
    size_t used = d->buf->cap; /* libjpeg calls this only when the buffer is full */
    size_t cap = used ? used * 2 : 65536;
    uint8_t *p = realloc(d->buf->p, cap);
    if (!p) {
        d->oom = 1;
        ERREXIT(c, JERR_OUT_OF_MEMORY);
    }
    d->buf->p = p;
    d->buf->cap = cap;
    d->pub.next_output_byte = p + used;
    d->pub.free_in_buffer = cap - used;
    return TRUE;
}

static void rst_term_destination(j_compress_ptr c)
{
    struct rst_dest *d = (struct rst_dest *)c->dest;
    d->len = d->buf->cap - d->pub.free_in_buffer;
}

int fl_jpeg_add_restarts(fl_encoder *e, const uint8_t *data, size_t len, uint32_t max_mcus,
                         const uint8_t **out, size_t *out_len, fl_error *err)
{
    if (!e || !data || !out || !out_len)
        return fl_error_set(err, FL_E_INVALID, "JPEG restart rewrite: NULL argument");
    fl_image_info info;
    int rc = fl_image_probe(data, len, &info, err);
    if (rc)
        return rc;
    if (info.format != FL_IMG_JPEG)
        return fl_error_set(err, FL_E_INVALID, "JPEG restart rewrite: input is not a JPEG");
    if ((uint64_t)info.width * info.height > FL_DEFAULT_MAX_PIXELS)
        return fl_error_set(err, FL_E_TOO_LARGE, "JPEG restart rewrite: %ux%u over the pixel limit",
                            info.width, info.height);
    /* a sequential file: its Huffman-coded bits copied with markers between (jpeg_restart.c) */
    size_t n;
    rc = fl_jpeg_restart_copy(&e->rst, &e->rst_scratch, data, len, max_mcus, &n);
    if (rc < 0)
        return fl_error_set(err, rc, "JPEG restart rewrite: out of memory");
    if (rc == 0) {
        *out = e->rst.p;
        *out_len = n;
        return 0;
    }
    if (e->rst.cap < len + 4096 && fl_buf_reserve(&e->rst, len + len / 8 + 4096))
        return fl_error_set(err, -ENOMEM, "JPEG restart rewrite: out of memory");
    struct jpeg_decompress_struct src;
    struct jpeg_compress_struct dst;
    struct rst_err jerr_src, jerr_dst;
    struct rst_dest dest = {.buf = &e->rst};
    memset(&src, 0, sizeof src);
    memset(&dst, 0, sizeof dst);
    src.err = jpeg_std_error(&jerr_src.pub);
    dst.err = jpeg_std_error(&jerr_dst.pub);
    jerr_src.pub.error_exit = jerr_dst.pub.error_exit = rst_error_exit;
    jerr_src.pub.emit_message = jerr_dst.pub.emit_message = rst_emit_message;
    jerr_src.pub.output_message = jerr_dst.pub.output_message = rst_output_message;
    volatile int created_src = 0, created_dst = 0; /* read after longjmp */
    /* Both error managers jump to the same place; the message comes from whichever failed. */
    jerr_src.msg[0] = jerr_dst.msg[0] = '\0';
    if (setjmp(jerr_src.jb))
        goto fail;
    memcpy(jerr_dst.jb, jerr_src.jb, sizeof(jmp_buf));
    jpeg_create_decompress(&src);
    created_src = 1;
    jpeg_create_compress(&dst);
    created_dst = 1;
    jpeg_mem_src(&src, data, (unsigned long)len);
    jpeg_read_header(&src, TRUE);
    jvirt_barray_ptr *coefs = jpeg_read_coefficients(&src);
    jpeg_copy_critical_parameters(&src, &dst);
    /* Restart interval: the largest divisor of the MCU row up to max_mcus (0: the whole row), so
     * every MCU row starts a new interval. */
    uint32_t maxh = 1;
    for (int c = 0; c < src.num_components; c++)
        if ((uint32_t)src.comp_info[c].h_samp_factor > maxh)
            maxh = (uint32_t)src.comp_info[c].h_samp_factor;
    if (src.num_components == 1)
        maxh = 1;
    uint32_t per_row = (src.image_width + 8 * maxh - 1) / (8 * maxh), ri = per_row;
    if (max_mcus)
        for (ri = max_mcus < per_row ? max_mcus : per_row; per_row % ri; ri--) {
        }
    if (ri > 65535)
        ri = 0; /* DRI is 16 bits: fall back to one marker per MCU row */
    if (ri)
        dst.restart_interval = ri;
    else
        dst.restart_in_rows = 1;
    dst.optimize_coding = TRUE; /* per-image Huffman tables win back most of the markers' bytes */
    dst.dest = &dest.pub;
    dest.pub.init_destination = rst_init_destination;
    dest.pub.empty_output_buffer = rst_empty_output_buffer;
    dest.pub.term_destination = rst_term_destination;
    jpeg_write_coefficients(&dst, coefs);
    jpeg_finish_compress(&dst);
    jpeg_finish_decompress(&src);
    jpeg_destroy_compress(&dst);
    jpeg_destroy_decompress(&src);
    *out = e->rst.p;
    *out_len = dest.len;
    return 0;
fail:
    if (created_dst)
        jpeg_destroy_compress(&dst);
    if (created_src)
        jpeg_destroy_decompress(&src);
    if (dest.oom)
        return fl_error_set(err, -ENOMEM, "JPEG restart rewrite: out of memory");
    return fl_error_set(err, FL_E_DECODE, "JPEG restart rewrite: %s",
                        jerr_src.msg[0] ? jerr_src.msg : jerr_dst.msg);
}

/* ---- Direct encode with restart markers (libjpeg API) ------------------------------------------
 * The same frame as fl_encode_jpeg (quality tables, 4:2:0 below quality 95 else 4:4:4, gray for one
 * channel, the accurate integer DCT, standard Huffman tables), so the coefficients and decoded
 * pixels are identical; only the restart markers differ. This costs what a plain encode costs,
 * where fl_jpeg_add_restarts after fl_encode_jpeg costs a second entropy pass. */
int fl_encode_jpeg_restart(fl_encoder *e, const fl_image *img, int quality, uint32_t max_mcus,
                           const uint8_t **out, size_t *out_len, fl_error *err)
{
    int rc = check_image(img, "encode JPEG", err);
    if (rc)
        return rc;
    if (quality < 1 || quality > 100)
        return fl_error_set(err, FL_E_INVALID, "encode JPEG: quality %d not in 1..100", quality);
    if (img->width > 65500 || img->height > 65500)
        return fl_error_set(err, FL_E_UNSUPPORTED, "encode JPEG: %ux%u over the JPEG limit 65500",
                            img->width, img->height);
    size_t guess = (size_t)img->width * img->height * img->channels / 4 + 4096;
    if (e->rst.cap < guess && fl_buf_reserve(&e->rst, guess))
        return fl_error_set(err, -ENOMEM, "encode JPEG: out of memory");
    struct jpeg_compress_struct c;
    struct rst_err jerr;
    struct rst_dest dest = {.buf = &e->rst};
    memset(&c, 0, sizeof c);
    c.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = rst_error_exit;
    jerr.pub.emit_message = rst_emit_message;
    jerr.pub.output_message = rst_output_message;
    jerr.msg[0] = '\0';
    volatile int created = 0;
    if (setjmp(jerr.jb))
        goto fail;
    jpeg_create_compress(&c);
    created = 1;
    c.image_width = img->width;
    c.image_height = img->height;
    c.input_components = (int)img->channels;
    c.in_color_space = img->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    c.dct_method = JDCT_ISLOW;
    uint32_t maxh = 1;
    if (img->channels == 3) {
        int h = quality >= 95 ? 1 : 2; /* as fl_encode_jpeg: 4:4:4 at >= 95, else 4:2:0 */
        c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = h;
        for (int k = 1; k < 3; k++)
            c.comp_info[k].h_samp_factor = c.comp_info[k].v_samp_factor = 1;
        maxh = (uint32_t)h;
    }
    uint32_t per_row = (img->width + 8 * maxh - 1) / (8 * maxh), ri = per_row;
    if (max_mcus)
        for (ri = max_mcus < per_row ? max_mcus : per_row; per_row % ri; ri--) {
        }
    if (ri > 65535)
        ri = 0;
    if (ri)
        c.restart_interval = ri;
    else
        c.restart_in_rows = 1;
    c.optimize_coding = FALSE; /* standard tables, as TurboJPEG: optimizing costs a second pass */
    c.dest = &dest.pub;
    dest.pub.init_destination = rst_init_destination;
    dest.pub.empty_output_buffer = rst_empty_output_buffer;
    dest.pub.term_destination = rst_term_destination;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(img->pixels + (size_t)c.next_scanline * img->stride);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *out = e->rst.p;
    *out_len = dest.len;
    return 0;
fail:
    if (created)
        jpeg_destroy_compress(&c);
    if (dest.oom)
        return fl_error_set(err, -ENOMEM, "encode JPEG: out of memory");
    return fl_error_set(err, FL_E_DECODE, "encode JPEG: %s", jerr.msg);
}
