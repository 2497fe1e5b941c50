/* src_csv.c — CSV sources: a header row naming the columns, then one image per row (or, under
 * --no-image, one record of --field values). Fields follow RFC 4180 (quotes, "" inside quotes,
 * CRLF or LF); the path and label columns are chosen by name (--path-column, --label-column).
 * Paths are relative to --root (default: the CSV's folder). */
#include "packdata.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct csv_row {
    char **f;
    size_t n, cap;
    char *buf;
    size_t blen, bcap;
} csv_row;

static int push_char(csv_row *r, char c)
{
    if (r->blen + 1 >= r->bcap) {
        size_t nc = r->bcap ? r->bcap * 2 : 256;
        char *b = realloc(r->buf, nc);
        if (!b)
            return -1;
        r->buf = b;
        r->bcap = nc;
    }
    r->buf[r->blen++] = c;
    return 0;
}

/* Parse one record starting at *pos. Fields are NUL-separated in r->buf; r->f holds offsets
 * (as pointers after the record is complete). Returns 1 when a record was read, 0 at the end,
 * -1 on a malformed record (unterminated quote), -2 out of memory. *lines counts newlines. */
static int csv_next(const char *d, size_t len, size_t *pos, csv_row *r, size_t *lines)
{
    size_t p = *pos;
    if (p >= len)
        return 0;
    r->n = 0;
    r->blen = 0;
    size_t starts[4096];
    size_t ns = 0;
    starts[ns++] = 0;
    int quoted = 0, at_start = 1;
    for (;;) {
        if (p >= len) {
            if (quoted)
                return -1;
            break;
        }
        char c = d[p];
        if (quoted) {
            if (c == '"') {
                if (p + 1 < len && d[p + 1] == '"') {
                    if (push_char(r, '"'))
                        return -2;
                    p += 2;
                    continue;
                }
                quoted = 0;
                p++;
                continue;
            }
            if (c == '\n')
                (*lines)++;
            if (push_char(r, c))
                return -2;
            p++;
            continue;
        }
        if (c == '"' && at_start) {
            quoted = 1;
            at_start = 0;
            p++;
            continue;
        }
        if (c == ',') {
            if (push_char(r, 0))
                return -2;
            if (ns == 4096)
                return -1;
            starts[ns++] = r->blen;
            at_start = 1;
            p++;
            continue;
        }
        if (c == '\r' && p + 1 < len && d[p + 1] == '\n') {
            p++;
            continue;
        }
        if (c == '\n') {
            (*lines)++;
            p++;
            break;
        }
        if (push_char(r, c))
            return -2;
        at_start = 0;
        p++;
    }
    if (push_char(r, 0))
        return -2;
    if (ns > r->cap) {
        char **f = realloc(r->f, ns * sizeof *f);
        if (!f)
            return -2;
        r->f = f;
        r->cap = ns;
    }
    for (size_t i = 0; i < ns; i++)
        r->f[i] = r->buf + starts[i];
    r->n = ns;
    *pos = p;
    return 1;
}

int pd_src_csv(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
               fl_error *err)
{
    pd_listing lst;
    int r = pd_listing_open(&lst, file, so, err);
    if (r)
        return r;
    const char *d = (const char *)lst.data;
    size_t len = lst.len, pos = lst.start, lines = 0; /* past a UTF-8 byte order mark */
    const char *pc = so->path_column ? so->path_column : "path";
    const char *lc = so->label_column ? so->label_column : "label";
    csv_row row = {0};
    long ip = -1, il = -1;
    size_t ncols = 0;
    int how = PD_LISTING_DONE;
    int k = csv_next(d, len, &pos, &row, &lines);
    if (k == -2) {
        how = PD_LISTING_OOM;
        goto done;
    }
    if (k <= 0) {
        how = fl_error_set(err, FL_E_FORMAT, "%s: %s", file,
                           k == 0 ? "empty CSV: expected a header row" : "malformed header row");
        goto done;
    }
    ncols = row.n;
    for (size_t i = 0; i < row.n; i++) {
        char *f = row.f[i];
        size_t l = strlen(f);
        while (l && (f[l - 1] == ' ' || f[l - 1] == '\r'))
            f[--l] = 0;
        while (*f == ' ')
            f++;
        if (!strcmp(f, pc) && ip < 0)
            ip = (long)i;
        if (!strcmp(f, lc) && il < 0)
            il = (long)i;
    }
    long fcol[FL_MAX_FIELDS];
    int with_fields = so->n_field_specs > 0;
    if (with_fields) {
        /* --field: the label column becomes optional (regression, tensors) */
        char why[300];
        if (pd_fields_begin(out, so, il >= 0, why, sizeof why)) {
            how = fl_error_set(err, FL_E_INVALID, "%s", why);
            goto done;
        }
        for (uint32_t f = 0; f < out->num_fields; f++) {
            fcol[f] = -1;
            for (size_t i = 0; i < row.n; i++)
                if (!strcmp(row.f[i], out->fields[f].name) && fcol[f] < 0)
                    fcol[f] = (long)i;
            /* every field but the image and a label from the label column has its column (a
             * declared int that becomes the label included) */
            int from_label_col =
                il >= 0 && f == (uint32_t)fl_fields_label_index(out->fields, out->num_fields);
            if (fcol[f] < 0 && out->fields[f].type != FL_FIELD_IMAGE && !from_label_col) {
                how = fl_error_set(err, FL_E_INVALID,
                                   "%s:1: header has no column named '%s' "
                                   "(--field %s)",
                                   file, out->fields[f].name, out->fields[f].name);
                goto done;
            }
        }
    }
    if ((ip < 0 && !so->no_image) || (il < 0 && !with_fields)) {
        int no_path = ip < 0 && !so->no_image;
        how = fl_error_set(err, FL_E_INVALID,
                           "%s:1: header has no column named '%s' (choose with "
                           "%s): columns are %s%s%s%s%s",
                           file, no_path ? pc : lc, no_path ? "--path-column" : "--label-column",
                           row.n > 0 ? row.f[0] : "", row.n > 1 ? ", " : "",
                           row.n > 1 ? row.f[1] : "", row.n > 2 ? ", ..." : "",
                           no_path ? "; rows of fields only (embeddings, features, tabular "
                                     "values) pack with --no-image"
                                   : "");
        goto done;
    }
    /* --no-image: the path column is not read (counted for the warning, unless a --field
     * packs it) */
    const int unread_path =
        so->no_image && ip >= 0 && fl_fields_find(out->fields, out->num_fields, pc) < 0;
    for (;;) {
        size_t line_no = lines + 1;
        k = csv_next(d, len, &pos, &row, &lines);
        if (k == 0)
            break;
        if (k == -2) {
            how = PD_LISTING_OOM;
            break;
        }
        char src[4200];
        snprintf(src, sizeof src, "%s:%zu", file, line_no);
        if (k == -1) {
            if (pd_reject(rc, src, "malformed CSV record (unterminated quote or too many fields)"))
                how = PD_LISTING_STOPPED;
            break; /* the rest of the file cannot be framed */
        }
        if (row.n == 1 && row.f[0][0] == 0)
            continue; /* blank line */
        if (row.n != ncols) {
            if (pd_reject(rc, src, "has %zu fields but the header has %zu", row.n, ncols)) {
                how = PD_LISTING_STOPPED;
                break;
            }
            continue;
        }
        const char *path = so->no_image ? NULL : row.f[ip];
        if (path && !*path) {
            if (pd_reject(rc, src, "empty path")) {
                how = PD_LISTING_STOPPED;
                break;
            }
            continue;
        }
        out->unread_paths += unread_path;
        size_t before = out->n;
        int added =
            so->no_image
                ? pd_listing_add_row(&lst, out, rc, so, src, line_no, il >= 0 ? row.f[il] : NULL)
                : pd_listing_add(&lst, out, rc, so, src, path, il >= 0 ? row.f[il] : "0");
        if (added) {
            how = added < 0 ? PD_LISTING_OOM : PD_LISTING_STOPPED;
            break;
        }
        if (with_fields && out->n > before) {
            pd_item *it = &out->v[out->n - 1];
            if (!(it->values = pd_items_new_values(out))) {
                how = PD_LISTING_OOM;
                break;
            }
            int bad = 0;
            for (uint32_t f = 0; f < out->num_fields && !bad; f++) {
                /* the image, and the label column: pd_listing_add took them */
                int lab_f = f == (uint32_t)fl_fields_label_index(out->fields, out->num_fields);
                if (out->fields[f].type == FL_FIELD_IMAGE || (lab_f && il >= 0))
                    continue;
                char why[300];
                int vr = pd_field_value_text(out, &out->fields[f], row.f[fcol[f]], lst.root,
                                             &it->values[f], why, sizeof why);
                if (!vr && it->values[f].kind == PD_VAL_FILE && !so->allow_outside_root &&
                    pd_path_leaves(lst.root, row.f[fcol[f]]))
                    vr = -1, snprintf(why, sizeof why,
                                      "%.150s is outside %.60s: refused "
                                      "(--allow-outside-root packs it)",
                                      row.f[fcol[f]], lst.root);
                if (!vr && lab_f) { /* the first int --field is the label: its range too */
                    int32_t lv;
                    memcpy(&lv, it->values[f].data, 4);
                    vr = pd_check_label(lv, so, why, sizeof why);
                }
                if (vr == -ENOMEM) {
                    how = PD_LISTING_OOM;
                    bad = 2;
                } else if (vr) {
                    out->n--; /* not added after all */
                    bad = pd_reject(rc, src, "field %s: %s", out->fields[f].name, why) ? 2 : 1;
                    if (bad == 2)
                        how = PD_LISTING_STOPPED;
                } else if (lab_f) {
                    memcpy(&it->label, it->values[f].data, 4);
                    if (it->label > lst.max_label)
                        lst.max_label = it->label;
                    it->values[f].kind = PD_VAL_NONE;
                }
            }
            char why[300];
            if (!bad && pd_fields_check_row(out, it->values, why, sizeof why)) {
                out->n--; /* not added after all */
                bad = pd_reject(rc, src, "%s", why) ? 2 : 1;
                if (bad == 2)
                    how = PD_LISTING_STOPPED;
            }
            if (bad == 2)
                break;
        }
    }
done:
    free(row.f);
    free(row.buf);
    return pd_listing_end(&lst, how, out, so, "csv", err);
}
