/* pd_coco.h — COCO segmentations as packdata carries them from the source parser to the worker
 * (a "segments" blob per image in the item list's arena) and their rasterisation into a
 * semantic mask, pixel for pixel as pycocotools' annToMask draws each object. */
#ifndef PD_COCO_H
#define PD_COCO_H

#include <stddef.h>
#include <stdint.h>

/* The segments blob: doubles (8-byte aligned, integers held exactly):
 *   [n_objects] then per object [value, kind, a, b, payload...]
 *   kind PD_SEG_POLYGONS: a = number of polygons; each polygon [n_coords, x0, y0, x1, y1, ...]
 *   kind PD_SEG_RLE: a = height, b = width; then [n_counts, counts...] (uncompressed RLE,
 *        column-major, starting with a run of zeros; the compressed string form is decoded by
 *        the source parser)
 * value: what the object's pixels become in the mask (class index + 1). */
enum { PD_SEG_POLYGONS = 1, PD_SEG_RLE = 2 };

/* A growable blob under construction. */
typedef struct pd_segbuf {
    double *v;
    size_t n, cap;
} pd_segbuf;
int pd_segbuf_push(pd_segbuf *b, double x); /* 0 or -ENOMEM */

/* Decode COCO's compressed RLE string (pycocotools rleFrString: 6-bit groups offset by 48,
 * differences from the count two back) into counts appended to `b` after a placeholder for their
 * number, which it fills in. Checks: every group complete, counts >= 0, their sum == h * w.
 * Returns 0, -1 with `why` filled (bad string), -ENOMEM. */
int pd_coco_rle_string(pd_segbuf *b, const char *s, size_t len, uint32_t h, uint32_t w, char *why,
                       size_t why_cap);

/* Paint every object of `blob` (len doubles) into `mask` (width x height elements of `elem`
 * bytes, 1 or 2, row-major, zeroed by the caller) in blob order (a later object overwrites an
 * earlier one where they overlap). Polygons go through pycocotools' rleFrPoly (boundary points
 * upsampled 5x, column crossings, the RLE toggled at each: even-odd fill) and the polygons of
 * one object are united, so the mask equals pycocotools' annToMask for each object. Returns 0,
 * or -1 with `why` filled (a malformed blob, an RLE of another size), -ENOMEM. */
int pd_coco_paint(const double *blob, size_t len, uint32_t width, uint32_t height, void *mask,
                  uint32_t elem, char *why, size_t why_cap);

#endif
