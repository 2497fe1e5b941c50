/* main.c — the `fastload` command: `bench` measures the loader, `digest` fingerprints its batch
 * stream; both are thin front ends over libfastload (loader/fastload.h). */
#include <stdio.h>
#include <string.h>

#include "fastload.h"
#include "fastload_cli.h"

static void usage(FILE *f)
{
    fputs("usage: fastload COMMAND [options]\n"
          "commands:\n"
          "  bench DST    run the loader over a packed dataset and report images/s, MB/s, the\n"
          "               per-stage time split and memory (--json for one JSON object)\n"
          "  bench --memcpy  single-thread memcpy bandwidth (peer of raw-record runs)\n"
          "  digest DST   SHA-256 of every batch and of the stream (determinism checks)\n"
          "Run 'fastload COMMAND --help' for a command's options. Datasets are made by packdata.\n"
          "  --help, --version\n", f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("fastload %s (libfastload %s)\n", FASTLOAD_VERSION, fl_version());
        return 0;
    }
    if (!strcmp(cmd, "bench"))
        return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "digest"))
        return cmd_digest(argc - 1, argv + 1);
    fprintf(stderr, "fastload: error: unknown command '%s' (try bench or digest; see --help)\n", cmd);
    return 2;
}
