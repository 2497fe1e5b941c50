/* source.c — choose the SRC form (rules documented in `packdata pack --help`) and hand it to the
 * matching parser. */
#include "packdata.h"

#include "archive_source.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcasecmp(s + a - b, suf);
}

int pd_source_load(const char *src, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                   fl_error *err)
{
    if (so->idx_images)
        return pd_src_idx(so->idx_images, so->idx_labels, so, rc, out, err);
    if (so->wds)
        return pd_src_wds(so->wds, so, rc, out, err);
    if (so->coco)
        return pd_src_coco(so->coco, so, rc, out, err);
    if (so->csv)
        return pd_src_csv(so->csv, so, rc, out, err);
    if (so->jsonl)
        return pd_src_jsonl(so->jsonl, so, rc, out, err);
    struct stat st;
    if (stat(src, &st) < 0)
        return fl_error_set(err, -errno, "%s: %s", src, strerror(errno));
    if (S_ISDIR(st.st_mode) && so->mask_dir)
        return pd_src_maskpairs(src, so, rc, out, err);
    if (S_ISDIR(st.st_mode)) {
        char *img = NULL, *lab = NULL;
        int r = pd_idx_find(src, so->split, &img, &lab, err);
        if (r < 0)
            return r;
        if (r == 0 && so->split) {
            /* IDX files here, none named by --split: say so (not "no class sub-folders") */
            char *i2 = NULL, *l2 = NULL;
            fl_error e2;
            int any = pd_idx_find(src, NULL, &i2, &l2, &e2);
            free(i2);
            free(l2);
            if (any != 0)
                return fl_error_set(err, FL_E_INVALID,
                                    "--split: %s holds no IDX files starting with "
                                    "'%.40s'",
                                    src, so->split);
        }
        if (r == 1) {
            r = pd_src_idx(img, lab, so, rc, out, err);
            free(img);
            free(lab);
            return r;
        }
        if (pd_cifar_detect(src))
            return pd_src_cifar(src, so, rc, out, err);
        return pd_src_imagefolder(src, so, rc, out, err);
    }
    if (pd_is_tar_name(src))
        return pd_src_tar(src, so, rc, out, err);
    if (ends_with(src, ".csv"))
        return pd_src_csv(src, so, rc, out, err);
    if (ends_with(src, ".jsonl"))
        return pd_src_jsonl(src, so, rc, out, err);
    if (ends_with(src, ".bin"))
        return pd_src_cifar(src, so, rc, out, err);
    if (strstr(src, "idx3-ubyte") || strstr(src, "idx1-ubyte"))
        return fl_error_set(err, FL_E_INVALID,
                            "%s: an IDX file: pass --idx IMAGES LABELS, or the "
                            "directory holding both",
                            src);
    return pd_src_list(src, so, rc, out, err);
}
