/* predict_images.c — image files given to `trainfast predict`, decoded exactly as the loader's
 * worker decodes an encoded record (loader/worker.c load_sample): the loader's evaluation crop
 * (fl_loader_eval_crop, with the loader's defaults), then fl_decode_crop_resize to the model's
 * input. So an image gives the same pixels here as in a dataset packed from it, and the same
 * logits. One decoder, one thread. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "fastload.h"
#include "fl_file.h"
#include "fl_image.h"
#include "predict.h"

struct tf_images {
    char *const *files;
    int n, next;
    uint32_t h, w, c;
    fl_loader_options lo; /* the loader's defaults; augment, out_width, out_height set */
    fl_decoder *dec;
    uint8_t *buf; /* the file's bytes (grow-only) */
    size_t cap;
};

int tf_images_open(char *const *files, int n, uint32_t h, uint32_t w, uint32_t c, int center,
                   tf_images **out, fl_error *err)
{
    *out = NULL;
    tf_images *s = calloc(1, sizeof *s);
    if (!s)
        return fl_error_set(err, -ENOMEM, "out of memory");
    int rc = fl_decoder_create(0, &s->dec, err); /* the loader's pixel limit (0: its default) */
    if (rc) {
        free(s);
        return rc;
    }
    fl_loader_options_init(&s->lo); /* center_ratio, no flip */
    s->lo.augment = center ? FL_AUG_CENTER : FL_AUG_NONE;
    s->lo.out_width = w;
    s->lo.out_height = h;
    s->files = files;
    s->n = n;
    s->h = h;
    s->w = w;
    s->c = c;
    *out = s;
    return 0;
}

/* one file into dst */
static int decode_one(tf_images *s, const char *path, uint8_t *dst, fl_error *err)
{
    size_t len = 0;
    fl_read_step step;
    int rc = fl_read_file_at(AT_FDCWD, path, SIZE_MAX, FL_READ_REGULAR | FL_READ_NONBLOCK, &s->buf,
                             &s->cap, &len, &step);
    if (rc)
        return fl_error_set(err, rc, "%s: cannot read it: %s", path,
                            step == FL_READ_NOT_REGULAR ? "not a regular file"
                            : rc == FL_E_TRUNCATED      ? "it shrank while read"
                                                        : strerror(-rc));
    fl_image_info ii;
    if ((rc = fl_image_probe(s->buf, len, &ii, err)))
        return fl_error_prefix(err, "%s", path);
    fl_rect crop;
    if ((rc = fl_loader_eval_crop(&s->lo, ii.width, ii.height, &crop, err)))
        return fl_error_prefix(err, "%s", path);
    rc = fl_decode_crop_resize(s->dec, s->buf, len, &crop, s->w, s->h, s->c, 0, dst, err);
    return rc ? fl_error_prefix(err, "%s", path) : 0;
}

int tf_images_next(tf_images *s, uint8_t *dst, uint32_t max, uint32_t *got, fl_error *err)
{
    const size_t sample = (size_t)s->h * s->w * s->c;
    uint32_t k = 0;
    *got = 0;
    for (; k < max && s->next < s->n; k++, s->next++) {
        int rc = decode_one(s, s->files[s->next], dst + k * sample, err);
        if (rc)
            return rc;
    }
    *got = k;
    return 0;
}

void tf_images_close(tf_images *s)
{
    if (!s)
        return;
    fl_decoder_free(s->dec);
    free(s->buf);
    free(s);
}
