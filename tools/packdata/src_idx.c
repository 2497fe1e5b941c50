/* src_idx.c — MNIST-style IDX input: an idx3-ubyte image file (N × rows × cols uint8) and an
 * idx1-ubyte label file (N uint8), each optionally gzip'ed. Items point into the decompressed
 * image buffer; names are "<file prefix>#<index>" ("train#17" for train-images-idx3-ubyte.gz). */
#include "packdata.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define IDX_MAX_FILE (4ull << 30)

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Parses into `out`; does not take ownership of img (the caller keeps or hands it over). */
int pd_idx_parse(const uint8_t *img, size_t img_len, const uint8_t *lab, size_t lab_len,
                 const char *img_name, const char *lab_name, uint64_t max_pixels, pd_items *out,
                 fl_error *err)
{
    if (img_len < 16 || be32(img) != 0x00000803)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: not an IDX image file (want magic 0x00000803: "
                            "unsigned bytes, 3 dimensions)",
                            img_name);
    if (lab_len < 8 || be32(lab) != 0x00000801)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: not an IDX label file (want magic 0x00000801: "
                            "unsigned bytes, 1 dimension)",
                            lab_name);
    uint32_t n = be32(img + 4), rows = be32(img + 8), cols = be32(img + 12);
    uint32_t nl = be32(lab + 4);
    if (!rows || !cols)
        return fl_error_set(err, FL_E_FORMAT, "%s: image size %ux%u is empty", img_name, cols,
                            rows);
    if ((uint64_t)rows * cols > (max_pixels ? max_pixels : 100000000ull))
        return fl_error_set(err, FL_E_TOO_LARGE,
                            "%s: declared image size %ux%u is over the "
                            "--max-pixels limit",
                            img_name, cols, rows);
    if (n != nl)
        return fl_error_set(err, FL_E_FORMAT, "%s holds %u images but %s holds %u labels", img_name,
                            n, lab_name, nl);
    uint64_t need = 16 + (uint64_t)n * rows * cols;
    if (img_len < need)
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s: truncated: header declares %u images of "
                            "%ux%u (%llu bytes) but the file holds %zu",
                            img_name, n, cols, rows, (unsigned long long)need, img_len);
    if (lab_len < 8 + (uint64_t)n)
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s: truncated: header declares %u labels but "
                            "the file holds %zu bytes",
                            lab_name, n, lab_len - 8);
    /* names stay short (they are stored per record): "train#17" for train-images-idx3-ubyte.gz */
    const char *bn = base_name(img_name);
    size_t bl = strlen(bn);
    const char *cut = strstr(bn, "-images");
    if (cut)
        bl = (size_t)(cut - bn);
    else if (bl > 3 && !strcmp(bn + bl - 3, ".gz"))
        bl -= 3;
    if (bl > 200)
        bl = 200;
    char name[512];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%.*s#%u", (int)bl, bn, i);
        pd_item it = {0};
        if (!(it.name = pd_items_strdup(out, name)))
            return fl_error_set(err, -ENOMEM, "out of memory");
        it.pixels = img + 16 + (size_t)i * rows * cols;
        it.height = rows;
        it.width = cols;
        it.channels = 1;
        it.label = lab[8 + i];
        if (pd_items_push(out, &it))
            return fl_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int pd_src_idx(const char *images, const char *labels, const pd_source_opts *so, pd_reject_ctx *rc,
               pd_items *out, fl_error *err)
{
    uint8_t *img = NULL, *lab = NULL;
    size_t il = 0, ll = 0;
    int r = pd_read_file(images, 1, IDX_MAX_FILE, &img, &il, err);
    if (r)
        return r;
    r = pd_read_file(labels, 1, IDX_MAX_FILE, &lab, &ll, err);
    if (r) {
        free(img);
        return r;
    }
    size_t first = out->n;
    r = pd_idx_parse(img, il, lab, ll, images, labels, so->max_pixels, out, err);
    if (r) {
        free(img);
        free(lab);
        return r;
    }
    if ((r = pd_items_own_block(out, img))) {
        free(lab);
        return fl_error_set(err, r, "out of memory");
    }
    /* label range: --num-classes / class names, else max label + 1 */
    long limit = so->num_classes > 0 ? so->num_classes : (long)so->n_class_names;
    int32_t maxl = -1;
    size_t w = first;
    for (size_t i = first; i < out->n; i++) {
        pd_item *it = &out->v[i];
        if (limit > 0 && it->label >= limit) {
            char src[600];
            snprintf(src, sizeof src, "%s#%zu", labels, i - first);
            if (pd_reject(rc, src, "label %d is out of range (%ld classes: 0..%ld)", it->label,
                          limit, limit - 1)) {
                free(lab);
                return pd_fail_reported(err, FL_E_LABEL);
            }
            continue;
        }
        if (it->label > maxl)
            maxl = it->label;
        out->v[w++] = *it;
    }
    out->n = w;
    free(lab);
    out->in_memory = 1;
    out->form = "idx";
    if (so->n_class_names)
        return pd_items_set_classes(out, so->class_names, so->n_class_names);
    return pd_items_numeric_classes(out, limit > 0 ? (uint32_t)limit : (uint32_t)(maxl + 1));
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int pd_idx_find(const char *dir, const char *split, char **images, char **labels, fl_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return fl_error_set(err, -errno, "%s: cannot open directory: %s", dir, strerror(errno));
    char *found[64];
    int nf = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nf < 64) {
        const char *n = de->d_name;
        if (n[0] == '.')
            continue;
        if ((ends_with(n, "-images-idx3-ubyte") || ends_with(n, "-images-idx3-ubyte.gz") ||
             ends_with(n, "-images.idx3-ubyte") || ends_with(n, "-images.idx3-ubyte.gz")) &&
            (!split || !strncmp(n, split, strlen(split))))
            found[nf++] = strdup(n);
    }
    closedir(d);
    if (!nf)
        return 0;
    qsort(found, (size_t)nf, sizeof *found, cmp_str);
    int rcode = 0;
    /* prefer the uncompressed file when both "x" and "x.gz" exist */
    int distinct = 0;
    for (int i = 0; i < nf; i++) {
        if (i + 1 < nf && !strncmp(found[i], found[i + 1], strlen(found[i])))
            continue;
        distinct++;
    }
    if (distinct > 1) {
        char list[1024] = "";
        for (int i = 0; i < nf; i++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", found[i]);
        }
        rcode = fl_error_set(err, FL_E_INVALID,
                             "%s holds several IDX image files (%s): pick one "
                             "with --split PREFIX (e.g. --split train or --split t10k) or --idx "
                             "IMAGES LABELS",
                             dir, list);
        goto done;
    }
    /* labels: same prefix, "-labels-idx1-ubyte[.gz]" */
    {
        const char *img = found[0];
        const char *mark = strstr(img, "-images");
        size_t pre = (size_t)(mark - img);
        const char *sep = mark[7] == '.' ? "." : "-";
        const char *cands[2] = {"", ".gz"};
        char *lab = NULL;
        for (int k = 0; k < 2 && !lab; k++) {
            char name[600];
            snprintf(name, sizeof name, "%.*s-labels%sidx1-ubyte%s", (int)pre, img, sep, cands[k]);
            char *p = pd_path_join(dir, name);
            FILE *f = p ? fopen(p, "rb") : NULL;
            if (f) {
                fclose(f);
                lab = p;
            } else {
                free(p);
            }
        }
        if (!lab) {
            rcode = fl_error_set(err, -ENOENT,
                                 "%s/%s: no matching %.*s-labels-idx1-ubyte[.gz] "
                                 "label file",
                                 dir, img, (int)pre, img);
            goto done;
        }
        *images = pd_path_join(dir, img);
        *labels = lab;
        rcode = 1;
    }
done:
    for (int i = 0; i < nf; i++)
        free(found[i]);
    return rcode;
}
