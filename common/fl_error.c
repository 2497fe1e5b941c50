/* fl_error.c — error codes to text, and the helpers that fill an fl_error record (common/). */
#include "fl_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fl_strerror(int code)
{
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
    if (code < 0 && code > -4096)
        return strerror(-code);
    return "unknown error";
}

/* Store the message `full` (len bytes) in err->msg. One too long for it loses its middle, never
 * its end: a message ends with the reason ("PATH: record 7: reason") and what makes it long is
 * a path. The cut does not split a UTF-8 character. */
static void store_msg(fl_error *err, const char *full, size_t len)
{
    const size_t cap = sizeof err->msg;
    if (len < cap) {
        memcpy(err->msg, full, len + 1);
        return;
    }
    static const char gap[] = "...";
    size_t tail = (cap - 1) * 5 / 8, head = cap - 1 - tail - (sizeof gap - 1), t0 = len - tail;
    while (head > 0 && ((unsigned char)full[head] & 0xc0) == 0x80)
        head--;
    while (t0 < len && ((unsigned char)full[t0] & 0xc0) == 0x80)
        t0++;
    memcpy(err->msg, full, head);
    memcpy(err->msg + head, gap, sizeof gap - 1);
    memcpy(err->msg + head + sizeof gap - 1, full + t0, len - t0);
    err->msg[head + sizeof gap - 1 + len - t0] = '\0';
}

int fl_error_vset(fl_error *err, int code, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    err->code = code;
    /* formatted apart from err->msg: callers may pass err->msg as an argument */
    char buf[2048];
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0) {
        err->msg[0] = '\0';
    } else if ((size_t)n < sizeof buf) {
        store_msg(err, buf, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (big) {
            vsnprintf(big, (size_t)n + 1, fmt, aq);
            store_msg(err, big, (size_t)n);
            free(big);
        } else {
            store_msg(err, buf, sizeof buf - 1);
        }
    }
    va_end(aq);
    return code;
}

int fl_error_set(fl_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fl_error_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int fl_error_prefix(fl_error *err, const char *fmt, ...)
{
    if (!err)
        return 0;
    char full[4096 + 2 + sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(full, 4096, fmt, ap);
    va_end(ap);
    size_t p = n < 0 ? 0 : (size_t)n < 4096 ? (size_t)n : 4095;
    memcpy(full + p, ": ", 2);
    size_t len = strnlen(err->msg, sizeof err->msg - 1);
    memcpy(full + p + 2, err->msg, len);
    full[p + 2 + len] = '\0'; /* store_msg copies the terminator with a message that fits */
    store_msg(err, full, p + 2 + len); /* the reason at the end survives a long prefix */
    return err->code;
}

void fl_error_clear(fl_error *err)
{
    if (err) {
        err->code = FL_OK;
        err->msg[0] = '\0';
    }
}
