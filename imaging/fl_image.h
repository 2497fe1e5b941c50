/* fl_image.h — image codecs and resampling shared by packdata and the loader: sniff JPEG/PNG
 * from their bytes (never from a file name), decode JPEG at a reduced DCT scale and only the rows
 * and columns a crop needs (libjpeg-turbo), decode PNG (libpng: 8/16-bit, palette, gray, alpha),
 * resample with an antialiasing filter, and encode JPEG/PNG.
 *
 * All untrusted bytes are parsed with bounds checks; declared sizes over the decoder's pixel
 * limit are refused before any allocation (FL_E_TOO_LARGE). A decoder owns grow-only scratch
 * buffers that are reused across calls, so steady-state decoding does not allocate.
 * Thread safety: one fl_decoder / fl_encoder per thread; the free functions are reentrant. */
#ifndef FL_IMAGE_H
#define FL_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fl_image_format { FL_IMG_UNKNOWN = 0, FL_IMG_JPEG = 1, FL_IMG_PNG = 2 } fl_image_format;

/* What the header of an encoded image declares. */
typedef struct fl_image_info {
    fl_image_format format;
    uint32_t width, height;
    uint32_t components; /* components stored in the file (1 gray, 3 color, 4 CMYK/RGBA, 2 GA) */
    int progressive;     /* JPEG: progressive scan */
} fl_image_info;

/* A decoded image: HWC uint8 rows, `stride` bytes apart. */
typedef struct fl_image {
    uint8_t *pixels;
    uint32_t width, height, channels;
    size_t stride;
} fl_image;

/* A crop rectangle in source-image pixel coordinates. */
typedef struct fl_rect {
    uint32_t x, y, width, height;
} fl_rect;

/* Identify format by magic bytes and read the declared size without decoding pixels.
 * Errors: FL_E_DECODE (not an image or header unreadable). */
int fl_image_probe(const uint8_t *data, size_t len, fl_image_info *out, fl_error *err);

typedef struct fl_decoder fl_decoder;

/* max_pixels: refuse images declaring more than this many pixels (0 = default 100 megapixels). */
int fl_decoder_create(uint64_t max_pixels, fl_decoder **out, fl_error *err);
void fl_decoder_free(fl_decoder *d);

/* Decode a whole image to `channels` (1 or 3; gray/CMYK/alpha/palette/16-bit converted).
 * For JPEG, decodes at the smallest DCT scale (1/8 … 8/8) whose output is still at least
 * min_width × min_height (pass 0, 0 for full size). The result points into the decoder's scratch
 * and is valid until the next call on `d`.
 * Errors: FL_E_DECODE (corrupt/truncated), FL_E_TOO_LARGE, FL_E_UNSUPPORTED. */
int fl_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels,
              uint32_t min_width, uint32_t min_height, fl_image *out, fl_error *err);

/* Decode the `crop` region of an encoded image, resample it to out_width × out_height, optionally
 * mirror it horizontally, and write HWC `channels` bytes per pixel to dst (row stride
 * out_width*channels). JPEG: DCT scaling chosen so the scaled crop still covers the output size,
 * rows above the crop skipped and columns outside it not IDCT'ed. The crop must lie inside the
 * image. Errors: as fl_decode, FL_E_RANGE for a crop outside the image. */
int fl_decode_crop_resize(fl_decoder *d, const uint8_t *data, size_t len, const fl_rect *crop,
                          uint32_t out_width, uint32_t out_height, uint32_t channels, int flip,
                          uint8_t *dst, fl_error *err);

/* Resample src (sw × sh, `channels`, row stride sstride) into dst (dw × dh, row stride dstride)
 * with a separable triangle filter widened by the shrink factor (antialiased), optionally mirrored.
 * Pure function of its inputs; scratch of at most (dw + dh) * 8 + dw*sh*channels*2 bytes is taken from
 * `scratch` when not NULL (scratch_len bytes), else allocated. Errors: FL_E_INVALID, -ENOMEM. */
int fl_resize(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride, uint32_t channels,
              uint8_t *dst, uint32_t dw, uint32_t dh, size_t dstride, int flip, void *scratch,
              size_t scratch_len, fl_error *err);

/* Scratch bytes fl_resize needs for these sizes. */
size_t fl_resize_scratch_size(uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh,
                              uint32_t channels);

typedef struct fl_encoder fl_encoder;
int fl_encoder_create(fl_encoder **out, fl_error *err);
void fl_encoder_free(fl_encoder *e);

/* Encode HWC pixels (1 or 3 channels) as baseline JPEG 4:2:0 (4:4:4 for quality >= 95) at
 * `quality`. *out points into the encoder's buffer, valid until the next call. */
int fl_encode_jpeg(fl_encoder *e, const fl_image *img, int quality, const uint8_t **out,
                   size_t *out_len, fl_error *err);

/* Encode HWC pixels (1 or 3 channels) as an 8-bit PNG. Same ownership as fl_encode_jpeg. */
int fl_encode_png(fl_encoder *e, const fl_image *img, const uint8_t **out, size_t *out_len,
                  fl_error *err);

#ifdef __cplusplus
}
#endif
#endif
