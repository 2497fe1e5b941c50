/* fl_cli_table.c — the table-driven command line (see fl_cli_table.h): getopt_long over a
 * command's option table, one-line usage errors, and --help generated from the same table. */
#include "fl_cli_table.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "fl_cli.h"

/* Column where the help text of an option starts. */
#define HELP_COL 25
/* Column where a command's summary starts in the tool's help. */
#define CMD_COL 29

static int takes_value(const fl_cli_opt *o)
{
    return o->kind != FL_CLI_FLAG && o->kind != FL_CLI_FLAG_OFF && o->kind != FL_CLI_SECTION;
}

static int is_option(const fl_cli_opt *o) { return o->kind != FL_CLI_SECTION; }

static size_t table_len(const fl_cli_opt *t)
{
    size_t n = 0;
    while (t[n].kind != FL_CLI_END)
        n++;
    return n;
}

/* "a, b or c" (the listed choices) into buf. */
static void choice_list(const fl_cli_choice *c, const char *last_sep, const char *sep, char *buf,
                        size_t cap)
{
    int n = 0, k = 0;
    for (const fl_cli_choice *p = c; p->word; p++)
        n += !p->hidden;
    buf[0] = 0;
    for (const fl_cli_choice *p = c; p->word; p++) {
        if (p->hidden)
            continue;
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s%s", k == 0 ? "" : k == n - 1 ? last_sep : sep, p->word);
        k++;
    }
}

static const char *metavar_of(const fl_cli_opt *o, char *buf, size_t cap)
{
    if (o->metavar)
        return o->metavar;
    if (o->choices) {
        choice_list(o->choices, "|", "|", buf, cap);
        return buf;
    }
    return "VALUE";
}

/* ---- storing a value -------------------------------------------------------------------- */

#define AT(opts, off, type) ((type *)((char *)(opts) + (off)))

/* Validate `v` for option `o` (named `name` as given) and store it. 0, or -1 after one line. */
static int store(const fl_cli_opt *o, const char *name, const char *v, const char *v2, void *opts,
                 const char *tool)
{
    uint64_t u;
    switch (o->kind) {
    case FL_CLI_FLAG: *AT(opts, o->off, int) = 1; return 0;
    case FL_CLI_FLAG_OFF: *AT(opts, o->off, int) = 0; return 0;
    case FL_CLI_U64:
        return fl_cli_opt_u64(tool, name, v, o->umin, o->umax, AT(opts, o->off, uint64_t));
    case FL_CLI_U32:
    case FL_CLI_INT:
        if (fl_cli_opt_u64(tool, name, v, o->umin, o->umax, &u))
            return -1;
        if (o->kind == FL_CLI_U32)
            *AT(opts, o->off, uint32_t) = (uint32_t)u;
        else
            *AT(opts, o->off, int) = (int)u;
        return 0;
    case FL_CLI_FLOAT:
        return fl_cli_opt_float(tool, name, v, o->dmin, o->dmax, o->open_min,
                                AT(opts, o->off, float));
    case FL_CLI_SIZE:
        return fl_cli_opt_size(tool, name, v, o->umin, o->umax, AT(opts, o->off, uint64_t));
    case FL_CLI_ENUM:
    case FL_CLI_CHOICE:
        for (const fl_cli_choice *c = o->choices; c->word; c++) {
            if (strcmp(c->word, v))
                continue;
            if (o->kind == FL_CLI_ENUM)
                *AT(opts, o->off, int) = c->value;
            else
                *AT(opts, o->off, const char *) = v;
            return 0;
        }
        {
            char list[256];
            choice_list(o->choices, " or ", ", ", list, sizeof list);
            fl_cli_opt_error(tool, name, v, "expected %s", list);
        }
        return -1;
    case FL_CLI_TEXT: *AT(opts, o->off, const char *) = v; return 0;
    case FL_CLI_TEXT2:
        *AT(opts, o->off, const char *) = v;
        *AT(opts, o->off2, const char *) = v2;
        return 0;
    case FL_CLI_CUSTOM: return o->parse(opts, name, v, tool);
    case FL_CLI_END:
    case FL_CLI_SECTION: break;
    }
    return -1;
}

/* ---- the getopt_long loop --------------------------------------------------------------- */

/* getopt_long's tables for one command. Long options return 256 + table index. */
typedef struct scan {
    const fl_cli_opt *t;
    size_t n;
    struct option *lo;
    char so[2 * FL_CLI_MAX_OPTS + 8];
} scan;

static int scan_init(scan *s, const fl_cli_opt *t)
{
    s->t = t;
    s->n = table_len(t);
    if (s->n > FL_CLI_MAX_OPTS)
        return -1;
    s->lo = calloc(s->n + 3, sizeof *s->lo);
    if (!s->lo)
        return -1;
    size_t k = 0, j = 0;
    s->so[j++] = '+'; /* stop at the first positional argument: we take it ourselves */
    s->so[j++] = ':'; /* a missing value returns ':' and prints nothing */
    for (size_t i = 0; i < s->n; i++) {
        if (!is_option(&t[i]))
            continue;
        s->lo[k++] = (struct option){
            t[i].name, takes_value(&t[i]) ? required_argument : no_argument, NULL, 256 + (int)i};
        if (t[i].short_name) {
            s->so[j++] = t[i].short_name;
            if (takes_value(&t[i]))
                s->so[j++] = ':';
        }
    }
    s->lo[k++] = (struct option){"help", no_argument, NULL, 'h'};
    s->lo[k++] = (struct option){"version", no_argument, NULL, 'V'};
    memcpy(s->so + j, "hV", 3);
    return 0;
}

/* One token of the command line. */
typedef struct token {
    enum { T_POS, T_OPT, T_HELP, T_VERSION, T_ERROR } what;
    int index; /* T_OPT: table index */
    const char *value, *value2;
    char name[64];   /* the option as given: "--resize" or "-o" */
    int first, next; /* argv[first .. next-1] are this token's words */
} token;

static int short_index(const scan *s, int c)
{
    for (size_t i = 0; i < s->n; i++)
        if (is_option(&s->t[i]) && s->t[i].short_name == c)
            return (int)i;
    return -1;
}

static void unknown(const char *tool, const char *cmd, const char *a)
{
    char q[96];
    fl_cli_error(tool, "%s: unknown option '%s' (see %s %s --help)", cmd,
                 fl_cli_quote(a, q, sizeof q), tool, cmd);
}

/* Read the next token at optind; on T_ERROR the one-line message was printed. */
static void next_token(const scan *s, const char *tool, const char *cmd, int argc, char **argv,
                       token *tk)
{
    int at = optind;
    const char *a = argv[at];
    memset(tk, 0, sizeof *tk);
    tk->first = at;
    if (a[0] != '-' || !a[1]) {
        tk->what = T_POS;
        tk->value = a;
        tk->next = optind = at + 1;
        return;
    }
    tk->what = T_ERROR;
    if (!strcmp(a, "--")) { /* getopt's end of options: not part of our command lines */
        unknown(tool, cmd, a);
        return;
    }
    int c = getopt_long(argc, argv, s->so, s->lo, NULL);
    tk->next = optind;
    int idx = c >= 256                 ? c - 256
              : (c == ':' || c == '?') ? (optopt >= 256 ? optopt - 256 : short_index(s, optopt))
              : c == 'h' || c == 'V'   ? -2
                                       : short_index(s, c);
    if (c == '?' && optopt == 0)
        idx = -1;
    /* the token must name the option exactly: no abbreviations ("--qui"), no clusters ("-qq") */
    int is_long = a[1] == '-';
    size_t nl = is_long ? strcspn(a + 2, "=") : 1;
    const char *want = idx >= 0   ? (is_long ? s->t[idx].name : NULL)
                       : c == 'h' ? "help"
                       : c == 'V' ? "version"
                                  : NULL;
    int eq = is_long ? a[2 + nl] == '=' : a[2] == '=';
    if (idx == -1 || (is_long && (!want || strlen(want) != nl || strncmp(want, a + 2, nl))) ||
        (!is_long && a[2] && a[2] != '=')) {
        unknown(tool, cmd, a);
        return;
    }
    snprintf(tk->name, sizeof tk->name, "%.*s", (int)(is_long ? nl + 2 : 2), a);
    if (idx == -2) {
        if (eq) {
            fl_cli_opt_error(tool, tk->name, a + (is_long ? 3 + nl : 3), "takes no value");
            return;
        }
        tk->what = c == 'h' ? T_HELP : T_VERSION;
        return;
    }
    const fl_cli_opt *o = &s->t[idx];
    tk->index = idx;
    if (!takes_value(o)) {
        if (eq) {
            fl_cli_opt_error(tool, tk->name, a + (is_long ? 3 + nl : 3), "takes no value");
            return;
        }
        tk->what = T_OPT;
        return;
    }
    if (c == ':') {
        if (o->kind == FL_CLI_TEXT2)
            fl_cli_opt_error(tool, tk->name, NULL, "needs two values: %s",
                             o->metavar ? o->metavar : "VALUE VALUE");
        else
            fl_cli_opt_error(tool, tk->name, NULL, "needs a value");
        return;
    }
    const char *v = optarg;
    if (!is_long && eq)
        v = a + 3; /* "-o=FILE": getopt would keep the '=' */
    if (!eq && at + 1 < argc && v == argv[at + 1] && !strncmp(v, "--", 2) && v[2]) {
        /* "--report --quiet": the value was forgotten; a value that really starts with "--"
         * can be given as --report=--quiet */
        fl_cli_opt_error(tool, tk->name, NULL,
                         "needs a value (next is the option '%.40s'; write %s=VALUE "
                         "for a value starting with --)",
                         v, tk->name);
        return;
    }
    if (!*v) {
        fl_cli_opt_error(tool, tk->name, NULL, "empty value");
        return;
    }
    tk->value = v;
    if (o->kind == FL_CLI_TEXT2) {
        const char *v2 = optind < argc ? argv[optind] : NULL;
        if (!v2 || !*v2 || !strncmp(v2, "--", 2)) {
            fl_cli_opt_error(tool, tk->name, NULL, "needs two values: %s",
                             o->metavar ? o->metavar : "VALUE VALUE");
            return;
        }
        tk->value2 = v2;
        tk->next = ++optind;
    }
    tk->what = T_OPT;
}

/* Forget getopt's state of an earlier parse (a half-read "-qx" cluster included). */
static void getopt_reset(char **argv)
{
    static char *none[] = {NULL, NULL};
    none[0] = argv[0];
    opterr = 0;
    optind = 0;
    getopt_long(1, none, "+", NULL, NULL);
    optind = 1;
}

int fl_cli_parse(const fl_cli_tool *tool, const fl_cli_cmd *cmd, int argc, char **argv, void *opts,
                 fl_cli_parsed *out)
{
    memset(out, 0, sizeof *out);
    out->tool = tool;
    out->cmd = cmd;
    scan s;
    if (scan_init(&s, cmd->opts)) {
        fl_cli_error(tool->name, "%s: out of memory", cmd->name);
        return FL_CLI_USAGE;
    }
    int r = FL_CLI_RUN;
    getopt_reset(argv);
    while (optind < argc && r == FL_CLI_RUN) {
        token tk;
        next_token(&s, tool->name, cmd->name, argc, argv, &tk);
        switch (tk.what) {
        case T_POS:
            if (cmd->max_pos == FL_CLI_POS_ANY) {
                /* argv[1 + npos] was read already (each positional takes one word), so the
                 * words can be gathered in place */
                if (out->npos < FL_CLI_MAX_POS)
                    out->pos[out->npos] = tk.value;
                argv[1 + out->npos++] = (char *)tk.value;
            } else if (out->npos >= cmd->max_pos || out->npos >= FL_CLI_MAX_POS) {
                char q[96];
                fl_cli_error(tool->name, "%s: unexpected argument '%s' (see %s %s --help)",
                             cmd->name, fl_cli_quote(tk.value, q, sizeof q), tool->name, cmd->name);
                r = FL_CLI_USAGE;
            } else {
                out->pos[out->npos++] = tk.value;
            }
            break;
        case T_HELP:
            fl_cli_print_help(tool, cmd, stdout);
            r = FL_CLI_DONE;
            break;
        case T_VERSION:
            tool->version(stdout);
            r = FL_CLI_DONE;
            break;
        case T_OPT:
            if (store(&s.t[tk.index], tk.name, tk.value, tk.value2, opts, tool->name))
                r = FL_CLI_USAGE;
            out->given[tk.index] = 1;
            break;
        case T_ERROR: r = FL_CLI_USAGE; break;
        }
    }
    free(s.lo);
    return r;
}

int fl_cli_given(const fl_cli_parsed *p, const char *name)
{
    const fl_cli_opt *t = p->cmd->opts;
    for (size_t i = 0; t[i].kind != FL_CLI_END && i < FL_CLI_MAX_OPTS; i++)
        if (is_option(&t[i]) && !strcmp(t[i].name, name) && p->given[i])
            return 1;
    return 0;
}

int fl_cli_copy_without(const fl_cli_tool *tool, const fl_cli_cmd *cmd, int argc, char **argv,
                        const char *name, char **out)
{
    scan s;
    int k = 0;
    if (scan_init(&s, cmd->opts))
        return 0;
    getopt_reset(argv);
    out[k++] = argv[0];
    while (optind < argc) {
        token tk;
        next_token(&s, tool->name, cmd->name, argc, argv, &tk);
        if (tk.next <= tk.first)
            break; /* cannot happen after a successful parse; do not loop */
        int drop = tk.what == T_OPT && !strcmp(s.t[tk.index].name, name);
        for (int i = tk.first; i < tk.next && !drop; i++)
            out[k++] = argv[i];
    }
    out[k] = NULL;
    free(s.lo);
    return k;
}

/* ---- help --------------------------------------------------------------------------------- */

/* Print `text`'s lines, the first after `left` (padded to column `at`), the others indented;
 * then "(default: DEF)", on a line of its own when it would make the last one too long. */
static void help_lines(FILE *out, int at, const char *left, const char *text, const char *def)
{
    int col = fprintf(out, "%s", left);
    if (col > at - 2) {
        fputc('\n', out);
        col = 0;
    }
    col += fprintf(out, "%*s", at - col, "");
    for (const char *p = text ? text : ""; *p;) {
        size_t l = strcspn(p, "\n");
        fwrite(p, 1, l, out);
        col += (int)l;
        p += l;
        if (*p == '\n')
            p++;
        if (*p)
            col = fprintf(out, "\n%*s", at, "") - 1;
    }
    if (def) {
        if (col + (int)strlen(def) + 12 > 100)
            col = fprintf(out, "\n%*s", at, "") - 1;
        fprintf(out, "%s(default: %s)", col > at ? " " : "", def);
    }
    fputc('\n', out);
}

void fl_cli_print_help(const fl_cli_tool *tool, const fl_cli_cmd *cmd, FILE *out)
{
    (void)tool;
    if (cmd->synopsis)
        fputs(cmd->synopsis, out);
    for (const fl_cli_opt *o = cmd->opts; o->kind != FL_CLI_END; o++) {
        if (o->kind == FL_CLI_SECTION) {
            fprintf(out, "\n%s\n", o->help);
            continue;
        }
        if (o->hidden)
            continue;
        char left[128], mv[128];
        int n = snprintf(left, sizeof left, "  ");
        if (o->short_name)
            n += snprintf(left + n, sizeof left - n, "-%c, ", o->short_name);
        n += snprintf(left + n, sizeof left - n, "--%s", o->name);
        if (takes_value(o))
            snprintf(left + n, sizeof left - n, " %s", metavar_of(o, mv, sizeof mv));
        help_lines(out, HELP_COL, left, o->help, o->def);
    }
    help_lines(out, HELP_COL, "  -h, --help", "this help; -V, --version: the version", NULL);
    if (cmd->epilog)
        fputs(cmd->epilog, out);
}

void fl_cli_print_tool_help(const fl_cli_tool *tool, FILE *out)
{
    fputs(tool->synopsis, out);
    fputs("\ncommands:\n", out);
    for (const fl_cli_cmd *const *c = tool->cmds; *c; c++) {
        char left[128];
        snprintf(left, sizeof left, "  %s %s", (*c)->name, (*c)->args ? (*c)->args : "");
        help_lines(out, CMD_COL, left, (*c)->summary, NULL);
    }
    fprintf(out, "\nRun '%s COMMAND --help' for a command's options.\n", tool->name);
    if (tool->epilog)
        fputs(tool->epilog, out);
}

int fl_cli_dispatch(const fl_cli_tool *tool, int argc, char **argv)
{
    if (argc < 2) {
        fl_cli_print_tool_help(tool, stderr);
        return FL_EXIT_USAGE;
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "help")) {
        fl_cli_print_tool_help(tool, stdout);
        return fl_cli_close_output(tool->name, stdout, "stdout");
    }
    if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
        tool->version(stdout);
        return fl_cli_close_output(tool->name, stdout, "stdout");
    }
    char names[256] = "";
    for (const fl_cli_cmd *const *c = tool->cmds; *c; c++) {
        if (!strcmp(a, (*c)->name)) {
            int r = (*c)->run(tool, argc - 1, argv + 1);
            int w = fl_cli_close_output(tool->name, stdout, "stdout");
            return r ? r : w;
        }
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", (*c)->name);
    }
    char q[96];
    fl_cli_error(tool->name, "unknown command '%s' (commands: %s; see %s --help)",
                 fl_cli_quote(a, q, sizeof q), names, tool->name);
    return FL_EXIT_USAGE;
}
