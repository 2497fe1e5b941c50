/* test_file_replace.c — the one durable write (fl_file_replace, fl_file_begin/commit/abort in
 * common/fl_file.h): a regular file is replaced through PATH.tmp (new inode, no temporary left),
 * a symlink keeps its link and its target is replaced, a FIFO is written in place to its reader,
 * /dev/null stays a character device, a directory is refused, /dev/full reports ENOSPC, a failed
 * write leaves the old file and no temporary, and the directory-sync rule returns 0 where the
 * file system syncs directories. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fl_check.h"
#include "fl_error.h"
#include "fl_file.h"

static char dir[] = "/tmp/fl_file_replace.XXXXXX";

static char *at(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static int slurp_is(const char *path, const char *want)
{
    char got[256] = {0};
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    return n == strlen(want) && memcmp(got, want, n) == 0;
}

static void regular(void)
{
    fl_write_step step;
    EXPECT(fl_file_replace(at("a.txt"), "one", 3, 0666, &step) == 0 && step == FL_WRITE_DONE);
    EXPECT(slurp_is(at("a.txt"), "one"));
    struct stat s1, s2;
    CHECK(stat(at("a.txt"), &s1) == 0);
    EXPECT(fl_file_replace(at("a.txt"), "two!", 4, 0666, &step) == 0);
    CHECK(stat(at("a.txt"), &s2) == 0);
    EXPECT(slurp_is(at("a.txt"), "two!"));
    EXPECTF(s1.st_ino != s2.st_ino, "a regular file was rewritten in place, not renamed over");
    EXPECT(access(at("a.txt.tmp"), F_OK) != 0);
}

static void symlink_target(void)
{
    CHECK(fl_file_replace(at("real.txt"), "old", 3, 0666, NULL) == 0);
    CHECK(symlink("real.txt", at("link.txt")) == 0);
    EXPECT(fl_file_replace(at("link.txt"), "new", 3, 0666, NULL) == 0);
    struct stat ls;
    CHECK(lstat(at("link.txt"), &ls) == 0);
    EXPECTF(S_ISLNK(ls.st_mode), "the symlink was replaced by a file");
    EXPECT(slurp_is(at("real.txt"), "new"));
    EXPECT(access(at("real.txt.tmp"), F_OK) != 0 && access(at("link.txt.tmp"), F_OK) != 0);
    /* a dangling symlink: its target is created */
    CHECK(symlink("made.txt", at("dangling")) == 0);
    EXPECT(fl_file_replace(at("dangling"), "made", 4, 0666, NULL) == 0);
    CHECK(lstat(at("dangling"), &ls) == 0);
    EXPECT(S_ISLNK(ls.st_mode) && slurp_is(at("made.txt"), "made"));
}

static void fifo_with_reader(void)
{
    CHECK(mkfifo(at("fifo"), 0600) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* the reader: exit 0 when it read exactly "through the pipe" */
        alarm(20);
        _exit(slurp_is(at("fifo"), "through the pipe") ? 0 : 1);
    }
    fl_write_step step;
    int rc = fl_file_replace(at("fifo"), "through the pipe", 16, 0666, &step);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    EXPECTF(rc == 0, "FIFO: %s (step %d)", strerror(-rc), step);
    EXPECTF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the FIFO's reader did not get the bytes");
    struct stat st;
    CHECK(lstat(at("fifo"), &st) == 0);
    EXPECTF(S_ISFIFO(st.st_mode), "the FIFO was replaced");
    EXPECT(access(at("fifo.tmp"), F_OK) != 0);
}

static void devices(void)
{
    fl_write_step step;
    EXPECT(fl_file_replace("/dev/null", "x", 1, 0666, &step) == 0);
    struct stat st;
    CHECK(stat("/dev/null", &st) == 0);
    EXPECTF(S_ISCHR(st.st_mode), "/dev/null is no longer a character device");
    if (access("/dev/full", W_OK) == 0) {
        int rc = fl_file_replace("/dev/full", "x", 1, 0666, &step);
        EXPECTF(rc == -ENOSPC && step == FL_WRITE_WRITE, "/dev/full: rc %d step %d", rc, step);
        CHECK(stat("/dev/full", &st) == 0);
        EXPECT(S_ISCHR(st.st_mode));
    }
    /* a symlink to a device: written in place through the link */
    CHECK(symlink("/dev/null", at("null-link")) == 0);
    EXPECT(fl_file_replace(at("null-link"), "x", 1, 0666, NULL) == 0);
    CHECK(lstat(at("null-link"), &st) == 0);
    EXPECT(S_ISLNK(st.st_mode));
}

static void refusals(void)
{
    fl_write_step step;
    CHECK(mkdir(at("sub"), 0777) == 0);
    int rc = fl_file_replace(at("sub"), "x", 1, 0666, &step);
    EXPECTF(rc == -EISDIR && step == FL_WRITE_NOT_FILE, "directory: rc %d step %d", rc, step);
    struct stat st;
    CHECK(stat(at("sub"), &st) == 0);
    EXPECT(S_ISDIR(st.st_mode));
    rc = fl_file_replace(at("missing/x.txt"), "x", 1, 0666, &step);
    EXPECTF(rc == -ENOENT && step == FL_WRITE_OPEN, "missing parent: rc %d step %d", rc, step);
    EXPECT(strcmp(fl_write_step_name(FL_WRITE_RENAME), "rename into place") == 0);
}

/* a write that fails midway (RLIMIT_FSIZE: EFBIG) leaves the old content and no temporary */
static void failed_write_keeps_old(void)
{
    CHECK(fl_file_replace(at("keep.txt"), "old", 3, 0666, NULL) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {2, 2};
        setrlimit(RLIMIT_FSIZE, &rl);
        fl_write_step step;
        int rc = fl_file_replace(at("keep.txt"), "longer", 6, 0666, &step);
        _exit(rc == -EFBIG && step == FL_WRITE_WRITE ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    EXPECTF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the failed write did not report EFBIG");
    EXPECT(slurp_is(at("keep.txt"), "old"));
    EXPECT(access(at("keep.txt.tmp"), F_OK) != 0);
}

/* streaming: begin, write, abort leaves nothing; begin, write, commit publishes */
static void streaming(void)
{
    fl_file_writer w;
    CHECK(fl_file_begin(at("s.txt"), 0666, &w, NULL) == 0);
    EXPECT(!w.in_place && w.tmp && access(w.tmp, F_OK) == 0);
    CHECK(fl_write_all(w.fd, "abc", 3) == 0);
    EXPECT(access(at("s.txt"), F_OK) != 0); /* nothing published before commit */
    fl_file_abort(&w);
    EXPECT(access(at("s.txt"), F_OK) != 0 && access(at("s.txt.tmp"), F_OK) != 0);
    CHECK(fl_file_begin(at("s.txt"), 0666, &w, NULL) == 0);
    CHECK(fl_write_all(w.fd, "abc", 3) == 0);
    fl_write_step step;
    /* the directory-sync rule: 0 where the directory syncs (EINVAL would also give 0) */
    EXPECT(fl_file_commit(&w, &step) == 0 && step == FL_WRITE_DONE);
    EXPECT(slurp_is(at("s.txt"), "abc") && w.fd == -1 && !w.tmp && !w.path);
}

int main(void)
{
    CHECK(mkdtemp(dir));
    regular();
    symlink_target();
    fifo_with_reader();
    devices();
    refusals();
    failed_write_keeps_old();
    streaming();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", dir);
    return fl_check_status();
}
