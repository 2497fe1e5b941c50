/* test_json.c — the JSON module (common/fl_json.h): the reader's values, escapes and \u
 * surrogates, rejection of malformed text with a byte position, depth limit, escape round trips
 * through fl_tbuf, and the quoting styles of the two writers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_check.h"
#include "fl_json.h"

static int parse(const char *t, fl_jdoc **d, fl_error *e)
{
    return fl_jparse(t, strlen(t), "test.json", d, e);
}

int main(void)
{
    fl_jdoc *d;
    fl_error e;
    const char *t =
        " {\"a\": [1, -2, 3.5, 1e3, true, false, null], \"s\": \"x\\n\\u00e9\\ud83d\\ude00\\\"\","
        " \"o\": {}, \"big\": 123456789012345678} ";
    CHECK_OK(parse(t, &d, &e), &e);
    const fl_jnode *r = fl_jroot(d);
    CHECK(r->type == FL_J_OBJECT && r->count == 4);
    const fl_jnode *a = fl_jget(r, "a");
    CHECK(a && a->type == FL_J_ARRAY && a->count == 7);
    CHECK(fl_jat(a, 0)->is_int && fl_jat(a, 0)->ival == 1);
    CHECK(fl_jat(a, 1)->ival == -2);
    CHECK(!fl_jat(a, 2)->is_int && fl_jat(a, 2)->dval == 3.5);
    CHECK(!fl_jat(a, 3)->is_int && fl_jat(a, 3)->dval == 1000.0);
    CHECK(fl_jat(a, 4)->type == FL_J_BOOL && fl_jat(a, 4)->bval == 1);
    CHECK(fl_jat(a, 6)->type == FL_J_NULL);
    CHECK(fl_jat(a, 7) == NULL);
    const fl_jnode *s = fl_jget(r, "s");
    CHECK(s && strcmp(s->str, "x\n\xc3\xa9\xf0\x9f\x98\x80\"") == 0);
    CHECK(fl_jget(r, "big")->ival == 123456789012345678LL);
    CHECK(fl_jget(r, "missing") == NULL);
    fl_jfree(d);

    const char *bad[] = {"",      "{",           "[1,]",        "{\"a\" 1}",   "{\"a\":1,}",
                         "\"abc", "\"a\\qb\"",   "01",          "1.",          "-",
                         "tru",   "[1] x",       "\"\\ud800\"", "\"\\u0000\"", "\"a\tb\"",
                         "{1:2}", "[\"\\u12\"]", "1e",          "{\"a\":1}}",  "nul"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i], &d, &e);
        if (rc != FL_E_FORMAT) {
            fprintf(stderr, "accepted bad JSON #%zu: %s\n", i, bad[i]);
            return 1;
        }
        CHECK(strstr(e.msg, "test.json: JSON byte") != NULL);
    }
    /* depth limit */
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    CHECK(fl_jparse(deep, 200, "deep", &d, &e) == FL_E_FORMAT);
    CHECK(strstr(e.msg, "too deep"));
    CHECK(fl_jparse(deep + 40, 120, "ok", &d, &e) == 0); /* 60 levels is fine */
    fl_jfree(d);

    /* escaping round trip, including every control byte */
    char raw[64];
    for (int i = 0; i < 32; i++)
        raw[i] = (char)(i + 1);
    memcpy(raw + 31, "\"\\/\xc3\xa9 end", 9);
    fl_tbuf b = {0};
    fl_tbuf_json_string(&b, raw, 40);
    CHECK(!b.failed);
    CHECK_OK(fl_jparse(b.data, b.len, "esc", &d, &e), &e);
    CHECK(fl_jroot(d)->str_len == 40 && memcmp(fl_jroot(d)->str, raw, 40) == 0);
    fl_jfree(d);
    fl_tbuf_free(&b);
    fl_tbuf_printf(&b, "%s-%d-%0300d", "long", 7, 5);
    CHECK(b.len == 5 + 2 + 300 && !b.failed);
    fl_tbuf_free(&b);

    /* the two writers' quoting styles (one function, common/fl_json.c): the manifest's text buffer
     * writes \b, \f as \u00XX and DEL as is; the --json builder writes \b, \f short and DEL as
     * \u007f. Both keep the bytes earlier versions wrote. */
    const char ctl[] = "a\b\f\x7f\x01\n\"\\z";
    fl_tbuf_json_string(&b, ctl, sizeof ctl - 1);
    CHECK(!b.failed && !strcmp(b.data, "\"a\\u0008\\u000c\x7f\\u0001\\n\\\"\\\\z\""));
    fl_tbuf_free(&b);
    fl_json j;
    fl_json_init(&j);
    fl_json_begin_array(&j);
    fl_json_string_n(&j, ctl, sizeof ctl - 1);
    fl_json_uint(&j, 7);
    fl_json_end_array(&j);
    CHECK(!fl_json_failed(&j) &&
          !strcmp(fl_json_text(&j), "[\"a\\b\\f\\u007f\\u0001\\n\\\"\\\\z\",7]"));
    fl_json_free(&j);
    printf("json ok\n");
    return 0;
}
