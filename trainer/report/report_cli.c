/* report_cli.c — `trainfast report LOG.jsonl [LOG2.jsonl ...] [-o FILE.html] [--title TEXT]`:
 * the HTML report of one or more training logs (`trainfast train --log`), several runs on the same
 * charts to compare them (report_train.c, report_html.c; docs/REPORT.md). */
#include <stdio.h>

#include "fl_cli.h"
#include "fl_cli_table.h"
#include "report_train.h"

typedef struct report_opts {
    const char *out, *title;
} report_opts;

static const fl_cli_opt report_table[] = {
    {FL_CLI_TEXT, "output", 'o', .off = FL_CLI_FIELD(report_opts, out), .metavar = "FILE.html",
     .help = "write the page there ('-': stdout)", .def = "report.html"},
    {FL_CLI_TEXT, "title", .off = FL_CLI_FIELD(report_opts, title), .metavar = "TEXT",
     .help = "the page's title", .def = "trainfast report"},
    {FL_CLI_END},
};

static int report_run(const fl_cli_tool *tool, int argc, char **argv);

const fl_cli_cmd tf_report_cmd = {
    .name = "report",
    .args = "LOG.jsonl... [-o FILE.html]",
    .summary = "an HTML report (charts, figures, configuration) of training logs (--log)",
    .synopsis =
        "usage: trainfast report LOG.jsonl [LOG2.jsonl ...] [-o FILE.html] [--title TEXT]\n"
        "\n"
        "Draws one self-contained HTML page (inline SVG charts, nothing fetched) from the JSONL\n"
        "logs of `trainfast train --log`: loss and top-1 per epoch, learning rate, images/s,\n"
        "data wait, where the time went, GPU utilisation and memory when logged, the final\n"
        "figures and the configuration. Several logs share the charts (one colour per run,\n"
        "named by file name) to compare runs.\n",
    .opts = report_table,
    .epilog =
        "A malformed log line is an error naming FILE:LINE; a last line cut short (a run stopped\n"
        "while writing it) is skipped with a warning.\n"
        "Exit status: 0 done, 1 a log could not be read or the page written, 2 usage.\n",
    .max_pos = FL_CLI_POS_ANY,
    .run = report_run,
};

static int report_run(const fl_cli_tool *tool, int argc, char **argv)
{
    report_opts o = {.out = "report.html", .title = "trainfast report"};
    fl_cli_parsed cl;
    int r = fl_cli_parse(tool, &tf_report_cmd, argc, argv, &o, &cl);
    if (r != FL_CLI_RUN)
        return r == FL_CLI_DONE ? FL_EXIT_OK : FL_EXIT_USAGE;
    if (cl.npos < 1) {
        fl_cli_error("trainfast", "report needs at least one LOG.jsonl (trainfast report "
                                  "LOG.jsonl)");
        return FL_EXIT_USAGE;
    }
    return tf_report_main((const char *const *)argv + 1, cl.npos, o.out, o.title); /* POS_ANY */
}
