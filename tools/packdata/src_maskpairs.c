/* src_maskpairs.c — segmentation sets stored as two parallel folders (`packdata pack IMAGES_DIR
 * DST --mask-dir MASKS_DIR`): one record per mask file (every file under MASKS_DIR, any depth,
 * whose name ends with --mask-suffix, default ".png"), paired with the image at the same
 * relative path with the suffix replaced (--image-suffix, default: the first of .jpg .jpeg .png
 * .webp that exists). Driving the pairs from the masks fits VOC, whose JPEGImages hold many
 * images without a SegmentationClass mask. Layouts:
 *   VOC        JPEGImages/x.jpg            SegmentationClass/x.png
 *   ADE20K     images/training/x.jpg       annotations/training/x.png
 *   Cityscapes leftImg8bit/train/c/x_leftImg8bit.png  gtFine/train/c/x_gtFine_labelIds.png
 *              (--image-suffix _leftImg8bit.png --mask-suffix _gtFine_labelIds.png)
 * Fields: image, mask (uint8: palette indices or gray values; a mask whose size differs from its
 * image is a bad input, found when the worker reads it). Class names: --classes when given. */
#include "packdata.h"

#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static struct {
    char **v;
    size_t n, cap;
    size_t root_len;
    const char *suffix;
    int oom;
} walk; /* nftw has no user pointer; one listing runs at a time */

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a > b && !strcmp(s + a - b, suf);
}

static int on_file(const char *fp, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag != FTW_F || !ends_with(fp, walk.suffix))
        return 0;
    if (walk.n == walk.cap) {
        size_t cap = walk.cap ? walk.cap * 2 : 1024;
        char **v = realloc(walk.v, cap * sizeof *v);
        if (!v)
            return walk.oom = 1;
        walk.v = v;
        walk.cap = cap;
    }
    const char *rel = fp + walk.root_len;
    while (*rel == '/')
        rel++;
    if (!(walk.v[walk.n] = strdup(rel)))
        return walk.oom = 1;
    walk.n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int pd_src_maskpairs(const char *dir, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                     fl_error *err)
{
    const char *msuf = so->mask_suffix ? so->mask_suffix : ".png";
    struct stat st;
    if (stat(so->mask_dir, &st) || !S_ISDIR(st.st_mode))
        return fl_error_set(err, FL_E_INVALID, "--mask-dir %s: not a directory", so->mask_dir);
    memset(&walk, 0, sizeof walk);
    walk.root_len = strlen(so->mask_dir);
    walk.suffix = msuf;
    if (nftw(so->mask_dir, on_file, 16, FTW_PHYS) < 0 && !walk.oom)
        return fl_error_set(err, -errno, "%s: %s", so->mask_dir, strerror(errno));
    int r = 0;
    if (walk.oom) {
        r = fl_error_set(err, -ENOMEM, "out of memory listing %s", so->mask_dir);
        goto done;
    }
    if (!walk.n) {
        r = fl_error_set(err, FL_E_INVALID,
                         "--mask-dir %s holds no files ending in '%s' (choose "
                         "with --mask-suffix)",
                         so->mask_dir, msuf);
        goto done;
    }
    qsort(walk.v, walk.n, sizeof *walk.v, cmp_str);
    out->num_fields = 0;
    pd_items_add_field(out, "image", FL_FIELD_IMAGE, FL_DTYPE_U8, 0, NULL, -1);
    pd_items_add_field(out, "mask", FL_FIELD_MASK, FL_DTYPE_U8, 0, NULL, 0);
    static const char *const exts[] = {".jpg", ".jpeg", ".png", ".webp", ".JPG", ".JPEG", ".PNG"};
    for (size_t i = 0; i < walk.n; i++) {
        const char *rel = walk.v[i];
        size_t stem = strlen(rel) - strlen(msuf);
        char *mpath = pd_path_join(so->mask_dir, rel);
        char *ipath = NULL, *iname = NULL;
        if (!mpath)
            goto oom;
        for (size_t k = 0; k < (so->image_suffix ? 1 : sizeof exts / sizeof *exts); k++) {
            const char *suf = so->image_suffix ? so->image_suffix : exts[k];
            free(iname);
            if (asprintf(&iname, "%.*s%s", (int)stem, rel, suf) < 0) {
                iname = NULL;
                free(mpath);
                goto oom;
            }
            free(ipath);
            if (!(ipath = pd_path_join(dir, iname))) {
                free(iname);
                free(mpath);
                goto oom;
            }
            if (stat(ipath, &st) == 0)
                break;
        }
        if (stat(ipath, &st) != 0) {
            char src[4200];
            snprintf(src, sizeof src, "%s", mpath);
            int stop = so->image_suffix
                           ? pd_reject(rc, src, "no image for this mask: %s does not exist", ipath)
                           : pd_reject(rc, src,
                                       "no image for this mask: %s/%.*s with .jpg, .jpeg, "
                                       ".png or .webp does not exist (choose with --image-suffix)",
                                       dir, (int)stem, rel);
            free(ipath);
            free(iname);
            free(mpath);
            if (stop) {
                r = pd_fail_reported(err, FL_E_FORMAT);
                goto done;
            }
            continue;
        }
        pd_item it = {0};
        it.name = pd_items_strdup(out, iname);
        it.path = pd_items_strdup(out, ipath);
        it.values = pd_items_new_values(out);
        free(ipath);
        free(iname);
        if (!it.name || !it.path || !it.values) {
            free(mpath);
            goto oom;
        }
        it.values[1].kind = PD_VAL_FILE;
        it.values[1].path = pd_items_strdup(out, mpath);
        free(mpath);
        if (!it.values[1].path || pd_items_push(out, &it))
            goto oom;
    }
    if (so->n_class_names)
        r = pd_items_set_classes(out, so->class_names, so->n_class_names);
    if (r)
        goto oom;
    out->form = "maskpairs";
    goto done;
oom:
    r = fl_error_set(err, -ENOMEM, "out of memory listing %s", so->mask_dir);
done:
    for (size_t i = 0; i < walk.n; i++)
        free(walk.v[i]);
    free(walk.v);
    memset(&walk, 0, sizeof walk);
    return r;
}
