/* test_fl_error.c — the error record (common/fl_error.c): fl_error_set and fl_error_prefix give
 * exactly the text asked for, NUL-terminated right after it (a prefixed message once carried one
 * byte of stale stack after its end: "... with drop_last\x8f"), also when the record held a
 * longer message before and when the prefix or the message must be cut (the end, which holds
 * the reason, survives; no UTF-8 character is split). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_error.h"

static int failures;
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                  \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Fill the record with a byte that is no NUL, so a missing terminator shows. */
static void poison(fl_error *e) { memset(e->msg, 0x8f, sizeof e->msg); }

/* Fill a stack region the size of fl_error_prefix's buffer with a non-NUL byte first. */
static void __attribute__((noinline)) dirty_stack(void)
{
    volatile char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)0x8f;
}

int main(void)
{
    fl_error e;
    poison(&e);
    CHECK(fl_error_set(&e, FL_E_INVALID, "%d records give no full batch", 1) == FL_E_INVALID);
    CHECK(!strcmp(e.msg, "1 records give no full batch"));
    for (int round = 0; round < 3; round++) {
        dirty_stack();
        CHECK(fl_error_prefix(&e, "%s", "o1") == FL_E_INVALID);
        CHECK(e.code == FL_E_INVALID);
    }
    CHECK(!strcmp(e.msg, "o1: o1: o1: 1 records give no full batch"));

    /* a longer message before, then a shorter one prefixed */
    poison(&e);
    fl_error_set(&e, FL_E_FORMAT, "%s", "a much longer message than the one that follows it here");
    fl_error_set(&e, FL_E_FORMAT, "short");
    dirty_stack();
    fl_error_prefix(&e, "p");
    CHECK(!strcmp(e.msg, "p: short"));

    /* too long: the end survives, the text stays terminated inside the record, UTF-8 whole */
    char path[3000];
    memset(path, 'a', sizeof path - 1);
    path[sizeof path - 1] = 0;
    memcpy(path + 100, "\xc3\xa9\xc3\xa9\xc3\xa9", 6); /* é é é near a possible cut */
    fl_error_set(&e, FL_E_CHECKSUM, "record 7: CRC32C mismatch");
    dirty_stack();
    fl_error_prefix(&e, "%s", path);
    size_t n = strnlen(e.msg, sizeof e.msg);
    CHECK(n < sizeof e.msg);
    CHECK(
        n >= strlen(": record 7: CRC32C mismatch") &&
        !strcmp(e.msg + n - strlen(": record 7: CRC32C mismatch"), ": record 7: CRC32C mismatch"));
    CHECK(strstr(e.msg, "...") != NULL);
    for (size_t i = 0; i < n; i++) /* no lone continuation byte after an ASCII one */
        if (((unsigned char)e.msg[i] & 0xc0) == 0x80)
            CHECK(i > 0 && ((unsigned char)e.msg[i - 1] & 0x80));
    fl_error_set(&e, FL_E_FORMAT, "%s: bad magic", path);
    n = strnlen(e.msg, sizeof e.msg);
    CHECK(n < sizeof e.msg && !strcmp(e.msg + n - strlen(": bad magic"), ": bad magic"));

    /* NULL records are accepted and return the code */
    CHECK(fl_error_set(NULL, FL_E_RANGE, "x") == FL_E_RANGE);
    CHECK(fl_error_prefix(NULL, "x") == 0);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("fl_error ok\n");
    return 0;
}
