/* src_imagefolder.c — torchvision ImageFolder layout: SRC/<class>/<...>/<image>. Class folders
 * sorted by name (byte order) give the labels, or --classes gives them in its order; files with an
 * image extension (.jpg .jpeg .jpe .png .webp, and .gif .bmp .tif .tiff so that those are reported
 * as unsupported rather than silently left out; any case) at any depth below them are the inputs,
 * sorted by relative path. Hidden entries are ignored. The format is sniffed from the bytes
 * later, so a lying extension is fine. A class folder without images is skipped with a warning
 * (it would be a class with no examples); a symbolic link loop is a bad input (reported, skipped
 * under --on-error skip), never a reason to abort the listing.
 *
 * Memory: each input is kept as its relative name and label (pd_items_push_file; the path is SRC
 * + name), and an entry of the file type readdir reports (DT_REG, DT_DIR) is not stat'ed. Under
 * --part I/N (without --shuffle) a first pass only counts the inputs of each class folder, and a
 * second one lists again the folders that hold inputs of this part, keeping only those: a task
 * holds its own slice, never the whole listing. */
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

static int sv_push(strvec *s, char *str)
{
    if (!str)
        return -ENOMEM;
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

static void sv_free(strvec *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* names after their type byte */
static int cmp_typed(const void *a, const void *b)
{
    return strcmp(*(char *const *)a + 1, *(char *const *)b + 1);
}

static int has_image_ext(const char *n)
{
    const char *dot = strrchr(n, '.');
    if (!dot)
        return 0;
    static const char *const ext[] = {".jpg", ".jpeg", ".jpe", ".png", ".webp",
                                      ".gif", ".bmp",  ".tif", ".tiff"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (!strcasecmp(dot, ext[i]))
            return 1;
    return 0;
}

/* The folders from SRC down to the one being listed (device, inode): a folder that is its own
 * ancestor is a symbolic link loop. */
typedef struct dir_chain {
    dev_t dev;
    ino_t ino;
    const struct dir_chain *up;
} dir_chain;

/* Is `path` a symbolic link that resolves outside `real_root` (SRC's real path; NULL: links may
 * lead anywhere, --allow-outside-root)? One lstat per entry. */
static int leaves(const char *real_root, const char *path)
{
    struct stat l;
    return real_root && lstat(path, &l) == 0 && S_ISLNK(l.st_mode) &&
           pd_link_leaves(real_root, path);
}

/* Collect image files below base/rel (rel relative to SRC), recursively. Bad entries go to
 * pd_reject: 1 when it said fail (already printed), else 0 or an error code. */
static int walk(const char *base, const char *rel, strvec *files, uint64_t *ignored,
                const dir_chain *up, int depth, const char *real_root, pd_reject_ctx *rc,
                fl_error *err)
{
    char *dir = pd_path_join(base, rel);
    if (!dir)
        return -ENOMEM;
    struct stat ds;
    if (stat(dir, &ds) < 0) {
        int e = errno;
        int r = pd_reject(rc, dir, "cannot read folder: %s%s", strerror(e),
                          e == ELOOP ? " (a symbolic link loop)" : "")
                    ? 1
                    : 0;
        free(dir);
        return r;
    }
    for (const dir_chain *c = up; c; c = c->up) {
        if (c->dev == ds.st_dev && c->ino == ds.st_ino) {
            int r = pd_reject(rc, dir,
                              "symbolic link loop: it leads back to one of its own "
                              "parent folders (not followed)")
                        ? 1
                        : 0;
            free(dir);
            return r;
        }
    }
    if (depth > 256) { /* no loop, just deeper than any real dataset */
        int r = pd_reject(rc, dir, "folders nested over 256 deep: not listed") ? 1 : 0;
        free(dir);
        return r;
    }
    dir_chain here = {ds.st_dev, ds.st_ino, up};
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        int r = pd_reject(rc, dir, "cannot open folder: %s", strerror(e)) ? 1 : 0;
        free(dir);
        return r;
    }
    /* each name after one byte holding its d_type */
    strvec names = {0};
    struct dirent *de;
    int r = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        size_t l = strlen(de->d_name);
        char *e = malloc(l + 2);
        if (e) {
            e[0] = (char)de->d_type;
            memcpy(e + 1, de->d_name, l + 1);
        }
        if ((r = sv_push(&names, e)))
            break;
    }
    closedir(d);
    if (!r && names.n)
        qsort(names.v, names.n, sizeof *names.v, cmp_typed); /* NULL when empty */
    for (size_t i = 0; i < names.n && !r; i++) {
        const unsigned char type = (unsigned char)names.v[i][0];
        const char *name = names.v[i] + 1;
        if (type == DT_REG) {
            /* a regular file (not a link): no stat needed to know what it is */
            if (!has_image_ext(name)) {
                (*ignored)++;
                continue;
            }
            char *rp = pd_path_join(rel, name);
            if (!rp || (r = sv_push(files, rp)))
                r = -ENOMEM;
            continue;
        }
        char *rp = pd_path_join(rel, name);
        char *fp = pd_path_join(dir, name);
        struct stat st;
        int st_err = 0;
        if (rp && fp && stat(fp, &st) < 0)
            st_err = errno;
        if (!rp || !fp) {
            r = -ENOMEM;
        } else if (leaves(real_root, fp)) {
            r = pd_reject(rc, fp,
                          "a symbolic link leading out of %s: not packed (a folder from "
                          "elsewhere could pack any file of this machine; --allow-outside-root "
                          "packs it)",
                          base)
                    ? 1
                    : 0;
        } else if (!st_err && S_ISDIR(st.st_mode)) {
            r = walk(base, rp, files, ignored, &here, depth + 1, real_root, rc, err);
        } else if (has_image_ext(name)) {
            /* missing/broken entries are kept: the pack reports them with the file name */
            r = sv_push(files, rp);
            rp = NULL;
        } else if (st_err && st_err != ENOENT) {
            /* a link that loops (or cannot be followed) might be a folder of images: say so
             * (a dangling link to nothing is left out like any other non-image entry) */
            r = pd_reject(rc, fp, "cannot follow: %s%s", strerror(st_err),
                          st_err == ELOOP ? " (a symbolic link loop)" : "")
                    ? 1
                    : 0;
        } else {
            (*ignored)++;
        }
        free(rp);
        free(fp);
    }
    sv_free(&names);
    free(dir);
    if (r == -ENOMEM)
        return fl_error_set(err, r, "out of memory listing %s", base);
    return r;
}

/* --part: the second pass. ccount[c] inputs were counted in class folder c: list again only the
 * folders that hold inputs of slice [n*I/N, n*(I+1)/N) and keep those inputs. Bad entries were
 * reported by the first pass: they are not reported twice. A folder that lists another number of
 * inputs now changed between the passes: an error, as the parts would not agree. */
static int take_part(const char *dir, const strvec *classes, const size_t *ccount,
                     const int32_t *clabel, const dir_chain *root, const char *real_root,
                     const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out, fl_error *err)
{
    uint64_t n = 0;
    for (size_t c = 0; c < classes->n; c++)
        n += ccount[c];
    out->presliced = 1;
    out->job_n = n;
    if (!n || so->part_count > n)
        return 0; /* the caller says why there is nothing to pack */
    uint64_t lo = (uint64_t)((unsigned __int128)n * so->part_index / so->part_count);
    uint64_t hi = (uint64_t)((unsigned __int128)n * (so->part_index + 1) / so->part_count);
    pd_reject_ctx quiet = {.skip = 1, .silent = 1};
    (void)rc;
    uint64_t first = 0, ignored = 0;
    for (size_t c = 0; c < classes->n && first < hi; c++) {
        uint64_t end = first + ccount[c];
        if (end <= lo || !ccount[c]) {
            first = end;
            continue;
        }
        strvec files = {0};
        int r = walk(dir, classes->v[c], &files, &ignored, root, 0, real_root, &quiet, err);
        if (r < 0) {
            sv_free(&files);
            return r == -ENOMEM ? fl_error_set(err, r, "out of memory listing %s", dir) : r;
        }
        if (files.n != ccount[c]) {
            sv_free(&files);
            return fl_error_set(err, FL_E_FORMAT,
                                "%s/%s: %zu inputs when first listed, %zu now: the folder changed "
                                "while it was listed (the parts of a --part job must list the "
                                "same inputs): pack again once SRC no longer changes",
                                dir, classes->v[c], ccount[c], files.n);
        }
        for (uint64_t k = first < lo ? lo - first : 0; k < ccount[c] && first + k < hi; k++)
            if (pd_items_push_file(out, dir, files.v[k] + strlen(classes->v[c]) + 1, clabel[c])) {
                sv_free(&files);
                return fl_error_set(err, -ENOMEM, "out of memory listing %s", dir);
            }
        sv_free(&files);
        first = end;
    }
    return 0;
}

static long find_name(char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], s))
            return (long)i;
    return -1;
}

int pd_src_imagefolder(const char *dir, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                       fl_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return fl_error_set(err, -errno, "%s: cannot open directory: %s", dir, strerror(errno));
    char *real_root = so->allow_outside_root ? NULL : realpath(dir, NULL);
    strvec classes = {0};
    struct dirent *de;
    int r = 0, failed = 0;
    while ((de = readdir(d)) && !r) {
        if (de->d_name[0] == '.')
            continue;
        char *p = pd_path_join(dir, de->d_name);
        struct stat st;
        if (!p) {
            r = -ENOMEM;
        } else if (stat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode) && leaves(real_root, p)) {
                if (!failed && pd_reject(rc, p,
                                         "a symbolic link leading out of %s: not packed "
                                         "(--allow-outside-root packs it)",
                                         dir))
                    failed = 1;
            } else if (S_ISDIR(st.st_mode)) {
                r = sv_push(&classes, strdup(de->d_name));
            }
        } else if (errno != ENOENT && !failed) {
            /* a class folder we cannot follow (a link to itself...) would silently vanish */
            int e = errno;
            if (pd_reject(rc, p, "cannot follow: %s%s", strerror(e),
                          e == ELOOP ? " (a symbolic link loop)" : ""))
                failed = 1;
        }
        free(p);
    }
    closedir(d);
    if (r)
        goto oom;
    if (failed) {
        r = pd_fail_reported(err, FL_E_FORMAT);
        goto done;
    }
    if (!classes.n) {
        r = fl_error_set(err, FL_E_INVALID,
                         "%s: no class sub-folders (an ImageFolder needs "
                         "SRC/<class>/<image> files; for other layouts see packdata pack --help)",
                         dir);
        goto done;
    }
    qsort(classes.v, classes.n, sizeof *classes.v, cmp_str);
    if (so->num_classes > 0 && !so->n_class_names) {
        r = fl_error_set(err, FL_E_INVALID,
                         "%s: an ImageFolder takes its classes from its "
                         "sub-folders (or from --classes FILE): drop --num-classes",
                         dir);
        goto done;
    }
    /* --classes: the class list and label order are the user's; every folder must be in it,
     * and a listed class without a folder or without images is kept (a class with no examples) */
    const int listed = so->n_class_names > 0;
    if (listed) {
        for (size_t c = 0; c < classes.n; c++) {
            if (find_name(so->class_names, so->n_class_names, classes.v[c]) < 0) {
                r = fl_error_set(err, FL_E_INVALID,
                                 "%s/%s: folder is not a class of --classes "
                                 "(%u names): add it to the list, or move the folder out of %s",
                                 dir, classes.v[c], so->n_class_names, dir);
                goto done;
            }
        }
    }
    /* SRC itself heads the chain: a link back to SRC is a loop too */
    struct stat rs;
    if (stat(dir, &rs) < 0) {
        r = fl_error_set(err, -errno, "%s: %s", dir, strerror(errno));
        goto done;
    }
    const dir_chain root = {rs.st_dev, rs.st_ino, NULL};
    uint64_t ignored = 0;
    strvec kept = {0}; /* class names, label order (without --classes: non-empty folders) */
    /* --part: the inputs each class folder holds and its label, for the second pass */
    const uint32_t parts = so->part_count;
    size_t *ccount = parts ? calloc(classes.n, sizeof *ccount) : NULL;
    int32_t *clabel = parts ? calloc(classes.n, sizeof *clabel) : NULL;
    if (parts && (!ccount || !clabel)) {
        free(ccount);
        free(clabel);
        goto oom;
    }
    memset(out->name_formats, 0, sizeof out->name_formats);
    for (size_t c = 0; c < classes.n; c++) {
        strvec files = {0};
        r = walk(dir, classes.v[c], &files, &ignored, &root, 0, real_root, rc, err);
        if (r == 1) {
            failed = 1;
            r = 0;
        }
        int32_t label = listed
                            ? (int32_t)find_name(so->class_names, so->n_class_names, classes.v[c])
                            : (int32_t)kept.n;
        if (!r && !listed && files.n)
            r = sv_push(&kept, strdup(classes.v[c]));
        if (!r && !files.n && !listed && !failed)
            fprintf(stderr,
                    PD_TOOL
                    ": warning: %s/%s: class folder without images (.jpg .jpeg "
                    ".png .webp ...): skipped, as it would be a class with no examples (to keep it "
                    "as a class, give the class list with --classes FILE)\n",
                    dir, classes.v[c]);
        for (size_t i = 0; i < files.n && !r; i++)
            out->name_formats[pd_name_format(files.v[i])]++;
        if (parts) {
            ccount[c] = files.n;
            clabel[c] = label;
        }
        for (size_t i = 0; i < files.n && !r && !parts; i++)
            if (pd_items_push_file(out, dir, files.v[i] + strlen(classes.v[c]) + 1, label))
                r = -ENOMEM;
        sv_free(&files);
        if (r == -ENOMEM) {
            sv_free(&kept);
            free(ccount);
            free(clabel);
            goto oom;
        }
        if (r) {
            sv_free(&kept);
            free(ccount);
            free(clabel);
            goto done;
        }
        if (failed)
            break; /* the first bad entry is the error (already printed) */
    }
    out->name_formats_set = 1;
    if (parts && !failed) {
        r = take_part(dir, &classes, ccount, clabel, &root, real_root, so, rc, out, err);
        if (r) {
            sv_free(&kept);
            free(ccount);
            free(clabel);
            goto done;
        }
    }
    free(ccount);
    free(clabel);
    if (failed) {
        sv_free(&kept);
        r = pd_fail_reported(err, FL_E_FORMAT);
        goto done;
    }
    if (!listed && !kept.n) {
        sv_free(&kept);
        r = fl_error_set(err, FL_E_INVALID,
                         "%s: no images in any class sub-folder (.jpg .jpeg .png "
                         ".webp, at any depth)",
                         dir);
        goto done;
    }
    if (ignored)
        fprintf(stderr,
                PD_TOOL ": note: ignored %llu file(s) without an image extension (.jpg .jpeg "
                        ".png .webp ...) in %s\n",
                (unsigned long long)ignored, dir);
    r = listed ? pd_items_set_classes(out, so->class_names, so->n_class_names)
               : pd_items_set_classes(out, kept.v, (uint32_t)kept.n);
    sv_free(&kept);
    if (r)
        goto oom;
    out->form = "imagefolder";
    out->class_prefix = 1; /* the names pushed are relative to their class folder */
    goto done;
oom:
    r = fl_error_set(err, -ENOMEM, "out of memory listing %s", dir);
done:
    sv_free(&classes);
    free(real_root);
    return r;
}
