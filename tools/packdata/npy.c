/* npy.c — NumPy .npy files (format versions 1-3, little-endian, C order) for ndarray fields:
 * the bounds-checked reader packdata uses for `--field NAME:ndarray:...` paths, and the header
 * writer of `packdata extract`. */
#include "packdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *descr;
    fl_dtype t;
} descrs[] = {{"u1", FL_DTYPE_U8},  {"i1", FL_DTYPE_I8},  {"u2", FL_DTYPE_U16},
              {"i2", FL_DTYPE_I16}, {"i4", FL_DTYPE_I32}, {"i8", FL_DTYPE_I64},
              {"f2", FL_DTYPE_F16}, {"f4", FL_DTYPE_F32}, {"f8", FL_DTYPE_F64}};

static const char *descr_of(fl_dtype t)
{
    for (size_t i = 0; i < sizeof descrs / sizeof *descrs; i++)
        if (descrs[i].t == t)
            return descrs[i].descr;
    return NULL;
}

/* The text after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    const char *k = strstr(h, key);
    if (!k)
        return NULL;
    k += strlen(key);
    while (*k == ' ' || *k == '\'' || *k == '"')
        k++;
    if (*k != ':')
        return NULL;
    k++;
    while (*k == ' ')
        k++;
    return k;
}

int pd_npy_parse(const uint8_t *d, size_t len, fl_dtype *dtype, uint32_t *ndim, uint64_t *shape,
                 const uint8_t **data, size_t *data_len, char *why, size_t cap)
{
    if (len < 10 || memcmp(d, "\x93NUMPY", 6))
        return snprintf(why, cap, "not a .npy file"), -1;
    size_t hl, off;
    if (d[6] == 1) {
        hl = (size_t)d[8] | (size_t)d[9] << 8;
        off = 10;
    } else if (d[6] == 2 || d[6] == 3) {
        if (len < 12)
            return snprintf(why, cap, ".npy header truncated"), -1;
        hl = (size_t)d[8] | (size_t)d[9] << 8 | (size_t)d[10] << 16 | (size_t)d[11] << 24;
        off = 12;
    } else {
        return snprintf(why, cap, ".npy format version %u is not 1, 2 or 3", d[6]), -1;
    }
    if (hl > len - off || hl > 65536)
        return snprintf(why, cap, ".npy header truncated"), -1;
    char h[65537];
    memcpy(h, d + off, hl);
    h[hl] = 0;
    const char *v = dict_value(h, "'descr'");
    if (!v || (*v != '\'' && *v != '"'))
        return snprintf(why, cap, ".npy header has no 'descr'"), -1;
    v++;
    char bo = *v;
    if (bo == '>' && !(v[1] == 'u' && v[2] == '1') && !(v[1] == 'i' && v[2] == '1'))
        return snprintf(why, cap, ".npy data is big-endian: save it little-endian"), -1;
    if (bo != '<' && bo != '|' && bo != '=' && bo != '>')
        return snprintf(why, cap, ".npy descr is not a plain number type"), -1;
    int found = 0;
    for (size_t i = 0; i < sizeof descrs / sizeof *descrs; i++)
        if (!strncmp(v + 1, descrs[i].descr, 2) && (v[3] == '\'' || v[3] == '"')) {
            *dtype = descrs[i].t;
            found = 1;
        }
    if (!found)
        return snprintf(why, cap, ".npy dtype '%.8s' is not one fastload stores", v), -1;
    v = dict_value(h, "'fortran_order'");
    if (!v || strncmp(v, "False", 5))
        return snprintf(why, cap, ".npy array is not in C order"), -1;
    v = dict_value(h, "'shape'");
    if (!v || *v != '(')
        return snprintf(why, cap, ".npy header has no 'shape'"), -1;
    v++;
    *ndim = 0;
    uint64_t n = 1;
    for (;;) {
        while (*v == ' ' || *v == ',')
            v++;
        if (*v == ')')
            break;
        char *e;
        unsigned long long x = strtoull(v, &e, 10);
        if (e == v || *ndim >= FL_MAX_DIMS || x > 0xffffffffull)
            return snprintf(why, cap, ".npy shape is not 1 to %d sizes", FL_MAX_DIMS), -1;
        shape[(*ndim)++] = x;
        n *= x;
        if (n > (1ull << 40))
            return snprintf(why, cap, ".npy shape is too large"), -1;
        v = e;
    }
    size_t need = (size_t)n * fl_dtype_size(*dtype);
    if (len - off - hl != need)
        return snprintf(why, cap, ".npy holds %zu data bytes, its shape and dtype need %zu",
                        len - off - hl, need),
               -1;
    *data = d + off + hl;
    *data_len = need;
    return 0;
}

size_t pd_npy_header(fl_dtype dtype, uint32_t ndim, const uint64_t *shape, char *out, size_t cap)
{
    const char *ds = descr_of(dtype);
    if (!ds || cap < 128)
        return 0;
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                     ds[1] == '1' ? '|' : '<', ds);
    for (uint32_t i = 0; i < ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%llu%s", (unsigned long long)shape[i],
                      ndim == 1      ? ","
                      : i + 1 < ndim ? ", "
                                     : "");
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* header padded with spaces so that the data starts at a multiple of 64, ending in \n */
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    if (padded > cap)
        return 0;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    size_t hl = padded - 10;
    out[8] = (char)(hl & 0xff);
    out[9] = (char)(hl >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', padded - 10 - (size_t)n - 1);
    out[padded - 1] = '\n';
    return padded;
}
