/* test_open_race.c — fl_dataset_open while another process keeps replacing the dataset the way a
 * non-atomic publish does (rename DST away, rename a fresh copy in, delete the old files one by
 * one): every open returns one whole dataset (A or B, checked record by record) or fails with
 * -EAGAIN "replaced while being opened", or -ENOENT naming the dataset itself when the open
 * falls between the replacer's two renames; never a corruption error, never a mix.
 * Prints how many opens saw A, B, and how many were retried into -EAGAIN. */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "fmt_test.h"

static void copy_file(const char *from, const char *to)
{
    size_t n;
    FILE *f = fopen(from, "rb");
    CHECK(f);
    static uint8_t buf[1 << 20];
    FILE *g = fopen(to, "wb");
    CHECK(g);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        CHECK(fwrite(buf, 1, n, g) == n);
    fclose(f);
    CHECK(fclose(g) == 0);
}

static void copy_dataset(const char *from, const char *to)
{
    CHECK(mkdir(to, 0755) == 0);
    DIR *d = opendir(from);
    CHECK(d);
    struct dirent *e;
    char a[PATH_MAX + 300], b[PATH_MAX + 300];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        copy_file(a, b);
    }
    closedir(d);
}

int main(void)
{
    const char *A = tt_path("A"), *B = tt_path("B"), *dst = tt_path("dst");
    char tmp[PATH_MAX + 300], old[PATH_MAX + 300];
    snprintf(tmp, sizeof tmp, "%s.partial", dst);
    snprintf(old, sizeof old, "%s.old", dst);
    fl_writer_options oa = tt_options(FL_BACKEND_SHARDS, FL_ENC_RAW, 0);
    oa.shard_bytes = 4000; /* many shards: a long open */
    tt_write(A, &oa, 40);
    fl_writer_options ob = tt_options(FL_BACKEND_SHARDS, FL_ENC_PNG, 0);
    ob.shard_bytes = 4000;
    tt_write(B, &ob, 12);
    copy_dataset(A, dst);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* the replacer: B, A, B, ... until killed */
        for (unsigned k = 0;; k++) {
            copy_dataset(k % 2 ? A : B, tmp);
            if (rename(dst, old) != 0)
                _exit(3);
            if (rename(tmp, dst) != 0)
                _exit(4);
            tt_rm_rf(old);
        }
    }
    unsigned seen_a = 0, seen_b = 0, again = 0, absent = 0, opens = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        fl_dataset *ds;
        fl_error err;
        fl_error_clear(&err);
        int rc = fl_dataset_open(dst, &ds, &err);
        opens++;
        if (rc == -EAGAIN) {
            CHECK(strstr(err.msg, "replaced while being opened") != NULL);
            again++;
        } else if (rc == -ENOENT && strncmp(err.msg, dst, strlen(dst)) == 0 &&
                   strncmp(err.msg + strlen(dst), ": ", 2) == 0) {
            /* between the replacer's two renames there is no dataset at dst at all (the open
             * named dst itself, not a shard of it): a true answer of a non-atomic publish */
            absent++;
        } else if (rc != 0) {
            fprintf(stderr, "open %u: unexpected error %d: %s\n", opens, rc, err.msg);
            kill(pid, SIGKILL);
            return 1;
        } else {
            if (fl_dataset_count(ds) == 40)
                seen_a++;
            else
                seen_b++;
            tt_check_all(ds, fl_dataset_count(ds)); /* exits 1 on any mixed or wrong record */
            fl_dataset_close(ds);
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < 2.0);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    printf("%u opens in 2 s while the dataset was replaced: %u saw A, %u saw B, %u -EAGAIN, "
           "%u found no dataset (between the renames)\n",
           opens, seen_a, seen_b, again, absent);
    CHECK(seen_a + seen_b > 0);
    return 0;
}
