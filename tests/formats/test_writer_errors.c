/* test_writer_errors.c — the writer refuses bad input cleanly and never damages finished data:
 * existing DST without overwrite, overwrite replacing an old dataset only at finish, raw size and
 * fixed-size mismatches, negative and out-of-range labels, bad options JSON, a disk-full-like
 * write error (RLIMIT_FSIZE -> EFBIG) mid-run that names the open shard's .tmp file and keeps
 * complete shards for a resume, and a shard name taken by a FIFO (refused, never opened). */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "fmt_test.h"

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void write_fail_child(const char *dst, fl_backend b)
{
    /* the child may write at most 64 KiB per file: a shard (or data.mdb) hits the limit */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {65536, 65536};
    if (setrlimit(RLIMIT_FSIZE, &rl))
        _exit(10);
    fl_writer_options o = tt_options(b, FL_ENC_JPEG, 0);
    o.shard_bytes = 40000;
    o.resume = 1;
    fl_writer *w;
    fl_error err;
    if (fl_writer_open(dst, &o, &w, &err))
        _exit(11);
    static uint8_t buf[1 << 17]; /* room for the oversized record */
    char name[128];
    for (uint64_t i = 0; i < 400; i++) {
        size_t n = tt_payload(i, FL_ENC_JPEG, 28, 28, 3, buf, sizeof buf);
        if (i == 150)
            n = 70000; /* bigger than the file size limit: its file cannot be written */
        tt_name(i, name, sizeof name);
        int rc = fl_writer_add(w, buf, n, tt_label(i), name, 10 + (uint32_t)(i % 5),
                               20 + (uint32_t)(i % 7), &err);
        if (rc) {
            printf("child: write error at record %llu: %s\n", (unsigned long long)i, err.msg);
            fflush(stdout);
            if (rc != -EFBIG || !strstr(err.msg, ".partial/"))
                _exit(13);
            if (b == FL_BACKEND_SHARDS && !strstr(err.msg, ".fls.tmp: write failed"))
                _exit(16);
            /* later calls keep failing with the same error */
            if (fl_writer_add(w, buf, 100, 0, "x", 10, 20, &err) != -EFBIG)
                _exit(12);
            fl_writer_abort(w);
            _exit(0);
        }
    }
    /* LMDB queues records in batches: the error comes at the commit in finish */
    int rc = fl_writer_finish(w, tt_classes, 3, &err);
    if (rc) {
        printf("child: write error at finish: %s\n", err.msg);
        fflush(stdout);
        _exit((rc == -EFBIG || rc == -EIO) && strstr(err.msg, ".partial/")
                  ? 0
                  : 15); /* LMDB reports EIO */
    }
    _exit(14); /* the limit was never hit */
}

int main(void)
{
    fl_error err;
    fl_writer *w;
    fl_dataset *ds;

    /* DST exists, overwrite not set */
    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    const char *dst = tt_path("exists");
    tt_write(dst, &o, 10);
    CHECK(fl_writer_open(dst, &o, &w, &err) == -EEXIST);
    CHECK(strstr(err.msg, "already exists"));
    /* overwrite: the old dataset stays until finish, then is replaced */
    o.overwrite = 1;
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    tt_add(w, &o, 0, 25);
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    CHECK(fl_dataset_count(ds) == 10); /* still the old one */
    fl_dataset_close(ds);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    tt_check_all(ds, 25);
    fl_dataset_close(ds);
    /* nothing left beside it, and a user's own "<dst>.old" is not touched */
    char old[PATH_MAX + 300];
    snprintf(old, sizeof old, "%s.old", dst);
    CHECK(mkdir(old, 0755) == 0);
    tt_write(dst, &o, 25);
    CHECK(exists(old));
    CHECK(rmdir(old) == 0);
    DIR *dir = opendir(tt_tmpdir());
    CHECK(dir);
    for (struct dirent *e; (e = readdir(dir));)
        CHECK(!strstr(e->d_name, "exists.old-"));
    closedir(dir);
    /* overwrite with another backend */
    fl_writer_options ol = tt_options(FL_BACKEND_LMDB, FL_ENC_JPEG, 0);
    ol.overwrite = 1;
    tt_write(dst, &ol, 12);
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    CHECK(fl_dataset_backend(ds) == FL_BACKEND_LMDB);
    tt_check_all(ds, 12);
    fl_dataset_close(ds);

    /* a trailing slash names the same dataset */
    char slash[PATH_MAX + 300];
    snprintf(slash, sizeof slash, "%s/", tt_path("slash"));
    fl_writer_options os = tt_options(FL_BACKEND_SHARDS, FL_ENC_PNG, 0);
    tt_write(slash, &os, 5);
    CHECK_OK(fl_dataset_open(tt_path("slash"), &ds, &err), &err);
    tt_check_all(ds, 5);
    fl_dataset_close(ds);
    CHECK(!exists(tt_path("slash/.partial")) && !exists(tt_path("slash.partial")));

    /* record-level refusals leave the writer usable */
    fl_writer_options orw = tt_options(FL_BACKEND_SHARDS, FL_ENC_RAW, 0);
    const char *d2 = tt_path("refuse");
    CHECK_OK(fl_writer_open(d2, &orw, &w, &err), &err);
    uint8_t px[28 * 28] = {0};
    CHECK(fl_writer_add(w, px, 100, 0, "short", 28, 28, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "short") && strstr(err.msg, "784"));
    CHECK(fl_writer_add(w, px, 784, 0, "wrongsize", 28, 27, &err) == FL_E_INVALID);
    CHECK(fl_writer_add(w, px, 784, -1, "neg", 28, 28, &err) == FL_E_LABEL);
    CHECK(strstr(err.msg, "neg"));
    CHECK(fl_writer_add_stored(w, px, 700, 784, 0, "stored", 28, 28, &err) == FL_E_INVALID);
    CHECK_OK(fl_writer_add(w, px, 784, 5, "ok", 28, 28, &err), &err);
    /* label 5 with 3 classes: finish refuses and DST does not appear */
    CHECK(fl_writer_finish(w, tt_classes, 3, &err) == FL_E_LABEL);
    CHECK(strstr(err.msg, "label 5"));
    CHECK(!exists(d2));

    /* the next shard's name taken by a FIFO: refused at once naming the .tmp (a durable write
     * opens a FIFO in place, which would block here), and the writer stays failed */
    const char *dfifo = tt_path("fifo");
    CHECK_OK(fl_writer_open(dfifo, &orw, &w, &err), &err);
    char fifo[PATH_MAX + 300];
    snprintf(fifo, sizeof fifo, "%s.partial/shard-00000.fls", dfifo);
    CHECK(mkfifo(fifo, 0644) == 0);
    CHECK(fl_writer_add(w, px, 784, 0, "a", 28, 28, &err) == -EEXIST);
    CHECK(strstr(err.msg, "shard-00000.fls.tmp: cannot create") && strstr(err.msg, "not a file"));
    CHECK(fl_writer_add(w, px, 784, 0, "b", 28, 28, &err) != 0);
    fl_writer_abort(w);
    CHECK(unlink(fifo) == 0);

    /* bad options */
    fl_writer_options ob = o;
    ob.overwrite = 0;
    ob.options_json = "{\"unterminated\": ";
    CHECK(fl_writer_open(tt_path("badopt"), &ob, &w, &err) == FL_E_FORMAT);
    ob.options_json = "[1, 2]";
    CHECK(fl_writer_open(tt_path("badopt"), &ob, &w, &err) == FL_E_INVALID);
    ob = o;
    ob.overwrite = 0;
    ob.schema.channels = 0;
    CHECK(fl_writer_open(tt_path("badopt"), &ob, &w, &err) == FL_E_INVALID);
    ob = o;
    ob.overwrite = 0;
    ob.schema.compression = FL_COMP_ZSTD;
    ob.zstd_level = 99;
    CHECK(fl_writer_open(tt_path("badopt"), &ob, &w, &err) == FL_E_INVALID);
    ob = o;
    ob.overwrite = 0;
    ob.part_index = 3;
    ob.part_count = 2;
    CHECK(fl_writer_open(tt_path("badopt"), &ob, &w, &err) == FL_E_INVALID);

    /* write error mid-run (disk full stand-in): clean error, complete shards survive, resume works
     */
    fl_backend backends[2] = {FL_BACKEND_SHARDS, FL_BACKEND_LMDB};
    for (int k = 0; k < 2; k++) {
        const char *d3 = tt_path(k ? "full_lmdb" : "full_shards");
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            write_fail_child(d3, backends[k]);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "write-error child (%s) exited with status %d\n", k ? "lmdb" : "shards",
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1);
            return 1;
        }
        CHECK(!exists(d3));
        fl_writer_options orr = tt_options(backends[k], FL_ENC_JPEG, 0);
        orr.shard_bytes = 40000;
        orr.resume = 1;
        CHECK_OK(fl_writer_open(d3, &orr, &w, &err), &err);
        uint64_t r = fl_writer_resume_count(w);
        printf("%s: after the write error, resumed from %llu\n", k ? "lmdb" : "shards",
               (unsigned long long)r);
        if (k == 0)
            CHECK(r > 0 && r <= 150);
        tt_add(w, &orr, r, 400);
        CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
        CHECK_OK(fl_dataset_open(d3, &ds, &err), &err);
        tt_check_all(ds, 400);
        fl_dataset_close(ds);
    }
    printf("writer errors ok\n");
    return 0;
}
