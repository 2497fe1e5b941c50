/* src_jsonl.c — JSON Lines sources (`--jsonl FILE`): one JSON object per line with the image
 * path (key --path-column, default "path"; not read under --no-image, where a record is its
 * fields only), the label (--label-column, default "label"; optional when --field is given) and
 * one key per --field. Paths are relative to --root (default: the file's folder). Blank lines
 * are skipped; a line that is not an object, or lacks a key, is a bad input named FILE:LINE. */
#include "packdata.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fl_json.h"

int pd_src_jsonl(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                 fl_error *err)
{
    pd_listing lst;
    int r = pd_listing_open(&lst, file, so, err);
    if (r)
        return r;
    const char *pc = so->path_column ? so->path_column : "path";
    const char *lc = so->label_column ? so->label_column : "label";
    int how = PD_LISTING_DONE;
    int with_fields = so->n_field_specs > 0;
    int with_label = -1; /* decided by the first object: is there a label key? */
    const char *d = (const char *)lst.data;
    size_t pos = lst.start, line = 0;
    while (pos < lst.len) {
        const char *nl = memchr(d + pos, '\n', lst.len - pos);
        size_t end = nl ? (size_t)(nl - d) : lst.len;
        size_t b = pos, e = end;
        pos = end + 1;
        line++;
        while (b < e && (d[b] == ' ' || d[b] == '\t' || d[b] == '\r'))
            b++;
        while (e > b && (d[e - 1] == ' ' || d[e - 1] == '\t' || d[e - 1] == '\r'))
            e--;
        if (b == e)
            continue;
        char src[4200];
        snprintf(src, sizeof src, "%s:%zu", file, line);
        fl_jdoc *doc = NULL;
        fl_error je;
        r = fl_jparse(d + b, e - b, src, &doc, &je);
        if (r == -ENOMEM) {
            how = PD_LISTING_OOM;
            break;
        }
        const fl_jnode *o = doc ? fl_jroot(doc) : NULL;
        if (r || o->type != FL_J_OBJECT) {
            fl_jfree(doc);
            if (pd_reject(rc, src, "%s", r ? je.msg : "is not a JSON object")) {
                how = PD_LISTING_STOPPED;
                break;
            }
            continue;
        }
        const fl_jnode *jp = fl_jget(o, pc), *jl = fl_jget(o, lc);
        if (with_label < 0) {
            with_label = jl != NULL || !with_fields;
            char why[300];
            if (with_fields && pd_fields_begin(out, so, with_label, why, sizeof why)) {
                fl_jfree(doc);
                how = fl_error_set(err, FL_E_INVALID, "%s", why);
                break;
            }
        }
        const char *why0 = NULL;
        char lab[64] = "0";
        const int no_path = !jp || jp->type != FL_J_STRING || !jp->str_len;
        if (so->no_image && jp && fl_fields_find(out->fields, out->num_fields, pc) < 0)
            out->unread_paths++; /* not read: counted for the warning, unless a --field packs it */
        if (!so->no_image && no_path)
            why0 = "has no image path (key \"%s\"); rows of fields only (embeddings, "
                   "features, tabular values) pack with --no-image";
        else if (with_label && !jl)
            why0 = "has no label (key \"%s\")";
        else if (with_label && jl->type == FL_J_NUMBER && jl->is_int)
            snprintf(lab, sizeof lab, "%lld", (long long)jl->ival);
        else if (with_label && jl->type == FL_J_STRING)
            snprintf(lab, sizeof lab, "%.60s", jl->str);
        else if (with_label)
            why0 = "has a label (key \"%s\") that is neither an integer nor a class name";
        if (why0) {
            /* the key named is decided before the line's document (jp's memory) is freed */
            const char *key = !so->no_image && no_path ? pc : lc;
            fl_jfree(doc);
            if (pd_reject(rc, src, why0, key)) {
                how = PD_LISTING_STOPPED;
                break;
            }
            continue;
        }
        size_t before = out->n;
        int added = so->no_image
                        ? pd_listing_add_row(&lst, out, rc, so, src, line, with_label ? lab : NULL)
                        : pd_listing_add(&lst, out, rc, so, src, jp->str, lab);
        if (added) {
            fl_jfree(doc);
            how = added < 0 ? PD_LISTING_OOM : PD_LISTING_STOPPED;
            break;
        }
        int stop = 0;
        if (with_fields && out->n > before) {
            pd_item *it = &out->v[out->n - 1];
            if (!(it->values = pd_items_new_values(out))) {
                fl_jfree(doc);
                how = PD_LISTING_OOM;
                break;
            }
            for (uint32_t f = 0; f < out->num_fields; f++) {
                /* the image, and the label column: pd_listing_add took them */
                int lab_f = f == (uint32_t)fl_fields_label_index(out->fields, out->num_fields);
                if (out->fields[f].type == FL_FIELD_IMAGE || (lab_f && with_label))
                    continue;
                const fl_field *fd = &out->fields[f];
                const fl_jnode *n = fl_jget(o, fd->name);
                char why[300];
                int vr =
                    n ? pd_field_value_json(out, fd, n, lst.root, &it->values[f], why, sizeof why)
                      : (snprintf(why, sizeof why, "the key is missing"), -1);
                if (!vr && it->values[f].kind == PD_VAL_FILE && !so->allow_outside_root &&
                    n->type == FL_J_STRING && pd_path_leaves(lst.root, n->str))
                    vr = -1, snprintf(why, sizeof why,
                                      "%.150s is outside %.60s: refused "
                                      "(--allow-outside-root packs it)",
                                      n->str, lst.root);
                if (!vr && lab_f) { /* the first int --field is the label: its range too */
                    int32_t lv;
                    memcpy(&lv, it->values[f].data, 4);
                    vr = pd_check_label(lv, so, why, sizeof why);
                }
                if (vr == -ENOMEM) {
                    how = PD_LISTING_OOM;
                    stop = 1;
                    break;
                }
                if (vr) {
                    out->n--;
                    if (pd_reject(rc, src, "field %s: %s", fd->name, why)) {
                        how = PD_LISTING_STOPPED;
                        stop = 1;
                    }
                    break;
                }
                if (lab_f) {
                    memcpy(&it->label, it->values[f].data, 4);
                    if (it->label > lst.max_label)
                        lst.max_label = it->label;
                    it->values[f].kind = PD_VAL_NONE;
                }
            }
        }
        fl_jfree(doc);
        if (stop)
            break;
        char why[300];
        if (with_fields && out->n > before &&
            pd_fields_check_row(out, out->v[out->n - 1].values, why, sizeof why)) {
            out->n--; /* not added after all */
            if (pd_reject(rc, src, "%s", why)) {
                how = PD_LISTING_STOPPED;
                break;
            }
        }
    }
    return pd_listing_end(&lst, how, out, so, "jsonl", err);
}
