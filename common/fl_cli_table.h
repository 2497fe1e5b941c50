/* fl_cli_table.h — the one command-line layer of packdata, fastload and trainfast: each command
 * is a table of options (name, argument kind and range, default, help text), parsed with
 * getopt_long; its --help is generated from the same table, so validation, error messages and
 * help cannot drift apart. A tool's sub-commands are a table too (fl_cli_tool, fl_cli_dispatch).
 *
 * Rules every command gets from the layer:
 *  - "--opt value" and "--opt=value" (short options: "-o value" and "-o=value"); an option given
 *    twice takes its last value, every value given is checked;
 *  - a missing, empty or malformed value, an unknown option, an abbreviated option ("--qui"), a
 *    flag given a value ("--json=1"), too many positional arguments: exit 2 (FL_EXIT_USAGE)
 *    after ONE line on stderr naming the option or argument;
 *  - -h/--help prints the generated help on stdout, -V/--version the tool's version (exit 0);
 *  - a positional argument may come before, between or after the options; "-" is positional. */
#ifndef FL_CLI_TABLE_H
#define FL_CLI_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What an option takes and where it stores it. Every kind but SECTION writes one field of the
 * caller's options struct at `off` (FL_CLI_FIELD); its type is given per kind. */
typedef enum fl_cli_kind {
    FL_CLI_END = 0,  /* ends a table */
    FL_CLI_SECTION,  /* a heading in --help ("Output:"); `help` is the heading */
    FL_CLI_FLAG,     /* int = 1 */
    FL_CLI_FLAG_OFF, /* int = 0 ("--no-flip") */
    FL_CLI_U64,      /* uint64_t, a decimal integer in [umin, umax] */
    FL_CLI_U32,      /* uint32_t, same */
    FL_CLI_INT,      /* int, same (umax <= INT_MAX) */
    FL_CLI_FLOAT,  /* float, a finite decimal number in [dmin, dmax] ((dmin, dmax] when open_min) */
    FL_CLI_SIZE,   /* uint64_t bytes: "256M", "1.5G", "4096" in [umin, umax] */
    FL_CLI_ENUM,   /* a 4-byte int or enum field = the value of the matching choice */
    FL_CLI_CHOICE, /* const char * = the value text, which must be one of the choices */
    FL_CLI_TEXT,   /* const char * = the value (any non-empty text: a path, a name) */
    FL_CLI_TEXT2,  /* two values ("--idx IMAGES LABELS"): const char * at off and off2 */
    FL_CLI_CUSTOM, /* parse(opts, name, value, tool) validates and stores */
} fl_cli_kind;

/* One accepted word of an ENUM or CHOICE option; `hidden` ones (aliases) are accepted but not
 * listed in the help or the error message. A list ends with {NULL}. */
typedef struct fl_cli_choice {
    const char *word;
    int value;
    int hidden;
} fl_cli_choice;

typedef struct fl_cli_opt {
    fl_cli_kind kind;
    const char *name;             /* long name without "--" */
    char short_name;              /* 0: none ('q' for -q) */
    size_t off, off2;             /* FL_CLI_FIELD(struct, field) */
    uint64_t umin, umax;          /* U64, U32, INT, SIZE */
    double dmin, dmax;            /* FLOAT */
    int open_min;                 /* FLOAT: the minimum itself is refused */
    const fl_cli_choice *choices; /* ENUM, CHOICE */
    /* CUSTOM: parse `value` of option `name` ("--resize" or "-o" as given) into the options
     * struct `opts`; return 0, or -1 after printing one line with fl_cli_opt_error. */
    int (*parse)(void *opts, const char *name, const char *value, const char *tool);
    const char
        *metavar;     /* "N", "FILE"; NULL: the choices joined by '|' (ENUM, CHOICE) or "VALUE" */
    const char *def;  /* the default as --help shows it ("256M", "all cores"); NULL: none */
    const char *help; /* one or more lines ('\n' separated), without the default */
    int hidden;       /* accepted, not listed (an alias such as --grey) */
} fl_cli_opt;

/* Offset of `field` (may be nested: "so.root") in struct `type`. */
#define FL_CLI_FIELD(type, field) offsetof(type, field)

struct fl_cli_tool;

/* One command: `packdata pack`, `fastload digest`, `trainfast eval`. */
typedef struct fl_cli_cmd {
    const char *name;    /* "pack" */
    const char *args;    /* positional arguments for the tool's command list: "SRC DST [options]" */
    const char *summary; /* one line (or more, '\n' separated) for the tool's command list */
    const char *synopsis;   /* start of --help: usage lines and what the command does */
    const fl_cli_opt *opts; /* terminated by {FL_CLI_END} */
    const char *epilog;     /* end of --help (NULL: none) */
    int max_pos;            /* positional arguments accepted; more is a usage error.
                               FL_CLI_POS_ANY: any number (file lists): fl_cli_parse gathers them,
                               in order, at argv[1..npos] (argv is rearranged: what follows them
                               is no longer the command line) and pos[] holds the first
                               FL_CLI_MAX_POS */
    /* Run the command: argv[0] is the command name; `tool` is the tool running it (for
     * fl_cli_parse). Returns the exit status. */
    int (*run)(const struct fl_cli_tool *tool, int argc, char **argv);
} fl_cli_cmd;

/* A tool: its name, version line and commands. */
typedef struct fl_cli_tool {
    const char *name;              /* "packdata" */
    const char *synopsis;          /* start of the tool's --help */
    const fl_cli_cmd *const *cmds; /* NULL-terminated */
    const char *epilog;            /* end of the tool's --help */
    void (*version)(FILE *out);    /* prints the --version line(s) */
} fl_cli_tool;

/* What one parse found. */
#define FL_CLI_MAX_POS  8
#define FL_CLI_POS_ANY  (-1)
#define FL_CLI_MAX_OPTS 96
typedef struct fl_cli_parsed {
    const fl_cli_tool *tool;
    const fl_cli_cmd *cmd;
    const char *pos[FL_CLI_MAX_POS]; /* positional arguments in order */
    int npos;
    unsigned char given[FL_CLI_MAX_OPTS]; /* per table entry: given at least once */
} fl_cli_parsed;

/* Results of fl_cli_parse. */
enum { FL_CLI_RUN = 0, FL_CLI_DONE = 1, FL_CLI_USAGE = 2 };

/* Parse argv (argv[0] is the command name) against cmd's table, storing values into the options
 * struct `opts` (which the caller has filled with the defaults). Returns FL_CLI_RUN (run the
 * command), FL_CLI_DONE (--help or --version was printed: exit 0) or FL_CLI_USAGE (one line was
 * printed on stderr: exit 2). `out` receives the positional arguments and the options given. */
int fl_cli_parse(const fl_cli_tool *tool, const fl_cli_cmd *cmd, int argc, char **argv, void *opts,
                 fl_cli_parsed *out);

/* Non-zero when option `name` (long name without "--") was on the command line. */
int fl_cli_given(const fl_cli_parsed *p, const char *name);

/* Print cmd's generated help (synopsis, options with their defaults, epilog) to `out`. */
void fl_cli_print_help(const fl_cli_tool *tool, const fl_cli_cmd *cmd, FILE *out);
/* Print the tool's help (synopsis, the command list, epilog) to `out`. */
void fl_cli_print_tool_help(const fl_cli_tool *tool, FILE *out);

/* Copy argv (a command's, already parsed successfully by fl_cli_parse) to `out` (room for argc
 * + 1 pointers), leaving out every occurrence of option `name` and its value; NULL-terminated.
 * Returns the number of arguments copied. (trainfast --nproc re-executes itself without it.) */
int fl_cli_copy_without(const fl_cli_tool *tool, const fl_cli_cmd *cmd, int argc, char **argv,
                        const char *name, char **out);

/* The tool's main: argv[1] names the command (or is --help/-h/help, --version/-V); runs it and
 * returns the exit status. No command: the tool's help on stderr, exit 2; an unknown command:
 * one line naming it, exit 2. */
int fl_cli_dispatch(const fl_cli_tool *tool, int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
