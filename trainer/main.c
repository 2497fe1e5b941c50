/* main.c — the trainfast command line: `train`, `eval`, `doctor`, --help, --version. Parses
 * options into tf_options and hands over to train.c / doctor.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fl_cli.h"
#include "dist.h"
#include "train.h"

#define TOOL "trainfast"

static void usage(FILE *out)
{
    fprintf(out,
"usage: trainfast train --data DIR --val DIR [options]\n"
"       trainfast eval CKPT DATA [--batch B] [--no-tta] [--device D] [--json]\n"
"       trainfast doctor [--json]\n"
"       trainfast --help | --version\n"
"\n"
"Trains an image classifier on datasets packed by packdata, fed by libfastload.\n"
"eval: CKPT is a checkpoint file, or a --checkpoint DIR (its newest valid checkpoint).\n"
"\n"
"train options:\n"
"  --model NAME           fastcnn (default; 28-64 px), resnet18, resnet50 (224 px)\n"
"  --width N              fastcnn channels of the first block (default 24; doubles per block)\n"
"  --residual             fastcnn: add a residual conv pair per block\n"
"  --gelu                 GELU instead of ReLU\n"
"  --epochs E             default 2\n"
"  --batch B|auto         default 128 on CPU, 512 on GPU; auto: largest power of two that fits\n"
"                         in GPU memory, found by trying (on CPU: the default)\n"
"  --lr LR                peak learning rate (default 0.2, tuned for fastcnn at batch 128:\n"
"                         lower it for resnet18/50 or small batches, e.g. 0.01 at batch 8)\n"
"  --wd WD                weight decay, not on BN/bias (default 5e-4)\n"
"  --momentum M           SGD momentum (default 0.9); --no-nesterov for plain momentum\n"
"  --label-smoothing E    default 0.1\n"
"  --schedule S           linear (default) or cosine decay after warm-up\n"
"  --warmup EPOCHS        linear warm-up length (default 0.5)\n"
"  --accum N              micro-batches per optimizer step (default 1); an epoch's last,\n"
"                         shorter group still steps (with the mean of its gradients)\n"
"  --ema DECAY            keep an EMA of the weights and evaluate it (default off)\n"
"  --crop-pad P           random crop with P pixels of padding (default 0)\n"
"  --no-flip              no random horizontal flip; --no-tta: no flip test-time augmentation\n"
"                         (TTA is used for the final evaluation only)\n"
"  --size S               image size for variable-size datasets (default 224)\n"
"  --precision P          bf16|fp16|fp32 (GPU; default bf16 there, fp32 on CPU)\n"
"  --device D             cpu, cuda or auto (default: CUDA when built and a GPU is visible)\n"
"  --workers N            loader decode threads (default 1 on CPU, all cores on GPU)\n"
"  --threads N            CPU compute threads (default: all cores)\n"
"  --seed S               shuffling/augmentation/init seed (default 0)\n"
"  --checkpoint DIR       write checkpoints there (each epoch, on SIGTERM/SIGINT)\n"
"  --checkpoint-every N   also every N steps\n"
"  --resume               continue from the newest valid checkpoint in DIR, only the same run:\n"
"                         these must be as before (else exit 2): the dataset of --data, --model,\n"
"                         and --width, --residual, --gelu, --seed, --accum, --epochs, --lr,\n"
"                         and --wd, --momentum, --no-nesterov, --label-smoothing, --schedule,\n"
"                         and --warmup, --ema, --crop-pad, --no-flip, --size, the global batch\n"
"                         (--batch may be left out). These may change: --val, --log, --json,\n"
"                         and --quiet, --threads, --workers, --device, --precision, --no-tta,\n"
"                         and --checkpoint-every, --sync-bn, the number of processes\n"
"  --log FILE.jsonl       one JSON object per epoch\n"
"  --json                 last stdout line: a JSON summary (val_top1, images_per_sec, ...)\n"
"  --quiet                no progress or per-epoch lines\n"
"  (an option given twice takes its last value; one that does not apply, e.g. --width with\n"
"  --model resnet18, is ignored with a warning)\n"
"\n"
"data parallel (docs/DISTRIBUTED.md): run under `mpirun -np N` or `srun --mpi=pmix`, or:\n"
"  --nproc N              start N local processes (re-execs under mpirun -np N); --batch is\n"
"                         per process, the global batch is N x batch\n"
"  --sync-bn              synchronized BatchNorm statistics over the processes (CPU backend;\n"
"                         default: statistics per process)\n"
"  --nccl                 GPU: average gradients through NCCL even with one process\n"
"\n"
"Exit status: 0 done, 1 data or runtime error (also: the loss diverged, or a log, checkpoint\n"
"or stdout could not be written), 2 usage or refusal, 130/143 stopped by SIGINT/SIGTERM\n"
"(after writing a checkpoint when --checkpoint is given).\n");
}

static const char eval_help[] =
"usage: trainfast eval CKPT DATA [--batch B] [--no-tta] [--device D] [--threads N] [--json]\n"
"\n"
"Evaluates a checkpoint on a dataset packed by packdata. CKPT is a checkpoint file, or a\n"
"checkpoint directory (its newest valid checkpoint).\n"
"  --batch B      samples per batch (default 256)\n"
"  --no-tta       no flip test-time augmentation\n"
"  --device D     cpu, cuda or auto (default auto)\n"
"  --threads N    CPU compute threads (default: all cores)\n"
"  --json         print the result as one JSON object\n"
"Exit status: 0 done, 1 data or runtime error, 2 usage.\n";

static const char doctor_help[] =
"usage: trainfast doctor [--json]\n"
"\n"
"Reports what this trainfast can use: the build, the GPU and its driver, cuDNN/cuBLAS, MPI/NCCL,\n"
"CPU threads. --json: one JSON object.\n";

/* Numbers go through the shared strict parsers (tools/common/fl_cli.h): a bad value is one line
 * naming the option, exit 2. */
static int parse_float(const char *opt, const char *v, float lo, float hi, float *out)
{
    return fl_cli_opt_float(TOOL, opt, v, lo, hi, 0, out);
}

/* (lo, hi]: for values that must be above lo (a learning rate of 0 trains nothing) */
static int parse_float_above(const char *opt, const char *v, float lo, float hi, float *out)
{
    return fl_cli_opt_float(TOOL, opt, v, lo, hi, 1, out);
}

static int parse_int(const char *opt, const char *v, long lo, long hi, long *out)
{
    return fl_cli_opt_int(TOOL, opt, v, lo, hi, out);
}

static int parse_device(const char *v)
{
    if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "auto")) {
        fl_cli_opt_error(TOOL, "--device", v, "expected cpu, cuda or auto");
        return -1;
    }
    return 0;
}

/* `--nproc N`: replace this process by `mpirun -np N <this trainfast> train <args minus --nproc>`.
 * Returns only on failure. */
static int run_nproc(int argc, char **argv, int nproc)
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
        fl_cli_error(TOOL, "--nproc %d: mpirun not found on PATH (install openmpi-bin, or launch "
                     "with srun --mpi=pmix)", nproc);
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
    char **av = calloc((size_t)argc + 16, sizeof *av);
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
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nproc")) {
            i++;
            continue;
        }
        if (!strncmp(argv[i], "--nproc=", 8))
            continue;
        av[k++] = argv[i];
    }
    av[k] = NULL;
    fflush(stdout);
    fflush(stderr);
    execv(mpirun, av);
    fl_cli_error(TOOL, "--nproc: cannot run %s: %s", mpirun, strerror(errno));
    free(av);
    return FL_EXIT_DATA;
}

static int cmd_train(int argc, char **argv)
{
    tf_options o;
    tf_options_init(&o);
    int width_given = 0;
    /* An option given twice takes its last value; every value given is checked. */
    for (int i = 2; i < argc; i++) {
        const char *v;
        long n;
        int m;
#define VAL(name) ((m = fl_cli_opt_value(argc, argv, &i, name, &v, TOOL)) != 0)
        if (fl_cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        } else if (VAL("--data")) {
            if (m < 0) return FL_EXIT_USAGE;
            o.data = v;
        } else if (VAL("--val")) {
            if (m < 0) return FL_EXIT_USAGE;
            o.val = v;
        } else if (VAL("--model")) {
            if (m < 0) return FL_EXIT_USAGE;
            if (strcmp(v, "fastcnn") && strcmp(v, "resnet18") && strcmp(v, "resnet50")) {
                fl_cli_opt_error(TOOL, "--model", v, "expected fastcnn, resnet18 or resnet50");
                return FL_EXIT_USAGE;
            }
            o.model = v;
        } else if (VAL("--width")) {
            if (m < 0 || parse_int("--width", v, 1, 4096, &n)) return FL_EXIT_USAGE;
            o.mopt.width = (int)n;
            width_given = 1;
        } else if (!strcmp(argv[i], "--residual")) {
            o.mopt.residual = 1;
        } else if (!strcmp(argv[i], "--gelu")) {
            o.mopt.gelu = 1;
        } else if (VAL("--epochs")) {
            if (m < 0 || parse_int("--epochs", v, 1, 100000, &n)) return FL_EXIT_USAGE;
            o.epochs = (int)n;
        } else if (VAL("--batch")) {
            if (m < 0) return FL_EXIT_USAGE;
            if (!strcmp(v, "auto")) {
                o.batch = 0;
                o.batch_auto = 1;
            } else if (parse_int("--batch", v, 1, 1 << 20, &n)) {
                return FL_EXIT_USAGE;
            } else {
                o.batch = (uint32_t)n;
                o.batch_auto = 0;
            }
        } else if (VAL("--lr")) {
            if (m < 0 || parse_float_above("--lr", v, 0, 100, &o.lr)) return FL_EXIT_USAGE;
        } else if (VAL("--wd")) {
            if (m < 0 || parse_float("--wd", v, 0, 1, &o.wd)) return FL_EXIT_USAGE;
        } else if (VAL("--momentum")) {
            if (m < 0 || parse_float("--momentum", v, 0, 0.9999f, &o.momentum)) return FL_EXIT_USAGE;
        } else if (!strcmp(argv[i], "--no-nesterov")) {
            o.nesterov = 0;
        } else if (VAL("--label-smoothing")) {
            if (m < 0 || parse_float("--label-smoothing", v, 0, 0.99f, &o.label_smoothing))
                return FL_EXIT_USAGE;
        } else if (VAL("--schedule")) {
            if (m < 0) return FL_EXIT_USAGE;
            if (!strcmp(v, "cosine"))
                o.cosine = 1;
            else if (!strcmp(v, "linear"))
                o.cosine = 0;
            else {
                fl_cli_opt_error(TOOL, "--schedule", v, "expected linear or cosine");
                return FL_EXIT_USAGE;
            }
        } else if (VAL("--warmup")) {
            if (m < 0 || parse_float("--warmup", v, 0, 1000, &o.warmup_epochs)) return FL_EXIT_USAGE;
        } else if (VAL("--accum")) {
            if (m < 0 || parse_int("--accum", v, 1, 4096, &n)) return FL_EXIT_USAGE;
            o.accum = (int)n;
        } else if (VAL("--ema")) {
            if (m < 0 || parse_float("--ema", v, 0, 0.999999f, &o.ema)) return FL_EXIT_USAGE;
        } else if (VAL("--crop-pad")) {
            if (m < 0 || parse_int("--crop-pad", v, 0, 64, &n)) return FL_EXIT_USAGE;
            o.crop_pad = (int)n;
        } else if (!strcmp(argv[i], "--no-flip")) {
            o.flip = 0;
        } else if (!strcmp(argv[i], "--no-tta")) {
            o.tta = 0;
        } else if (VAL("--size")) {
            if (m < 0 || parse_int("--size", v, 8, 4096, &n)) return FL_EXIT_USAGE;
            o.size = (uint32_t)n;
        } else if (VAL("--precision")) {
            if (m < 0) return FL_EXIT_USAGE;
            o.precision_given = 1;
            if (!strcmp(v, "fp32"))
                o.precision = TF_FP32;
            else if (!strcmp(v, "bf16"))
                o.precision = TF_BF16;
            else if (!strcmp(v, "fp16"))
                o.precision = TF_FP16;
            else {
                fl_cli_opt_error(TOOL, "--precision", v, "expected bf16, fp16 or fp32");
                return FL_EXIT_USAGE;
            }
        } else if (VAL("--device")) {
            if (m < 0 || parse_device(v)) return FL_EXIT_USAGE;
            o.device = v;
        } else if (VAL("--workers")) {
            if (m < 0 || parse_int("--workers", v, 1, 1024, &n)) return FL_EXIT_USAGE;
            o.workers = (int)n;
        } else if (VAL("--threads")) {
            if (m < 0 || parse_int("--threads", v, 1, 256, &n)) return FL_EXIT_USAGE;
            o.threads = (int)n;
        } else if (VAL("--seed")) {
            uint64_t s;
            if (m < 0 || fl_cli_opt_u64(TOOL, "--seed", v, 0, UINT64_MAX, &s)) return FL_EXIT_USAGE;
            o.seed = s;
        } else if (VAL("--checkpoint")) {
            if (m < 0) return FL_EXIT_USAGE;
            o.ckpt_dir = v;
        } else if (VAL("--checkpoint-every")) {
            if (m < 0 || parse_int("--checkpoint-every", v, 1, 1L << 40, &n)) return FL_EXIT_USAGE;
            o.ckpt_every = (uint64_t)n;
        } else if (!strcmp(argv[i], "--resume")) {
            o.resume = 1;
        } else if (VAL("--log")) {
            if (m < 0) return FL_EXIT_USAGE;
            o.log_path = v;
        } else if (!strcmp(argv[i], "--json")) {
            o.json = 1;
        } else if (VAL("--nproc")) {
            if (m < 0 || parse_int("--nproc", v, 1, 4096, &n)) return FL_EXIT_USAGE;
            o.nproc = (int)n;
        } else if (!strcmp(argv[i], "--sync-bn")) {
            o.sync_bn = 1;
        } else if (!strcmp(argv[i], "--nccl")) {
            o.nccl = 1;
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            o.quiet = 1;
        } else {
            fl_cli_error(TOOL, "train: unknown option '%s' (see trainfast --help)", argv[i]);
            return FL_EXIT_USAGE;
        }
#undef VAL
    }
    /* options that do not apply to this run: say so (issue 10, finding 11) */
    if (strcmp(o.model, "fastcnn") && (width_given || o.mopt.residual))
        fl_cli_warn(TOOL, "%s applies only to --model fastcnn (not %s): ignored",
                    width_given ? "--width" : "--residual", o.model);
    if (o.ckpt_every && !o.ckpt_dir)
        fl_cli_warn(TOOL, "--checkpoint-every needs --checkpoint DIR: no checkpoints are written");
    if (o.nproc > 0)
        return run_nproc(argc, argv, o.nproc);
    return tf_train_main(&o);
}

static int cmd_eval(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *device = "auto";
    int np = 0, json = 0, tta = 1;
    long batch = 256, threads = 0;
    for (int i = 2; i < argc; i++) {
        const char *v;
        int m;
        if (fl_cli_is_help(argv[i])) {
            fputs(eval_help, stdout);
            return 0;
        } else if ((m = fl_cli_opt_value(argc, argv, &i, "--batch", &v, TOOL)) != 0) {
            if (m < 0 || parse_int("--batch", v, 1, 1 << 20, &batch)) return FL_EXIT_USAGE;
        } else if ((m = fl_cli_opt_value(argc, argv, &i, "--threads", &v, TOOL)) != 0) {
            if (m < 0 || parse_int("--threads", v, 1, 256, &threads)) return FL_EXIT_USAGE;
        } else if ((m = fl_cli_opt_value(argc, argv, &i, "--device", &v, TOOL)) != 0) {
            if (m < 0 || parse_device(v)) return FL_EXIT_USAGE;
            device = v;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--no-tta")) {
            tta = 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fl_cli_error(TOOL, "eval: unknown option '%s'", argv[i]);
            return FL_EXIT_USAGE;
        } else if (np < 2) {
            pos[np++] = argv[i];
        } else {
            fl_cli_error(TOOL, "eval: unexpected argument '%s'", argv[i]);
            return FL_EXIT_USAGE;
        }
    }
    if (np != 2) {
        fl_cli_error(TOOL, "eval needs CKPT and DATA (trainfast eval CKPT DATA)");
        return FL_EXIT_USAGE;
    }
    return tf_eval_main(pos[0], pos[1], (uint32_t)batch, tta, json, device, (int)threads);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return FL_EXIT_USAGE;
    }
    if (fl_cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (fl_cli_is_version(argv[1])) {
        fl_cli_print_version(stdout, TOOL);
        return 0;
    }
    if (!strcmp(argv[1], "train"))
        return cmd_train(argc, argv);
    if (!strcmp(argv[1], "eval"))
        return cmd_eval(argc, argv);
    if (!strcmp(argv[1], "doctor")) {
        int json = 0;
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--json"))
                json = 1;
            else if (fl_cli_is_help(argv[i])) {
                fputs(doctor_help, stdout);
                return 0;
            } else {
                fl_cli_error(TOOL, "doctor: unknown option '%s'", argv[i]);
                return FL_EXIT_USAGE;
            }
        }
        return tf_doctor_main(json);
    }
    fl_cli_error(TOOL, "unknown command '%s' (train, eval, doctor; see --help)", argv[1]);
    return FL_EXIT_USAGE;
}
