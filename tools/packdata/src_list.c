/* src_list.c — Caffe convert_imageset-style list files: one "relative/path label" per line.
 * The label is the last whitespace-separated field, so paths may contain spaces; blank lines and
 * lines starting with '#' are skipped; paths are relative to --root (default: the list's folder).
 * A leading UTF-8 byte order mark is skipped. */
#include "packdata.h"

#include "fl_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pd_src_list(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                fl_error *err) {
    uint8_t *data;
    size_t len;
    int r = pd_read_file(file, 0, 1ull << 32, &data, &len, err);
    if (r) return r;
    char *root = so->root ? strdup(so->root) : fl_dir_of(file);
    pd_strset seen = {0};
    int32_t maxl = -1;
    size_t line_no = 0, pos = 0;
    char *line = NULL;
    size_t line_cap = 0;
    r = 0;
    if (!root) goto oom;
    /* a UTF-8 byte order mark (Windows editors write one) is not part of the first path */
    if (len >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3)) pos = 3;
    while (pos < len) {
        size_t e = pos;
        while (e < len && data[e] != '\n') e++;
        size_t n = e - pos;
        line_no++;
        if (n + 1 > line_cap) {
            line_cap = n + 1;
            char *nl = realloc(line, line_cap);
            if (!nl) goto oom;
            line = nl;
        }
        memcpy(line, data + pos, n);
        line[n] = 0;
        pos = e + 1;
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) line[--n] = 0;
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || *p == '#') continue;
        char where[64];
        char src[4200];
        snprintf(where, sizeof where, ":%zu", line_no);
        snprintf(src, sizeof src, "%s%s", file, where);
        if (memchr(line, 0, n) != NULL && strlen(line) != n) {
            if (pd_reject(rc, src, "line contains a NUL byte")) goto fail;
            continue;
        }
        char *sp = p + strlen(p);
        while (sp > p && sp[-1] != ' ' && sp[-1] != '\t') sp--;
        if (sp == p) {
            if (pd_reject(rc, src, "expected \"path label\", found one field '%.200s'", p)) goto fail;
            continue;
        }
        char *lab = sp;
        char *pe = sp;
        while (pe > p && (pe[-1] == ' ' || pe[-1] == '\t')) pe--;
        *pe = 0;
        int added = pd_add_listed(out, &seen, rc, so, src, root, p, lab, &maxl);
        if (added < 0) goto oom;
        if (added > 0) goto fail;
    }
    out->form = "list";
    r = pd_items_finish_classes(out, so, maxl);
    if (r) goto oom;
    goto done;
oom:
    r = fl_error_set(err, -ENOMEM, "out of memory reading %s", file);
    goto done;
fail:
    r = pd_fail_reported(err, FL_E_LABEL);
done:
    free(line);
    free(root);
    free(data);
    pd_strset_free(&seen);
    return r;
}
