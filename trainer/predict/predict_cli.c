/* predict_cli.c — the command line of `trainfast predict` (its option table, --help text and
 * positional arguments: CKPT, then one packed dataset or any number of image files), handed to
 * tf_predict_main (predict.c). main.c lists tf_predict_cmd among trainfast's commands. */
#include <stdio.h>

#include "fl_cli.h"
#include "fl_cli_table.h"
#include "predict.h"
#include "train.h"

#define TOOL "trainfast"

static const fl_cli_choice devices[] = {
    {"cpu", 0, 0}, {"cuda", 0, 0}, {"auto", 0, 0}, {NULL, 0, 0}};

#define P(field) FL_CLI_FIELD(tf_predict_opts, field)
static const fl_cli_opt predict_table[] = {
    {FL_CLI_U32, "batch", .off = P(batch), .umin = 1, .umax = 1 << 16, .metavar = "B",
     .help = "samples per batch", .def = "256"},
    {FL_CLI_CHOICE, "device", .off = P(device), .choices = devices, .metavar = "D",
     .help = "cpu, cuda (bf16, as training) or auto", .def = "auto"},
    {FL_CLI_U32, "top", .off = P(top), .umin = 1, .umax = 1000, .metavar = "K",
     .help = "classes listed per record, most probable first", .def = "1"},
    {FL_CLI_FLAG, "json", .off = P(json),
     .help = "stdout: JSON lines, one object per record ({\"index\", \"file\" or\n"
             "\"label\" and \"label_name\", \"top\": [{\"class\", \"name\", \"prob\"}]}),\n"
             "then one summary object ({\"summary\": true, \"images_per_sec\", \"top1\", ...})"},
    {FL_CLI_TEXT, "logits", .off = P(logits_path), .metavar = "FILE.npy",
     .help = "write the logits: NumPy .npy, float32 [N, classes], rows in record order"},
    {FL_CLI_TEXT, "csv", .off = P(csv_path), .metavar = "FILE",
     .help = "write the predictions as CSV: index, file (images) or label,\n"
             "class_1, prob_1, ... class_K, prob_K"},
    {FL_CLI_INT, "threads", .off = P(threads), .umin = 1, .umax = 256, .metavar = "N",
     .help = "CPU compute threads", .def = "all cores"},
    {FL_CLI_INT, "workers", .off = P(workers), .umin = 1, .umax = 1024, .metavar = "N",
     .help = "loader decode threads (packed data)", .def = "1"},
    {FL_CLI_ENUM, "cpu-backend", .off = P(cpu_impl), .choices = tf_cpu_backend_choices,
     .metavar = "B", .help = TF_CPU_BACKEND_HELP, .def = TF_CPU_BACKEND_DEF},
    {FL_CLI_END},
};
#undef P

static int predict_run(const fl_cli_tool *tool, int argc, char **argv);

const fl_cli_cmd tf_predict_cmd = {
    .name = "predict",
    .args = "CKPT DATA|IMAGE... [options]",
    .summary = "predict with a checkpoint: per-record classes, .npy logits, CSV, JSON",
    .synopsis =
        "usage: trainfast predict CKPT DATA [--batch B] [--device D] [--top K] [--json]\n"
        "                         [--logits FILE.npy] [--csv FILE] [--cpu-backend B]\n"
        "       trainfast predict CKPT IMAGE... [options]\n"
        "\n"
        "Runs a checkpoint (file, or a checkpoint directory: its newest valid one) over a dataset\n"
        "packed by packdata, read as `trainfast eval` reads it, or over image files (JPEG, PNG,\n"
        "WebP) decoded and resized as the loader decodes a record: for a model trained at --size\n"
        "on images of varying size, the loader's evaluation crop (shorter side to size/0.875,\n"
        "centre crop); for a model trained on fixed-size data, the whole image resized to the\n"
        "model's input (an image of that size is taken as it is). Inference is eval's forward\n"
        "without TTA (BN in eval mode; the EMA weights when the run kept them; bf16 on the GPU).\n"
        "Prints one line per record (the most probable classes and their probabilities) and,\n"
        "for a packed (labelled) dataset, top-1/top-5; images/s on stderr (or in the JSON\n"
        "summary).\n",
    .opts = predict_table,
    .epilog =
        "Exit status: 0 done, 1 data or runtime error (unreadable checkpoint or image, an output\n"
        "that cannot be written), 2 usage or refusal (data of another image shape or other "
        "classes).\n",
    .max_pos = FL_CLI_POS_ANY,
    .run = predict_run,
};

static int predict_run(const fl_cli_tool *tool, int argc, char **argv)
{
    tf_predict_opts p = {.batch = 256, .top = 1, .device = "auto"};
    fl_cli_parsed cl;
    int r = fl_cli_parse(tool, &tf_predict_cmd, argc, argv, &p, &cl);
    if (r != FL_CLI_RUN)
        return r == FL_CLI_DONE ? FL_EXIT_OK : FL_EXIT_USAGE;
    if (cl.npos < 2) {
        fl_cli_error(TOOL, "predict needs CKPT and DATA (trainfast predict CKPT DATA|IMAGE...)");
        return FL_EXIT_USAGE;
    }
    /* FL_CLI_POS_ANY: the positional arguments are argv[1..npos] */
    p.ckpt = argv[1];
    p.data = argv + 2;
    p.ndata = cl.npos - 1;
    if ((r = tf_cpu_impl_refused(p.cpu_impl)))
        return r;
    return tf_predict_main(&p);
}
