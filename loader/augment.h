/* augment.h — per-sample augmentation parameters: random-resized-crop sampled exactly as
 * torchvision's RandomResizedCrop.get_params (10 tries, then the center-crop fallback), the
 * evaluation resize + center crop, the object-keeping crop (a random window holding at least one
 * box centre, as SSD / DALI's RandomBBoxCrop), and the horizontal flip. Pure functions of
 * (seed, epoch, sample position) and the image size. Internal. */
#ifndef FL_AUGMENT_H
#define FL_AUGMENT_H

#include <stdint.h>

#include "fastload.h"
#include "fl_image.h"

typedef struct fl_aug_config {
    fl_augment augment;
    int flip;
    double scale_min, scale_max;
    double ratio_min, ratio_max;
    double center_ratio;
    uint32_t out_width, out_height;
    uint64_t seed;
} fl_aug_config;

typedef struct fl_aug_params {
    fl_rect crop; /* region of the source image to resample to the output size */
    int flip;     /* mirror horizontally */
} fl_aug_params;

/* Parameters for the sample at epoch-sequence position `pos` of `epoch`, on a source image of
 * src_width × src_height (both >= 1). */
void fl_augment_params(const fl_aug_config *c, uint64_t epoch, uint64_t pos, uint32_t src_width,
                       uint32_t src_height, fl_aug_params *out);

/* FL_AUG_OBJECT_CROP's draw for the sample at (epoch, pos) on a src_width × src_height image
 * with n boxes (x0, y0, x1, y1 float32 rows, source pixels): up to FL_OBJECT_CROP_TRIES random
 * windows drawn from the sample's stream, each with an area fraction in [scale_min, scale_max]
 * and a log-uniform aspect ratio in [ratio_min, ratio_max] as random-resized-crop draws them
 * (a draw that does not fit the image counts as a try); the first window holding the centre of
 * at least one box wins. When none does, or there are no boxes, the whole image. The flip as
 * for the other augmentations. fl_augment_params gives the whole image for FL_AUG_OBJECT_CROP
 * (the loader calls this one, with the sample's boxes). */
#define FL_OBJECT_CROP_TRIES 50
void fl_augment_object_params(const fl_aug_config *c, uint64_t epoch, uint64_t pos,
                              uint32_t src_width, uint32_t src_height, const float *boxes,
                              uint32_t n, fl_aug_params *out);

#endif
