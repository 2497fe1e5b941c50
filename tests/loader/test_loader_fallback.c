/* test_loader_fallback.c — where io_uring is forbidden (seccomp in a container, simulated here
 * with a seccomp filter that makes io_uring_setup fail with ENOSYS), FL_IO_AUTO falls back to
 * pread with exactly one log line and the same batches; FL_IO_URING is refused cleanly. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"

static int log_lines;
static char last_log[512];

static void on_log(void *user, int level, const char *msg)
{
    log_lines++;
    snprintf(last_log, sizeof last_log, "%s", msg);
}

static int forbid_io_uring(void)
{
#if defined(__x86_64__) && defined(__NR_io_uring_setup)
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
    return -1;
#endif
}

int main(void)
{
    char *dir = fx_tmpdir("fallback");
    fx_spec s = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_RAW,
                 .compression = FL_COMP_NONE,
                 .n = 120,
                 .height = 96,
                 .width = 64,
                 .channels = 3,
                 .classes = 3,
                 .shard_bytes = 8192};
    char *p = fx_make(dir, "raw", &s);
    /* FL_IO_AUTO would read a dataset this small into memory: memory_max < 0 makes it stream
     * from the files with io_uring, or pread without it */
    fl_loader_options o;
    fx_options(&o);
    o.memory_max = -1;
    o.order = FL_ORDER_RANDOM;
    o.augment = FL_AUG_RRC;
    o.out_height = o.out_width = 8;
    o.flip = 1;
    o.seed = 3;
    o.log = on_log;
    uint64_t ref = fx_stream_hash(p, &o, 20, NULL);
    CHECK(log_lines == 0);

    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (forbid_io_uring() != 0) {
            printf("cannot install a seccomp filter here: skipped\n");
            _exit(77);
        }
        fl_loader *L;
        fl_error err;
        fl_loader_options u = o;
        u.io = FL_IO_URING;
        int rc = fl_loader_create(p, &u, &L, &err);
        printf("FL_IO_URING without io_uring: %s\n", err.msg);
        CHECK(rc == FL_E_UNSUPPORTED && L == NULL);
        log_lines = 0;
        CHECK_OK(fl_loader_create(p, &o, &L, &err), &err);
        fl_loader_stats st;
        fl_loader_stats_get(L, &st);
        printf("FL_IO_AUTO: backend %s, log: %s\n", st.io_backend, last_log);
        CHECK(strcmp(st.io_backend, "pread") == 0);
        CHECK(log_lines == 1 && strstr(last_log, "io_uring"));
        fl_loader_close(L);
        CHECK(fx_stream_hash(p, &o, 20, NULL) == ref);
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    free(p);
    fx_rmrf(dir);
    free(dir);
    CHECK(WIFEXITED(status));
    if (WEXITSTATUS(status) == 0)
        printf("ok\n");
    return WEXITSTATUS(status);
}
