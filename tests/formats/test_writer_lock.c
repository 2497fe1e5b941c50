/* test_writer_lock.c — the writer's destination rules, at the library level:
 * a second writer of the same DST gets -EBUSY naming the first one's pid (also when
 * the first is another process), the lock dies with a SIGKILLed holder and its stale file never
 * blocks; a caller-held lock is honoured; overwrite refuses a folder that is not a dataset of
 * ours and a dataset holding a foreign file (FL_E_INVALID, nothing touched); a partial folder
 * holding foreign files is neither cleared nor resumed; DST "." / ".." / "/" are refused; a
 * missing parent is named; a replacement leaves nothing beside DST; fl_writer_inspect and
 * fl_writer_remove_partial say and do what fl_writer.h documents. */
#include <signal.h>
#include <sys/wait.h>

#include "fmt_test.h"

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static void put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

static int file_is(const char *path, const char *text)
{
    char b[256] = {0};
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    return n == strlen(text) && memcmp(b, text, n) == 0;
}

int main(void)
{
    fl_error err;
    fl_writer *w, *w2;
    char p[PATH_MAX + 600], q[PATH_MAX + 300];

    /* 1. two writers of one DST in one process: the second is refused at once */
    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    const char *dst = tt_path("ds");
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    CHECK(fl_writer_open(dst, &o, &w2, &err) == -EBUSY);
    char want[128];
    snprintf(want, sizeof want, "is being written by process %ld", (long)getpid());
    CHECK(strstr(err.msg, want) != NULL);
    snprintf(p, sizeof p, "%s.lock", dst);
    CHECK(exists(p));
    tt_add(w, &o, 0, 20);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    CHECK(!exists(p)); /* the lock file goes with the lock */

    /* 2. another process holds it; then it is SIGKILLed: the stale file does not block */
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        fl_writer_options oc = o;
        oc.overwrite = 1;
        fl_writer *wc;
        if (fl_writer_open(dst, &oc, &wc, NULL))
            _exit(1);
        if (write(pipefd[1], "x", 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    char c;
    CHECK(read(pipefd[0], &c, 1) == 1);
    o.overwrite = 1;
    CHECK(fl_writer_open(dst, &o, &w2, &err) == -EBUSY);
    snprintf(want, sizeof want, "is being written by process %ld", (long)child);
    CHECK(strstr(err.msg, want) != NULL);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK(exists(p)); /* left behind by the killed holder */
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    tt_add(w, &o, 0, 30);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    CHECK(!exists(p));
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    tt_check_all(ds, 30);
    fl_dataset_close(ds);
    /* nothing beside it: no .partial, no .old-* */
    DIR *dir = opendir(tt_tmpdir());
    CHECK(dir);
    for (struct dirent *e; (e = readdir(dir));)
        CHECK(strncmp(e->d_name, "ds.", 3) != 0);
    closedir(dir);

    /* 3. a caller-held lock is used (and must be for the same DST) */
    fl_writer_lock *lk;
    CHECK_OK(fl_writer_lock_acquire(dst, &lk, &err), &err);
    CHECK(fl_writer_open(dst, &o, &w, &err) == -EBUSY); /* not given: open's own attempt fails */
    o.lock = lk;
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    tt_add(w, &o, 0, 5);
    fl_writer_abort(w);
    CHECK(exists(p)); /* still the caller's */
    fl_writer_options ox = o;
    CHECK(fl_writer_open(tt_path("other"), &ox, &w, &err) == FL_E_INVALID);
    fl_writer_lock_release(lk);
    CHECK(!exists(p));
    o.lock = NULL;
    CHECK_OK(fl_writer_remove_partial(dst, &err), &err);

    /* 4. overwrite never touches what is not ours */
    const char *user = tt_path("user");
    CHECK(mkdir(user, 0755) == 0);
    snprintf(p, sizeof p, "%s/notes.txt", user);
    put_file(p, "my notes");
    snprintf(q, sizeof q, "%s/sub", user);
    CHECK(mkdir(q, 0755) == 0);
    CHECK(fl_writer_open(user, &o, &w, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "no manifest.json") && strstr(err.msg, "nothing was changed"));
    CHECK(file_is(p, "my notes") && exists(q));
    snprintf(q, sizeof q, "%s.partial", user);
    CHECK(!exists(q));
    /* a dataset of ours with a file added: refused at open, and at finish if added meanwhile */
    snprintf(p, sizeof p, "%s/README", dst);
    put_file(p, "keep");
    CHECK(fl_writer_open(dst, &o, &w, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "README") != NULL);
    CHECK(unlink(p) == 0);
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    tt_add(w, &o, 0, 12);
    put_file(p, "keep");
    CHECK(fl_writer_finish(w, tt_classes, 3, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "README") != NULL);
    CHECK(file_is(p, "keep"));
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    tt_check_all(ds, 30); /* still the old one */
    fl_dataset_close(ds);
    /* the refused run stays resumable: remove the file, resume, publish */
    CHECK(unlink(p) == 0);
    o.resume = 1;
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    CHECK(fl_writer_resume_count(w) == 12);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    o.resume = 0;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    tt_check_all(ds, 12);
    fl_dataset_close(ds);

    /* 5. a partial folder that is not ours: not cleared, not resumed */
    snprintf(q, sizeof q, "%s.partial", dst);
    CHECK(mkdir(q, 0755) == 0);
    snprintf(p, sizeof p, "%s/thesis.tex", q);
    put_file(p, "draft");
    fl_writer_dst_info info;
    CHECK_OK(fl_writer_inspect(dst, &info, &err), &err);
    CHECK(info.dst == FL_DST_DATASET && info.records == 12 && info.partial == FL_PARTIAL_OTHER);
    CHECK(strstr(info.partial_why, "thesis.tex") != NULL);
    fl_writer_dst_info_free(&info);
    CHECK(fl_writer_open(dst, &o, &w, &err) == FL_E_INVALID);
    o.resume = 1;
    CHECK(fl_writer_open(dst, &o, &w, &err) == FL_E_INVALID);
    o.resume = 0;
    CHECK(fl_writer_remove_partial(dst, &err) == FL_E_INVALID);
    CHECK(file_is(p, "draft"));
    CHECK(unlink(p) == 0 && rmdir(q) == 0);

    /* 6. names that are no dataset folder; a missing parent */
    const char *bad[] = {".", "..", "/", "./", "x/..", "x/.", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(fl_writer_open(bad[i], &o, &w, &err) == FL_E_INVALID);
    snprintf(p, sizeof p, "%s/nope/ds", tt_tmpdir());
    CHECK(fl_writer_open(p, &o, &w, &err) == -ENOENT);
    snprintf(q, sizeof q, "parent folder %s/nope does not exist", tt_tmpdir());
    CHECK(strstr(err.msg, q) != NULL);

    /* 7. a lock path that is somebody's file is refused and kept */
    snprintf(p, sizeof p, "%s.lock", dst);
    put_file(p, "not a pid\n");
    CHECK(fl_writer_open(dst, &o, &w, &err) == FL_E_INVALID);
    CHECK(file_is(p, "not a pid\n"));
    CHECK(unlink(p) == 0);
    printf("writer lock ok\n");
    return 0;
}
