/* src_list.c — Caffe convert_imageset-style list files: one "relative/path label" per line.
 * The label is the last whitespace-separated field, so paths may contain spaces; blank lines and
 * lines starting with '#' are skipped; paths are relative to --root (default: the list's folder).
 * A leading UTF-8 byte order mark is skipped. */
#include "packdata.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pd_src_list(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                fl_error *err)
{
    pd_listing lst;
    int r = pd_listing_open(&lst, file, so, err);
    if (r)
        return r;
    const uint8_t *data = lst.data;
    size_t len = lst.len, line_no = 0, pos = lst.start; /* past a UTF-8 byte order mark */
    char *line = NULL;
    size_t line_cap = 0;
    int how = PD_LISTING_DONE;
    while (pos < len) {
        size_t e = pos;
        while (e < len && data[e] != '\n')
            e++;
        size_t n = e - pos;
        line_no++;
        if (n + 1 > line_cap) {
            line_cap = n + 1;
            char *nl = realloc(line, line_cap);
            if (!nl) {
                how = PD_LISTING_OOM;
                break;
            }
            line = nl;
        }
        memcpy(line, data + pos, n);
        line[n] = 0;
        pos = e + 1;
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = 0;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#')
            continue;
        char where[64];
        char src[4200];
        snprintf(where, sizeof where, ":%zu", line_no);
        snprintf(src, sizeof src, "%s%s", file, where);
        if (memchr(line, 0, n) != NULL && strlen(line) != n) {
            if (pd_reject(rc, src, "line contains a NUL byte")) {
                how = PD_LISTING_STOPPED;
                break;
            }
            continue;
        }
        char *sp = p + strlen(p);
        while (sp > p && sp[-1] != ' ' && sp[-1] != '\t')
            sp--;
        if (sp == p) {
            if (pd_reject(rc, src, "expected \"path label\", found one field '%.200s'", p)) {
                how = PD_LISTING_STOPPED;
                break;
            }
            continue;
        }
        char *lab = sp;
        char *pe = sp;
        while (pe > p && (pe[-1] == ' ' || pe[-1] == '\t'))
            pe--;
        *pe = 0;
        int added = pd_listing_add(&lst, out, rc, so, src, p, lab);
        if (added) {
            how = added < 0 ? PD_LISTING_OOM : PD_LISTING_STOPPED;
            break;
        }
    }
    free(line);
    return pd_listing_end(&lst, how, out, so, "list", err);
}
