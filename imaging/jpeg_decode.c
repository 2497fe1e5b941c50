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
};

/* libjpeg calls this for fatal errors: keep the message and jump back to the entry point. */
static void on_error_exit(j_common_ptr c) {
    struct fl_jpeg_err *e = (struct fl_jpeg_err *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings (level -1) that mean pixels are missing or wrong are errors for us: a truncated file
 * would otherwise decode "successfully" with a grey bottom. Others (extra bytes between markers,
 * odd JFIF versions) are tolerated, as every mainstream decoder does. Trace messages are dropped. */
static void on_emit_message(j_common_ptr c, int level) {
    if (level >= 0) return;
    struct fl_jpeg_err *e = (struct fl_jpeg_err *)c->err;
    c->err->num_warnings++;
    /* End of data in a single-scan file: if pixels are really missing, the Huffman decoder runs
     * out of bits and raises JWRN_HIT_MARKER, which is fatal below; if not, the file only lacks
     * its EOI marker and every pixel is there (PIL and browsers accept those too). A progressive
     * or multi-scan file that ends early just loses scans silently, so there it stays fatal. */
    if (c->err->msg_code == JWRN_JPEG_EOF && c->is_decompressor) {
        j_decompress_ptr dc = (j_decompress_ptr)c;
        /* Sequential files hold each component in exactly one scan: all in one scan = single-scan. */
        if (!dc->progressive_mode && dc->comps_in_scan > 0 && dc->comps_in_scan == dc->num_components)
            return;
    }
    switch (c->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_MUST_RESYNC:
        c->err->format_message(c, e->msg);
        longjmp(e->jb, 1);
    default: break;
    }
}

static void on_output_message(j_common_ptr c) { (void)c; /* never print */ }

static void on_progress(j_common_ptr c) {
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > FL_JPEG_MAX_SCANS) {
        struct fl_jpeg_err *e = (struct fl_jpeg_err *)c->err;
        snprintf(e->msg, sizeof e->msg, "more than %d scans (refusing a progressive CPU bomb)",
                 FL_JPEG_MAX_SCANS);
        longjmp(e->jb, 1);
    }
}

void fl_jpeg_state_free(struct fl_jpeg_state *s) {
    if (!s) return;
    jpeg_destroy_decompress(&s->cinfo);
    free(s);
}

static int jpeg_state_get(fl_decoder *d, fl_error *err) {
    if (d->jpeg) return 0;
    struct fl_jpeg_state *s = calloc(1, sizeof *s);
    if (!s) return fl_error_set(err, -ENOMEM, "JPEG: out of memory");
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
static int choose_scale(uint32_t w, uint32_t h, uint32_t need_w, uint32_t need_h) {
    if (need_w == 0 && need_h == 0) return 8; /* 0, 0 asks for full size */
    for (size_t i = 0; i < N_SCALES; i++) {
        uint64_t n = (uint64_t)scale_nums[i];
        if ((w * n + 7) / 8 >= need_w && (h * n + 7) / 8 >= need_h) return (int)n;
    }
    return 8;
}

/* Read the header and set the output color space. Must run under the caller's setjmp. */
static int jpeg_setup(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels,
                      int *cmyk, fl_error *err) {
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
    case JCS_RGB:
        ci->out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
        break;
    default:
        return fl_error_set(err, FL_E_UNSUPPORTED, "JPEG: unsupported color space (%d components)",
                            ci->num_components);
    }
    return 0;
}

/* a*b/255 rounded, exact for 0..255 inputs. */
static inline uint8_t mul255(uint32_t a, uint32_t b) {
    uint32_t t = a * b + 128;
    return (uint8_t)((t + (t >> 8)) >> 8);
}

/* CMYK scanline → RGB or gray. Photoshop (the files with an Adobe APP14 marker) stores CMYK
 * inverted (0 = full ink), so R = C·K/255; plain CMYK is R = (255−C)(255−K)/255. */
static void cmyk_row(const uint8_t *src, uint8_t *dst, uint32_t w, uint32_t channels, int inverted) {
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
                     int cmyk, fl_error *err) {
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
        for (uint32_t i = 0; i < k; i++) rows[i] = dst + (size_t)(r + i) * stride;
        JDIMENSION got = jpeg_read_scanlines(ci, rows, k);
        if (got == 0) return fl_error_set(err, FL_E_DECODE, "JPEG: decoder returned no scanline");
        r += got;
    }
    return 0;
}

int fl_jpeg_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels,
                   uint32_t min_w, uint32_t min_h, fl_image *out, fl_error *err) {
    int rc = jpeg_state_get(d, err);
    if (rc) return rc;
    struct fl_jpeg_state *s = d->jpeg;
    j_decompress_ptr ci = &s->cinfo;
    if (setjmp(s->jerr.jb)) {
        jpeg_abort_decompress(ci);
        return fl_error_set(err, FL_E_DECODE, "JPEG: %s", s->jerr.msg);
    }
    int cmyk;
    rc = jpeg_setup(d, data, len, channels, &cmyk, err);
    if (rc) goto fail;
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
    rc = read_rows(d, d->image.p, stride, ci->output_height, channels, cmyk, err);
    if (rc) goto fail;
    out->pixels = d->image.p;
    out->width = ci->output_width;
    out->height = ci->output_height;
    out->channels = channels;
    out->stride = stride;
    jpeg_finish_decompress(ci);
    return 0;
fail:
    jpeg_abort_decompress(ci);
    return rc;
}


static inline uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* Restart-marker row skipping. A sequential single-scan JPEG with a restart marker after every
 * MCU row (or every 1/m of one) can be decoded from any MCU row: at a restart the DC predictors
 * reset and the bit stream is byte-aligned. Rebuild the file in d->stream as the headers (SOF
 * height reduced by the skipped rows) followed by the entropy data after the restart marker that
 * opens iMCU row k, restart markers renumbered from RST0, and decode that instead of Huffman-
 * decoding rows 0..k-1 only to throw them away. The coefficients, and so the pixels, are the same;
 * only the first output row of the rebuilt image differs (the fancy chroma upsampler has no row
 * above it), so k is chosen to leave at least one row between it and the first row wanted.
 * num: DCT scale n/8; sy0: first wanted output row at that scale. Returns the rebuilt length
 * (0: not applicable, decode the original) and the output rows skipped in *yshift. All offsets
 * are bounds-checked; anything unexpected falls back to the original stream. */
static size_t restart_skip(fl_decoder *d, const uint8_t *data, size_t len, uint32_t num,
                           uint32_t sy0, uint32_t *yshift) {
    *yshift = 0;
    if (sy0 < 2 || len < 4 || data[0] != 0xFF || data[1] != 0xD8) return 0;
    size_t pos = 2, sof = 0, entropy = 0;
    uint32_t ri = 0, nf = 0, ns = 0, maxh = 1, maxv = 1, w = 0, h = 0;
    while (!entropy) {
        while (pos + 1 < len && data[pos] == 0xFF && data[pos + 1] == 0xFF) pos++; /* fill */
        if (pos + 4 > len || data[pos] != 0xFF) return 0;
        uint32_t m = data[pos + 1], seglen = be16(data + pos + 2);
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD9) || seglen < 2 || pos + 2 + seglen > len) return 0;
        const uint8_t *seg = data + pos + 4;
        if (m == 0xC0 || m == 0xC1) { /* baseline / extended sequential Huffman */
            if (sof || seglen < 8) return 0;
            h = be16(seg + 1);
            w = be16(seg + 3);
            nf = seg[5];
            if (nf < 1 || nf > 4 || seglen < 8 + 3 * nf || h == 0 || w == 0) return 0;
            for (uint32_t c = 0; c < nf; c++) {
                uint32_t hs = seg[6 + 3 * c + 1] >> 4, vs = seg[6 + 3 * c + 1] & 15;
                if (hs < 1 || hs > 4 || vs < 1 || vs > 4) return 0;
                if (hs > maxh) maxh = hs;
                if (vs > maxv) maxv = vs;
            }
            if (nf == 1) maxh = maxv = 1; /* one component: MCU = one block, iMCU row = 8 rows */
            sof = pos + 5;
        } else if ((m >= 0xC2 && m <= 0xCB && m != 0xC4 && m != 0xC8) || (m >= 0xCD && m <= 0xCF)) {
            return 0; /* progressive, lossless, arithmetic: not handled */
        } else if (m == 0xDD) {
            if (seglen != 4) return 0;
            ri = be16(seg);
        } else if (m == 0xDA) {
            if (seglen < 3) return 0;
            ns = seg[0];
            entropy = pos + 2 + seglen;
        }
        pos += 2 + seglen;
    }
    if (!sof || ri == 0 || ns != nf) return 0;
    uint32_t mcus_per_row = (w + 8 * maxh - 1) / (8 * maxh);
    if (mcus_per_row % ri) return 0;
    uint32_t rows_scaled = maxv * num; /* output rows per iMCU row at scale num/8 */
    uint32_t k = (sy0 - 1) / rows_scaled;
    if (k == 0) return 0;
    uint64_t nrst = (uint64_t)k * (mcus_per_row / ri); /* markers before iMCU row k */
    /* Find the end of the nrst-th restart marker. */
    size_t p = entropy;
    uint64_t seen = 0;
    while (seen < nrst) {
        const uint8_t *q = memchr(data + p, 0xFF, len - p);
        if (!q || (size_t)(q - data) + 1 >= len) return 0;
        size_t at = (size_t)(q - data);
        uint8_t b = data[at + 1];
        if (b == 0x00) {
            p = at + 2;
        } else if (b == 0xFF) {
            p = at + 1;
        } else if (b >= 0xD0 && b <= 0xD7) {
            if ((uint32_t)(b - 0xD0) != (uint32_t)(seen & 7)) return 0; /* out of sequence */
            seen++;
            p = at + 2;
        } else {
            return 0; /* EOI or another marker before row k: leave it to libjpeg */
        }
    }
    size_t tail = len - p;
    if (fl_buf_reserve(&d->stream, entropy + tail)) return 0;
    uint8_t *o = d->stream.p;
    memcpy(o, data, entropy);
    uint32_t nh = h - k * maxv * 8;
    o[sof] = (uint8_t)(nh >> 8);
    o[sof + 1] = (uint8_t)nh;
    uint32_t shift = (uint32_t)(nrst & 7);
    if (shift == 0) {
        memcpy(o + entropy, data + p, tail);
    } else { /* renumber the remaining restart markers so the first one is RST0 again */
        size_t i = p, op = entropy;
        while (i < len) {
            const uint8_t *q = memchr(data + i, 0xFF, len - i);
            size_t at = q ? (size_t)(q - data) : len;
            memcpy(o + op, data + i, at - i);
            op += at - i;
            if (at + 1 >= len) {
                if (at < len) o[op++] = 0xFF;
                break;
            }
            uint8_t b = data[at + 1];
            o[op++] = 0xFF;
            if (b == 0xFF) { /* fill byte: the next 0xFF starts the marker */
                i = at + 1;
                continue;
            }
            o[op++] = (b >= 0xD0 && b <= 0xD7) ? (uint8_t)(0xD0 + ((b - 0xD0 - shift) & 7)) : b;
            i = at + 2;
        }
    }
    *yshift = k * rows_scaled;
    return entropy + tail;
}

/* The libjpeg part of fl_jpeg_decode_crop: decode src (the file, or its restart-rebuilt copy
 * starting yshift output rows lower) at scale num/8, only the rows and columns of the crop. */
static int decode_crop_rows(fl_decoder *d, const uint8_t *src, size_t src_len, int num,
                            uint32_t yshift, double fx0, double fy0, const fl_rect *crop,
                            uint32_t channels, fl_image *out, double win[4], fl_error *err) {
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
    if (rc) goto fail;
    ci->scale_num = (unsigned)num;
    ci->scale_denom = 8;
    jpeg_start_decompress(ci);
    /* Coordinates below are in the decoded (possibly row-shifted) image. */
    uint32_t ow = ci->output_width, oh = ci->output_height;
    const double y0 = fy0 - yshift;
    double fx1 = fmin((double)(crop->x + crop->width) * f, ow);
    double fy1 = fmin((double)(crop->y + crop->height) * f - yshift, oh);
    uint32_t sx0 = (uint32_t)fx0, sy0 = (uint32_t)y0;
    uint32_t sx1 = (uint32_t)ceil(fx1), sy1 = (uint32_t)ceil(fy1);
    if (sx1 > ow) sx1 = ow;
    if (sy1 > oh) sy1 = oh;
    if (sx1 <= sx0) sx1 = sx0 + 1;
    if (sy1 <= sy0) sy1 = sy0 + 1;
    /* Columns: libjpeg widens the window to whole iMCUs and tells us where it starts. Its
     * chroma upsampler treats the window's first and last columns as image edges (it replicates
     * the edge chroma sample instead of blending in the neighbour outside the window), so ask for
     * one more column on each side that has one: then every column the resampler reads equals
     * the full decode's, byte for byte. */
    JDIMENSION xoff = sx0 > 0 ? sx0 - 1 : 0;
    JDIMENSION cw = (sx1 < ow ? sx1 + 1 : ow) - xoff;
    if (xoff > 0 || cw < ow) jpeg_crop_scanline(ci, &xoff, &cw);
    uint32_t rows = sy1 - sy0;
    size_t stride = (size_t)ci->output_width * channels;
    if (fl_buf_reserve(&d->image, stride * rows)) {
        rc = fl_error_set(err, -ENOMEM, "JPEG: out of memory for the crop");
        goto fail;
    }
    /* Rows above the crop: Huffman-decoded but not IDCT'ed; rows below are never read. */
    if (sy0 > 0 && jpeg_skip_scanlines(ci, sy0) != sy0) {
        rc = fl_error_set(err, FL_E_DECODE, "JPEG: could not skip %u rows", sy0);
        goto fail;
    }
    rc = read_rows(d, d->image.p, stride, rows, channels, cmyk, err);
    if (rc) goto fail;
    out->pixels = d->image.p;
    out->width = ci->output_width;
    out->height = rows;
    out->channels = channels;
    out->stride = stride;
    win[0] = fx0 - xoff;
    win[1] = y0 - sy0;
    win[2] = fx1 - fx0;
    win[3] = fy1 - y0;
    jpeg_abort_decompress(ci); /* the rows below the crop are not needed */
    return 0;
fail:
    jpeg_abort_decompress(ci);
    return rc;
}

int fl_jpeg_decode_crop(fl_decoder *d, const uint8_t *data, size_t len, const fl_rect *crop,
                        uint32_t out_w, uint32_t out_h, uint32_t channels, fl_image *out,
                        double win[4], fl_error *err) {
    int rc = jpeg_state_get(d, err);
    if (rc) return rc;
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
    uint32_t yshift = 0;
    const size_t rlen = (d->flags & FL_DECODE_NO_RESTART_SKIP)
                            ? 0 : restart_skip(d, data, len, (uint32_t)num, (uint32_t)fy0, &yshift);
    return decode_crop_rows(d, rlen ? d->stream.p : data, rlen ? rlen : len, num, yshift, fx0, fy0,
                            crop, channels, out, win, err);
}
