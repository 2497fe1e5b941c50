/* src_cifar.c — CIFAR-10/100 binary batches. CIFAR-10 records are 1 label byte + 3072 pixel bytes
 * (1024 R, 1024 G, 1024 B: planar 32×32); CIFAR-100 records have a coarse and a fine label byte
 * first. Pixels are converted to HWC once at load; names are "<batch file without .bin>#<index>".
 * Class names come from batches.meta.txt / fine_label_names.txt / coarse_label_names.txt next to
 * the batches. */
#include "packdata.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CIFAR_PIX 3072u

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int pd_cifar_parse(const uint8_t *data, size_t len, const char *file_name, int cifar100, int coarse,
                   pd_items *out, fl_error *err)
{
    size_t rec = cifar100 ? CIFAR_PIX + 2 : CIFAR_PIX + 1;
    if (len == 0)
        return fl_error_set(err, FL_E_FORMAT, "%s: empty CIFAR batch file", file_name);
    if (len % rec)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: %zu bytes is not a whole number of %zu-byte "
                            "CIFAR-%s records (truncated or not a CIFAR batch)",
                            file_name, len, rec, cifar100 ? "100" : "10");
    size_t n = len / rec;
    uint8_t *hwc = malloc(n * CIFAR_PIX);
    if (!hwc)
        return fl_error_set(err, -ENOMEM, "out of memory");
    int r = pd_items_own_block(out, hwc);
    if (r)
        return fl_error_set(err, r, "out of memory");
    const char *bn = base_name(file_name);
    size_t bl = strlen(bn);
    if (bl > 4 && !strcmp(bn + bl - 4, ".bin"))
        bl -= 4; /* "data_batch_1#17" */
    if (bl > 200)
        bl = 200;
    char name[512];
    for (size_t i = 0; i < n; i++) {
        const uint8_t *rp = data + i * rec;
        const uint8_t *px = rp + (cifar100 ? 2 : 1);
        uint8_t *o = hwc + i * CIFAR_PIX;
        for (unsigned k = 0; k < 1024; k++) {
            o[3 * k] = px[k];
            o[3 * k + 1] = px[1024 + k];
            o[3 * k + 2] = px[2048 + k];
        }
        pd_item it = {0};
        snprintf(name, sizeof name, "%.*s#%zu", (int)bl, bn, i);
        if (!(it.name = pd_items_strdup(out, name)))
            return fl_error_set(err, -ENOMEM, "out of memory");
        it.pixels = o;
        it.height = it.width = 32;
        it.channels = 3;
        it.label = cifar100 ? rp[coarse ? 0 : 1] : rp[0];
        if (pd_items_push(out, &it))
            return fl_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

static int is_file(const char *dir, const char *name)
{
    char *p = pd_path_join(dir, name);
    struct stat st;
    int ok = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    return ok;
}

/* A CIFAR-100 batch: a non-empty whole number of 3074-byte records (coarse, fine, 3072 pixels). */
static int is_cifar100_batch(const char *dir, const char *name)
{
    char *p = pd_path_join(dir, name);
    struct stat st;
    int ok =
        p && stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size % 3074 == 0;
    free(p);
    return ok;
}

int pd_cifar_detect(const char *dir)
{
    /* train.bin/test.bin are generic names: take them for CIFAR-100 when the label-name files are
     * beside them, or when their size is a whole number of CIFAR-100 records (the names files
     * are often dropped when the batches are copied). */
    return is_file(dir, "data_batch_1.bin") || is_file(dir, "test_batch.bin") ||
           ((is_file(dir, "train.bin") || is_file(dir, "test.bin")) &&
            (is_file(dir, "fine_label_names.txt") || is_file(dir, "coarse_label_names.txt"))) ||
           is_cifar100_batch(dir, "train.bin") || is_cifar100_batch(dir, "test.bin");
}

/* Read a names file (one per line, blank lines dropped) into out's classes. 0 when read. */
static int load_names(const char *dir, const char *file, pd_items *out, uint32_t expect)
{
    char *p = pd_path_join(dir, file);
    uint8_t *d;
    size_t n;
    fl_error e;
    int r = p ? pd_read_file(p, 0, 1 << 20, &d, &n, &e) : -ENOMEM;
    free(p);
    if (r)
        return -1;
    char *names[256];
    uint32_t k = 0;
    size_t s = 0;
    char *txt = (char *)d;
    for (size_t i = 0; i <= n && k < 256; i++) {
        if (i == n || txt[i] == '\n') {
            size_t e2 = i;
            while (e2 > s && (txt[e2 - 1] == '\r' || txt[e2 - 1] == ' '))
                e2--;
            if (e2 > s) {
                names[k++] = strndup(txt + s, e2 - s);
            }
            s = i + 1;
        }
    }
    free(d);
    r = -1;
    if (k == expect)
        r = pd_items_set_classes(out, names, k);
    for (uint32_t i = 0; i < k; i++)
        free(names[i]);
    return r;
}

static int cmp_batch(const void *a, const void *b)
{
    /* data_batch_2 before data_batch_10 */
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    long nx = atol(x + strcspn(x, "0123456789")), ny = atol(y + strcspn(y, "0123456789"));
    return nx != ny ? (nx < ny ? -1 : 1) : strcmp(x, y);
}

int pd_src_cifar(const char *src, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                 fl_error *err)
{
    struct stat st;
    if (stat(src, &st) < 0)
        return fl_error_set(err, -errno, "%s: %s", src, strerror(errno));
    char *files[64];
    int nf = 0, cifar100 = 0, r = 0;
    char *dir;
    if (S_ISDIR(st.st_mode)) {
        dir = strdup(src);
        int has_train10 = is_file(src, "data_batch_1.bin"),
            has_test10 = is_file(src, "test_batch.bin");
        int has_train100 = is_file(src, "train.bin"), has_test100 = is_file(src, "test.bin");
        cifar100 = !(has_train10 || has_test10);
        int has_train = cifar100 ? has_train100 : has_train10;
        int has_test = cifar100 ? has_test100 : has_test10;
        const char *split = so->split;
        if (!split) {
            if (has_train && has_test) {
                free(dir);
                return fl_error_set(err, FL_E_INVALID,
                                    "%s holds both CIFAR training and test "
                                    "batches: choose with --split train or --split test",
                                    src);
            }
            split = has_train ? "train" : "test";
        }
        if (strcmp(split, "train") && strcmp(split, "test")) {
            free(dir);
            return fl_error_set(err, FL_E_INVALID,
                                "--split for CIFAR must be train or test (got '%s')", split);
        }
        if (!strcmp(split, "test")) {
            files[nf++] = pd_path_join(src, cifar100 ? "test.bin" : "test_batch.bin");
        } else if (cifar100) {
            files[nf++] = pd_path_join(src, "train.bin");
        } else {
            DIR *d = opendir(src);
            struct dirent *de;
            char *names[64];
            int nn = 0;
            while (d && (de = readdir(d)) && nn < 64)
                if (!strncmp(de->d_name, "data_batch_", 11) && strstr(de->d_name, ".bin"))
                    names[nn++] = strdup(de->d_name);
            if (d)
                closedir(d);
            qsort(names, (size_t)nn, sizeof *names, cmp_batch);
            for (int i = 0; i < nn; i++) {
                files[nf++] = pd_path_join(src, names[i]);
                free(names[i]);
            }
        }
    } else {
        const char *bn = base_name(src);
        cifar100 = !strcmp(bn, "train.bin") || !strcmp(bn, "test.bin");
        if (!strstr(bn, "batch") && !cifar100) {
            /* unknown name: decide by record size */
            cifar100 = st.st_size % (CIFAR_PIX + 1) != 0 && st.st_size % (CIFAR_PIX + 2) == 0;
        }
        const char *s = strrchr(src, '/');
        dir = s ? strndup(src, (size_t)(s - src)) : strdup(".");
        files[nf++] = strdup(src);
    }
    for (int i = 0; i < nf && !r; i++) {
        uint8_t *d;
        size_t n;
        if (!files[i]) {
            r = fl_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        r = pd_read_file(files[i], 0, 1ull << 32, &d, &n, err);
        if (r)
            break;
        r = pd_cifar_parse(d, n, files[i], cifar100, so->cifar100_coarse, out, err);
        free(d);
    }
    for (int i = 0; i < nf; i++)
        free(files[i]);
    if (r) {
        free(dir);
        return r;
    }
    uint32_t ncls = cifar100 ? (so->cifar100_coarse ? 20 : 100) : 10;
    if (so->num_classes > 0)
        ncls = (uint32_t)so->num_classes;
    if (so->n_class_names)
        ncls = so->n_class_names;
    /* labels out of range: report each */
    size_t w = 0;
    for (size_t i = 0; i < out->n; i++) {
        if ((uint32_t)out->v[i].label >= ncls) {
            if (pd_reject(rc, out->v[i].name, "label %d is out of range (%u classes)",
                          out->v[i].label, ncls)) {
                free(dir);
                return pd_fail_reported(err, FL_E_LABEL);
            }
            continue;
        }
        out->v[w++] = out->v[i];
    }
    out->n = w;
    out->in_memory = 1;
    out->form = cifar100 ? "cifar100" : "cifar10";
    if (so->n_class_names) {
        r = pd_items_set_classes(out, so->class_names, so->n_class_names);
    } else if (load_names(dir,
                          cifar100 ? (so->cifar100_coarse ? "coarse_label_names.txt"
                                                          : "fine_label_names.txt")
                                   : "batches.meta.txt",
                          out, ncls) != 0) {
        r = pd_items_numeric_classes(out, ncls);
    }
    free(dir);
    return r ? fl_error_set(err, r, "out of memory") : 0;
}
