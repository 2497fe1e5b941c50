/* fl_error.h — error codes and the error record shared by every fastload library and tool
 * (common/, the bottom layer: every other layer includes it; installed as a public header).
 *
 * Library functions return 0 on success or a negative code: either -errno (an OS error such as
 * -ENOENT, -EIO, -ENOSPC) or one of the FL_E* codes below, which live in a reserved range so they
 * never collide with errno values. Functions that can fail also take an `fl_error *` (may be NULL)
 * that receives the same code and a one-line message naming the file, record and reason.
 * Libraries never print and never exit; front ends print `err.msg` and choose an exit status. */
#ifndef FL_ERROR_H
#define FL_ERROR_H

#include <stdarg.h>

/* FL_API marks a function of libfastload's public API. The library's objects are compiled with
 * -fvisibility=hidden where their public headers use it (cmake/fl_public_api.cmake), so only what
 * is marked keeps default visibility; the version script generated from the public headers
 * decides what libfastload.so exports either way. */
#ifndef FL_API
#define FL_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
    FL_OK = 0,
    FL_E_BASE = -40000,
    FL_E_FORMAT = -40001,      /* bad magic, malformed structure, offset/length out of bounds */
    FL_E_VERSION = -40002,     /* a format version this build does not read */
    FL_E_TRUNCATED = -40003,   /* file shorter than its header/footer says (unfinished write) */
    FL_E_CHECKSUM = -40004,    /* CRC32C of a record, index or header does not match */
    FL_E_RANGE = -40005,       /* index or argument out of range */
    FL_E_DECODE = -40006,      /* an image (JPEG/PNG) or compressed block failed to decode */
    FL_E_TOO_LARGE = -40007,   /* declared image size over the configured pixel limit */
    FL_E_UNSUPPORTED = -40008, /* valid input this build cannot handle */
    FL_E_INVALID = -40009,     /* invalid argument or option value */
    FL_E_LMDB = -40010,        /* LMDB reported an error (message carries mdb_strerror) */
    FL_E_CUDA = -40011,        /* CUDA runtime error (message carries cudaGetErrorString) */
    FL_E_LABEL = -40012,       /* label not a number, or out of range */
    FL_E_DUPLICATE = -40013,   /* the same input listed twice */
    FL_E_CANCELLED = -40014,   /* operation stopped on request (signal, shutdown) */
    FL_E_LAST = -40015
};

/* One error: its code and a printable one-line message ("path: record 17: reason"). A message
 * longer than msg keeps its start and its end (the reason) with "..." in the middle. */
typedef struct fl_error {
    int code;
    char msg[768];
} fl_error;

/* Human-readable name of `code` (FL_E* or -errno). Never returns NULL. */
FL_API const char *fl_strerror(int code);

/* Fill `err` (when not NULL) with `code` and a printf-style message; returns `code`, so callers
 * write `return fl_error_set(err, FL_E_FORMAT, "%s: bad magic", path);`. */
FL_API int fl_error_set(fl_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same with a va_list. */
FL_API int fl_error_vset(fl_error *err, int code, const char *fmt, va_list ap);

/* Prefix an existing message in place: "prefix: old message". Keeps the code. Returns err->code. */
FL_API int fl_error_prefix(fl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reset to FL_OK with an empty message. */
FL_API void fl_error_clear(fl_error *err);

#ifdef __cplusplus
}
#endif
#endif
