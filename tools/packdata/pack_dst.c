/* pack_dst.c — `packdata pack`'s destination (pack_dst.h): the lock on DST, the checks of what
 * is at DST and DST.partial, and the job record that --resume compares: the plan text saved in
 * DST.partial.plan beside DST.partial (its short form, the inputs' count and digest, is
 * DST.partial/plan.txt) and the inputs digest kept in the manifest's options. The plan is
 * written to a file as it is made: its text (64 bytes an input) is never held in memory, but
 * for saying what changed when a --resume is refused; and plan.txt stays small, as the writer
 * reads it whole whenever it inspects DST.partial. */
#include "pack_dst.h"

#include "archive_source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_json.h"
#include "fl_writer.h"
#include "sha256.h"

#define PLAN_HEADER "fastload-pack-plan\t1\n"

/* ---- paths ---------------------------------------------------------------------------------- */

/* The absolute path DST names (it may not exist yet: its parent's real path + its name). */
static char *real_dst(const char *dst)
{
    char *r = realpath(dst, NULL);
    if (r)
        return r;
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dst);
    char *slash = strrchr(parent, '/');
    const char *base = dst;
    if (!slash) {
        strcpy(parent, ".");
    } else {
        base = dst + (slash - parent) + 1;
        if (slash == parent)
            parent[1] = '\0';
        else
            *slash = '\0';
    }
    char *rp = realpath(parent, NULL);
    if (!rp)
        return NULL;
    char *out = NULL;
    if (asprintf(&out, "%s/%s", strcmp(rp, "/") ? rp : "", base) < 0)
        out = NULL;
    free(rp);
    return out;
}

/* a equals b, or lies inside it */
static int path_within(const char *a, const char *b)
{
    size_t n = strlen(b);
    if (!strcmp(b, "/"))
        return 1;
    return !strncmp(a, b, n) && (a[n] == '\0' || a[n] == '/');
}

/* ---- begin / end ---------------------------------------------------------------------------- */

int pd_dst_begin(const pd_pack_opts *po, pd_dst *d)
{
    memset(d, 0, sizeof *d);
    d->dst = strdup(po->dst);
    if (!d->dst) {
        fl_cli_error(PD_TOOL, "out of memory");
        return FL_EXIT_DATA;
    }
    size_t l = strlen(d->dst);
    while (l > 1 && d->dst[l - 1] == '/')
        d->dst[--l] = '\0';

    /* an output inside the input (or around it) would be read back as input on the next run, or
     * be deleted with it: refuse before anything else */
    struct stat st;
    if (po->src && !po->so.csv && !po->so.idx_images && stat(po->src, &st) == 0 &&
        S_ISDIR(st.st_mode)) {
        char *rs = realpath(po->src, NULL);
        char *rd = real_dst(d->dst);
        int bad = 0;
        if (rs && rd) {
            if (!strcmp(rs, rd))
                fl_cli_error(PD_TOOL,
                             "%s: the destination is the source folder %s: choose a new "
                             "folder outside it; nothing was changed",
                             po->dst, po->src),
                    bad = 1;
            else if (path_within(rd, rs))
                fl_cli_error(PD_TOOL,
                             "%s: the destination is inside the source folder %s (it would "
                             "become part of the input): choose a folder outside it; nothing was "
                             "changed",
                             po->dst, po->src),
                    bad = 1;
            else if (path_within(rs, rd))
                fl_cli_error(PD_TOOL,
                             "%s: the source folder %s is inside the destination: choose "
                             "another destination; nothing was changed",
                             po->dst, po->src),
                    bad = 1;
        }
        free(rs);
        free(rd);
        if (bad)
            return FL_EXIT_USAGE;
    }

    fl_error err;
    fl_error_clear(&err);
    int r = fl_writer_lock_acquire(d->dst, &d->lock, &err);
    if (r) {
        fl_cli_error(PD_TOOL, "%s", err.msg[0] ? err.msg : fl_strerror(r));
        return r == -EBUSY || r == FL_E_INVALID || r == -ENOENT || r == -ENOTDIR ? FL_EXIT_USAGE
                                                                                 : FL_EXIT_DATA;
    }
    r = fl_writer_inspect(d->dst, &d->info, &err);
    if (r) {
        fl_cli_error(PD_TOOL, "%s", err.msg[0] ? err.msg : fl_strerror(r));
        return r == FL_E_INVALID ? FL_EXIT_USAGE : FL_EXIT_DATA;
    }
    if (d->info.dst == FL_DST_OTHER) {
        if (po->force)
            fl_cli_error(PD_TOOL,
                         "cannot replace %s: %s; --force replaces only a dataset packdata "
                         "wrote, nothing was changed",
                         d->dst, d->info.why);
        else
            fl_cli_error(PD_TOOL,
                         "%s: choose another destination (a folder that does not exist yet, or "
                         "an empty one); nothing was changed",
                         d->info.why);
        return FL_EXIT_USAGE;
    }
    if (d->info.partial == FL_PARTIAL_OTHER) {
        fl_cli_error(PD_TOOL,
                     "%s: it is not a partial dataset of packdata: move it away; nothing "
                     "was changed",
                     d->info.partial_why);
        return FL_EXIT_USAGE;
    }
    if (d->info.dst == FL_DST_DATASET && !po->force && !po->resume) {
        fl_cli_error(PD_TOOL,
                     "%s already exists: pass --force to replace it (it is replaced only "
                     "once the new dataset is complete), or --resume to check that it is complete",
                     d->dst);
        return FL_EXIT_DATA;
    }
    if (d->info.partial != FL_PARTIAL_NONE && !po->resume && !po->force) {
        fl_cli_error(PD_TOOL,
                     "%s.partial exists (left by an interrupted run): pass --resume to "
                     "finish it, or --force to start over",
                     d->dst);
        return FL_EXIT_DATA;
    }
    return -1;
}

void pd_dst_end(pd_dst *d)
{
    fl_writer_lock_release(d->lock);
    d->lock = NULL;
    fl_writer_dst_info_free(&d->info);
    free(d->dst);
    d->dst = NULL;
}

/* ---- the job record ------------------------------------------------------------------------- */

/* Names may hold tabs, newlines, backslashes: escape them so that one input is one line. */
static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '\t')
            fputs("\\t", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else if (*s == '\r')
            fputs("\\r", f);
        else
            fputc(*s, f);
    }
}

/* Where the plan's text goes as it is made, line by line: a file (or none), the inputs' digest,
 * and a comparison with an earlier run's plan (so neither plan is held twice in memory). */
typedef struct plan_sink {
    FILE *f;         /* the plan file, or NULL */
    const char *old; /* the earlier run's plan, or NULL */
    size_t old_len, off;
    int differs;
    sha256_ctx c;
    char *line; /* formatting buffer (grow-only) */
    size_t cap;
    int oom;
} plan_sink;

static void sink_write(plan_sink *s, const char *b, size_t n, int digest)
{
    if (s->f && fwrite(b, 1, n, s->f) != n)
        s->oom = s->oom ? s->oom : -EIO;
    if (digest)
        sha256_update(&s->c, b, n);
    if (s->old && !s->differs && (s->off + n > s->old_len || memcmp(s->old + s->off, b, n)))
        s->differs = 1;
    s->off += n;
}

/* One line into the sink, digested when `digest` (the class and input lines). */
static void sink_printf(plan_sink *s, int digest, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void sink_printf(plan_sink *s, int digest, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->line, s->cap, fmt, ap);
    va_end(ap);
    if (n < 0) {
        s->oom = -EINVAL;
        return;
    }
    if ((size_t)n >= s->cap) {
        char *b = realloc(s->line, (size_t)n + 256);
        if (!b) {
            s->oom = -ENOMEM;
            return;
        }
        s->line = b;
        s->cap = (size_t)n + 256;
        va_start(ap, fmt);
        vsnprintf(s->line, s->cap, fmt, ap);
        va_end(ap);
    }
    sink_write(s, s->line, (size_t)n, digest);
}

/* s escaped as put_escaped writes it: s itself when nothing needs escaping, else *buf. NULL
 * when out of memory. */
static const char *escape_into(const char *s, char **buf, size_t *cap)
{
    if (!strpbrk(s, "\\\t\n\r"))
        return s;
    size_t need = strlen(s) * 2 + 1;
    if (need > *cap) {
        char *b = realloc(*buf, need);
        if (!b)
            return NULL;
        *buf = b;
        *cap = need;
    }
    char *o = *buf;
    for (; *s; s++) {
        char e = *s == '\\' ? '\\' : *s == '\t' ? 't' : *s == '\n' ? 'n' : *s == '\r' ? 'r' : 0;
        if (e) {
            *o++ = '\\';
            *o++ = e;
        } else {
            *o++ = *s;
        }
    }
    *o = 0;
    return *buf;
}

static void put_source(FILE *f, const pd_pack_opts *po)
{
    const char *srcs[2] = {po->src, NULL};
    if (po->so.idx_images)
        srcs[0] = po->so.idx_images, srcs[1] = po->so.idx_labels;
    else if (po->so.csv)
        srcs[0] = po->so.csv;
    else if (po->so.coco)
        srcs[0] = po->so.coco, srcs[1] = po->so.root;
    else if (po->so.jsonl)
        srcs[0] = po->so.jsonl;
    else if (po->so.wds)
        srcs[0] = po->so.wds;
    else if (po->so.mask_dir)
        srcs[1] = po->so.mask_dir;
    fputs("source", f);
    for (int i = 0; i < 2; i++) {
        if (!srcs[i])
            continue;
        char *r = realpath(srcs[i], NULL);
        fputc('\t', f);
        put_escaped(f, r ? r : srcs[i]);
        free(r);
    }
    fputc('\n', f);
}

/* Option members compared by --resume: all but where SRC was (compared as a real path) and what
 * is derived from the data (the trained dictionary's size) or from the inputs (their digest). */
static int option_compared(const char *key)
{
    return strcmp(key, "source") && strcmp(key, "dictionary_bytes") && strcmp(key, "inputs");
}

/* The digest of an item's field values (boxes, class lists, masks ...) as 16 hex digits in
 * `out`: an annotation edited between a killed run and its --resume makes another job. A value
 * read from a file stands as its path, size and modification time, like an image. */
static void values_stamp(const pd_items *items, const pd_item *it, char out[17])
{
    sha256_ctx c;
    sha256_init(&c);
    for (uint32_t k = 0; it->values && k < items->num_fields; k++) {
        const pd_value *v = &it->values[k];
        uint64_t head[3] = {(uint64_t)v->kind, v->count, v->len};
        sha256_update(&c, head, sizeof head);
        if (v->kind == PD_VAL_DATA || v->kind == PD_VAL_SEGMENTS) {
            if (v->len)
                sha256_update(&c, v->data, v->len);
        } else if (v->kind == PD_VAL_FILE && v->path) {
            struct stat st;
            long long st_v[2] = {-1, -1};
            if (!stat(v->path, &st)) {
                st_v[0] = (long long)st.st_size;
                st_v[1] = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
            }
            sha256_update(&c, v->path, strlen(v->path) + 1);
            sha256_update(&c, st_v, sizeof st_v);
        }
    }
    uint8_t dg[32];
    char hex[65];
    sha256_final(&c, dg);
    sha256_hex(dg, hex);
    memcpy(out, hex, 16);
    out[16] = 0;
}

/* The plan's first lines: its version, the source and the options compared by --resume. A
 * malloc'ed text, NULL when out of memory. */
static char *job_head(const pd_pack_opts *po, const pd_items *items, const pd_plan *plan,
                      size_t *len)
{
    char *opts = pd_options_json(po, plan, items, 0, 0, NULL);
    if (!opts)
        return NULL;
    fl_jdoc *doc = NULL;
    fl_error err;
    if (fl_jparse(opts, strlen(opts), "options", &doc, &err)) {
        free(opts);
        return NULL;
    }
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (f) {
        fputs(PLAN_HEADER, f);
        put_source(f, po);
        for (const fl_jnode *m = fl_jroot(doc)->child; m; m = m->next) {
            if (!option_compared(m->key))
                continue;
            fprintf(f, "option\t%s\t%.*s\n", m->key, (int)(m->src_end - m->src_begin),
                    opts + m->src_begin);
        }
        if (fclose(f)) {
            free(text);
            text = NULL;
        }
    }
    fl_jfree(doc);
    free(opts);
    return text;
}

/* Make the job: its head, the count and digest of its inputs, one stat per file input (its size
 * and modification time). The plan's text goes to `f` when not NULL, and is compared with `old`
 * (*differs) when that is not NULL; it is never held in memory. Returns 0, -ENOMEM, or -EIO
 * (writing f failed). */
static int job_make(const pd_pack_opts *po, const pd_items *items, const pd_plan *plan, FILE *f,
                    const char *old, size_t old_len, pd_job *j, int *differs)
{
    memset(j, 0, sizeof *j);
    j->head = job_head(po, items, plan, &j->head_len);
    if (!j->head)
        return -ENOMEM;
    plan_sink sk;
    memset(&sk, 0, sizeof sk);
    sk.f = f;
    sk.old = old;
    sk.old_len = old_len;
    sha256_init(&sk.c);
    sink_write(&sk, j->head, j->head_len, 0);
    char *ebuf = NULL, *path = NULL;
    size_t ecap = 0, pcap = 0;
    for (uint32_t i = 0; i < items->num_classes && !sk.oom; i++) {
        const char *e = escape_into(items->class_names[i], &ebuf, &ecap);
        if (!e)
            sk.oom = -ENOMEM;
        else
            sink_printf(&sk, 1, "class\t%u\t%s\n", i, e);
    }
    for (size_t i = 0; i < items->n && !sk.oom; i++) {
        pd_item tmp;
        const pd_item *it = pd_items_get(items, i, &tmp, &path, &pcap);
        const char *e = it ? escape_into(it->name, &ebuf, &ecap) : NULL;
        if (!e) {
            sk.oom = -ENOMEM;
            break;
        }
        char stamp[96];
        unsigned long long size = 0;
        if (it->pixels) {
            /* in-memory pixels (IDX, CIFAR): their content stands for size and time */
            size = (unsigned long long)it->height * it->width * it->channels;
            snprintf(stamp, sizeof stamp, "crc32c:%08x", fl_crc32c(0, it->pixels, size));
        } else if (it->member) {
            /* a tar member: where it sits in which version of the tar */
            size = it->member->size;
            snprintf(stamp, sizeof stamp, "tar:%s@%llu#%llu", pd_archive_stamp(it->member->ar),
                     (unsigned long long)it->member->offset, (unsigned long long)it->member->entry);
        } else if (!it->path) {
            snprintf(stamp, sizeof stamp, "no-image"); /* --no-image: its values say it all */
        } else {
            struct stat st;
            if (stat(it->path, &st) == 0) {
                size = (unsigned long long)st.st_size;
                snprintf(stamp, sizeof stamp, "%lld",
                         (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec);
            } else {
                snprintf(stamp, sizeof stamp, "missing");
            }
        }
        if (items->num_fields) {
            char vs[17];
            values_stamp(items, it, vs);
            sink_printf(&sk, 1, "input\t%s\t%d\t%llu\t%s\tfields:%s\n", e, it->label, size, stamp,
                        vs);
        } else {
            sink_printf(&sk, 1, "input\t%s\t%d\t%llu\t%s\n", e, it->label, size, stamp);
        }
    }
    free(ebuf);
    free(path);
    free(sk.line);
    if (sk.oom)
        return sk.oom == -EIO ? -EIO : -ENOMEM;
    if (differs)
        *differs = sk.differs || sk.off != old_len;
    uint8_t dg[32];
    sha256_final(&sk.c, dg);
    sha256_hex(dg, j->sha256);
    j->count = items->n;
    int n = asprintf(&j->summary, "%.*sinputs\t%llu\t%s\n", (int)j->head_len, j->head,
                     (unsigned long long)j->count, j->sha256);
    if (n < 0) {
        j->summary = NULL;
        return -ENOMEM;
    }
    j->summary_len = (size_t)n;
    return 0;
}

void pd_job_free(pd_job *j)
{
    free(j->head);
    j->head = NULL;
    free(j->summary);
    j->summary = NULL;
    if (j->plan_file)
        unlink(j->plan_file);
    free(j->plan_file);
    j->plan_file = NULL;
}

void pd_job_keep(pd_job *j)
{
    free(j->plan_file);
    j->plan_file = NULL;
}

void pd_job_done(const pd_dst *d)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s.partial.plan", d->dst);
    unlink(p);
}

/* ---- comparing jobs ------------------------------------------------------------------------- */

typedef struct plan_lines {
    char *text; /* a copy, split in place */
    char **v;
    size_t n, cap;
} plan_lines;

static int lines_split(const char *text, size_t len, plan_lines *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->text = malloc(len + 1);
    if (!pl->text)
        return -ENOMEM;
    memcpy(pl->text, text, len);
    pl->text[len] = '\0';
    for (char *s = pl->text; *s;) {
        char *e = strchr(s, '\n');
        if (e)
            *e = '\0';
        if (pl->n == pl->cap) {
            size_t cap = pl->cap ? pl->cap * 2 : 256;
            char **v = realloc(pl->v, cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            pl->v = v;
            pl->cap = cap;
        }
        pl->v[pl->n++] = s;
        if (!e)
            break;
        s = e + 1;
    }
    return 0;
}

static void lines_free(plan_lines *pl)
{
    free(pl->text);
    free(pl->v);
}

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* field k (0-based) of a tab-separated line: pointer and length */
static const char *field(const char *s, int k, size_t *len)
{
    for (int i = 0; i < k && s; i++) {
        s = strchr(s, '\t');
        if (s)
            s++;
    }
    if (!s) {
        *len = 0;
        return "";
    }
    const char *e = strchr(s, '\t');
    *len = e ? (size_t)(e - s) : strlen(s);
    return s;
}

static int field_eq(const char *a, const char *b, int k)
{
    size_t la, lb;
    const char *fa = field(a, k, &la), *fb = field(b, k, &lb);
    return la == lb && !memcmp(fa, fb, la);
}

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* The header line (packdata's version) and the source line of two plans. Sets *ia / *ib to the
 * first line after the source lines. Returns 0 when they are the same, 1 when they differ (why). */
static int plan_source_diff(const plan_lines *A, const plan_lines *B, size_t *ia, size_t *ib,
                            char *why, size_t cap)
{
    if (A->n == 0 || B->n == 0 || strcmp(A->v[0], B->v[0])) {
        snprintf(why, cap, "it was recorded by another version of packdata");
        return 1;
    }
    for (*ia = 1; *ia < A->n && starts(A->v[*ia], "source\t"); (*ia)++) {
    }
    for (*ib = 1; *ib < B->n && starts(B->v[*ib], "source\t"); (*ib)++) {
    }
    if (*ia != 2 || *ib != 2 || strcmp(A->v[1], B->v[1])) {
        size_t la, lb;
        const char *sa = *ia > 1 ? field(A->v[1], 1, &la) : "",
                   *sb = *ib > 1 ? field(B->v[1], 1, &lb) : "";
        if (*ia <= 1)
            la = 0;
        if (*ib <= 1)
            lb = 0;
        snprintf(why, cap, "another source: the interrupted run packed %.*s, this run reads %.*s",
                 (int)(la > 400 ? 400 : la), sa, (int)(lb > 400 ? 400 : lb), sb);
        return 1;
    }
    return 0;
}

/* The option lines from A->v[ia] / B->v[ib] on, compared by name in either order. Sets *oa / *ob
 * to the first line after them. Returns 0 when they are the same, 1 when they differ (why). */
static int plan_options_diff(const plan_lines *A, const plan_lines *B, size_t ia, size_t ib,
                             size_t *oa, size_t *ob, char *why, size_t cap)
{
    for (*oa = ia; *oa < A->n && starts(A->v[*oa], "option\t"); (*oa)++) {
    }
    for (*ob = ib; *ob < B->n && starts(B->v[*ob], "option\t"); (*ob)++) {
    }
    for (size_t i = ib; i < *ob; i++) {
        size_t kl, vl;
        const char *k = field(B->v[i], 1, &kl), *v = field(B->v[i], 2, &vl);
        size_t j = ia;
        while (j < *oa && !field_eq(A->v[j], B->v[i], 1))
            j++;
        if (j == *oa) {
            snprintf(why, cap, "option \"%.*s\" is new in this run (%.*s)", (int)kl, k,
                     (int)(vl > 200 ? 200 : vl), v);
            return 1;
        }
        if (!field_eq(A->v[j], B->v[i], 2)) {
            size_t ol;
            const char *o = field(A->v[j], 2, &ol);
            snprintf(why, cap, "option \"%.*s\" differs: %.*s in the interrupted run, %.*s now",
                     (int)kl, k, (int)(ol > 200 ? 200 : ol), o, (int)(vl > 200 ? 200 : vl), v);
            return 1;
        }
    }
    for (size_t j = ia; j < *oa; j++) {
        size_t i = ib;
        while (i < *ob && !field_eq(A->v[j], B->v[i], 1))
            i++;
        if (i == *ob) {
            size_t kl;
            const char *k = field(A->v[j], 1, &kl);
            snprintf(why, cap, "option \"%.*s\" of the interrupted run is not in this one", (int)kl,
                     k);
            return 1;
        }
    }
    return 0;
}

/* The class lines from A->v[oa] / B->v[ob] on, in order. Sets *ca / *cb to the first line after
 * them. Returns 0 when they are the same, 1 when they differ (why). */
static int plan_classes_diff(const plan_lines *A, const plan_lines *B, size_t oa, size_t ob,
                             size_t *ca, size_t *cb, char *why, size_t cap)
{
    for (*ca = oa; *ca < A->n && starts(A->v[*ca], "class\t"); (*ca)++) {
    }
    for (*cb = ob; *cb < B->n && starts(B->v[*cb], "class\t"); (*cb)++) {
    }
    if (*ca - oa != *cb - ob) {
        snprintf(why, cap, "%zu classes in the interrupted run, %zu now", *ca - oa, *cb - ob);
        return 1;
    }
    for (size_t i = 0; i < *ca - oa; i++) {
        if (strcmp(A->v[oa + i], B->v[ob + i])) {
            size_t la, lb;
            const char *na = field(A->v[oa + i], 2, &la), *nb = field(B->v[ob + i], 2, &lb);
            snprintf(why, cap, "class %zu was \"%.*s\", now \"%.*s\"", i,
                     (int)(la > 200 ? 200 : la), na, (int)(lb > 200 ? 200 : lb), nb);
            return 1;
        }
    }
    return 0;
}

/* How the input lines of two plans differ: counts and the first name of each kind. */
typedef struct input_changes {
    size_t added, changed, removed, moved;
    const char *first_added, *first_changed, *first_removed;
    size_t fa_len, fc_len, fr_len;
    const char *what; /* how first_changed changed */
} input_changes;

/* Matches the input lines A->v[ca..] and B->v[cb..] by name (a hash table over A's) and counts
 * the added, removed, changed and moved ones. Returns 0 or -ENOMEM. */
static int inputs_compare(const plan_lines *A, const plan_lines *B, size_t ca, size_t cb,
                          input_changes *ic)
{
    size_t na = A->n - ca, nb = B->n - cb;
    size_t hcap = 16;
    while (hcap < na * 2)
        hcap *= 2;
    size_t *ht = malloc(hcap * sizeof *ht); /* index + 1 into A, 0 = empty */
    uint8_t *seen = calloc(na ? na : 1, 1);
    if (!ht || !seen) {
        free(ht);
        free(seen);
        return -ENOMEM;
    }
    memset(ht, 0, hcap * sizeof *ht);
    for (size_t i = 0; i < na; i++) {
        size_t l;
        const char *n = field(A->v[ca + i], 1, &l);
        size_t h = (size_t)fnv(n, l) & (hcap - 1);
        while (ht[h])
            h = (h + 1) & (hcap - 1);
        ht[h] = i + 1;
    }
    memset(ic, 0, sizeof *ic);
    ic->what = "";
    for (size_t i = 0; i < nb; i++) {
        const char *line = B->v[cb + i];
        size_t l;
        const char *n = field(line, 1, &l);
        size_t h = (size_t)fnv(n, l) & (hcap - 1), found = 0;
        while (ht[h]) {
            if (field_eq(A->v[ca + ht[h] - 1], line, 1)) {
                found = ht[h];
                break;
            }
            h = (h + 1) & (hcap - 1);
        }
        if (!found) {
            if (!ic->added++)
                ic->first_added = n, ic->fa_len = l;
            continue;
        }
        const char *old = A->v[ca + found - 1];
        seen[found - 1] = 1;
        if (found - 1 != i)
            ic->moved++;
        if (!strcmp(old, line))
            continue;
        if (!ic->changed++) {
            ic->first_changed = n, ic->fc_len = l;
            ic->what = !field_eq(old, line, 3) ? "changed size"
                       : !field_eq(old, line, 4)
                           ? "was modified (another modification time or content)"
                       : !field_eq(old, line, 2) ? "has another label"
                       : !field_eq(old, line, 5) ? "has other field values (boxes, masks, ...)"
                                                 : "changed";
        }
    }
    for (size_t i = 0; i < na; i++)
        if (!seen[i] && !ic->removed++)
            ic->first_removed = field(A->v[ca + i], 1, &ic->fr_len);
    free(ht);
    free(seen);
    return 0;
}

/* Says (in why) how the inputs changed; something is always said. */
static void inputs_describe(const input_changes *ic, char *why, size_t cap)
{
    size_t o = 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (o < cap)                                                                               \
            o += (size_t)snprintf(why + o, cap - o, __VA_ARGS__);                                  \
    } while (0)
    if (ic->added)
        APPEND("%zu input%s added, first: %.*s", ic->added, ic->added == 1 ? "" : "s",
               (int)(ic->fa_len > 300 ? 300 : ic->fa_len), ic->first_added);
    if (ic->removed)
        APPEND("%s%zu input%s removed, first: %.*s", o ? "; " : "", ic->removed,
               ic->removed == 1 ? "" : "s", (int)(ic->fr_len > 300 ? 300 : ic->fr_len),
               ic->first_removed);
    if (ic->changed) {
        APPEND("%s%.*s %s", o ? "; " : "", (int)(ic->fc_len > 300 ? 300 : ic->fc_len),
               ic->first_changed, ic->what);
        if (ic->changed > 1)
            APPEND(" (and %zu more inputs changed)", ic->changed - 1);
    }
    if (!o && ic->moved)
        APPEND("the inputs are the same but in another order");
    if (!o)
        APPEND("the recorded plan differs");
#undef APPEND
}

/* Say (in `why`) how plan `b` (this run) differs from plan `a` (the earlier run): the first of
 * version, source, options, classes and inputs that differs. Returns 0 when they are the same, 1
 * when they differ, -ENOMEM. */
static int plan_diff(const char *a, size_t alen, const char *b, size_t blen, char *why, size_t cap)
{
    why[0] = '\0';
    if (alen == blen && !memcmp(a, b, alen))
        return 0;
    plan_lines A = {0}, B = {0};
    if (lines_split(a, alen, &A) || lines_split(b, blen, &B)) {
        lines_free(&A);
        lines_free(&B);
        return -ENOMEM;
    }
    int rc = 1;
    size_t ia, ib, oa, ob, ca, cb;
    input_changes ic;
    if (!plan_source_diff(&A, &B, &ia, &ib, why, cap) &&
        !plan_options_diff(&A, &B, ia, ib, &oa, &ob, why, cap) &&
        !plan_classes_diff(&A, &B, oa, ob, &ca, &cb, why, cap)) {
        rc = inputs_compare(&A, &B, ca, cb, &ic);
        if (!rc) {
            inputs_describe(&ic, why, cap);
            rc = 1;
        }
    }
    lines_free(&A);
    lines_free(&B);
    return rc;
}

/* Compare this job with the finished dataset's manifest: 0 same, 1 different (why), <0 error. */
static int manifest_diff(const char *dst, const pd_job *j, char *why, size_t cap)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/manifest.json", dst);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, cap, "%.400s: %s", path, strerror(errno));
        return 1;
    }
    char *text = NULL;
    size_t len = 0, capt = 0;
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        if (len + k > capt) {
            capt = (len + k) * 2;
            char *t = realloc(text, capt);
            if (!t) {
                free(text);
                fclose(f);
                return -ENOMEM;
            }
            text = t;
        }
        memcpy(text + len, buf, k);
        len += k;
    }
    fclose(f);
    fl_jdoc *doc = NULL;
    fl_error err;
    if (fl_jparse(text ? text : "", len, path, &doc, &err)) {
        snprintf(why, cap, "%s", err.msg);
        free(text);
        return 1;
    }
    int rc = 1;
    const fl_jnode *opts = fl_jget(fl_jroot(doc), "options");
    /* the options this run would record, compared member by member */
    plan_lines B;
    if (lines_split(j->head, j->head_len, &B)) {
        rc = -ENOMEM;
        goto out;
    }
    if (!opts || opts->type != FL_J_OBJECT) {
        snprintf(why, cap, "its manifest records no packing options");
        goto out_lines;
    }
    for (size_t i = 0; i < B.n; i++) {
        if (!starts(B.v[i], "option\t"))
            continue;
        size_t kl, vl;
        const char *kk = field(B.v[i], 1, &kl), *v = field(B.v[i], 2, &vl);
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(kl < 127 ? kl : 127), kk);
        const fl_jnode *m = fl_jget(opts, key);
        if (!m) {
            snprintf(why, cap, "option \"%s\" is not recorded in it (packed by another version)",
                     key);
            goto out_lines;
        }
        size_t ml = m->src_end - m->src_begin;
        if (ml != vl || memcmp(text + m->src_begin, v, vl)) {
            snprintf(why, cap, "option \"%s\" differs: %.*s in %s, %.*s now", key,
                     (int)(ml > 200 ? 200 : ml), text + m->src_begin, dst,
                     (int)(vl > 200 ? 200 : vl), v);
            goto out_lines;
        }
    }
    for (const fl_jnode *m = opts->child; m; m = m->next) {
        if (!option_compared(m->key))
            continue;
        int found = 0;
        for (size_t i = 0; i < B.n && !found; i++) {
            size_t kl;
            const char *kk = field(B.v[i], 1, &kl);
            found = starts(B.v[i], "option\t") && kl == strlen(m->key) && !memcmp(kk, m->key, kl);
        }
        if (!found) {
            snprintf(why, cap, "option \"%s\" of %s is not in this run", m->key, dst);
            goto out_lines;
        }
    }
    const fl_jnode *in = fl_jget(opts, "inputs");
    const fl_jnode *cnt = fl_jget(in, "count"), *sha = fl_jget(in, "sha256");
    if (!in || !cnt || !sha || !cnt->is_int || sha->type != FL_J_STRING) {
        snprintf(why, cap,
                 "it records no digest of its inputs (packed by an older packdata), so "
                 "it cannot be checked against SRC");
        goto out_lines;
    }
    if ((uint64_t)cnt->ival != j->count) {
        snprintf(why, cap, "it was packed from %lld inputs, SRC now has %llu", (long long)cnt->ival,
                 (unsigned long long)j->count);
        goto out_lines;
    }
    if (strcmp(sha->str, j->sha256)) {
        snprintf(why, cap,
                 "SRC's inputs changed since it was packed (same number, %llu, but other "
                 "names, labels, sizes, modification times or classes)",
                 (unsigned long long)j->count);
        goto out_lines;
    }
    rc = 0;
out_lines:
    lines_free(&B);
out:
    fl_jfree(doc);
    free(text);
    return rc;
}

static void print_complete(const pd_pack_opts *po, const char *dst, uint64_t records)
{
    if (po->json) {
        fl_json j;
        fl_json_init(&j);
        fl_json_begin_object(&j);
        fl_json_key(&j, "dst");
        fl_json_string(&j, dst);
        fl_json_key(&j, "already_complete");
        fl_json_bool(&j, 1);
        fl_json_key(&j, "records");
        fl_json_uint(&j, records);
        fl_json_end_object(&j);
        if (!fl_json_failed(&j))
            puts(fl_json_text(&j));
        fl_json_free(&j);
    } else if (!po->quiet) {
        printf("%s is already complete (%llu records, same options and inputs): nothing to do\n",
               dst, (unsigned long long)records);
    }
}

/* The whole plan of a fresh run into DST.partial.plan, beside DST.partial (whose plan.txt holds
 * its short form). Returns -1 to go on, else the exit status (printed). */
static int job_write(const pd_pack_opts *po, const pd_dst *d, const pd_items *items,
                     const pd_plan *plan, pd_job *j)
{
    char *file = NULL;
    if (asprintf(&file, "%s.partial.plan", d->dst) < 0) {
        fl_cli_error(PD_TOOL, "out of memory");
        return FL_EXIT_DATA;
    }
    FILE *f = fopen(file, "w");
    if (!f) {
        fl_cli_error(PD_TOOL, "cannot write %s: %s", file, strerror(errno));
        free(file);
        return FL_EXIT_DATA;
    }
    int r = job_make(po, items, plan, f, NULL, 0, j, NULL);
    j->plan_file = file; /* removed by pd_job_free unless kept (pd_job_keep) */
    if (!r && (fflush(f) || fsync(fileno(f))))
        r = -errno;
    if (fclose(f) && !r)
        r = -EIO;
    if (r == -ENOMEM) {
        fl_cli_error(PD_TOOL, "out of memory");
        return FL_EXIT_DATA;
    }
    if (r) {
        fl_cli_error(PD_TOOL, "cannot write %s: %s", file, strerror(-r));
        return FL_EXIT_DATA;
    }
    return -1;
}

int pd_dst_job(const pd_pack_opts *po, pd_dst *d, const pd_items *items, const pd_plan *plan,
               pd_job *j, int *fresh)
{
    memset(j, 0, sizeof *j);
    *fresh = 1;
    char why[1200];
    if (po->resume && d->info.partial == FL_PARTIAL_RESUMABLE) {
        if (!d->info.plan) {
            fl_cli_error(PD_TOOL,
                         "cannot resume %s.partial: it records no plan of its inputs (it was "
                         "started by an older packdata, or killed as it started), so they cannot "
                         "be checked; run without --resume and with --force to start over",
                         d->dst);
            return FL_EXIT_USAGE;
        }
        /* plan.txt is the short form (head + the inputs' count and digest; the whole plan is
         * DST.partial.plan beside it), or the whole plan (an older packdata) */
        const int short_form = !strstr(d->info.plan, "\ninput\t");
        int differs = 0;
        int r = short_form
                    ? job_make(po, items, plan, NULL, NULL, 0, j, NULL)
                    : job_make(po, items, plan, NULL, d->info.plan, d->info.plan_len, j, &differs);
        if (r) {
            fl_cli_error(PD_TOOL, "out of memory");
            return FL_EXIT_DATA;
        }
        char *older = NULL; /* the earlier whole plan, to say what differs */
        size_t older_len = 0;
        if (short_form) {
            differs = d->info.plan_len != j->summary_len ||
                      memcmp(d->info.plan, j->summary, j->summary_len) != 0;
            char p[PATH_MAX + 32];
            snprintf(p, sizeof p, "%s.partial.plan", d->dst);
            fl_error e2;
            if (differs &&
                (pd_read_file(p, 0, (size_t)1 << 40, (uint8_t **)&older, &older_len, &e2) ||
                 !memmem(older, older_len, "\ninput\t", 7))) {
                /* no whole plan to compare with: the source and options, else the digest */
                free(older);
                older = NULL;
                const char *in = strstr(d->info.plan, "\ninputs\t");
                size_t ol = in ? (size_t)(in - d->info.plan) + 1 : d->info.plan_len;
                r = plan_diff(d->info.plan, ol, j->head, j->head_len, why, sizeof why);
                if (r < 0) {
                    fl_cli_error(PD_TOOL, "out of memory");
                    return FL_EXIT_DATA;
                }
                if (!r)
                    snprintf(why, sizeof why,
                             "its inputs changed since it was started (%s.partial.plan, which "
                             "would name them, is gone: %llu inputs now)",
                             d->dst, (unsigned long long)j->count);
                fl_cli_error(PD_TOOL,
                             "cannot resume %s.partial: this is not the job it was started "
                             "for: %s; run without --resume (with --force) to start over with "
                             "these inputs and options",
                             d->dst, why);
                return FL_EXIT_USAGE;
            }
        } else {
            older = d->info.plan;
            older_len = d->info.plan_len;
        }
        if (differs) {
            /* say what differs: this run's plan in memory, once, beside the earlier one */
            char *text = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&text, &len);
            pd_job j2;
            r = f ? job_make(po, items, plan, f, NULL, 0, &j2, NULL) : -ENOMEM;
            if (f && fclose(f) && !r)
                r = -ENOMEM;
            if (f)
                pd_job_free(&j2);
            if (!r)
                r = plan_diff(older, older_len, text, len, why, sizeof why);
            free(text);
            if (older != d->info.plan)
                free(older);
            if (r < 0) {
                fl_cli_error(PD_TOOL, "out of memory");
                return FL_EXIT_DATA;
            }
            fl_cli_error(PD_TOOL,
                         "cannot resume %s.partial: this is not the job it was started "
                         "for: %s; run without --resume (with --force) to start over with these "
                         "inputs and options",
                         d->dst, r ? why : "the inputs changed while they were compared");
            return FL_EXIT_USAGE;
        }
        /* the same job: the earlier plan is not needed any more */
        free(d->info.plan);
        d->info.plan = NULL;
        d->info.plan_len = 0;
        if (d->info.dst == FL_DST_DATASET && !po->force) {
            fl_cli_error(PD_TOOL,
                         "%s exists and %s.partial is an interrupted run that replaces "
                         "it: run the same command with --force --resume to finish it",
                         d->dst, d->dst);
            return FL_EXIT_DATA;
        }
        *fresh = 0;
        return -1;
    }
    if (po->resume && d->info.dst == FL_DST_DATASET) {
        /* DST is a dataset packdata published (its manifest, the files it lists and nothing
         * else: fl_writer_inspect), which happens only once complete. It is not opened here:
         * that would load the index of every record; `packdata verify` checks its contents */
        const uint64_t records = d->info.records;
        {
            /* the inputs' digest only: no plan is written or kept */
            int r = job_make(po, items, plan, NULL, NULL, 0, j, NULL);
            if (!r)
                r = manifest_diff(d->dst, j, why, sizeof why);
            if (r < 0) {
                fl_cli_error(PD_TOOL, "out of memory");
                return FL_EXIT_DATA;
            }
            if (r == 0) {
                if (d->info.partial == FL_PARTIAL_STALE) {
                    /* left by a run killed while publishing or clearing: ours, and of no use */
                    fl_error e2;
                    fl_writer_remove_partial(d->dst, &e2);
                }
                /* DST.partial.plan, left by a run killed after it published DST (under our
                 * lock: no run is writing DST) */
                pd_job_done(d);
                print_complete(po, d->dst, records);
                return FL_EXIT_OK;
            }
            if (!po->force) {
                fl_cli_error(PD_TOOL,
                             "%s is complete but is not this job: %s; pass --force to replace it",
                             d->dst, why);
                return FL_EXIT_USAGE;
            }
            pd_job_free(j);
        }
    }
    return job_write(po, d, items, plan, j);
}
