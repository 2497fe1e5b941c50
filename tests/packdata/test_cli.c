/* test_cli.c — checks the shared CLI helpers (tools/common/fl_cli.h): size parsing, human
 * formatting, option matching and JSON escaping/commas. */
#include <stdio.h>
#include <string.h>

#include "fl_cli.h"

static int fails;
#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                          \
        }                                                                     \
    } while (0)
#define CHECK_STR(a, b)                                                                 \
    do {                                                                                \
        const char *a_ = (a), *b_ = (b);                                                \
        if (strcmp(a_, b_)) {                                                           \
            fprintf(stderr, "%s:%d: got '%s', want '%s'\n", __FILE__, __LINE__, a_, b_); \
            fails++;                                                                    \
        }                                                                               \
    } while (0)

int main(void) {
    uint64_t v;
    CHECK(fl_cli_parse_size("256M", &v) == 0 && v == 256ull << 20);
    CHECK(fl_cli_parse_size("1G", &v) == 0 && v == 1ull << 30);
    CHECK(fl_cli_parse_size("1.5k", &v) == 0 && v == 1536);
    CHECK(fl_cli_parse_size("64KiB", &v) == 0 && v == 65536);
    CHECK(fl_cli_parse_size("4096", &v) == 0 && v == 4096);
    CHECK(fl_cli_parse_size("10MB", &v) == 0 && v == 10ull << 20);
    CHECK(fl_cli_parse_size("12B", &v) == 0 && v == 12);
    CHECK(fl_cli_parse_size("", &v) != 0);
    CHECK(fl_cli_parse_size("-1", &v) != 0);
    CHECK(fl_cli_parse_size("1X", &v) != 0);
    CHECK(fl_cli_parse_size("1GBx", &v) != 0);
    CHECK(fl_cli_parse_size("99999999999T", &v) != 0);

    CHECK(fl_cli_parse_u64("42", 0, 100, &v) == 0 && v == 42);
    CHECK(fl_cli_parse_u64("420", 0, 100, &v) != 0);
    CHECK(fl_cli_parse_u64("-1", 0, 100, &v) != 0);
    CHECK(fl_cli_parse_u64("4x", 0, 100, &v) != 0);
    long l;
    CHECK(fl_cli_parse_int("-5", -10, 10, &l) == 0 && l == -5);
    CHECK(fl_cli_parse_int("", -10, 10, &l) != 0);

    char b[64];
    CHECK_STR(fl_cli_human_bytes(512, b, sizeof b), "512 B");
    CHECK_STR(fl_cli_human_bytes(1536, b, sizeof b), "1.5 KiB");
    CHECK_STR(fl_cli_human_bytes(3ull << 30, b, sizeof b), "3.0 GiB");
    CHECK_STR(fl_cli_human_bytes(50ull << 20, b, sizeof b), "50.0 MiB");
    CHECK_STR(fl_cli_human_bytes(118ull << 20, b, sizeof b), "118 MiB");
    CHECK_STR(fl_cli_human_count(1.2e6, b, sizeof b), "1.2 M");
    CHECK_STR(fl_cli_human_count(118000, b, sizeof b), "118 k");
    CHECK_STR(fl_cli_human_rate(2345, "img/s", b, sizeof b), "2.3 k img/s");
    CHECK_STR(fl_cli_human_rate(950, "img/s", b, sizeof b), "950 img/s");
    CHECK_STR(fl_cli_human_rate(1.5 * 1048576, "B/s", b, sizeof b), "1.5 MiB/s");
    CHECK_STR(fl_cli_human_duration(0.42, b, sizeof b), "0.42 s");
    CHECK_STR(fl_cli_human_duration(245, b, sizeof b), "4m 05s");
    CHECK_STR(fl_cli_human_duration(7380, b, sizeof b), "2h 03m");

    char *argv[] = {"tool", "--seed", "7", "--workers=3", "--quiet", "--last"};
    int argc = 6, i = 1;
    const char *val;
    CHECK(fl_cli_opt_value(argc, argv, &i, "--seed", &val, "t") == 1 && !strcmp(val, "7") && i == 2);
    i = 3;
    CHECK(fl_cli_opt_value(argc, argv, &i, "--workers", &val, "t") == 1 && !strcmp(val, "3") && i == 3);
    i = 4;
    CHECK(fl_cli_opt_value(argc, argv, &i, "--qu", &val, "t") == 0);
    i = 5;
    CHECK(fl_cli_opt_value(argc, argv, &i, "--last", &val, "t") == -1);
    /* strict numbers (issue 10, finding 9): no sign, space, junk, nan/inf, hex or overflow */
    CHECK(fl_cli_parse_u64("+1", 0, 100, &v) != 0);
    CHECK(fl_cli_parse_u64(" 1", 0, 100, &v) != 0);
    CHECK(fl_cli_parse_u64("99999999999999999999", 0, UINT64_MAX, &v) != 0);
    CHECK(fl_cli_parse_u64("18446744073709551615", 0, UINT64_MAX, &v) == 0 && v == UINT64_MAX);
    CHECK(fl_cli_parse_int("-", -10, 10, &l) != 0);
    CHECK(fl_cli_parse_int("+5", -10, 10, &l) != 0);
    CHECK(fl_cli_parse_int("99999999999999999999", 0, 10, &l) != 0);
    double d;
    CHECK(fl_cli_parse_double("0.5", 0, 1, 0, &d) == 0 && d == 0.5);
    CHECK(fl_cli_parse_double("5e-4", 0, 1, 0, &d) == 0 && d == 5e-4);
    CHECK(fl_cli_parse_double("0", 0, 1, 0, &d) == 0 && d == 0);
    CHECK(fl_cli_parse_double("0", 0, 1, 1, &d) != 0);
    const char *bad_nums[] = {"nan", "NaN", "inf", "infinity", "-inf", "1e309", "0x1p-2", "", " 1", "1x", "1,5", "--1"};
    for (size_t k = 0; k < sizeof bad_nums / sizeof *bad_nums; k++) {
        CHECK(fl_cli_parse_double(bad_nums[k], -1e300, 1e300, 0, &d) != 0);
        CHECK(fl_cli_parse_size(bad_nums[k], &v) != 0);
    }
    CHECK(fl_cli_parse_size("1e3", &v) != 0);
    CHECK(fl_cli_parse_size("1..5K", &v) != 0);
    CHECK(fl_cli_parse_size(".5K", &v) == 0 && v == 512);
    {
        char *av[] = {"tool", "--report", "--quiet", "--root", "", "--x=", "--y"};
        int ac = 7, k = 1;
        const char *val2;
        CHECK(fl_cli_opt_value(ac, av, &k, "--report", &val2, "t") == -1); /* next is an option */
        k = 3;
        CHECK(fl_cli_opt_value(ac, av, &k, "--root", &val2, "t") == -1);   /* empty */
        k = 5;
        CHECK(fl_cli_opt_value(ac, av, &k, "--x", &val2, "t") == -1);      /* empty after = */
        CHECK(fl_cli_flag("--y", "--y", "t") == 1);
        CHECK(fl_cli_flag("--y=1", "--y", "t") == -1);
        CHECK(fl_cli_flag("--yy", "--y", "t") == 0);
    }
    CHECK(fl_cli_is_help("--help") && fl_cli_is_help("-h") && !fl_cli_is_help("--helpme"));
    CHECK(fl_cli_is_version("--version"));

    fl_json j;
    fl_json_init(&j);
    fl_json_begin_object(&j);
    fl_json_key(&j, "records");
    fl_json_uint(&j, 70000);
    fl_json_key(&j, "classes");
    fl_json_begin_array(&j);
    fl_json_string(&j, "a\"b\\c\n\x01");
    fl_json_string(&j, "\xc3\xa9t\xc3\xa9");
    fl_json_end_array(&j);
    fl_json_key(&j, "ratio");
    fl_json_double(&j, 0.5);
    fl_json_key(&j, "nested");
    fl_json_begin_object(&j);
    fl_json_key(&j, "x");
    fl_json_bool(&j, 1);
    fl_json_key(&j, "y");
    fl_json_null(&j);
    fl_json_end_object(&j);
    fl_json_key(&j, "neg");
    fl_json_int(&j, -3);
    fl_json_end_object(&j);
    CHECK_STR(fl_json_text(&j), "{\"records\":70000,\"classes\":[\"a\\\"b\\\\c\\n\\u0001\",\"\xc3\xa9t\xc3\xa9\"],"
                                "\"ratio\":0.5,\"nested\":{\"x\":true,\"y\":null},\"neg\":-3}");
    fl_json_free(&j);

    fl_json_init(&j);
    fl_json_begin_array(&j);
    fl_json_double(&j, 0.0 / 0.0);
    fl_json_string_n(&j, "a\0b", 3);
    fl_json_raw(&j, "{\"k\":1}");
    fl_json_begin_array(&j);
    fl_json_end_array(&j);
    fl_json_end_array(&j);
    CHECK_STR(fl_json_text(&j), "[null,\"a\\u0000b\",{\"k\":1},[]]");
    fl_json_free(&j);
    FILE *tf = tmpfile();
    fl_json_fputs(tf, "q\"\t", 3);
    rewind(tf);
    char line[64] = "";
    CHECK(fgets(line, sizeof line, tf) != NULL);
    CHECK_STR(line, "\"q\\\"\\t\"");
    fclose(tf);

    fl_progress *p = fl_progress_start("test", 10, "img", 1);
    CHECK(p && !fl_progress_active(p));
    fl_progress_update(p, 5);
    fl_progress_finish(p);

    if (fails) return 1;
    printf("fl_cli ok\n");
    return 0;
}
