/* test_fl_cli.c — the command-line layer of common/ (fl_cli.h, fl_cli_table.h): strict number
 * and size parsing, human formatting, the table-driven parser (both value forms, last value wins,
 * missing/empty/malformed values, abbreviations, clusters, flags given a value, positional
 * arguments, two-value options, --help generated with the defaults, --nproc's argv copy) and
 * the JSON writer's escaping and commas. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_check.h"
#include "fl_cli.h"
#include "fl_cli_table.h"

/* ---- a small command to parse ---------------------------------------------------------------- */

typedef struct topts {
    uint64_t seed;
    uint32_t workers;
    int level, quiet, pinned, mode;
    float lr;
    uint64_t size;
    const char *out, *device, *img, *lab;
    int custom_calls;
} topts;

static int parse_custom(void *opts, const char *name, const char *v, const char *tool)
{
    topts *o = opts;
    o->custom_calls++;
    if (strcmp(v, "ok"))
        return fl_cli_opt_error(tool, name, v, "expected ok"), -1;
    return 0;
}

static const fl_cli_choice modes[] = {{"a", 1, 0}, {"b", 2, 0}, {"bee", 2, 1}, {NULL, 0, 0}};
static const fl_cli_choice devs[] = {{"cpu", 0, 0}, {"cuda", 0, 0}, {NULL, 0, 0}};
#define F(f) FL_CLI_FIELD(topts, f)
static const fl_cli_opt table[] = {
    {FL_CLI_SECTION, .help = "Things:"},
    {FL_CLI_U64, "seed", .off = F(seed), .umax = UINT64_MAX, .metavar = "S", .help = "a seed",
     .def = "0"},
    {FL_CLI_U32, "workers", .off = F(workers), .umin = 1, .umax = 8, .metavar = "N",
     .help = "workers"},
    {FL_CLI_INT, "level", .off = F(level), .umin = 1, .umax = 22, .metavar = "L", .help = "level"},
    {FL_CLI_FLAG, "quiet", 'q', .off = F(quiet), .help = "quiet"},
    {FL_CLI_FLAG_OFF, "no-pinned", .off = F(pinned), .help = "not pinned"},
    {FL_CLI_ENUM, "mode", .off = F(mode), .choices = modes, .help = "mode", .def = "a"},
    {FL_CLI_FLOAT, "lr", .off = F(lr), .dmin = 0, .dmax = 1, .open_min = 1, .metavar = "LR",
     .help = "rate"},
    {FL_CLI_SIZE, "size", .off = F(size), .umin = 1, .umax = 1ull << 30, .metavar = "SIZE",
     .help = "size"},
    {FL_CLI_TEXT, "output", 'o', .off = F(out), .metavar = "FILE", .help = "where"},
    {FL_CLI_CHOICE, "device", .off = F(device), .choices = devs, .metavar = "D", .help = "device"},
    {FL_CLI_TEXT2, "idx", .off = F(img), .off2 = F(lab), .metavar = "IMAGES LABELS",
     .help = "pair"},
    {FL_CLI_CUSTOM, "custom", .parse = parse_custom, .metavar = "X", .help = "custom"},
    {FL_CLI_FLAG, "quieter", .off = F(quiet), .hidden = 1},
    {FL_CLI_END},
};
#undef F

static int run_cmd(const fl_cli_tool *t, int argc, char **argv)
{
    (void)t, (void)argc, (void)argv;
    return 42;
}

static const fl_cli_cmd cmd = {.name = "go",
                               .args = "SRC [options]",
                               .summary = "go somewhere",
                               .synopsis = "usage: t go SRC [options]\n",
                               .opts = table,
                               .epilog = "the end\n",
                               .max_pos = 2,
                               .run = run_cmd};
static const fl_cli_cmd *const cmds[] = {&cmd, NULL};
static void version(FILE *out) { fputs("t 1\n", out); }
static const fl_cli_tool tool = {
    .name = "t", .synopsis = "usage: t COMMAND\n", .cmds = cmds, .version = version};

/* Parse a NULL-terminated list of words (after the command name) into *o. */
static int parse_words(topts *o, fl_cli_parsed *p, const char *const *words)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "go";
    for (; *words; words++)
        argv[argc++] = (char *)*words;
    argv[argc] = NULL;
    memset(o, 0, sizeof *o);
    o->pinned = 1;
    return fl_cli_parse(&tool, &cmd, argc, argv, o, p);
}
#define PARSE(...) parse_words(&o, &p, (const char *const[]){__VA_ARGS__, NULL})

static void test_table(void)
{
    topts o;
    fl_cli_parsed p;
    /* both value forms, last value wins, positional arguments anywhere */
    CHECK(PARSE("src", "--seed", "7", "--workers=3", "-q", "--seed=9", "dst", "--no-pinned") ==
          FL_CLI_RUN);
    CHECK(o.seed == 9 && o.workers == 3 && o.quiet == 1 && o.pinned == 0);
    CHECK(p.npos == 2 && !strcmp(p.pos[0], "src") && !strcmp(p.pos[1], "dst"));
    CHECK(fl_cli_given(&p, "seed") && fl_cli_given(&p, "workers") && !fl_cli_given(&p, "level"));
    CHECK(PARSE("--mode", "b", "--lr", "0.5", "--size", "1M", "-o", "x.png", "--device=cuda",
                "--level", "22") == FL_CLI_RUN);
    CHECK(o.mode == 2 && o.lr == 0.5f && o.size == 1u << 20 && !strcmp(o.out, "x.png") &&
          !strcmp(o.device, "cuda") && o.level == 22);
    CHECK(PARSE("--mode", "bee", "-o=y", "-", "--idx", "i", "l", "--custom", "ok") == FL_CLI_RUN);
    CHECK(o.mode == 2 && !strcmp(o.out, "y") && p.npos == 1 && !strcmp(p.pos[0], "-"));
    CHECK(!strcmp(o.img, "i") && !strcmp(o.lab, "l") && o.custom_calls == 1);
    CHECK(PARSE("--quieter") == FL_CLI_RUN && o.quiet == 1); /* hidden: accepted */
    CHECK(PARSE("--output=--x") == FL_CLI_RUN &&
          !strcmp(o.out, "--x"));                 /* a value starting with -- */
    CHECK(PARSE("--seed", "-1") == FL_CLI_USAGE); /* the value is taken, then refused */
    /* usage errors: each one line, exit 2 */
    const char *const bad[][4] = {
        {"--seed"},            /* missing value (last) */
        {"--seed", "--quiet"}, /* next is another option */
        {"--seed", ""},        /* empty */
        {"--seed="},           /* empty after = */
        {"--seed", "x"},       /* malformed */
        {"--workers", "9"},    /* out of range */
        {"--lr", "0"},         /* open minimum */
        {"--lr", "nan"},
        {"--size", "1X"},
        {"--mode", "c"}, /* not a choice */
        {"--device", "tpu"},
        {"--custom", "no"}, /* the custom parser refuses */
        {"--see", "1"},     /* abbreviation */
        {"--bogus"},        /* unknown */
        {"-qq"},            /* cluster */
        {"-ox"},            /* attached short value */
        {"--quiet=1"},      /* flag given a value */
        {"-q=1"},
        {"--"},          /* not part of our command lines */
        {"a", "b", "c"}, /* too many positional arguments */
        {"--idx", "i"},  /* two values needed */
        {"--idx", "i", "--quiet"},
        {"--help=1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *w[5] = {bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL};
        int r = parse_words(&o, &p, w);
        if (r != FL_CLI_USAGE)
            fprintf(stderr, "case %zu (%s): got %d\n", i, bad[i][0], r);
        CHECK(r == FL_CLI_USAGE);
    }
    /* a bad value then a good one: every value given is checked */
    CHECK(PARSE("--seed", "x", "--seed", "1") == FL_CLI_USAGE);
    /* --help and --version stop the parse (exit 0); an error before them wins */
    CHECK(PARSE("--seed", "1", "--help") == FL_CLI_DONE);
    CHECK(PARSE("-V") == FL_CLI_DONE);
    CHECK(PARSE("--bogus", "--help") == FL_CLI_USAGE);
    /* the argv copy without an option (trainfast --nproc) */
    char *argv[] = {"go", "a", "--seed", "1", "--custom=ok", "-q", "--seed=2", "b", NULL};
    char *out[16];
    int n = fl_cli_copy_without(&tool, &cmd, 8, argv, "seed", out);
    CHECK(n == 5 && !strcmp(out[0], "go") && !strcmp(out[1], "a") &&
          !strcmp(out[2], "--custom=ok") && !strcmp(out[3], "-q") && !strcmp(out[4], "b") &&
          out[5] == NULL);
    /* dispatch */
    char *dv[] = {"t", "go", NULL};
    CHECK(fl_cli_dispatch(&tool, 2, dv) == 42);
    char *dv2[] = {"t", "went", NULL};
    CHECK(fl_cli_dispatch(&tool, 2, dv2) == FL_EXIT_USAGE);
}

/* The generated help lists every option (not the hidden one) with its metavar and default. */
static void test_help(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f);
    fl_cli_print_help(&tool, &cmd, f);
    fclose(f);
    CHECK(strstr(buf, "usage: t go SRC [options]\n"));
    CHECK(strstr(buf, "\nThings:\n"));
    CHECK(strstr(buf, "  --seed S               a seed (default: 0)\n"));
    CHECK(strstr(buf, "  -q, --quiet            quiet\n"));
    CHECK(strstr(buf, "  --mode a|b             mode (default: a)\n"));
    CHECK(strstr(buf, "  --idx IMAGES LABELS    pair\n"));
    CHECK(strstr(buf, "  -o, --output FILE      where\n"));
    CHECK(!strstr(buf, "quieter") && !strstr(buf, "bee"));
    CHECK(strstr(buf, "the end\n"));
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    CHECK(f);
    fl_cli_print_tool_help(&tool, f);
    fclose(f);
    CHECK(strstr(buf, "commands:\n  go SRC [options]           go somewhere\n"));
    free(buf);
}

int main(void)
{
    test_table();
    test_help();

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

    /* strict numbers: no sign, space, junk, nan/inf, hex or overflow */
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
    const char *bad_nums[] = {"nan",    "NaN", "inf", "infinity", "-inf", "1e309",
                              "0x1p-2", "",    " 1",  "1x",       "1,5",  "--1"};
    for (size_t k = 0; k < sizeof bad_nums / sizeof *bad_nums; k++) {
        CHECK(fl_cli_parse_double(bad_nums[k], -1e300, 1e300, 0, &d) != 0);
        CHECK(fl_cli_parse_size(bad_nums[k], &v) != 0);
    }
    CHECK(fl_cli_parse_size("1e3", &v) != 0);
    CHECK(fl_cli_parse_size("1..5K", &v) != 0);
    CHECK(fl_cli_parse_size(".5K", &v) == 0 && v == 512);
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
    CHECK_STR(fl_json_text(&j),
              "{\"records\":70000,\"classes\":[\"a\\\"b\\\\c\\n\\u0001\",\"\xc3\xa9t\xc3\xa9\"],"
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

    printf("fl_cli ok\n");
    return 0;
}
