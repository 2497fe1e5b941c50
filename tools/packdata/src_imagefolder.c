/* src_imagefolder.c — torchvision ImageFolder layout: SRC/<class>/<...>/<image>. Class folders
 * sorted by name (byte order) give the labels; files with an image extension (.jpg .jpeg .jpe
 * .png, any case) at any depth below them are the inputs, sorted by relative path. Hidden entries
 * are ignored. The format is sniffed from the bytes later, so a lying extension is fine. */
#include "packdata.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec;

static int sv_push(strvec *s, char *str) {
    if (!str) return -ENOMEM;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        char **v = realloc(s->v, nc * sizeof *v);
        if (!v) {
            free(str);
            return -ENOMEM;
        }
        s->v = v;
        s->cap = nc;
    }
    s->v[s->n++] = str;
    return 0;
}

static void sv_free(strvec *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_image_ext(const char *n) {
    const char *dot = strrchr(n, '.');
    if (!dot) return 0;
    return !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".jpe") ||
           !strcasecmp(dot, ".png");
}

/* Collect image files below base/rel (rel relative to SRC), recursively. */
static int walk(const char *base, const char *rel, strvec *files, uint64_t *ignored, int depth,
                fl_error *err) {
    if (depth > 64) return fl_error_set(err, FL_E_INVALID, "%s/%s: folders nested too deep (a symlink loop?)", base, rel);
    char *dir = pd_path_join(base, rel);
    if (!dir) return -ENOMEM;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        int r = fl_error_set(err, -e, "%s: cannot open directory: %s", dir, strerror(e));
        free(dir);
        return r;
    }
    strvec names = {0};
    struct dirent *de;
    int r = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if ((r = sv_push(&names, strdup(de->d_name)))) break;
    }
    closedir(d);
    if (!r) qsort(names.v, names.n, sizeof *names.v, cmp_str);
    for (size_t i = 0; i < names.n && !r; i++) {
        char *rp = pd_path_join(rel, names.v[i]);
        char *fp = pd_path_join(dir, names.v[i]);
        struct stat st;
        if (!rp || !fp) {
            r = -ENOMEM;
        } else if (stat(fp, &st) == 0 && S_ISDIR(st.st_mode)) {
            r = walk(base, rp, files, ignored, depth + 1, err);
        } else if (has_image_ext(names.v[i])) {
            /* missing/broken entries are kept: the pack reports them with the file name */
            r = sv_push(files, rp);
            rp = NULL;
        } else {
            (*ignored)++;
        }
        free(rp);
        free(fp);
    }
    sv_free(&names);
    free(dir);
    if (r == -ENOMEM) return fl_error_set(err, r, "out of memory listing %s", base);
    return r;
}

int pd_src_imagefolder(const char *dir, const pd_source_opts *so, pd_reject_ctx *rc,
                       pd_items *out, fl_error *err) {
    (void)rc;
    DIR *d = opendir(dir);
    if (!d) return fl_error_set(err, -errno, "%s: cannot open directory: %s", dir, strerror(errno));
    strvec classes = {0};
    struct dirent *de;
    int r = 0;
    while ((de = readdir(d)) && !r) {
        if (de->d_name[0] == '.') continue;
        char *p = pd_path_join(dir, de->d_name);
        struct stat st;
        if (p && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) r = sv_push(&classes, strdup(de->d_name));
        free(p);
    }
    closedir(d);
    if (r) goto oom;
    if (!classes.n) {
        r = fl_error_set(err, FL_E_INVALID, "%s: no class sub-folders (an ImageFolder needs "
                         "SRC/<class>/<image> files; for other layouts see packdata pack --help)", dir);
        goto done;
    }
    qsort(classes.v, classes.n, sizeof *classes.v, cmp_str);
    if (so->n_class_names || so->num_classes > 0) {
        /* ImageFolder names come from the folders; refuse conflicting options rather than guess */
        r = fl_error_set(err, FL_E_INVALID, "%s: an ImageFolder takes its classes from its "
                         "sub-folders: drop --classes/--class-names/--num-classes", dir);
        goto done;
    }
    uint64_t ignored = 0;
    for (size_t c = 0; c < classes.n; c++) {
        strvec files = {0};
        r = walk(dir, classes.v[c], &files, &ignored, 0, err);
        for (size_t i = 0; i < files.n && !r; i++) {
            pd_item it = {0};
            it.name = pd_items_strdup(out, files.v[i]);
            char *full = pd_path_join(dir, files.v[i]);
            it.path = full ? pd_items_strdup(out, full) : NULL;
            free(full);
            it.label = (int32_t)c;
            if (!it.name || !it.path || pd_items_push(out, &it)) r = -ENOMEM;
        }
        sv_free(&files);
        if (r == -ENOMEM) goto oom;
        if (r) goto done;
    }
    if (ignored)
        fprintf(stderr, PD_TOOL ": note: ignored %llu file(s) without a .jpg/.jpeg/.png extension in %s\n",
                (unsigned long long)ignored, dir);
    r = pd_items_set_classes(out, classes.v, (uint32_t)classes.n);
    if (r) goto oom;
    out->form = "imagefolder";
    goto done;
oom:
    r = fl_error_set(err, -ENOMEM, "out of memory listing %s", dir);
done:
    sv_free(&classes);
    return r;
}
