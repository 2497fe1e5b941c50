/* jpeg_decode.c — JPEG decoding through the libjpeg API of libjpeg-turbo: DCT-scaled output,
 * crop decode (jpeg_crop_scanline for columns, jpeg_skip_scanlines for rows), CMYK/YCCK → RGB by
 * hand, and errors/corrupt-data warnings turned into FL_E_DECODE via setjmp/longjmp. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "image_internal.h"

/* A progressive file can declare thousands of tiny scans that each cost a pass over the
 * coefficients (a CPU bomb); real encoders emit about ten. */
#define FL_JPEG_MAX_SCANS 500

struct fl_jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
};

struct fl_jpeg_state {
    struct jpeg_decompress_struct cinfo; /* created once, reused for every image */
    struct fl_jpeg_err jerr;
    struct jpeg_progress_mgr progress;
    struct fl_jpeg_entropy *entropy; /* our Huffman decoder, created on first use */
};

/* libjpeg calls this for fatal errors: keep the message and jump back to the entry point. */
static void on_error_exit(j_common_ptr c)
{
    struct fl_jpeg_err *e = (struct fl_jpeg_err *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings (level -1) that mean pixels are missing or wrong are errors for us: a truncated file
 * would otherwise decode "successfully" with a grey bottom. Others (extra bytes between markers,
 * odd JFIF versions) are tolerated, as every mainstream decoder does. Trace messages are dropped.
 */
static void on_emit_message(j_common_ptr c, int level)
{
    if (level >= 0)
        return;
    struct fl_jpeg_err *e = (struct fl_jpeg_err *)c->err;
    c->err->num_warnings++;
    /* End of data in a single-scan file: if pixels are really missing, the Huffman decoder runs
     * out of bits and raises JWRN_HIT_MARKER, which is fatal below; if not, the file only lacks
     * its EOI marker and every pixel is there (PIL and browsers accept those too). A progressive
     * or multi-scan file that ends early just loses scans silently, so there it stays fatal. */
    if (c->err->msg_code == JWRN_JPEG_EOF && c->is_decompressor) {
        j_decompress_ptr dc = (j_decompress_ptr)c;
        /* Sequential files hold each component in exactly one scan: all in one scan = single-scan.
         */
        if (!dc->progressive_mode && dc->comps_in_scan > 0 &&
            dc->comps_in_scan == dc->num_components)
            return;
    }
    switch (c->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_MUST_RESYNC: c->err->format_message(c, e->msg); longjmp(e->jb, 1);
    default: break;
    }
}

static void on_output_message(j_common_ptr c) { (void)c; /* never print */ }

static void on_progress(j_common_ptr c)
{
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > FL_JPEG_MAX_SCANS) {
        struct fl_jpeg_err *e = (struct fl_jpeg_err *)c->err;
        snprintf(e->msg, sizeof e->msg, "more than %d scans (refusing a progressive CPU bomb)",
                 FL_JPEG_MAX_SCANS);
        longjmp(e->jb, 1);
    }
}

void fl_jpeg_state_free(struct fl_jpeg_state *s)
{
    if (!s)
        return;
    jpeg_destroy_decompress(&s->cinfo);
    fl_jpeg_entropy_free(s->entropy);
    free(s);
}

static int jpeg_state_get(fl_decoder *d, fl_error *err)
{
    if (d->jpeg)
        return 0;
    struct fl_jpeg_state *s = calloc(1, sizeof *s);
    if (!s)
        return fl_error_set(err, -ENOMEM, "JPEG: out of memory");
    s->cinfo.err = jpeg_std_error(&s->jerr.pub);
    s->jerr.pub.error_exit = on_error_exit;
    s->jerr.pub.emit_message = on_emit_message;
    s->jerr.pub.output_message = on_output_message;
    if (setjmp(s->jerr.jb)) { /* jpeg_create_decompress fails only on out-of-memory */
        free(s);
        return fl_error_set(err, -ENOMEM, "JPEG: cannot create decompressor");
    }
    jpeg_create_decompress(&s->cinfo);
    s->progress.progress_monitor = on_progress;
    s->cinfo.progress = &s->progress;
    d->jpeg = s;
    return 0;
}

/* DCT scales (n/8) we are willing to decode at. libjpeg-turbo has SIMD IDCTs only for 8/8,
 * 4/8, 2/8 and 1/8; see choose_scale(). */
static const int scale_nums[] = {1, 2, 4, 8};
#define N_SCALES (sizeof scale_nums / sizeof scale_nums[0])

/* Smallest n/8 whose scaled w×h (libjpeg rounds up) is still >= need_w × need_h. */
static int choose_scale(uint32_t w, uint32_t h, uint32_t need_w, uint32_t need_h)
{
    if (need_w == 0 && need_h == 0)
        return 8; /* 0, 0 asks for full size */
    for (size_t i = 0; i < N_SCALES; i++) {
        uint64_t n = (uint64_t)scale_nums[i];
        if ((w * n + 7) / 8 >= need_w && (h * n + 7) / 8 >= need_h)
            return (int)n;
    }
    return 8;
}

/* Read the header and set the output color space. Must run under the caller's setjmp. */
static int jpeg_setup(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels, int *cmyk,
                      fl_error *err)
{
    j_decompress_ptr ci = &d->jpeg->cinfo;
    jpeg_mem_src(ci, data, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    if ((uint64_t)ci->image_width * ci->image_height > d->max_pixels)
        return fl_error_set(err, FL_E_TOO_LARGE, "JPEG: %ux%u over the pixel limit %llu",
                            ci->image_width, ci->image_height, (unsigned long long)d->max_pixels);
    *cmyk = 0;
    /* Merged (box) chroma upsampling and the fast integer IDCT: a few levels of difference for
     * a few percent of speed; off unless the caller asks (fl_decoder_set_flags). */
    ci->do_fancy_upsampling = (d->flags & FL_DECODE_FAST_UPSAMPLE) ? FALSE : TRUE;
    ci->dct_method = (d->flags & FL_DECODE_FAST_DCT) ? JDCT_IFAST : JDCT_ISLOW;
    switch (ci->jpeg_color_space) {
    case JCS_CMYK:
    case JCS_YCCK:
        ci->out_color_space = JCS_CMYK; /* libjpeg converts YCCK → CMYK, not CMYK → RGB */
        *cmyk = 1;
        break;
    case JCS_GRAYSCALE:
    case JCS_YCbCr:
    case JCS_RGB: ci->out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB; break;
    default:
        return fl_error_set(err, FL_E_UNSUPPORTED, "JPEG: unsupported color space (%d components)",
                            ci->num_components);
    }
    return 0;
}

/* Right after jpeg_start_decompress: Huffman-decode with jpeg_entropy.c unless the caller asked
 * for libjpeg's decoder or the file is of a kind it leaves to libjpeg. Under setjmp. */
static int entropy_setup(fl_decoder *d, fl_error *err)
{
    struct fl_jpeg_state *s = d->jpeg;
    if (d->flags & FL_DECODE_LIBJPEG_HUFFMAN)
        return 0;
    if (!s->entropy && !(s->entropy = fl_jpeg_entropy_new()))
        return fl_error_set(err, -ENOMEM, "JPEG: out of memory");
    fl_jpeg_entropy_use_index(s->entropy, d->jidx, d->jidx_len);
    int rc = fl_jpeg_entropy_install(s->entropy, &s->cinfo);
    return rc < 0 ? fl_error_set(err, rc, "JPEG: out of memory") : 0;
}

/* a*b/255 rounded, exact for 0..255 inputs. */
static inline uint8_t mul255(uint32_t a, uint32_t b)
{
    uint32_t t = a * b + 128;
    return (uint8_t)((t + (t >> 8)) >> 8);
}

/* CMYK scanline → RGB or gray. Photoshop (the files with an Adobe APP14 marker) stores CMYK
 * inverted (0 = full ink), so R = C·K/255; plain CMYK is R = (255−C)(255−K)/255. */
static void cmyk_row(const uint8_t *src, uint8_t *dst, uint32_t w, uint32_t channels, int inverted)
{
    for (uint32_t x = 0; x < w; x++, src += 4) {
        uint32_t c = src[0], m = src[1], y = src[2], k = src[3];
        if (!inverted) {
            c = 255 - c;
            m = 255 - m;
            y = 255 - y;
            k = 255 - k;
        }
        uint8_t rgb[3] = {mul255(c, k), mul255(m, k), mul255(y, k)};
        if (channels == 3) {
            memcpy(dst + 3 * x, rgb, 3);
        } else {
            fl_rgb_to_gray(rgb, dst + x, 1);
        }
    }
}

/* Read `n` output rows into dst (row stride `stride`, `channels` per pixel). Under setjmp. */
static int read_rows(fl_decoder *d, uint8_t *dst, size_t stride, uint32_t n, uint32_t channels,
                     int cmyk, fl_error *err)
{
    j_decompress_ptr ci = &d->jpeg->cinfo;
    uint32_t w = ci->output_width;
    if (cmyk) {
        if (fl_buf_reserve(&d->rows, (size_t)w * 4))
            return fl_error_set(err, -ENOMEM, "JPEG: out of memory");
        int inverted = ci->saw_Adobe_marker;
        for (uint32_t r = 0; r < n; r++) {
            JSAMPROW row = d->rows.p;
            if (jpeg_read_scanlines(ci, &row, 1) != 1)
                return fl_error_set(err, FL_E_DECODE, "JPEG: decoder returned no scanline");
            cmyk_row(d->rows.p, dst + (size_t)r * stride, w, channels, inverted);
        }
        return 0;
    }
    JSAMPROW rows[16];
    uint32_t r = 0;
    while (r < n) {
        uint32_t k = n - r < 16 ? n - r : 16;
        for (uint32_t i = 0; i < k; i++)
            rows[i] = dst + (size_t)(r + i) * stride;
        JDIMENSION got = jpeg_read_scanlines(ci, rows, k);
        if (got == 0)
            return fl_error_set(err, FL_E_DECODE, "JPEG: decoder returned no scanline");
        r += got;
    }
    return 0;
}

int fl_jpeg_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels,
                   uint32_t min_w, uint32_t min_h, fl_image *out, fl_error *err)
{
    int rc = jpeg_state_get(d, err);
    if (rc)
        return rc;
    struct fl_jpeg_state *s = d->jpeg;
    j_decompress_ptr ci = &s->cinfo;
    if (setjmp(s->jerr.jb)) {
        jpeg_abort_decompress(ci);
        return fl_error_set(err, FL_E_DECODE, "JPEG: %s", s->jerr.msg);
    }
    int cmyk;
    rc = jpeg_setup(d, data, len, channels, &cmyk, err);
    if (rc)
        goto fail;
    ci->scale_num = (unsigned)choose_scale(ci->image_width, ci->image_height, min_w, min_h);
    ci->scale_denom = 8;
    jpeg_calc_output_dimensions(ci);
    size_t stride = (size_t)ci->output_width * channels;
    if (fl_buf_reserve(&d->image, stride * ci->output_height)) {
        rc = fl_error_set(err, -ENOMEM, "JPEG: out of memory for %ux%u", ci->output_width,
                          ci->output_height);
        goto fail;
    }
    jpeg_start_decompress(ci);
    rc = entropy_setup(d, err);
    if (rc)
        goto fail;
    rc = read_rows(d, d->image.p, stride, ci->output_height, channels, cmyk, err);
    if (rc)
        goto fail;
    out->pixels = d->image.p;
    out->width = ci->output_width;
    out->height = ci->output_height;
    out->channels = channels;
    out->stride = stride;
    jpeg_finish_decompress(ci);
    d->jidx_fresh = 1;
    return 0;
fail:
    jpeg_abort_decompress(ci);
    return rc;
}

size_t fl_jpeg_learned_index(fl_decoder *d, const void **index)
{
    *index = NULL;
    return d->jidx_fresh && d->jpeg && d->jpeg->entropy
               ? fl_jpeg_entropy_index(d->jpeg->entropy, index)
               : 0;
}

static inline uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* Restart-marker cropping. In a sequential single-scan JPEG whose restart interval divides the
 * MCU row (see fl_jpeg_add_restarts), every interval can be decoded on its own: at a restart the
 * DC predictors reset and the bit stream is byte-aligned. So rebuild the file in d->stream as
 * just the intervals the crop needs: the headers with the SOF size cut to them, then, for the
 * iMCU rows k..r1-1, the intervals c0..c1-1 of each row, restart markers renumbered in sequence,
 * and EOI. libjpeg then Huffman-decodes neither the rows above the crop nor the columns beside it.
 * The coefficients, and so the pixels, are the same; only the rebuilt image's own edge rows and
 * columns can differ (the fancy chroma upsampler has no neighbour beyond them), so the rebuilt
 * image keeps at least one pixel beyond the crop's window on every side that has one, and the
 * crop decode's column margins (below) stay inside it.
 * num: DCT scale n/8; crop: in source pixels.
 * Returns the rebuilt length (0: not applicable, decode the original) and the output pixels cut
 * on the left/top in *xshift and *yshift. All offsets are bounds-checked; anything unexpected falls
 * back to the original stream. */
static size_t restart_crop(fl_decoder *d, const uint8_t *data, size_t len, uint32_t num,
                           const fl_rect *crop, uint32_t *xshift, uint32_t *yshift)
{
    *xshift = *yshift = 0;
    if (len < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return 0;
    size_t pos = 2, sof = 0, entropy = 0;
    uint32_t ri = 0, nf = 0, ns = 0, maxh = 1, maxv = 1, w = 0, h = 0;
    while (!entropy) {
        while (pos + 1 < len && data[pos] == 0xFF && data[pos + 1] == 0xFF)
            pos++; /* fill */
        if (pos + 4 > len || data[pos] != 0xFF)
            return 0;
        uint32_t m = data[pos + 1], seglen = be16(data + pos + 2);
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD9) || seglen < 2 || pos + 2 + seglen > len)
            return 0;
        const uint8_t *seg = data + pos + 4;
        if (m == 0xC0 || m == 0xC1) { /* baseline / extended sequential Huffman */
            if (sof || seglen < 8)
                return 0;
            h = be16(seg + 1);
            w = be16(seg + 3);
            nf = seg[5];
            if (nf < 1 || nf > 4 || seglen < 8 + 3 * nf || h == 0 || w == 0)
                return 0;
            for (uint32_t c = 0; c < nf; c++) {
                uint32_t hs = seg[6 + 3 * c + 1] >> 4, vs = seg[6 + 3 * c + 1] & 15;
                if (hs < 1 || hs > 4 || vs < 1 || vs > 4)
                    return 0;
                if (hs > maxh)
                    maxh = hs;
                if (vs > maxv)
                    maxv = vs;
            }
            if (nf == 1)
                maxh = maxv = 1; /* one component: MCU = one block, iMCU row = 8 rows */
            sof = pos + 5;
        } else if ((m >= 0xC2 && m <= 0xCB && m != 0xC4 && m != 0xC8) || (m >= 0xCD && m <= 0xCF)) {
            return 0; /* progressive, lossless, arithmetic: not handled */
        } else if (m == 0xDD) {
            if (seglen != 4)
                return 0;
            ri = be16(seg);
        } else if (m == 0xDA) {
            if (seglen < 3)
                return 0;
            ns = seg[0];
            entropy = pos + 2 + seglen;
        }
        pos += 2 + seglen;
    }
    if (!sof || ri == 0 || ns != nf)
        return 0;
    if ((uint64_t)crop->x + crop->width > w || (uint64_t)crop->y + crop->height > h)
        return 0;
    /* The window the crop decode reads, computed as it does (in output pixels at scale num/8). */
    double f = num / 8.0;
    uint32_t ow = (uint32_t)(((uint64_t)w * num + 7) / 8),
             oh = (uint32_t)(((uint64_t)h * num + 7) / 8);
    uint32_t sx0 = (uint32_t)(crop->x * f), sy0 = (uint32_t)(crop->y * f);
    uint32_t sx1 = (uint32_t)ceil(fmin((double)(crop->x + crop->width) * f, ow));
    uint32_t sy1 = (uint32_t)ceil(fmin((double)(crop->y + crop->height) * f, oh));
    uint32_t mcus_per_row = (w + 8 * maxh - 1) / (8 * maxh);
    uint32_t mcu_rows = (h + 8 * maxv - 1) / (8 * maxv);
    if (mcus_per_row % ri)
        return 0;
    uint32_t ipr = mcus_per_row / ri;               /* restart intervals per MCU row */
    uint32_t mh = maxv * num, iw = ri * maxh * num; /* iMCU row height, interval width (output) */
    /* Rows: the crop decode reads rows [sy0, sy1). Fancy chroma upsampling blends each chroma
     * row with its neighbour above or below, and the rebuilt image's first and last chroma rows
     * have none (libjpeg replicates them): so keep one output row above sy0 (the chroma row
     * above it starts there at worst) and at least one below sy1 - 1. */
    uint32_t k = sy0 >= 2 ? (sy0 - 1) / mh : 0;
    uint32_t r1 = sy1 / mh + 1;
    if (r1 > mcu_rows)
        r1 = mcu_rows;
    /* Columns: the crop decode reads [sx0 - 1, sx1 + 1); keep one more on each side. */
    uint32_t c0 = sx0 >= 2 ? (sx0 - 2) / iw : 0;
    uint32_t c1 = (sx1 + 2 + iw - 1) / iw;
    if (c1 > ipr)
        c1 = ipr;
    if (k >= r1 || c0 >= c1)
        return 0;
    if (k == 0 && c0 == 0 && r1 == mcu_rows && c1 == ipr)
        return 0; /* nothing to cut */
    if (fl_buf_reserve(&d->stream, len + 16))
        return 0;
    uint8_t *o = d->stream.p;
    memcpy(o, data, entropy);
    uint32_t nh = r1 == mcu_rows ? h - k * maxv * 8 : (r1 - k) * maxv * 8;
    uint32_t nw = c1 == ipr ? w - c0 * ri * maxh * 8 : (c1 - c0) * ri * maxh * 8;
    o[sof] = (uint8_t)(nh >> 8);
    o[sof + 1] = (uint8_t)nh;
    o[sof + 2] = (uint8_t)(nw >> 8);
    o[sof + 3] = (uint8_t)nw;
    size_t op = entropy, start = entropy, p = entropy;
    uint64_t g = 0, gend = (uint64_t)r1 * ipr, copied = 0;
    while (g < gend) { /* interval g runs from `start` to the next RST (or EOI) */
        size_t at = fl_jpeg_next_marker(data, p, len); /* stuffed zeros skipped */
        if (at + 1 >= len)
            return 0;
        uint8_t b = data[at + 1];
        if (b == 0xFF) {
            p = at + 1;
            continue;
        }
        int rst = b >= 0xD0 && b <= 0xD7;
        if (rst ? (uint32_t)(b - 0xD0) != (uint32_t)(g & 7)
                : !(b == 0xD9 && g + 1 == (uint64_t)mcu_rows * ipr))
            return 0; /* out of sequence, or another marker before the last interval */
        uint64_t row = g / ipr, col = g % ipr;
        if (row >= k && col >= c0 && col < c1) {
            if (copied) { /* the marker that ends the previous kept interval */
                o[op++] = 0xFF;
                o[op++] = (uint8_t)(0xD0 + ((copied - 1) & 7));
            }
            memcpy(o + op, data + start, at - start);
            op += at - start;
            copied++;
        }
        g++;
        p = start = at + 2;
    }
    o[op++] = 0xFF;
    o[op++] = 0xD9;
    *xshift = c0 * iw;
    *yshift = k * mh;
    return op;
}

/* The libjpeg part of fl_jpeg_decode_crop: decode src (the file, or its restart-rebuilt copy
 * starting xshift columns right and yshift rows lower) at scale num/8, only the rows and columns of
 * the crop. */
static int decode_crop_rows(fl_decoder *d, const uint8_t *src, size_t src_len, int num,
                            uint32_t xshift, uint32_t yshift, double fx0, double fy0,
                            const fl_rect *crop, uint32_t channels, fl_image *out, double win[4],
                            fl_error *err)
{
    struct fl_jpeg_state *s = d->jpeg;
    j_decompress_ptr ci = &s->cinfo;
    double f = num / 8.0;
    int rc;
    if (setjmp(s->jerr.jb)) {
        jpeg_abort_decompress(ci);
        return fl_error_set(err, FL_E_DECODE, "JPEG: %s", s->jerr.msg);
    }
    int cmyk;
    rc = jpeg_setup(d, src, src_len, channels, &cmyk, err);
    if (rc)
        goto fail;
    ci->scale_num = (unsigned)num;
    ci->scale_denom = 8;
    jpeg_start_decompress(ci);
    rc = entropy_setup(d, err);
    if (rc)
        goto fail;
    /* Coordinates below are in the decoded (possibly row-shifted) image. */
    uint32_t ow = ci->output_width, oh = ci->output_height;
    const double x0 = fx0 - xshift, y0 = fy0 - yshift;
    /* The crop was chosen from the probed size; a crafted file whose frame header disagrees
     * with what the probe read must fail here, not steer the window outside the image. */
    if (!(x0 >= 0 && y0 >= 0 && x0 < ow && y0 < oh)) {
        rc = fl_error_set(err, FL_E_DECODE,
                          "JPEG: crop at %.0f,%.0f outside the decoded %ux%u image (header "
                          "disagrees with the probed size)",
                          x0, y0, ow, oh);
        goto fail;
    }
    double fx1 = fmin((double)(crop->x + crop->width) * f - xshift, ow);
    double fy1 = fmin((double)(crop->y + crop->height) * f - yshift, oh);
    uint32_t sx0 = (uint32_t)x0, sy0 = (uint32_t)y0;
    uint32_t sx1 = (uint32_t)ceil(fx1), sy1 = (uint32_t)ceil(fy1);
    if (sx1 > ow)
        sx1 = ow;
    if (sy1 > oh)
        sy1 = oh;
    if (sx1 <= sx0)
        sx1 = sx0 + 1;
    if (sy1 <= sy0)
        sy1 = sy0 + 1;
    /* Columns: libjpeg widens the window to whole iMCUs and tells us where it starts. Its
     * chroma upsampler treats the window's first and last columns as image edges (it replicates
     * the edge chroma sample instead of blending in the neighbour outside the window), so ask for
     * one more column on each side that has one: then every column the resampler reads equals
     * the full decode's, byte for byte. */
    JDIMENSION xoff = sx0 > 0 ? sx0 - 1 : 0;
    JDIMENSION cw = (sx1 < ow ? sx1 + 1 : ow) - xoff;
    if (xoff > 0 || cw < ow)
        jpeg_crop_scanline(ci, &xoff, &cw);
    uint32_t rows = sy1 - sy0;
    if (ci->output_width == 0 || ci->output_width > ow || rows > oh) {
        rc = fl_error_set(err, FL_E_DECODE, "JPEG: crop window %ux%u outside the %ux%u image",
                          (unsigned)ci->output_width, rows, ow, oh);
        goto fail;
    }
    size_t stride = (size_t)ci->output_width * channels;
    if (fl_buf_reserve(&d->image, stride * rows)) {
        rc = fl_error_set(err, -ENOMEM, "JPEG: out of memory for the crop");
        goto fail;
    }
    /* The last iMCU row the rows read need: the fancy upsampler also reads the next one */
    uint32_t mh = (uint32_t)ci->max_v_samp_factor * (uint32_t)num;
    fl_jpeg_entropy_last_row(s->entropy, ci, (sy1 - 1) / mh + 1);
    /* Rows above the crop: Huffman-decoded but not IDCT'ed; rows below are never read. */
    if (sy0 > 0 && jpeg_skip_scanlines(ci, sy0) != sy0) {
        rc = fl_error_set(err, FL_E_DECODE, "JPEG: could not skip %u rows", sy0);
        goto fail;
    }
    rc = read_rows(d, d->image.p, stride, rows, channels, cmyk, err);
    if (rc)
        goto fail;
    out->pixels = d->image.p;
    out->width = ci->output_width;
    out->height = rows;
    out->channels = channels;
    out->stride = stride;
    win[0] = x0 - xoff;
    win[1] = y0 - sy0;
    win[2] = fx1 - x0;
    win[3] = fy1 - y0;
    jpeg_abort_decompress(ci); /* the rows below the crop are not needed */
    d->jidx_fresh = 1;
    return 0;
fail:
    jpeg_abort_decompress(ci);
    return rc;
}

int fl_jpeg_decode_crop(fl_decoder *d, const uint8_t *data, size_t len, const fl_rect *crop,
                        uint32_t out_w, uint32_t out_h, uint32_t channels, fl_image *out,
                        double win[4], fl_error *err)
{
    int rc = jpeg_state_get(d, err);
    if (rc)
        return rc;
    /* The scaled crop must still cover the output so the resampler only ever shrinks. */
    int num = 8;
    for (size_t i = 0; i < N_SCALES; i++) {
        uint64_t n = (uint64_t)scale_nums[i];
        if (crop->width * n >= (uint64_t)out_w * 8 && crop->height * n >= (uint64_t)out_h * 8) {
            num = (int)n;
            break;
        }
    }
    /* Scaled pixel i covers source pixels [8i/num, 8(i+1)/num). */
    double f = num / 8.0;
    double fx0 = crop->x * f, fy0 = crop->y * f;
    uint32_t xshift = 0, yshift = 0;
    size_t rlen = 0;
    if (!(d->flags & FL_DECODE_NO_RESTART_SKIP))
        rlen = restart_crop(d, data, len, (uint32_t)num, crop, &xshift, &yshift);
    return decode_crop_rows(d, rlen ? d->stream.p : data, rlen ? rlen : len, num, xshift, yshift,
                            fx0, fy0, crop, channels, out, win, err);
}
