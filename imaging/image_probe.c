/* image_probe.c — identify JPEG/PNG/WebP by magic bytes and read the declared size from the
 * header (JPEG: walk the markers to the SOF; PNG: the IHDR chunk; WebP: its first chunk) without
 * decoding any pixels; name the formats we recognise but do not read (GIF, BMP, ...). */
#include <string.h>

#include "fl_image.h"

static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t le16(const uint8_t *p) { return (uint32_t)p[1] << 8 | p[0]; }
static uint32_t le24(const uint8_t *p) { return (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]; }
static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int probe_jpeg(const uint8_t *data, size_t len, fl_image_info *out, fl_error *err)
{
    size_t pos = 2; /* after SOI */
    for (;;) {
        /* A marker is 0xFF (any number of fill 0xFF bytes) then a code. */
        if (pos >= len || data[pos] != 0xFF)
            return fl_error_set(err, FL_E_DECODE,
                                "JPEG: no marker at byte %zu before the frame header", pos);
        while (pos < len && data[pos] == 0xFF)
            pos++;
        if (pos >= len)
            return fl_error_set(err, FL_E_DECODE, "JPEG: truncated header");
        uint8_t m = data[pos++];
        if (m == 0x00) /* a stuffed zero is entropy data, not a marker: libjpeg would skip it as
                          garbage and find another frame header than we would */
            return fl_error_set(err, FL_E_DECODE,
                                "JPEG: no marker at byte %zu before the frame header", pos - 2);
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7))
            continue; /* standalone markers */
        if (m == 0xD8)
            continue; /* stray SOI */
        if (m == 0xD9 || m == 0xDA)
            return fl_error_set(err, FL_E_DECODE, "JPEG: no frame header (SOF) before %s",
                                m == 0xD9 ? "end of image" : "scan data");
        if (pos + 2 > len)
            return fl_error_set(err, FL_E_DECODE, "JPEG: truncated header");
        uint32_t seglen = be16(data + pos);
        if (seglen < 2)
            return fl_error_set(err, FL_E_DECODE, "JPEG: bad segment length %u", seglen);
        if (pos + seglen > len)
            return fl_error_set(err, FL_E_DECODE, "JPEG: truncated header");
        int is_sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
        if (is_sof) {
            if (seglen < 8)
                return fl_error_set(err, FL_E_DECODE, "JPEG: frame header too short");
            const uint8_t *s = data + pos + 2;
            uint32_t h = be16(s + 1), w = be16(s + 3), nc = s[5];
            /* what libjpeg-turbo 2.1 (8-bit build) cannot decode: say so here, so packdata's
             * keep refuses it instead of storing a record the loader would fail on */
            if (m == 0xC3 || m == 0xC7 || m == 0xCB || m == 0xCF)
                return fl_error_set(err, FL_E_UNSUPPORTED, "a lossless JPEG (SOF%d): not supported",
                                    m - 0xC0);
            if (s[0] != 8)
                return fl_error_set(err, FL_E_UNSUPPORTED,
                                    "a %u-bit JPEG: not supported (8-bit only)", s[0]);
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

static int probe_png(const uint8_t *data, size_t len, fl_image_info *out, fl_error *err)
{
    /* signature, then the first chunk must be IHDR: length 13, "IHDR", 13 bytes, CRC. */
    if (len < 8 + 8 + 13)
        return fl_error_set(err, FL_E_DECODE, "PNG: truncated header");
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

/* WebP (RIFF container): "RIFF" size "WEBP", then the first chunk. A simple lossy file starts
 * with "VP8 " (a key frame: 3-byte tag, start code 9D 01 2A, 14-bit width and height), a lossless
 * one with "VP8L" (signature 0x2F, then 14-bit width-1 and height-1), an extended one with "VP8X"
 * (flags, 24-bit canvas width-1 and height-1). The decoder (libwebp) checks the rest. */
static int probe_webp(const uint8_t *data, size_t len, fl_image_info *out, fl_error *err)
{
    if (len < 20)
        return fl_error_set(err, FL_E_DECODE, "WebP: truncated header");
    uint32_t riff = le32(data + 4);
    if (riff < 12 || riff & 1)
        return fl_error_set(err, FL_E_DECODE, "WebP: bad RIFF size %u", riff);
    const uint8_t *c = data + 12;
    uint32_t clen = le32(c + 4);
    const uint8_t *p = c + 8;
    size_t avail = len - 20;
    uint32_t w, h, comps = 3;
    if (!memcmp(c, "VP8 ", 4)) {
        if (clen < 10 || avail < 10)
            return fl_error_set(err, FL_E_DECODE, "WebP: truncated VP8 header");
        if (p[0] & 1)
            return fl_error_set(err, FL_E_DECODE, "WebP: first VP8 frame is not a key frame");
        if (p[3] != 0x9D || p[4] != 0x01 || p[5] != 0x2A)
            return fl_error_set(err, FL_E_DECODE, "WebP: bad VP8 start code");
        w = le16(p + 6) & 0x3FFF;
        h = le16(p + 8) & 0x3FFF;
    } else if (!memcmp(c, "VP8L", 4)) {
        if (clen < 5 || avail < 5)
            return fl_error_set(err, FL_E_DECODE, "WebP: truncated VP8L header");
        if (p[0] != 0x2F)
            return fl_error_set(err, FL_E_DECODE, "WebP: bad VP8L signature");
        uint32_t bits = le32(p + 1);
        w = (bits & 0x3FFF) + 1;
        h = ((bits >> 14) & 0x3FFF) + 1;
        if (bits >> 29)
            return fl_error_set(err, FL_E_DECODE, "WebP: VP8L version %u", bits >> 29);
        if (bits >> 28 & 1)
            comps = 4;
    } else if (!memcmp(c, "VP8X", 4)) {
        if (clen < 10 || avail < 10)
            return fl_error_set(err, FL_E_DECODE, "WebP: truncated VP8X header");
        if (p[0] & 0x02)
            return fl_error_set(err, FL_E_UNSUPPORTED,
                                "an animated WebP image: not supported "
                                "(only still images are read)");
        if (p[0] & 0x10)
            comps = 4;
        w = le24(p + 4) + 1;
        h = le24(p + 7) + 1;
    } else {
        return fl_error_set(
            err, FL_E_DECODE, "WebP: unknown first chunk '%c%c%c%c'",
            c[0] >= 0x20 && c[0] < 0x7f ? c[0] : '?', c[1] >= 0x20 && c[1] < 0x7f ? c[1] : '?',
            c[2] >= 0x20 && c[2] < 0x7f ? c[2] : '?', c[3] >= 0x20 && c[3] < 0x7f ? c[3] : '?');
    }
    if (w == 0 || h == 0)
        return fl_error_set(err, FL_E_DECODE, "WebP: zero width or height (%ux%u)", w, h);
    out->format = FL_IMG_WEBP;
    out->width = w;
    out->height = h;
    out->components = comps;
    out->progressive = 0;
    return 0;
}

/* Formats people keep beside their JPEGs that we recognise only to name them. */
static const char *unsupported_name(const uint8_t *d, size_t len)
{
    if (len >= 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6)))
        return "GIF";
    if (len >= 14 && d[0] == 'B' && d[1] == 'M' && le32(d + 2) >= 14 && le32(d + 10) >= 14)
        return "BMP";
    if (len >= 4 && (!memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4)))
        return "TIFF";
    if (len >= 12 && !memcmp(d + 4, "ftyp", 4)) {
        if (!memcmp(d + 8, "avif", 4) || !memcmp(d + 8, "avis", 4))
            return "AVIF";
        if (!memcmp(d + 8, "heic", 4) || !memcmp(d + 8, "heix", 4) || !memcmp(d + 8, "mif1", 4) ||
            !memcmp(d + 8, "msf1", 4))
            return "HEIF";
    }
    if (len >= 12 && !memcmp(d, "\0\0\0\x0cjP  ", 8))
        return "JPEG 2000";
    if (len >= 3 && d[0] == 'P' && d[1] >= '1' && d[1] <= '7' &&
        (d[2] == '\n' || d[2] == ' ' || d[2] == '\r'))
        return "PNM";
    return NULL;
}

int fl_image_probe(const uint8_t *data, size_t len, fl_image_info *out, fl_error *err)
{
    fl_image_info tmp;
    if (!out)
        out = &tmp;
    memset(out, 0, sizeof *out);
    if (!data && len)
        return fl_error_set(err, FL_E_INVALID, "probe: NULL data");
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
        return probe_jpeg(data, len, out, err);
    if (len >= 8 && memcmp(data, png_sig, 8) == 0)
        return probe_png(data, len, out, err);
    if (len >= 12 && !memcmp(data, "RIFF", 4) && !memcmp(data + 8, "WEBP", 4))
        return probe_webp(data, len, out, err);
    if (len == 0)
        return fl_error_set(err, FL_E_DECODE, "empty file, not an image");
    const char *other = unsupported_name(data, len);
    if (other)
        return fl_error_set(
            err, FL_E_UNSUPPORTED, "a %s image: not supported (this build reads %s)", other,
            fl_image_can_decode(FL_IMG_WEBP) ? "JPEG, PNG and WebP" : "JPEG and PNG");
    return fl_error_set(err, FL_E_DECODE, "not a JPEG, PNG or WebP image (unknown magic bytes)");
}

const char *fl_image_format_name(fl_image_format f)
{
    return f == FL_IMG_JPEG   ? "jpeg"
           : f == FL_IMG_PNG  ? "png"
           : f == FL_IMG_WEBP ? "webp"
                              : "unknown";
}

int fl_image_looks_complete(fl_image_format f, const uint8_t *d, size_t n)
{
    size_t lo = n > 4096 ? n - 4096 : 0;
    if (f == FL_IMG_JPEG) {
        /* entropy-coded data never holds FF D9 (0xFF is stuffed): finding it near the end is
         * reliable */
        for (size_t i = n; i >= lo + 2; i--)
            if (d[i - 2] == 0xFF && d[i - 1] == 0xD9)
                return 1;
        return 0;
    }
    if (f == FL_IMG_PNG) {
        for (size_t i = n; i >= lo + 4; i--)
            if (!memcmp(d + i - 4, "IEND", 4))
                return 1;
        return 0;
    }
    if (f == FL_IMG_WEBP)
        return n >= 12 && (uint64_t)le32(d + 4) + 8 <= n;
    return 1;
}
