/* geometry.h — one sample's geometry (a crop of the source image, resampled to the output size,
 * optionally mirrored left-right: fl_aug_params) applied to the fields that live in the image's
 * pixel space: boxes (transformed exactly, clipped, kept or dropped by the minimum-visible rule,
 * compacted with the int lists aligned to them) and masks (nearest neighbour through the same
 * mapping as the image, so no class id that was not there can appear). Pure functions over
 * caller-owned memory. Internal.
 *
 * The mapping, the same as the image resampler's (pixel centres): output pixel u (0 <= u < out_w)
 * covers source x in crop.x + [u, u+1) * crop.width / out_w, so a source coordinate x maps to
 * x' = (x - crop.x) * out_w / crop.width (y likewise); a flip then maps x' to out_w - x'. */
#ifndef FL_GEOMETRY_H
#define FL_GEOMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h" /* fl_aug_params */

/* Boxes (n rows of x0, y0, x1, y1 float32, source pixels, x1/y1 exclusive; src need not be
 * aligned: a parsed fields block's values are not) through the crop
 * ap->crop resampled to out_w × out_h and the flip ap->flip:
 *   x' = (x - crop.x) * out_w / crop.width, clipped to [0, out_w] (y likewise),
 *   flipped: x0' = out_w - x1', x1' = out_w - x0'.
 * A box the crop does not cut is always kept (however small: with no augmentation every box
 * comes out); a box the crop cuts is kept when its clipped part is at least 1 output pixel wide
 * and 1 high and holds at least `min_visible` (0..1) of its transformed, unclipped area. Kept boxes
 * are written to dst in their source order (dst may not overlap src), and keep[j] (may be NULL)
 * receives the source row of kept box j, for fl_rows_compact. Returns the number kept. */
uint32_t fl_boxes_transform(const void *src, uint32_t n, const fl_aug_params *ap, uint32_t out_w,
                            uint32_t out_h, float min_visible, float *dst, uint32_t *keep);

/* dst[j] = src[keep[j]] for j < nkeep (src int32, need not be aligned): an int list aligned to a
 * boxes field keeps the rows its boxes kept. dst may equal src (keep[] is increasing, so the
 * compaction runs in place). */
void fl_rows_compact_i32(const void *src, const uint32_t *keep, uint32_t nkeep, int32_t *dst);

/* The source column of each output column (xmap[out_w], flip applied: xmap[u] is what output
 * column u shows) and the source row of each output row (ymap[out_h]), nearest neighbour
 * through the pixel centres: xmap[u] = crop.x + floor((u + 0.5) * crop.width / out_w). */
void fl_geometry_maps(const fl_aug_params *ap, uint32_t out_w, uint32_t out_h, uint32_t *xmap,
                      uint32_t *ymap);

/* Resample a label image (src: src_w columns per row, `elem` 1 or 2 bytes per pixel, rows
 * src_stride bytes apart) into dst (out_w × out_h, packed) with the maps of fl_geometry_maps
 * (which must lie inside the source). Every output pixel is a copy of one source pixel. */
void fl_mask_resample(const void *src, size_t src_stride, uint32_t elem, const uint32_t *xmap,
                      const uint32_t *ymap, uint32_t out_w, uint32_t out_h, void *dst);

#endif
