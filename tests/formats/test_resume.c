/* test_resume.c — resumable writing on one backend (argv[1]: shards|lmdb): after fl_writer_abort
 * and after a SIGKILL mid-run (leaving a .tmp shard), a resumed writer keeps what was durably
 * written, reports how many records that is, and the finished dataset holds every record exactly
 * once, in order. Also: a damaged last shard is redone, a resume with other settings is refused,
 * a non-resume run starts over, and nothing appears at DST before finish. */
#include <signal.h>
#include <sys/wait.h>

#include "fmt_test.h"

static fl_writer_options opts(fl_backend b)
{
    fl_writer_options o = tt_options(b, FL_ENC_RAW, 1);
    o.shard_bytes = 24576; /* 4 KiB header + ~ 50 records of ~ 400 compressed bytes */
    o.resume = 1;
    return o;
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Resume, add the rest, finish, check everything. */
static uint64_t resume_and_finish(const char *dst, const fl_writer_options *o, uint64_t n)
{
    fl_writer *w;
    fl_error err;
    CHECK_OK(fl_writer_open(dst, o, &w, &err), &err);
    uint64_t r = fl_writer_resume_count(w);
    tt_add(w, o, r, n);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    tt_check_all(ds, n);
    fl_dataset_close(ds);
    return r;
}

int main(int argc, char **argv)
{
    fl_backend b = tt_backend_arg(argc, argv);
    const uint64_t n = 500;
    fl_error err;
    fl_writer *w;
    char partial[PATH_MAX + 300];

    /* 1. abort after 230 records */
    fl_writer_options o = opts(b);
    const char *dst = tt_path("a");
    snprintf(partial, sizeof partial, "%s.partial", dst);
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    CHECK(fl_writer_resume_count(w) == 0);
    tt_add(w, &o, 0, 230);
    fl_writer_abort(w);
    CHECK(!exists(dst) && exists(partial));
    uint64_t r = resume_and_finish(dst, &o, n);
    printf("abort at 230: resumed from %llu\n", (unsigned long long)r);
    if (b == FL_BACKEND_LMDB)
        CHECK(r == 230); /* abort commits the queued batch */
    else
        CHECK(r > 150 && r <= 230); /* complete shards only */
    CHECK(!exists(partial));

    /* 2. SIGKILL mid-run, at several points */
    uint64_t kill_at[] = {0, 7, 333};
    for (size_t k = 0; k < sizeof kill_at / sizeof kill_at[0]; k++) {
        char name[32];
        snprintf(name, sizeof name, "kill%zu", k);
        dst = tt_path(name);
        snprintf(partial, sizeof partial, "%s.partial", dst);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            fl_writer *cw;
            if (fl_writer_open(dst, &o, &cw, &err))
                _exit(2);
            tt_add(cw, &o, 0, kill_at[k]);
            raise(SIGKILL);
            _exit(3);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        CHECK(!exists(dst));
        /* leftover garbage temporaries are removed by resume */
        char junk[PATH_MAX + 400];
        snprintf(junk, sizeof junk, "%s/shard-00099.fls.tmp", partial);
        FILE *f = fopen(junk, "w");
        CHECK(f);
        fputs("partial", f);
        fclose(f);
        r = resume_and_finish(dst, &o, n);
        printf("kill at %llu: resumed from %llu\n", (unsigned long long)kill_at[k],
               (unsigned long long)r);
        CHECK(r <= kill_at[k]);
    }

    /* 3. damaged last shard (shards backend): it is dropped and its records redone */
    if (b == FL_BACKEND_SHARDS) {
        dst = tt_path("damaged");
        snprintf(partial, sizeof partial, "%s.partial", dst);
        CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
        tt_add(w, &o, 0, 200);
        fl_writer_abort(w);
        /* find the last shard and cut it */
        int last = -1;
        char p[PATH_MAX + 400];
        for (int s = 0; s < 1000; s++) {
            snprintf(p, sizeof p, "%s/shard-%05d.fls", partial, s);
            if (!exists(p))
                break;
            last = s;
        }
        CHECK(last >= 2);
        snprintf(p, sizeof p, "%s/shard-%05d.fls", partial, last);
        struct stat st;
        CHECK(stat(p, &st) == 0);
        CHECK(truncate(p, st.st_size - 10) == 0);
        CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
        r = fl_writer_resume_count(w);
        fl_writer_abort(w);
        CHECK(r > 0 && r < 200);
        CHECK(!exists(p)); /* the damaged shard was deleted */
        uint64_t r2 = resume_and_finish(dst, &o, n);
        CHECK(r2 == r);
        printf("damaged last shard: resumed from %llu\n", (unsigned long long)r);
    }

    /* 4. resume with other settings is refused; without resume the partial run is discarded */
    dst = tt_path("other");
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    tt_add(w, &o, 0, 100);
    fl_writer_abort(w);
    fl_writer_options o2 = o;
    o2.zstd_level = 5;
    CHECK(fl_writer_open(dst, &o2, &w, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "cannot resume") != NULL);
    o2 = o;
    o2.resume = 0;
    CHECK_OK(fl_writer_open(dst, &o2, &w, &err), &err);
    CHECK(fl_writer_resume_count(w) == 0);
    tt_add(w, &o2, 0, 50);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    tt_check_all(ds, 50);
    fl_dataset_close(ds);

    /* 5. resume keeps the first run's dictionary even when called with another */
    if (b == FL_BACKEND_SHARDS || b == FL_BACKEND_LMDB) {
        static uint8_t d1[3000], d2[3000];
        for (size_t i = 0; i < sizeof d1; i++) {
            d1[i] = (uint8_t)(i * 13);
            d2[i] = (uint8_t)(i * 17 + 1);
        }
        dst = tt_path("dict");
        o2 = o;
        o2.zstd_dict = d1;
        o2.zstd_dict_len = sizeof d1;
        CHECK_OK(fl_writer_open(dst, &o2, &w, &err), &err);
        tt_add(w, &o2, 0, 120);
        fl_writer_abort(w);
        o2.zstd_dict = d2;
        CHECK_OK(fl_writer_open(dst, &o2, &w, &err), &err);
        size_t dl;
        const void *dp = fl_writer_dictionary(w, &dl);
        CHECK(dp && dl == sizeof d1 && memcmp(dp, d1, dl) == 0);
        tt_add(w, &o2, fl_writer_resume_count(w), n);
        CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
        CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
        tt_check_all(ds, n);
        fl_dataset_close(ds);
    }
    printf("resume ok\n");
    return 0;
}
