/* export_cli.c — `trainfast export CKPT|CHECKPOINT_DIR -o FILE.onnx [--batch N|dynamic]
 * [--opset N] [--json]`: the checkpoint's inference graph as ONNX (export_onnx.h), with the
 * weights `trainfast eval` evaluates (the EMA weights when the run kept an EMA). Built without
 * protobuf-c (no TF_HAVE_ONNX), the command exists and exits 2 saying what to install. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "fl_cli.h"
#include "fl_file.h"
#include "fl_cli_table.h"
#include "fl_json.h"
#include "model.h"
#ifdef TF_HAVE_ONNX
#include "export_onnx.h"
#include "train_internal.h"
#endif

#define TOOL "trainfast"

typedef struct export_opts {
    const char *out;
    int64_t batch; /* 0: dynamic */
    int opset, json;
} export_opts;

/* --batch N|dynamic */
static int opt_batch(void *opts, const char *name, const char *v, const char *tool)
{
    export_opts *o = opts;
    uint64_t n;
    if (!strcmp(v, "dynamic")) {
        o->batch = 0;
        return 0;
    }
    if (fl_cli_parse_u64(v, 1, 1u << 20, &n)) {
        fl_cli_opt_error(tool, name, v, "expected 'dynamic' or a batch size from 1 to %u",
                         1u << 20);
        return -1;
    }
    o->batch = (int64_t)n;
    return 0;
}

#define F(field) FL_CLI_FIELD(export_opts, field)
static const fl_cli_opt export_table[] = {
    {FL_CLI_TEXT, "output", 'o', .off = F(out), .metavar = "FILE.onnx",
     .help = "where to write the model (a file is replaced: written to FILE.onnx.tmp, then\n"
             "renamed; a symlink's target likewise; a device or FIFO is written in place)"},
    {FL_CLI_CUSTOM, "batch", .parse = opt_batch, .metavar = "N|dynamic",
     .help = "batch dimension of input `images` and output `logits`", .def = "dynamic"},
    {FL_CLI_INT, "opset", .off = F(opset), .umin = 13, .umax = 21, .metavar = "N",
     .help = "ONNX default-domain opset (13-21)", .def = "17"},
    {FL_CLI_FLAG, "json", .off = F(json), .help = "print what was written as one JSON object"},
    {FL_CLI_END},
};
#undef F

static int export_run(const fl_cli_tool *tool, int argc, char **argv);

const fl_cli_cmd tf_export_cmd = {
    .name = "export",
    .args = "CKPT -o FILE.onnx [options]",
    .summary = "write a checkpoint's inference graph as ONNX (for ONNX Runtime, TensorRT)",
    .synopsis =
        "usage: trainfast export CKPT|CHECKPOINT_DIR -o FILE.onnx [--batch N|dynamic] [--opset N]\n"
        "\n"
        "Writes the trained network of a checkpoint (a file, or a checkpoint directory: its\n"
        "newest valid one) as an ONNX model for inference: batch norm folded into the "
        "convolutions,\n"
        "the input normalisation inside the graph. Input `images`: float32 [N, C, H, W],\n"
        "raw pixel values 0..255 (RGB or grey, as the loader gives them); output `logits`:\n"
        "float32 [N, classes]. The weights are those `trainfast eval` uses (the EMA when the\n"
        "run kept one). Class names and the input contract are in the model's metadata_props.\n",
    .opts = export_table,
    .epilog = "Building a TensorRT engine from it (trtexec), the input contract: docs/DEPLOY.md.\n"
              "Exit status: 0 written, 1 data or runtime error, 2 usage (also: a trainfast built\n"
              "without protobuf-c).\n",
    .max_pos = 1,
    .run = export_run,
};

#ifdef TF_HAVE_ONNX
static void print_result(const char *ckpt, const char *out, const tf_checkpoint *ck,
                         const tf_onnx_options *o, const tf_onnx_summary *s, int json)
{
    if (json) {
        fl_json j;
        fl_json_init(&j);
        fl_json_begin_object(&j);
        fl_json_key(&j, "checkpoint");
        fl_json_string(&j, ckpt);
        fl_json_key(&j, "onnx");
        fl_json_string(&j, out);
        fl_json_key(&j, "model");
        fl_json_string(&j, ck->model);
        fl_json_key(&j, "weights");
        fl_json_string(&j, o->weights);
        fl_json_key(&j, "opset");
        fl_json_int(&j, o->opset ? o->opset : TF_ONNX_OPSET_DEFAULT);
        fl_json_key(&j, "batch");
        if (o->batch)
            fl_json_int(&j, o->batch);
        else
            fl_json_string(&j, "dynamic");
        fl_json_key(&j, "input");
        fl_json_begin_array(&j);
        fl_json_int(&j, ck->in_c);
        fl_json_int(&j, ck->in_h);
        fl_json_int(&j, ck->in_w);
        fl_json_end_array(&j);
        fl_json_key(&j, "classes");
        fl_json_int(&j, ck->num_classes);
        fl_json_key(&j, "nodes");
        fl_json_int(&j, s->nodes);
        fl_json_key(&j, "initializers");
        fl_json_int(&j, s->initializers);
        fl_json_key(&j, "weights_count");
        fl_json_int(&j, s->weights);
        fl_json_key(&j, "bn_folded_conv");
        fl_json_int(&j, s->bn_folded_conv);
        fl_json_key(&j, "bn_folded_pool");
        fl_json_int(&j, s->bn_folded_pool);
        fl_json_key(&j, "bn_affine");
        fl_json_int(&j, s->bn_affine);
        fl_json_key(&j, "bytes");
        fl_json_uint(&j, s->bytes);
        fl_json_end_object(&j);
        puts(fl_json_failed(&j) ? "{}" : fl_json_text(&j));
        fl_json_free(&j);
        return;
    }
    printf("%s: %s (%s weights, %dx%dx%d, %d classes) -> %s: %d nodes, %.1f MB, opset %d, "
           "batch %s; BN folded: %d into a conv, %d through a max-pool, %d left as Mul+Add\n",
           ckpt, ck->model, o->weights, ck->in_c, ck->in_h, ck->in_w, ck->num_classes, out,
           s->nodes, (double)s->bytes / 1e6, o->opset ? o->opset : TF_ONNX_OPSET_DEFAULT,
           o->batch ? "fixed" : "dynamic", s->bn_folded_conv, s->bn_folded_pool, s->bn_affine);
}

static int do_export(const char *ckpt, const export_opts *e)
{
    char latest[4096];
    tf_checkpoint ck;
    tf_model_spec spec;
    int status = tf_eval_load(&ckpt, latest, sizeof latest, NULL, e->json, &ck, &spec);
    if (status)
        return status;
    if (e->out && fl_file_clobbers(e->out, ckpt)) {
        fl_cli_error(TOOL,
                     "-o %s is the checkpoint %s: writing it would replace the checkpoint; "
                     "write it elsewhere (nothing was written)",
                     e->out, ckpt);
        tf_model_free(&spec);
        tf_checkpoint_free(&ck);
        return FL_EXIT_USAGE;
    }
    /* the weights `trainfast eval` evaluates: the EMA when the run kept one (train_eval.c) */
    const int ema = ck.has_ema && ck.st.ema_params && ck.st.ema_stats;
    char epoch[32], step[32];
    snprintf(epoch, sizeof epoch, "%llu", (unsigned long long)ck.epoch);
    snprintf(step, sizeof step, "%llu", (unsigned long long)ck.st.step);
    const tf_onnx_meta meta[] = {{"checkpoint", ckpt}, {"epoch", epoch}, {"optimizer_steps", step}};
    const int named =
        (ck.cfg.present & TF_CFG_CLASSES) && ck.cfg.class_count == (uint32_t)ck.num_classes;
    char doc[4800];
    snprintf(doc, sizeof doc,
             "%s trained by trainfast (fastload %s), exported from %s. Input "
             "'images': float32 [N,%d,%d,%d], pixel values 0..255 (%s); output 'logits': float32 "
             "[N,%d]. Class names: metadata_props 'classes'.",
             ck.model, fl_cli_version(), ckpt, ck.in_c, ck.in_h, ck.in_w,
             ck.in_c == 1 ? "grey" : "RGB", ck.num_classes);
    tf_onnx_options o = {
        .opset = e->opset,
        .batch = e->batch,
        .weights = ema ? "ema" : "raw",
        .classes = named ? (const char *const *)ck.cfg.classes : NULL,
        .class_count = named ? ck.cfg.class_count : 0,
        .meta = meta,
        .n_meta = 3,
        .doc = doc,
    };
    if (!named)
        fl_cli_warn(TOOL, "%s records no class names: metadata 'classes' lists the label numbers",
                    ckpt);
    tf_onnx_summary sum;
    fl_error err;
    if (tf_onnx_export(e->out, &spec, ema ? ck.st.ema_params : ck.st.params,
                       ema ? ck.st.ema_stats : ck.st.stats, &o, &sum, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        status = err.code == FL_E_INVALID ? FL_EXIT_USAGE : FL_EXIT_DATA;
    } else {
        print_result(ckpt, e->out, &ck, &o, &sum, e->json);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fl_cli_error(TOOL, "cannot write to stdout: %s", strerror(errno));
            status = FL_EXIT_DATA;
        }
    }
    tf_model_free(&spec);
    tf_checkpoint_free(&ck);
    return status;
}
#endif

static int export_run(const fl_cli_tool *tool, int argc, char **argv)
{
    export_opts e = {.opset = 17};
    fl_cli_parsed cl;
    int r = fl_cli_parse(tool, &tf_export_cmd, argc, argv, &e, &cl);
    if (r != FL_CLI_RUN)
        return r == FL_CLI_DONE ? FL_EXIT_OK : FL_EXIT_USAGE;
    if (cl.npos != 1 || !e.out) {
        fl_cli_error(TOOL,
                     "export needs CKPT and -o FILE.onnx (trainfast export CKPT -o FILE.onnx)");
        return FL_EXIT_USAGE;
    }
    struct stat st;
    if (stat(e.out, &st) == 0 && S_ISDIR(st.st_mode)) {
        fl_cli_error(TOOL, "-o %s: is a directory (give the file to write, e.g. %s/model.onnx)",
                     e.out, e.out);
        return FL_EXIT_USAGE;
    }
#ifdef TF_HAVE_ONNX
    return do_export(cl.pos[0], &e);
#else
    fl_cli_error(TOOL,
                 "export: this trainfast was built without ONNX export (it needs "
                 "protobuf-c-compiler, libprotobuf-c-dev and python3-onnx when cmake runs, and "
                 "FL_ONNX_EXPORT=ON)");
    return FL_EXIT_USAGE;
#endif
}
