/* image_probe.c — identify JPEG/PNG by magic bytes and read the declared size from the header
 * (JPEG: walk the markers to the SOF; PNG: the IHDR chunk) without decoding any pixels. */
#include <string.h>

#include "fl_image.h"

static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int probe_jpeg(const uint8_t *data, size_t len, fl_image_info *out, fl_error *err) {
    size_t pos = 2; /* after SOI */
    for (;;) {
        /* A marker is 0xFF (any number of fill 0xFF bytes) then a code. */
        if (pos >= len || data[pos] != 0xFF)
            return fl_error_set(err, FL_E_DECODE, "JPEG: no marker at byte %zu before the frame header", pos);
        while (pos < len && data[pos] == 0xFF) pos++;
        if (pos >= len) return fl_error_set(err, FL_E_DECODE, "JPEG: truncated header");
        uint8_t m = data[pos++];
        if (m == 0x00) /* a stuffed zero is entropy data, not a marker: libjpeg would skip it as
                          garbage and find another frame header than we would */
            return fl_error_set(err, FL_E_DECODE, "JPEG: no marker at byte %zu before the frame header",
                                pos - 2);
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue; /* standalone markers */
        if (m == 0xD8) continue;                              /* stray SOI */
        if (m == 0xD9 || m == 0xDA)
            return fl_error_set(err, FL_E_DECODE, "JPEG: no frame header (SOF) before %s",
                                m == 0xD9 ? "end of image" : "scan data");
        if (pos + 2 > len) return fl_error_set(err, FL_E_DECODE, "JPEG: truncated header");
        uint32_t seglen = be16(data + pos);
        if (seglen < 2) return fl_error_set(err, FL_E_DECODE, "JPEG: bad segment length %u", seglen);
        if (pos + seglen > len) return fl_error_set(err, FL_E_DECODE, "JPEG: truncated header");
        int is_sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
        if (is_sof) {
            if (seglen < 8) return fl_error_set(err, FL_E_DECODE, "JPEG: frame header too short");
            const uint8_t *s = data + pos + 2;
            uint32_t h = be16(s + 1), w = be16(s + 3), nc = s[5];
            if (w == 0 || h == 0)
                return fl_error_set(err, FL_E_DECODE, "JPEG: zero width or height (%ux%u)", w, h);
            if (nc == 0 || nc > 4)
                return fl_error_set(err, FL_E_DECODE, "JPEG: %u components", nc);
            out->format = FL_IMG_JPEG;
            out->width = w;
            out->height = h;
            out->components = nc;
            out->progressive = (m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE);
            return 0;
        }
        pos += seglen;
    }
}

static int probe_png(const uint8_t *data, size_t len, fl_image_info *out, fl_error *err) {
    /* signature, then the first chunk must be IHDR: length 13, "IHDR", 13 bytes, CRC. */
    if (len < 8 + 8 + 13) return fl_error_set(err, FL_E_DECODE, "PNG: truncated header");
    const uint8_t *c = data + 8;
    if (be32(c) != 13 || memcmp(c + 4, "IHDR", 4) != 0)
        return fl_error_set(err, FL_E_DECODE, "PNG: first chunk is not IHDR");
    uint32_t w = be32(c + 8), h = be32(c + 12);
    uint8_t depth = c[16], ctype = c[17];
    if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu)
        return fl_error_set(err, FL_E_DECODE, "PNG: bad size %ux%u", w, h);
    uint32_t comps;
    switch (ctype) {
    case 0: comps = 1; break;
    case 2: comps = 3; break;
    case 3: comps = 3; break; /* palette: indices expand to RGB */
    case 4: comps = 2; break;
    case 6: comps = 4; break;
    default: return fl_error_set(err, FL_E_DECODE, "PNG: bad color type %u", ctype);
    }
    if (depth != 1 && depth != 2 && depth != 4 && depth != 8 && depth != 16)
        return fl_error_set(err, FL_E_DECODE, "PNG: bad bit depth %u", depth);
    out->format = FL_IMG_PNG;
    out->width = w;
    out->height = h;
    out->components = comps;
    out->progressive = c[20] != 0; /* Adam7 interlace */
    return 0;
}

int fl_image_probe(const uint8_t *data, size_t len, fl_image_info *out, fl_error *err) {
    fl_image_info tmp;
    if (!out) out = &tmp;
    memset(out, 0, sizeof *out);
    if (!data && len) return fl_error_set(err, FL_E_INVALID, "probe: NULL data");
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
        return probe_jpeg(data, len, out, err);
    if (len >= 8 && memcmp(data, png_sig, 8) == 0) return probe_png(data, len, out, err);
    if (len == 0) return fl_error_set(err, FL_E_DECODE, "empty file, not an image");
    return fl_error_set(err, FL_E_DECODE, "not a JPEG or PNG image (unknown magic bytes)");
}
