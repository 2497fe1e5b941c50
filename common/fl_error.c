/* fl_error.c — error codes to text, and the helpers that fill an fl_error record (common/). */
#include "fl_error.h"

#include <stdio.h>
#include <string.h>

const char *fl_strerror(int code) {
    switch (code) {
    case FL_OK: return "success";
    case FL_E_FORMAT: return "malformed file";
    case FL_E_VERSION: return "unsupported format version";
    case FL_E_TRUNCATED: return "file truncated or unfinished";
    case FL_E_CHECKSUM: return "checksum mismatch";
    case FL_E_RANGE: return "out of range";
    case FL_E_DECODE: return "cannot decode";
    case FL_E_TOO_LARGE: return "image too large";
    case FL_E_UNSUPPORTED: return "unsupported";
    case FL_E_INVALID: return "invalid argument";
    case FL_E_LMDB: return "LMDB error";
    case FL_E_CUDA: return "CUDA error";
    case FL_E_LABEL: return "bad label";
    case FL_E_DUPLICATE: return "duplicate entry";
    case FL_E_CANCELLED: return "cancelled";
    default: break;
    }
    if (code < 0 && code > -4096) return strerror(-code);
    return "unknown error";
}

int fl_error_vset(fl_error *err, int code, const char *fmt, va_list ap) {
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

int fl_error_set(fl_error *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fl_error_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int fl_error_prefix(fl_error *err, const char *fmt, ...) {
    if (!err) return 0;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3, len = strnlen(old, sizeof old - 1);
    if (len > room) len = room;
    memcpy(err->msg + n + 2, old, len);
    err->msg[n + 2 + len] = '\0';
    return err->code;
}

void fl_error_clear(fl_error *err) {
    if (err) {
        err->code = FL_OK;
        err->msg[0] = '\0';
    }
}
