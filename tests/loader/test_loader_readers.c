/* test_loader_readers.c — the record readers on their own: io_uring (registered buffers) and
 * pread, buffered and O_DIRECT, give the exact bytes of records anywhere in a file (unaligned,
 * ending at EOF, empty, read straight into a caller buffer), report a record past the end of
 * the file as FL_E_TRUNCATED and a bad descriptor as -EBADF; two groups can be in flight and
 * drained in either order. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "reader.h"

#define FILE_LEN 100003u

static uint8_t content[FILE_LEN];
static int seen[64];

typedef struct expect {
    int res[64];
} expect;

static void on_done(void *user, fl_read_req *r)
{
    expect *e = user;
    CHECK(r->tag < 64);
    seen[r->tag]++;
    CHECK(r->res == e->res[r->tag]);
    if (r->res == 0)
        CHECK(memcmp(r->data, content + r->offset, r->len) == 0);
}

static void run(fl_reader *rd, int fd, int bad_fd, int into_dst)
{
    static const struct {
        uint64_t off;
        uint32_t len;
    } recs[] = {{0, 100},       {4095, 2},           {4096, 4096},
                {12345, 30000}, {FILE_LEN - 7, 7},   {FILE_LEN - 5000, 5000},
                {777, 0},       {FILE_LEN - 10, 20}, {50000, 1}};
    const unsigned n = sizeof recs / sizeof recs[0];
    fl_read_req reqs[16];
    expect e;
    memset(&e, 0, sizeof e);
    memset(seen, 0, sizeof seen);
    uint8_t *dst = malloc(64 * 1024);
    for (unsigned i = 0; i < n; i++) {
        memset(&reqs[i], 0, sizeof reqs[i]);
        reqs[i].fd = fd;
        reqs[i].offset = recs[i].off;
        reqs[i].len = recs[i].len;
        reqs[i].tag = i;
        if (into_dst && i == 3)
            reqs[i].dst = dst;
        e.res[i] = recs[i].off + recs[i].len > FILE_LEN ? FL_E_TRUNCATED : 0;
    }
    reqs[n] = reqs[0];
    reqs[n].fd = bad_fd;
    reqs[n].tag = n;
    e.res[n] = -EBADF;
    double wait = 0;
    uint64_t bytes = 0;
    fl_reader_run(rd, reqs, n + 1, on_done, &e, &wait, &bytes);
    for (unsigned i = 0; i <= n; i++)
        CHECK(seen[i] == 1);
    CHECK(bytes >= 30000);
    if (into_dst && !rd->direct)
        CHECK(reqs[3].data == dst);
    free(dst);
}

/* Two groups in flight at once, drained in the opposite order: completions of one group seen
 * while draining the other are kept for it. */
static void run_two(fl_reader *rd, int fd)
{
    fl_read_req a[8], b[8];
    expect e;
    memset(&e, 0, sizeof e);
    memset(seen, 0, sizeof seen);
    for (unsigned i = 0; i < 8; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].fd = fd;
        a[i].offset = 1000 + i * 9000;
        a[i].len = 5000 + i;
        a[i].tag = i;
        b[i] = a[i];
        b[i].offset += 3;
        b[i].tag = 8 + i;
    }
    double wait = 0;
    uint64_t bytes = 0;
    rd->submit(rd, a, 8, 0, &wait);
    rd->submit(rd, b, 8, 8, &wait);
    CHECK(rd->drain(rd, b, 8, on_done, &e, &wait, &bytes) == 0);
    for (unsigned i = 0; i < 16; i++)
        CHECK(seen[i] == (i >= 8));
    CHECK(rd->drain(rd, a, 8, on_done, &e, &wait, &bytes) == 0);
    for (unsigned i = 0; i < 16; i++)
        CHECK(seen[i] == 1);
}

int main(void)
{
    char *dir = fx_tmpdir("readers");
    char path[4200];
    snprintf(path, sizeof path, "%s/data", dir);
    for (uint32_t i = 0; i < FILE_LEN; i++)
        content[i] = (uint8_t)(i * 2654435761u >> 24);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, content, FILE_LEN) == FILE_LEN);
    close(fd);
    int bfd = open(path, O_RDONLY);
    int dfd = open(path, O_RDONLY | O_DIRECT);
    int bad = 1000;
    while (fcntl(bad, F_GETFD) != -1)
        bad++;
    fl_error err;
    for (int direct = 0; direct < 2; direct++) {
        int f = direct ? dfd : bfd;
        if (f < 0) {
            printf("O_DIRECT not supported by this filesystem: that part is skipped\n");
            continue;
        }
        fl_reader *rd;
        if (fl_uring_reader_create(16, 30000, direct, &rd, &err) == 0) {
            printf("io_uring reader (direct %d): registered buffers %s\n", direct,
                   rd->registered ? "yes" : "no");
            run(rd, f, bad, 1);
            run(rd, f, bad, 0); /* the ring is reusable after errors */
            run_two(rd, f);
            rd->destroy(rd);
        } else {
            printf("io_uring unavailable (%s): that part is skipped\n", err.msg);
        }
        CHECK_OK(fl_pread_reader_create(16, 30000, direct, &rd, &err), &err);
        run(rd, f, bad, 1);
        run_two(rd, f);
        rd->destroy(rd);
    }
    close(bfd);
    if (dfd >= 0)
        close(dfd);
    fx_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
