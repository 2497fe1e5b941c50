/* fl_check.h — the one assertion header of the C tests. A test program exits 0 (pass), 1 (fail) or
 * 77 (skip: FL_CHECK_SKIP, CTest's SKIP_RETURN_CODE), liburing's habit. Every failed check prints
 * file:line and what failed on stderr. Two kinds:
 *   fatal   CHECK(cond), CHECK_OK(expr, errp), CHECK_STR(got, want): exit 1 at once (what follows
 *           depends on it);
 *   counted EXPECT(cond), EXPECTF(cond, fmt, ...), EXPECT_RC(rc, want, errp), EXPECT_STR(got,
 * want): the program goes on (one run reports every difference); main ends with `return
 * fl_check_status();`, 1 when any counted check failed. CHECK_OK and EXPECT_RC print the library's
 * message: the test includes fl_error.h (fl_strerror, fl_error) itself, as every test of a library
 * call does. */
#ifndef FL_CHECK_H
#define FL_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FL_CHECK_SKIP 77

/* Counted failures of this program. Weak: one counter shared by all of a test's source files. */
__attribute__((weak)) int fl_check_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* expr returns 0 or a negative error code; errp is the fl_error * it filled. */
#define CHECK_OK(expr, errp)                                                                       \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #expr, rc_,    \
                    fl_strerror(rc_), (errp)->msg);                                                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_STR(got, want)                                                                       \
    do {                                                                                           \
        const char *g_ = (got), *w_ = (want);                                                      \
        if (strcmp(g_, w_) != 0) {                                                                 \
            fprintf(stderr, "%s:%d: %s is '%s', want '%s'\n", __FILE__, __LINE__, #got, g_, w_);   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define EXPECTF(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            fl_check_failures++;                                                                   \
        }                                                                                          \
    } while (0)

#define EXPECT(cond) EXPECTF(cond, "check failed: %s", #cond)

#define EXPECT_RC(rc, want, errp)                                                                  \
    do {                                                                                           \
        int rc_ = (rc);                                                                            \
        EXPECTF(rc_ == (want), "got %d (%s), want %d: %s", rc_, fl_strerror(rc_), (want),          \
                (errp)->msg);                                                                      \
    } while (0)

#define EXPECT_STR(got, want)                                                                      \
    do {                                                                                           \
        const char *g_ = (got), *w_ = (want);                                                      \
        EXPECTF(strcmp(g_, w_) == 0, "got '%s', want '%s'", g_, w_);                               \
    } while (0)

/* main's exit status after counted checks: 0, or 1 (and the count on stderr) when any failed. */
static inline int fl_check_status(void)
{
    if (fl_check_failures)
        fprintf(stderr, "%d check(s) failed\n", fl_check_failures);
    return fl_check_failures ? 1 : 0;
}

#endif
