/* main.c — the trainfast command line: `train`, `eval` and `doctor` as option tables of the
 * command-line layer (common/fl_cli_table.h: getopt_long, --help generated from the tables),
 * parsed into tf_options and handed over to train.c / doctor.c; `--nproc` re-executes under
 * mpirun. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_cli_table.h"
#include "dist.h"
#include "train.h"

#define TOOL "trainfast"

/* ---- train ---------------------------------------------------------------------------------- */

/* --batch B|auto */
static int opt_batch(void *opts, const char *name, const char *v, const char *tool)
{
    tf_options *o = opts;
    uint64_t n;
    if (!strcmp(v, "auto")) {
        o->batch = 0;
        o->batch_auto = 1;
        return 0;
    }
    if (fl_cli_opt_u64(tool, name, v, 1, 1 << 20, &n))
        return -1;
    o->batch = (uint32_t)n;
    o->batch_auto = 0;
    return 0;
}

/* --epochs E|auto (auto = 0: train.c sizes the run from the dataset, epoch_budget.h) */
static int opt_epochs(void *opts, const char *name, const char *v, const char *tool)
{
    tf_options *o = opts;
    uint64_t n;
    if (!strcmp(v, "auto")) {
        o->epochs = 0;
        return 0;
    }
    if (fl_cli_opt_u64(tool, name, v, 1, 100000, &n))
        return -1;
    o->epochs = (int)n;
    return 0;
}

#define F(field) FL_CLI_FIELD(tf_options, field)

static const fl_cli_choice models[] = {
    {"fastcnn", 0, 0}, {"resnet18", 0, 0}, {"resnet50", 0, 0}, {NULL, 0, 0}};
static const fl_cli_choice schedules[] = {{"linear", 0, 0}, {"cosine", 1, 0}, {NULL, 0, 0}};
static const fl_cli_choice precisions[] = {
    {"bf16", TF_BF16, 0}, {"fp16", TF_FP16, 0}, {"fp32", TF_FP32, 0}, {NULL, 0, 0}};
static const fl_cli_choice devices[] = {
    {"cpu", 0, 0}, {"cuda", 0, 0}, {"auto", 0, 0}, {NULL, 0, 0}};
_Static_assert(sizeof(tf_precision) == sizeof(int), "FL_CLI_ENUM fields are 4-byte ints");

static const fl_cli_opt train_opts[] = {
    {FL_CLI_SECTION, .help = "data and model:"},
    {FL_CLI_TEXT, "data", .off = F(data), .metavar = "DIR",
     .help = "training dataset (packed by packdata)"},
    {FL_CLI_TEXT, "val", .off = F(val), .metavar = "DIR", .help = "validation dataset"},
    {FL_CLI_CHOICE, "model", .off = F(model), .choices = models, .metavar = "NAME",
     .help = "fastcnn (28-64 px), resnet18, resnet50 (224 px)", .def = "fastcnn"},
    {FL_CLI_INT, "width", .off = F(mopt.width), .umin = 1, .umax = 4096, .metavar = "N",
     .help = "fastcnn channels of the first block (doubles per block)", .def = "24"},
    {FL_CLI_FLAG, "residual", .off = F(mopt.residual),
     .help = "fastcnn: add a residual conv pair per block"},
    {FL_CLI_FLAG, "gelu", .off = F(mopt.gelu), .help = "GELU instead of ReLU"},
    {FL_CLI_INT, "size", .off = F(size), .umin = 8, .umax = 4096, .metavar = "S",
     .help = "image size for variable-size datasets", .def = "224"},

    {FL_CLI_SECTION, .help = "optimisation:"},
    {FL_CLI_CUSTOM, "epochs", .parse = opt_epochs, .metavar = "E|auto",
     .help = "epochs (1-100000); auto: enough to see at least 120,000 samples,\n"
             "at least 2 (6,000 images: 20 epochs; 60,000: 2)",
     .def = "auto"},
    {FL_CLI_CUSTOM, "batch", .parse = opt_batch, .metavar = "B|auto",
     .help = "samples per batch (per process); auto: the largest power of two that\n"
             "fits in GPU memory, found by trying (on CPU: the default)",
     .def = "128 on CPU, 512 on GPU"},
    {FL_CLI_FLOAT, "lr", .off = F(lr), .dmin = 0, .dmax = 100, .open_min = 1, .metavar = "LR",
     .help = "peak learning rate, tuned for fastcnn at batch 128: lower it for\n"
             "resnet18/50 or small batches, e.g. 0.01 at batch 8",
     .def = "0.2"},
    {FL_CLI_FLOAT, "wd", .off = F(wd), .dmin = 0, .dmax = 1, .metavar = "WD",
     .help = "weight decay, not on BN/bias", .def = "5e-4"},
    {FL_CLI_FLOAT, "momentum", .off = F(momentum), .dmin = 0, .dmax = 0.9999f, .metavar = "M",
     .help = "SGD momentum", .def = "0.9"},
    {FL_CLI_FLAG_OFF, "no-nesterov", .off = F(nesterov),
     .help = "plain momentum instead of Nesterov's"},
    {FL_CLI_FLOAT, "label-smoothing", .off = F(label_smoothing), .dmin = 0, .dmax = 0.99f,
     .metavar = "E", .help = "label smoothing", .def = "0.1"},
    {FL_CLI_ENUM, "schedule", .off = F(cosine), .choices = schedules, .metavar = "S",
     .help = "linear or cosine decay after warm-up", .def = "linear"},
    {FL_CLI_FLOAT, "warmup", .off = F(warmup_epochs), .dmin = 0, .dmax = 1000, .metavar = "EPOCHS",
     .help = "linear warm-up length", .def = "0.5"},
    {FL_CLI_INT, "accum", .off = F(accum), .umin = 1, .umax = 4096, .metavar = "N",
     .help = "micro-batches per optimizer step; an epoch's last, shorter group\n"
             "still steps (with the mean of its gradients)",
     .def = "1"},
    {FL_CLI_FLOAT, "ema", .off = F(ema), .dmin = 0, .dmax = 0.999999f, .metavar = "DECAY",
     .help = "keep an EMA of the weights and evaluate it", .def = "off"},
    {FL_CLI_INT, "crop-pad", .off = F(crop_pad), .umin = 0, .umax = 64, .metavar = "P",
     .help = "random crop with P pixels of padding", .def = "0"},
    {FL_CLI_FLAG_OFF, "no-flip", .off = F(flip), .help = "no random horizontal flip"},
    {FL_CLI_FLAG_OFF, "no-tta", .off = F(tta),
     .help = "no flip test-time augmentation (TTA is used for the final evaluation only)"},

    {FL_CLI_SECTION, .help = "hardware:"},
    {FL_CLI_ENUM, "precision", .off = F(precision), .choices = precisions, .metavar = "P",
     .help = "bf16|fp16|fp32; CPU: fp32 or bf16 (needs AVX512_BF16/AMX)",
     .def = "bf16 on GPU, fp32 on CPU"},
    {FL_CLI_CHOICE, "device", .off = F(device), .choices = devices, .metavar = "D",
     .help = "cpu, cuda or auto", .def = "CUDA when built and a GPU is visible"},
    {FL_CLI_INT, "workers", .off = F(workers), .umin = 1, .umax = 1024, .metavar = "N",
     .help = "loader decode threads",
     .def = "CPU: one per core, as many at work as the steps need; GPU: all cores"},
    {FL_CLI_INT, "threads", .off = F(threads), .umin = 1, .umax = 256, .metavar = "N",
     .help = "CPU compute threads", .def = "the cores, shared out between a node's processes"},
    {FL_CLI_ENUM, "cpu-backend", .off = F(cpu_impl), .choices = tf_cpu_backend_choices,
     .metavar = "B", .help = TF_CPU_BACKEND_HELP, .def = TF_CPU_BACKEND_DEF},
    {FL_CLI_U64, "seed", .off = F(seed), .umin = 0, .umax = UINT64_MAX, .metavar = "S",
     .help = "shuffling/augmentation/init seed", .def = "0"},

    {FL_CLI_SECTION, .help = "checkpoints and output:"},
    {FL_CLI_TEXT, "checkpoint", .off = F(ckpt_dir), .metavar = "DIR",
     .help = "write checkpoints there (each epoch, on SIGTERM/SIGINT/SIGHUP); the folder\n"
             "of one run: refused while another run uses it, and without --resume\n"
             "when it holds checkpoints already"},
    {FL_CLI_U64, "checkpoint-every", .off = F(ckpt_every), .umin = 1, .umax = 1ull << 40,
     .metavar = "N", .help = "also every N steps"},
    {FL_CLI_FLAG, "resume", .off = F(resume),
     .help = "continue from the newest valid checkpoint in DIR, only the same run:\n"
             "these must be as before (else exit 2): the dataset of --data, --model,\n"
             "and --width, --residual, --gelu, --seed, --accum, --epochs, --lr,\n"
             "and --wd, --momentum, --no-nesterov, --label-smoothing, --schedule,\n"
             "and --warmup, --ema, --crop-pad, --no-flip, --size, the global batch\n"
             "(--batch may be left out). These may change: --val, --log, --json,\n"
             "and --quiet, --threads, --workers, --device, --precision, --no-tta,\n"
             "and --checkpoint-every, --sync-bn, the number of processes"},
    {FL_CLI_TEXT, "log", .off = F(log_path), .metavar = "FILE.jsonl",
     .help = "one JSON object per epoch"},
    {FL_CLI_U32, "log-every", .off = F(log_every), .umin = 1, .umax = 1u << 30, .metavar = "N",
     .help = "the log's per-N-steps points (loss, lr, images/s, data wait)\n"
             "every N batches",
     .def = "about 50 points per epoch"},
    {FL_CLI_TEXT, "report", .off = F(report_path), .metavar = "FILE.html",
     .help = "at the end, write the run's HTML report there (docs/REPORT.md)"},
    {FL_CLI_FLAG, "json", .off = F(json),
     .help = "last stdout line: a JSON summary (val_top1, images_per_sec, ...)"},
    {FL_CLI_FLAG, "quiet", 'q', .off = F(quiet), .help = "no progress or per-epoch lines"},

    {FL_CLI_SECTION,
     .help =
         "data parallel (docs/DISTRIBUTED.md): run under `mpirun -np N` or `srun --mpi=pmix`, or:"},
    {FL_CLI_INT, "nproc", .off = F(nproc), .umin = 1, .umax = 4096, .metavar = "N",
     .help = "start N local processes (re-execs under mpirun -np N); --batch is\n"
             "per process, the global batch is N x batch"},
    {FL_CLI_FLAG, "sync-bn", .off = F(sync_bn),
     .help = "synchronized BatchNorm statistics over the processes (CPU backend;\n"
             "default: statistics per process)"},
    {FL_CLI_FLAG, "nccl", .off = F(nccl),
     .help = "GPU: average gradients through NCCL even with one process"},
    {FL_CLI_END},
};
#undef F

static int train_run(const fl_cli_tool *tool, int argc, char **argv);

static const fl_cli_cmd train_cmd = {
    .name = "train",
    .args = "--data DIR --val DIR [options]",
    .summary = "train an image classifier on datasets packed by packdata",
    .synopsis = "usage: trainfast train --data DIR --val DIR [options]\n"
                "\n"
                "Trains an image classifier on datasets packed by packdata, fed by libfastload.\n",
    .opts = train_opts,
    .epilog =
        "\n"
        "An option given twice takes its last value; one that does not apply, e.g. --width with\n"
        "--model resnet18, is ignored with a warning.\n"
        "Exit status: 0 done, 1 data or runtime error (also: the loss diverged, or a log, "
        "checkpoint\n"
        "or stdout could not be written), 2 usage or refusal, 130/143/129 stopped by\n"
        "SIGINT/SIGTERM/SIGHUP (after writing a checkpoint when --checkpoint is given; a signal\n"
        "ignored when trainfast starts, as nohup ignores SIGHUP, stays ignored).\n",
    .max_pos = 0,
    .run = train_run,
};

/* `--nproc N`: replace this process by `mpirun -np N <this trainfast> train <args minus --nproc>`
 * (argv[0] is "train"). Returns only on failure. */
static int run_nproc(const fl_cli_tool *tool, int argc, char **argv, int nproc)
{
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK")) {
        fl_cli_error(TOOL, "--nproc: already started by an MPI launcher; leave --nproc out");
        return FL_EXIT_USAGE;
    }
    if (!tf_dist_have_mpi()) {
        fl_cli_error(TOOL, "--nproc: this trainfast was built without MPI (install "
                           "libopenmpi-dev and rebuild)");
        return FL_EXIT_USAGE;
    }
    /* find mpirun on PATH (execvp would, but then we could not say clearly that it is missing) */
    const char *path = getenv("PATH");
    char mpirun[4096] = "";
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        snprintf(mpirun, sizeof mpirun, "%.*s/mpirun", (int)len, p);
        if (access(mpirun, X_OK) == 0)
            break;
        mpirun[0] = 0;
        p += len + (e ? 1 : 0);
    }
    if (!mpirun[0]) {
        fl_cli_error(TOOL,
                     "--nproc %d: mpirun not found on PATH (install openmpi-bin, or launch "
                     "with srun --mpi=pmix)",
                     nproc);
        return FL_EXIT_USAGE;
    }
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        fl_cli_error(TOOL, "--nproc: cannot find this executable (/proc/self/exe)");
        return FL_EXIT_DATA;
    }
    self[sl] = 0;
    char np[16];
    snprintf(np, sizeof np, "%d", nproc);
    char **av = calloc((size_t)argc + 17, sizeof *av);
    if (!av)
        return FL_EXIT_DATA;
    int k = 0;
    av[k++] = mpirun;
    if (geteuid() == 0)
        av[k++] = "--allow-run-as-root";
    av[k++] = "--oversubscribe";
    av[k++] = "--bind-to";
    av[k++] = "none";
    av[k++] = "-np";
    av[k++] = np;
    av[k++] = self;
    /* the same command line without --nproc (the table says which words belong to it) */
    fl_cli_copy_without(tool, &train_cmd, argc, argv, "nproc", av + k);
    fflush(stdout);
    fflush(stderr);
    execv(mpirun, av);
    fl_cli_error(TOOL, "--nproc: cannot run %s: %s", mpirun, strerror(errno));
    free(av);
    return FL_EXIT_DATA;
}

static int train_run(const fl_cli_tool *tool, int argc, char **argv)
{
    tf_options o;
    tf_options_init(&o);
    fl_cli_parsed cl;
    int r = fl_cli_parse(tool, &train_cmd, argc, argv, &o, &cl);
    if (r != FL_CLI_RUN)
        return r == FL_CLI_DONE ? FL_EXIT_OK : FL_EXIT_USAGE;
    o.precision_given = fl_cli_given(&cl, "precision");
    if ((r = tf_cpu_impl_refused(o.cpu_impl)))
        return r;
    /* options that do not apply to this run: say so */
    int width_given = fl_cli_given(&cl, "width");
    if (strcmp(o.model, "fastcnn") && (width_given || o.mopt.residual))
        fl_cli_warn(TOOL, "%s applies only to --model fastcnn (not %s): ignored",
                    width_given ? "--width" : "--residual", o.model);
    if (o.ckpt_every && !o.ckpt_dir)
        fl_cli_warn(TOOL, "--checkpoint-every needs --checkpoint DIR: no checkpoints are written");
    if (o.nproc > 0)
        return run_nproc(tool, argc, argv, o.nproc);
    return tf_train_main(&o);
}

/* ---- eval ----------------------------------------------------------------------------------- */

typedef struct eval_opts {
    uint32_t batch;
    int tta, json, threads, cpu_impl;
    const char *device;
} eval_opts;

static const fl_cli_opt eval_table[] = {
    {FL_CLI_U32, "batch", .off = FL_CLI_FIELD(eval_opts, batch), .umin = 1, .umax = 1 << 20,
     .metavar = "B", .help = "samples per batch", .def = "256"},
    {FL_CLI_FLAG_OFF, "no-tta", .off = FL_CLI_FIELD(eval_opts, tta),
     .help = "no flip test-time augmentation"},
    {FL_CLI_CHOICE, "device", .off = FL_CLI_FIELD(eval_opts, device), .choices = devices,
     .metavar = "D", .help = "cpu, cuda or auto", .def = "auto"},
    {FL_CLI_INT, "threads", .off = FL_CLI_FIELD(eval_opts, threads), .umin = 1, .umax = 256,
     .metavar = "N", .help = "CPU compute threads", .def = "all cores"},
    {FL_CLI_ENUM, "cpu-backend", .off = FL_CLI_FIELD(eval_opts, cpu_impl),
     .choices = tf_cpu_backend_choices, .metavar = "B", .help = TF_CPU_BACKEND_HELP,
     .def = TF_CPU_BACKEND_DEF},
    {FL_CLI_FLAG, "json", .off = FL_CLI_FIELD(eval_opts, json),
     .help = "print the result as one JSON object"},
    {FL_CLI_END},
};

static int eval_run(const fl_cli_tool *tool, int argc, char **argv);

static const fl_cli_cmd eval_cmd = {
    .name = "eval",
    .args = "CKPT DATA [options]",
    .summary = "evaluate a checkpoint (file, or a --checkpoint DIR: its newest valid one)",
    .synopsis =
        "usage: trainfast eval CKPT DATA [--batch B] [--no-tta] [--device D] [--threads N]\n"
        "                      [--cpu-backend B] [--json]\n"
        "\n"
        "Evaluates a checkpoint on a dataset packed by packdata. CKPT is a checkpoint file, or a\n"
        "checkpoint directory (its newest valid checkpoint).\n",
    .opts = eval_table,
    .epilog = "Exit status: 0 done, 1 data or runtime error, 2 usage.\n",
    .max_pos = 2,
    .run = eval_run,
};

static int eval_run(const fl_cli_tool *tool, int argc, char **argv)
{
    eval_opts e = {.batch = 256, .tta = 1, .device = "auto"};
    fl_cli_parsed cl;
    int r = fl_cli_parse(tool, &eval_cmd, argc, argv, &e, &cl);
    if (r != FL_CLI_RUN)
        return r == FL_CLI_DONE ? FL_EXIT_OK : FL_EXIT_USAGE;
    if (cl.npos != 2) {
        fl_cli_error(TOOL, "eval needs CKPT and DATA (trainfast eval CKPT DATA)");
        return FL_EXIT_USAGE;
    }
    if ((r = tf_cpu_impl_refused(e.cpu_impl)))
        return r;
    return tf_eval_main(cl.pos[0], cl.pos[1], e.batch, e.tta, e.json, e.device, e.threads,
                        e.cpu_impl);
}

/* ---- doctor --------------------------------------------------------------------------------- */

static const fl_cli_opt doctor_table[] = {
    {FL_CLI_FLAG, "json", .off = 0, .help = "one JSON object"},
    {FL_CLI_END},
};

static int doctor_run(const fl_cli_tool *tool, int argc, char **argv);

static const fl_cli_cmd doctor_cmd = {
    .name = "doctor",
    .args = "[--json]",
    .summary = "what this trainfast can use: build, GPU, driver, cuDNN, MPI, threads",
    .synopsis = "usage: trainfast doctor [--json]\n"
                "\n"
                "Reports what this trainfast can use: the build, the GPU and its driver, "
                "cuDNN/cuBLAS, MPI/NCCL,\n"
                "CPU threads.\n",
    .opts = doctor_table,
    .max_pos = 0,
    .run = doctor_run,
};

static int doctor_run(const fl_cli_tool *tool, int argc, char **argv)
{
    int json = 0;
    fl_cli_parsed cl;
    int r = fl_cli_parse(tool, &doctor_cmd, argc, argv, &json, &cl);
    if (r != FL_CLI_RUN)
        return r == FL_CLI_DONE ? FL_EXIT_OK : FL_EXIT_USAGE;
    return tf_doctor_main(json);
}

/* ---- the tool ------------------------------------------------------------------------------- */

static void version(FILE *out) { fl_cli_print_version(out, TOOL); }

/* `trainfast predict` (predict_cli.c) */
extern const fl_cli_cmd tf_predict_cmd;

/* `trainfast report` (report_cli.c) */
extern const fl_cli_cmd tf_report_cmd;

/* `trainfast export` (export_cli.c) */
extern const fl_cli_cmd tf_export_cmd;

static const fl_cli_cmd *const commands[] = {
    &train_cmd, &eval_cmd, &tf_predict_cmd, &doctor_cmd, &tf_report_cmd, &tf_export_cmd, NULL};

static const fl_cli_tool tool = {
    .name = TOOL,
    .synopsis = "usage: trainfast train --data DIR --val DIR [options]\n"
                "       trainfast eval CKPT DATA [options]\n"
                "       trainfast predict CKPT DATA|IMAGE... [options]\n"
                "       trainfast doctor [--json]\n"
                "       trainfast report LOG.jsonl... [-o FILE.html]\n"
                "       trainfast export CKPT -o FILE.onnx [options]\n"
                "\n"
                "Trains an image classifier on datasets packed by packdata, fed by libfastload.\n",
    .cmds = commands,
    .epilog =
        "Exit status: 0 done, 1 data or runtime error, 2 usage or refusal, 130/143/129 stopped\n"
        "by SIGINT/SIGTERM/SIGHUP.\n",
    .version = version,
};

/* oneDNN runs on OpenMP (libgomp), whose threads spin at every barrier waiting for the others.
 * When one of them is descheduled - the loader's decode threads, a second job, a noisy
 * neighbour on the same cores - its partner spins through the time slice it waits for: beside
 * two busy processes fastcnn trained at 102 img/s with 5.0 s of CPU under libgomp's default
 * spin, at 192 img/s with 2.5 s under OMP_WAIT_POLICY=passive (bench/shared_cores.sh), with the
 * same results bit for bit (the policy changes how threads wait, never the work each does; a
 * thread count that followed the machine's load would change the sums). libgomp reads the
 * policy once, as it loads, before main: so a command that computes on the CPU re-executes
 * itself once with OMP_WAIT_POLICY=passive, unless the user chose (OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT set; e.g. OMP_WAIT_POLICY=active on cores nobody else uses) or valgrind runs
 * it (its client would lose the tool). */
static void omp_wait_policy_default(char **argv)
{
#ifdef FL_HAVE_ONEDNN
    static const char *const cmds[] = {"train", "eval", "predict"};
    int computes = 0;
    for (size_t i = 0; argv[0] && argv[1] && i < sizeof cmds / sizeof *cmds; i++)
        computes |= !strcmp(argv[1], cmds[i]);
    const char *pre = getenv("LD_PRELOAD");
    if (!computes || getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") ||
        (pre && strstr(pre, "vgpreload")))
        return;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = 0;
    if (setenv("OMP_WAIT_POLICY", "passive", 1))
        return;
    execv(self, argv); /* returns only on failure: then run as we are */
    unsetenv("OMP_WAIT_POLICY");
#else
    (void)argv;
#endif
}

int main(int argc, char **argv)
{
    omp_wait_policy_default(argv);
    return fl_cli_dispatch(&tool, argc, argv);
}
