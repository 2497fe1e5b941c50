/* fl_image.h — image codecs and resampling shared by packdata and the loader: sniff JPEG/PNG/WebP
 * from their bytes (never from a file name), decode JPEG at a reduced DCT scale and only the rows
 * and columns a crop needs (libjpeg-turbo), decode PNG (libpng: 8/16-bit, palette, gray, alpha)
 * and WebP (libwebp, when the build found it: lossy, lossless, alpha; not animations), resample
 * with an antialiasing filter, and encode JPEG/PNG.
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
#include "fl_fields.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fl_image_format {
    FL_IMG_UNKNOWN = 0,
    FL_IMG_JPEG = 1,
    FL_IMG_PNG = 2,
    FL_IMG_WEBP = 3 /* probed in every build; decoded only where fl_image_can_decode says so */
} fl_image_format;

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

/* Identify format by magic bytes (JPEG FF D8 FF, the PNG signature, RIFF....WEBP; never the file
 * name) and read the declared size from the header without decoding pixels: JPEG by walking the
 * markers to the first SOF (every segment length bounds-checked), PNG from IHDR, WebP from its
 * first chunk (VP8 frame header, VP8L header or VP8X canvas). `out` may be NULL.
 * Errors: FL_E_DECODE (empty, unknown magic bytes, header truncated or malformed);
 * FL_E_UNSUPPORTED for images we recognise but never decode (GIF, BMP, TIFF, HEIF/AVIF, animated
 * WebP): the message names the format. */
FL_API int fl_image_probe(const uint8_t *data, size_t len, fl_image_info *out, fl_error *err);

/* 1 when this build decodes `f` (JPEG and PNG always; WebP only when built with libwebp),
 * else 0. */
FL_API int fl_image_can_decode(fl_image_format f);

/* Short lower-case name of a format ("jpeg", "png", "webp", "unknown"). */
FL_API const char *fl_image_format_name(fl_image_format f);

/* A complete file's tail is there: JPEG ends with an EOI marker (FF D9 in its last 4 KiB), PNG
 * with an IEND chunk, WebP holds the whole RIFF size its header declares. 1 when complete, 0
 * when truncated (other formats: 1). Cheap (no decoding): packdata checks kept files with it. */
FL_API int fl_image_looks_complete(fl_image_format f, const uint8_t *data, size_t len);

typedef struct fl_decoder fl_decoder;

/* Create a decoder. max_pixels: refuse images declaring more than this many pixels (0 = default
 * 100 megapixels); the check runs on the header before libjpeg/libpng allocate anything.
 * *out is owned by the caller (fl_decoder_free). Errors: FL_E_INVALID, -ENOMEM. */
FL_API int fl_decoder_create(uint64_t max_pixels, fl_decoder **out, fl_error *err);
/* Free a decoder and its scratch (NULL is a no-op). Images it returned become invalid. */
FL_API void fl_decoder_free(fl_decoder *d);

/* JPEG speed/accuracy trade-offs (bit flags; default 0 = libjpeg's accurate defaults).
 * FL_DECODE_FAST_UPSAMPLE: merged "box" chroma upsampling instead of the smooth (fancy) one;
 * FL_DECODE_FAST_DCT: the fast integer IDCT. Together they make the random-resized-crop path about
 * 5% faster (bench: fl_decode_bench --fast) at the cost of a few levels of difference near chroma
 * edges; meant for training augmentation, not for packdata. Output stays deterministic. */
enum { FL_DECODE_FAST_UPSAMPLE = 1, FL_DECODE_FAST_DCT = 2, FL_DECODE_FAST = 3 };
/* Test/bench aid: never start a crop decode at a restart marker (see fl_jpeg_add_restarts);
 * the output is the same either way. */
enum { FL_DECODE_NO_RESTART_SKIP = 4 };
/* Bench/test aid: Huffman-decode with libjpeg's own decoder instead of fastload's (jpeg_entropy.c:
 * the same coefficients, faster, above all on files with restart markers, where libjpeg-turbo
 * takes its bit-by-bit path); the naive-limit figure of the benchmarks is stock libjpeg-turbo. */
enum { FL_DECODE_LIBJPEG_HUFFMAN = 8 };
FL_API void fl_decoder_set_flags(fl_decoder *d, unsigned flags);

/* Decode a whole image to `channels` (1 or 3; gray/CMYK/alpha/palette/16-bit converted).
 * WebP decodes at full size (min_width/min_height ignored) through libwebp's RGB output, alpha
 * dropped as for PNG (equal to PIL's convert("RGB") with the same libwebp); where the build has
 * no libwebp it fails with FL_E_UNSUPPORTED.
 * For JPEG, decodes at the smallest DCT scale whose output is still at least min_width ×
 * min_height (pass 0, 0 for full size). The scales used are 1/8, 1/4, 1/2 and 1: libjpeg-turbo
 * has SIMD IDCTs only for those, and its 3/8 … 7/8 IDCTs (plain C) measured slower than decoding
 * at the next larger power of two. Scaled sizes round up as libjpeg does (203 at 1/2 → 102).
 * Conversions: gray → RGB replicates; RGB → gray uses Y = 0.299 R + 0.587 G + 0.114 B (libjpeg's
 * own for JPEG, the same weights in fixed point for PNG); CMYK/YCCK JPEG → RGB by hand, R = C·K/255
 * for Adobe (inverted, Photoshop) files, R = (255−C)(255−K)/255 otherwise; PNG alpha is dropped,
 * not composited (as PIL's convert("RGB")); 16-bit PNG keeps the high byte; palettes expand.
 * EXIF orientation and ICC profiles are not applied (as PIL's Image.open + convert). RGB output
 * equals PIL's convert("RGB") byte for byte on JPEG and PNG (same libjpeg-turbo/libpng defaults).
 * Corrupt-data warnings that mean missing pixels (premature end of data, bad Huffman code,
 * lost sync) are errors; a single-scan JPEG that lacks only its EOI marker decodes (all pixels
 * are there), a progressive one that ends early does not (scans could be missing). The result
 * points into the decoder's scratch and is valid until the next call on `d`; scratch only grows, so
 * same-size images do not allocate. Errors: FL_E_DECODE (not an image, corrupt, truncated),
 * FL_E_TOO_LARGE, FL_E_UNSUPPORTED, FL_E_INVALID (channels not 1 or 3), -ENOMEM. */
FL_API int fl_decode(fl_decoder *d, const uint8_t *data, size_t len, uint32_t channels,
                     uint32_t min_width, uint32_t min_height, fl_image *out, fl_error *err);

/* Decode the `crop` region of an encoded image, resample it to out_width × out_height, optionally
 * mirror it horizontally, and write HWC `channels` bytes per pixel to dst (row stride
 * out_width*channels). JPEG: DCT scaling chosen so the scaled crop still covers the output size,
 * rows above the crop skipped (Huffman-decoded only; in a sequential file whose restart interval
 * divides the MCU row, see fl_jpeg_add_restarts, only the intervals the crop touches are read;
 * given an entry-point index of the file, fl_decoder_set_jpeg_index, neither the rows above nor
 * most columns beside the crop are read), columns outside it not IDCT'ed, rows below it never
 * decoded (so corruption outside the crop can go unnoticed). The crop maps to fractional
 * coordinates of the scaled image and the resampler reads no pixel outside it; the decoded
 * columns include one beyond each side of the crop, so libjpeg's chroma upsampling at the crop
 * edges sees the same neighbours as in a full decode. The result equals "decode the whole image
 * at the same DCT scale, resample the crop's window" byte for byte (at full scale: "decode, cut
 * the crop, fl_resize"), and differs from the full-size reference only by the DCT scaling's own
 * filtering. (valgrind flags some output bytes as uninitialised because of libjpeg-turbo's
 * SIMD code, a known false positive; run valgrind with JSIMD_FORCENONE=1.)
 * PNG and WebP: full decode, then the same resampling (bit-exact with that reference). The crop
 * must lie inside the image. No allocation in steady state (decoder scratch). Errors: as fl_decode;
 * FL_E_RANGE for an empty crop or one outside the image; FL_E_INVALID for a NULL crop/dst or a zero
 * output size. */
FL_API int fl_decode_crop_resize(fl_decoder *d, const uint8_t *data, size_t len,
                                 const fl_rect *crop, uint32_t out_width, uint32_t out_height,
                                 uint32_t channels, int flip, uint8_t *dst, fl_error *err);

/* Entry points into a JPEG's Huffman-coded data, so that a crop decode skips the bits of the
 * rows above the crop and of most columns beside it. A file without restart markers is one bit
 * stream: every decode notes, as it goes, the bit offset and DC predictors at evenly spaced MCUs
 * (about 128 an image, 12 bytes each); handed back for a later decode of the same file, these
 * let it start from the nearest one before the first MCU it needs. The index is an opaque byte
 * string that belongs to one file: it carries the file's MCU geometry, data length and a hash of
 * its data, and one that does not match (another file, damaged bytes) is ignored; it only ever
 * changes how much is decoded, never the pixels (equal byte for byte with or without it).
 * fl_decoder_set_jpeg_index: use `index` (len bytes, borrowed until the call returns) for the
 * next fl_decode or fl_decode_crop_resize on d only; NULL clears it.
 * fl_decoder_jpeg_index: after that decode, when it was a JPEG one and found entry points the
 * index given did not hold, the grown index (*index points into d's scratch, valid until the next
 * call on d) and its length; else 0 and *index NULL. A caller keeps it per file (libfastload's
 * loader keeps one per record, fl_loader_options.jpeg_index_memory) and gives it back next time. */
FL_API void fl_decoder_set_jpeg_index(fl_decoder *d, const void *index, size_t len);
FL_API size_t fl_decoder_jpeg_index(fl_decoder *d, const void **index);

/* The most memory fl_decode_crop_resize can use for this image, crop and output, read from the
 * header alone (nothing is decoded): the decoder's scratch (pixels decoded before resampling,
 * row pointers, a JPEG rebuilt from a restart marker, the resampler's buffer) plus the codecs'
 * own allocations (libjpeg's coefficient buffers: the whole image's for a progressive or
 * multi-scan file; libpng's rows; libwebp's 4-byte ARGB pixels and alpha plane for lossless or
 * alpha images). An upper bound, for callers sharing a memory budget between decoders; libpng's
 * ancillary chunks (at most 8 MiB, freed at once) are not counted. 0 when the header cannot be
 * probed (the decode fails at once). */
FL_API uint64_t fl_decode_crop_resize_bytes(const uint8_t *data, size_t len, const fl_rect *crop,
                                            uint32_t out_width, uint32_t out_height,
                                            uint32_t channels);

/* When the decoder's scratch buffers hold more than max_held bytes in all, free them (the next
 * decode allocates what it needs again): a caller bounding memory does this after an unusually
 * large image. Returns the bytes the scratch holds after the call. */
FL_API size_t fl_decoder_trim(fl_decoder *d, size_t max_held);

/* Resample src (sw × sh, `channels` 1..4, row stride sstride) into dst (dw × dh, row stride
 * dstride) with a separable triangle filter widened by the shrink factor (antialiased, PIL's
 * BILINEAR: within one level of PIL's Image.resize), optionally mirrored left-right. Fixed point
 * (14-bit weights summing exactly to one, vertical pass then horizontal, 8-bit rows between them as
 * PIL does): a pure function of its inputs, bit-identical across runs, threads and SIMD levels
 * (AVX2, SSSE3 and portable C kernels are chosen at run time and give the same bytes). Equal
 * sizes without flip copy exactly. Scratch: fl_resize_scratch_size() bytes taken from `scratch`
 * when not NULL (scratch_len bytes; less is FL_E_INVALID), else allocated and freed per call.
 * Errors: FL_E_INVALID (zero size, channels, strides, short scratch), -ENOMEM. */
FL_API int fl_resize(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride,
                     uint32_t channels, uint8_t *dst, uint32_t dw, uint32_t dh, size_t dstride,
                     int flip, void *scratch, size_t scratch_len, fl_error *err);

/* Scratch bytes fl_resize needs for these sizes (about dh × sw × channels + small tables);
 * 0 for invalid sizes. */
FL_API size_t fl_resize_scratch_size(uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh,
                                     uint32_t channels);

/* An encoder owns a TurboJPEG handle and grow-only output buffers; one per thread.
 * fl_encoder_create errors: FL_E_INVALID, -ENOMEM. fl_encoder_free(NULL) is a no-op. */
typedef struct fl_encoder fl_encoder;
FL_API int fl_encoder_create(fl_encoder **out, fl_error *err);
FL_API void fl_encoder_free(fl_encoder *e);

/* Encode HWC pixels (1 or 3 channels, any stride) as baseline JPEG (accurate DCT) 4:2:0, 4:4:4
 * for quality >= 95, grayscale for 1 channel, at `quality` 1..100. *out points into the
 * encoder's buffer, valid until the next call on `e`.
 * Errors: FL_E_INVALID (bad image or quality), FL_E_UNSUPPORTED (a side over 65500), -ENOMEM. */
FL_API int fl_encode_jpeg(fl_encoder *e, const fl_image *img, int quality, const uint8_t **out,
                          size_t *out_len, fl_error *err);

/* Losslessly rewrite a JPEG (baseline or progressive) as a baseline JPEG with restart markers,
 * the restart interval being the largest divisor of the MCU row count up to max_mcus MCUs (0: one
 * interval per MCU row). The DCT coefficients are kept, so it decodes to exactly the same pixels.
 * A sequential Huffman file without restart markers (what cameras and PIL write) has its
 * entropy-coded bits copied with its own Huffman tables, markers inserted and only the first DC
 * difference after each marker re-coded: about 0.65x the CPU of a full decode (size +4-5% at 4
 * MCUs per interval on 0.2 MP 4:2:0 photos). Any other file (progressive, already restart-marked,
 * a DC difference its table cannot code, corrupt) is transcoded through libjpeg with per-image
 * optimized Huffman tables: about 2.5x a full decode, +1.6%. fl_decode_crop_resize on such a
 * file Huffman-decodes only the restart intervals the crop touches (rows above and, with
 * intervals shorter than a row, columns beside the crop are not read at all); libjpeg-turbo
 * decodes files with restart markers on its slower Huffman path (full decodes are a few percent
 * slower; see bench/decode_bench.c --restart, bench/jpeg_restart_pack.sh).
 * Same ownership as fl_encode_jpeg (*out valid until the next call on `e`).
 * Errors: FL_E_INVALID (not a JPEG, NULL args), FL_E_DECODE (corrupt), FL_E_TOO_LARGE, -ENOMEM. */
FL_API int fl_jpeg_add_restarts(fl_encoder *e, const uint8_t *data, size_t len, uint32_t max_mcus,
                                const uint8_t **out, size_t *out_len, fl_error *err);

/* Encode like fl_encode_jpeg (same quantization, subsampling, DCT and standard Huffman tables: the
 * same decoded pixels) but with restart markers as fl_jpeg_add_restarts would place them (max_mcus
 * as there), in one pass: it costs what fl_encode_jpeg costs (measured), where encoding then
 * rewriting costs a second entropy pass; the markers add about 1.5% to the size. *out is valid
 * until the next fl_jpeg_add_restarts / fl_encode_jpeg_restart call on `e`. Errors: as
 * fl_encode_jpeg. */
FL_API int fl_encode_jpeg_restart(fl_encoder *e, const fl_image *img, int quality,
                                  uint32_t max_mcus, const uint8_t **out, size_t *out_len,
                                  fl_error *err);

/* Encode HWC pixels (1 or 3 channels, any stride) as an 8-bit gray or RGB PNG (zlib default
 * level, adaptive filters). Same ownership as fl_encode_jpeg. Errors: FL_E_INVALID, -ENOMEM. */
FL_API int fl_encode_png(fl_encoder *e, const fl_image *img, const uint8_t **out, size_t *out_len,
                         fl_error *err);

/* ---- Masks (mask_codec.c) -------------------------------------------------------------------
 * A mask is a label image: height x width class ids, uint8 or uint16, row-major, no stride.
 * Stored losslessly as an 8/16-bit grayscale PNG or as one zstd frame of the raw little-endian
 * elements (fl_mask_codec, fl_fields.h). */

/* Encode `pixels` (width x height elements of `dtype`, FL_DTYPE_U8 or FL_DTYPE_U16) with
 * `codec` (FL_MASK_PNG: 8- or 16-bit gray PNG, zlib level 6; FL_MASK_ZSTD: zstd `level`, 0 =
 * 3) into *out, a grow-only buffer (realloc'ed as needed, *cap its size), setting *out_len.
 * Errors: FL_E_INVALID (zero size, other dtype or codec), -ENOMEM. */
FL_API int fl_mask_encode(const void *pixels, uint32_t width, uint32_t height, fl_dtype dtype,
                          fl_mask_codec codec, int level, uint8_t **out, size_t *cap,
                          size_t *out_len, fl_error *err);

/* The size of an encoded mask without decoding it: a PNG's IHDR (*bits = its bit depth, 1..16)
 * or, for FL_MASK_ZSTD, nothing to read (*width = *height = 0, *bits = 0). Errors: FL_E_DECODE. */
FL_API int fl_mask_probe(const uint8_t *data, size_t len, fl_mask_codec codec, uint32_t *width,
                         uint32_t *height, uint32_t *bits, fl_error *err);

/* Decode an encoded mask (untrusted bytes) into dst: exactly width x height elements of `dtype`
 * (U8 or U16), dst_cap bytes available. FL_MASK_PNG: a gray PNG (1..16 bits, alpha dropped)
 * gives its values; a palette PNG gives its palette indices (VOC's SegmentationClass masks are
 * palette images whose indices are the classes, 255 the "void" border); an RGB/RGBA PNG is
 * refused (colour-coded masks must be converted to class ids first). A value that does not fit
 * `dtype` (over 255 into uint8) is refused. FL_MASK_ZSTD: the frame must decompress to exactly
 * width x height x element bytes (little-endian). `what` names the mask in messages.
 * Errors: FL_E_DECODE (corrupt, truncated), FL_E_FORMAT (size other than width x height, RGB,
 * a value out of range), FL_E_INVALID (dtype, codec, dst_cap too small), -ENOMEM. */
FL_API int fl_mask_decode(const uint8_t *data, size_t len, fl_mask_codec codec, uint32_t width,
                          uint32_t height, fl_dtype dtype, void *dst, size_t dst_cap,
                          const char *what, fl_error *err);

/* A mask decoder for repeated decodes (one per thread): it keeps a zstd context, an arena for
 * libpng's per-image allocations and grow-only row scratch, so after its first few masks a
 * decode allocates nothing. */
typedef struct fl_mask_decoder fl_mask_decoder;

/* Create a mask decoder. Errors: -ENOMEM. */
FL_API int fl_mask_decoder_create(fl_mask_decoder **out, fl_error *err);
/* Free one (NULL is fine). */
FL_API void fl_mask_decoder_free(fl_mask_decoder *d);

/* fl_mask_decode_rows flags: the caller has verified a checksum over the encoded bytes (the
 * record's CRC32C), so the PNG's own adler32/CRCs are not computed again and a partial decode
 * (`rows`) is allowed. */
#define FL_MASK_CHECKED 1

/* fl_mask_decode through decoder d. rows: with FL_MASK_CHECKED, decode only rows [0, rows)
 * of the mask (0 or >= height: all of it; dst rows from `rows` on are left untouched) - what a
 * crop that ends above the last row needs (PNG; a zstd frame is always decoded whole);
 * without it every row is decoded and checked.
 * Errors: those of fl_mask_decode; FL_E_INVALID for a NULL decoder. */
FL_API int fl_mask_decode_rows(fl_mask_decoder *d, const uint8_t *data, size_t len,
                               fl_mask_codec codec, uint32_t width, uint32_t height, fl_dtype dtype,
                               uint32_t rows, int flags, void *dst, size_t dst_cap,
                               const char *what, fl_error *err);

/* Nearest-neighbour resample of a mask (elements of `elem` bytes, 1 or 2): output pixel (u, v)
 * takes source pixel (floor((u + 0.5) * sw / dw), floor((v + 0.5) * sh / dh)), so no new value
 * ever appears. */
FL_API void fl_mask_resize_nearest(const void *src, uint32_t sw, uint32_t sh, void *dst,
                                   uint32_t dw, uint32_t dh, uint32_t elem);

#ifdef __cplusplus
}
#endif
#endif
