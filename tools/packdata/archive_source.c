/* archive_source.c — tar files read in place through libarchive (archive_source.h): listing
 * (every entry's path, type, size, data offset and first bytes), random reads of uncompressed
 * members by pread, in-order reads of compressed ones under a lock, served in item order while
 * the pack pipeline runs. */
#include "archive_source.h"

#include "fl_grow.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int pd_is_tar_name(const char *path)
{
    static const char *const ext[] = {".tar",    ".tar.gz", ".tgz",     ".tar.bz2", ".tbz2",
                                      ".tar.xz", ".txz",    ".tar.zst", ".tzst",    ".tar.lz4"};
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        size_t k = strlen(ext[i]);
        if (n > k && !strcasecmp(path + n - k, ext[i]))
            return 1;
    }
    return 0;
}

int pd_tar_path_safe(const char *p)
{
    if (!*p || *p == '/')
        return 0;
    for (const char *c = p; *c;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return 0;
        if (!e)
            break;
        c = e + 1;
        if (!*c)
            break; /* a trailing slash (a directory entry) */
    }
    return 1;
}

#ifndef PD_HAVE_ARCHIVE

struct pd_archive {
    int unused;
};

int pd_archive_supported(void) { return 0; }

int pd_archive_open(pd_items *items, const char *path, pd_archive **out, int *random, fl_error *err)
{
    (void)items;
    *out = NULL;
    *random = 0;
    return fl_error_set(err, FL_E_UNSUPPORTED,
                        "%s: this build of packdata cannot read tar files "
                        "(it was built without libarchive: install libarchive-dev and rebuild "
                        "fastload, or extract the archive and pack the folder)",
                        path);
}
const char *pd_archive_path(const pd_archive *ar)
{
    (void)ar;
    return "";
}
const char *pd_archive_stamp(const pd_archive *ar)
{
    (void)ar;
    return "";
}

int pd_archive_list(pd_archive *ar, size_t head_bytes, pd_tar_visit visit, void *ctx, fl_error *err)
{
    (void)ar, (void)head_bytes, (void)visit, (void)ctx;
    return fl_error_set(err, FL_E_UNSUPPORTED, "no libarchive in this build");
}
int pd_archive_list_inner(pd_archive *ar, uint64_t offset, uint64_t size, const char *name,
                          size_t head_bytes, pd_tar_visit visit, void *ctx, fl_error *err)
{
    (void)ar, (void)offset, (void)size, (void)name, (void)head_bytes, (void)visit, (void)ctx;
    return fl_error_set(err, FL_E_UNSUPPORTED, "no libarchive in this build");
}
int pd_member_read(const pd_member *m, uint8_t **buf, size_t *cap, size_t *len, char *why,
                   size_t why_cap)
{
    (void)m, (void)buf, (void)cap, (void)len;
    snprintf(why, why_cap, "no libarchive in this build");
    return FL_E_UNSUPPORTED;
}
void pd_archives_begin_ordered(pd_items *items, size_t start) { (void)items, (void)start; }
int pd_tar_entry_read(const pd_tar_entry *e, uint8_t *dst, char *why, size_t why_cap)
{
    (void)e, (void)dst;
    snprintf(why, why_cap, "no libarchive in this build");
    return FL_E_UNSUPPORTED;
}
const char *pd_archives_stream_only(const pd_archive *list)
{
    (void)list;
    return NULL;
}
void pd_archives_free(pd_archive *list) { (void)list; }

#else

#include <archive.h>
#include <archive_entry.h>

#define READ_BLOCK (64u << 10)

/* The item-order turn shared by all archives of one item list. */
typedef struct pd_order {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int on;
    uint64_t turn;
} pd_order;

struct pd_archive {
    char *path;
    char stamp[48];
    int fd; /* random access: pread */
    int random;
    uint64_t file_size;
    /* in-order reading: the stream and where it stands */
    pthread_mutex_t m;
    struct archive *a;
    uint64_t pos;       /* ordinal of the next header to read */
    int have_cur;       /* the header of entry pos - 1 was read, its data not yet */
    pd_order *order;    /* the list head's */
    pd_order own_order; /* used when this is the list head */
    pd_archive *next;
};

int pd_archive_supported(void) { return 1; }

static struct archive *new_reader(void)
{
    struct archive *a = archive_read_new();
    if (!a)
        return NULL;
    /* tar formats only (ustar, pax, GNU, v7): a zip or cpio is not a tar input */
    archive_read_support_format_tar(a);
    archive_read_support_filter_all(a);
    return a;
}

/* A reader over the whole file (seekable: skipping an uncompressed member is an lseek). */
static int open_stream(const pd_archive *ar, struct archive **out, fl_error *err)
{
    struct archive *a = new_reader();
    if (!a)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", ar->path);
    if (archive_read_open_filename(a, ar->path, READ_BLOCK) != ARCHIVE_OK) {
        int e = archive_errno(a);
        int r =
            fl_error_set(err, e > 0 ? -e : FL_E_FORMAT, "%s: cannot open as a tar: %s", ar->path,
                         archive_error_string(a) ? archive_error_string(a) : "unknown error");
        archive_read_free(a);
        return r;
    }
    *out = a;
    return 0;
}

int pd_archive_open(pd_items *items, const char *path, pd_archive **out, int *random, fl_error *err)
{
    *out = NULL;
    *random = 0;
    pd_archive *ar = calloc(1, sizeof *ar);
    if (!ar || !(ar->path = strdup(path))) {
        free(ar);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    }
    ar->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (ar->fd < 0 || fstat(ar->fd, &st) < 0) {
        int e = errno;
        if (ar->fd >= 0)
            close(ar->fd);
        free(ar->path);
        free(ar);
        return fl_error_set(err, -e, "%s: cannot open: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
        /* a FIFO would block the listing's second open; it could not be read twice anyway */
        close(ar->fd);
        free(ar->path);
        free(ar);
        return fl_error_set(err, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL, "%s: %s, not a tar file",
                            path, S_ISDIR(st.st_mode) ? "a folder" : "not a regular file");
    }
    ar->file_size = (uint64_t)st.st_size;
    snprintf(ar->stamp, sizeof ar->stamp, "%lld:%llu",
             (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
             (unsigned long long)st.st_size);
    pthread_mutex_init(&ar->m, NULL);
    /* probe: which filter (compression) the file has */
    struct archive *a = NULL;
    int r = open_stream(ar, &a, err);
    if (r) {
        pthread_mutex_destroy(&ar->m);
        close(ar->fd);
        free(ar->path);
        free(ar);
        return r;
    }
    ar->random = S_ISREG(st.st_mode) && archive_filter_count(a) == 1 &&
                 archive_filter_code(a, 0) == ARCHIVE_FILTER_NONE;
    archive_read_free(a);
    /* append (the listing order is the order the archives were opened) */
    if (!items->archives) {
        pthread_mutex_init(&ar->own_order.m, NULL);
        pthread_cond_init(&ar->own_order.cv, NULL);
        ar->order = &ar->own_order;
        items->archives = ar;
    } else {
        pd_archive *t = items->archives;
        while (t->next)
            t = t->next;
        t->next = ar;
        ar->order = items->archives->order;
    }
    *random = ar->random;
    *out = ar;
    return 0;
}

const char *pd_archive_path(const pd_archive *ar) { return ar->path; }
const char *pd_archive_stamp(const pd_archive *ar) { return ar->stamp; }

static const char *entry_path(struct archive_entry *e)
{
    /* pax headers carry UTF-8 names, which the "C" locale cannot convert: take them as they are */
    const char *p = archive_entry_pathname_utf8(e);
    return p ? p : archive_entry_pathname(e);
}

/* The listing loop over an opened reader. base: added to data offsets (an inner tar). */
static int list_reader(struct archive *a, const char *what, uint64_t base, int offsets_valid,
                       size_t head_bytes, pd_tar_visit visit, void *ctx, fl_error *err)
{
    uint8_t head[64];
    if (head_bytes > sizeof head)
        head_bytes = sizeof head;
    struct archive_entry *e;
    uint64_t ord = 0;
    for (;; ord++) {
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN) {
            const char *why = archive_error_string(a);
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: corrupt or truncated tar after %llu "
                                "entries: %s",
                                what, (unsigned long long)ord, why ? why : "read error");
        }
        pd_tar_entry te;
        memset(&te, 0, sizeof te);
        te.path = entry_path(e);
        if (!te.path)
            te.path = "";
        te.entry = ord;
        te.offset = offsets_valid ? base + (uint64_t)archive_filter_bytes(a, 0) : 0;
        te.size = archive_entry_size_is_set(e) && archive_entry_size(e) > 0
                      ? (uint64_t)archive_entry_size(e)
                      : 0;
        mode_t ft = archive_entry_filetype(e);
        te.type = archive_entry_hardlink(e) || ft == AE_IFLNK ? PD_TAR_LINK
                  : ft == AE_IFDIR                            ? PD_TAR_DIR
                  : ft == AE_IFREG                            ? PD_TAR_FILE
                                                              : PD_TAR_OTHER;
        te.sparse = archive_entry_sparse_count(e) > 0;
        if (te.type == PD_TAR_FILE && head_bytes && te.size) {
            size_t want = te.size < head_bytes ? (size_t)te.size : head_bytes, got = 0;
            while (got < want) {
                la_ssize_t n = archive_read_data(a, head + got, want - got);
                if (n <= 0)
                    break;
                got += (size_t)n;
            }
            te.head = head;
            te.head_len = got;
        }
        te.reader = a;
        int v = visit(ctx, &te);
        if (v)
            return v;
    }
}

int pd_tar_entry_read(const pd_tar_entry *e, uint8_t *dst, char *why, size_t why_cap)
{
    if (e->head_len)
        memcpy(dst, e->head, e->head_len);
    uint64_t got = e->head_len;
    while (got < e->size) {
        la_ssize_t n = archive_read_data(e->reader, dst + got, (size_t)(e->size - got));
        if (n <= 0) {
            snprintf(why, why_cap, "truncated member: %llu of %llu bytes (%s)",
                     (unsigned long long)got, (unsigned long long)e->size,
                     n < 0 && archive_error_string(e->reader) ? archive_error_string(e->reader)
                                                              : "end of data");
            return FL_E_FORMAT;
        }
        got += (uint64_t)n;
    }
    return 0;
}

int pd_archive_list(pd_archive *ar, size_t head_bytes, pd_tar_visit visit, void *ctx, fl_error *err)
{
    struct archive *a = NULL;
    int r = open_stream(ar, &a, err);
    if (r)
        return r;
    r = list_reader(a, ar->path, 0, ar->random, head_bytes, visit, ctx, err);
    archive_read_free(a);
    return r;
}

/* An inner tar: libarchive reads the byte range of the outer file through these callbacks. */
typedef struct inner_src {
    int fd;
    uint64_t begin, size, pos;
    uint8_t *buf;
    int eio;
} inner_src;

static la_ssize_t inner_read(struct archive *a, void *cd, const void **out)
{
    (void)a;
    inner_src *s = cd;
    uint64_t left = s->size - s->pos;
    size_t n = left < READ_BLOCK ? (size_t)left : READ_BLOCK;
    if (!n)
        return 0;
    ssize_t got = pread(s->fd, s->buf, n, (off_t)(s->begin + s->pos));
    if (got < 0) {
        s->eio = errno;
        archive_set_error(a, errno, "read: %s", strerror(errno));
        return -1;
    }
    s->pos += (uint64_t)got;
    *out = s->buf;
    return got;
}

static la_int64_t inner_skip(struct archive *a, void *cd, la_int64_t req)
{
    (void)a;
    inner_src *s = cd;
    uint64_t left = s->size - s->pos;
    uint64_t n = req < 0 ? 0 : (uint64_t)req < left ? (uint64_t)req : left;
    s->pos += n;
    return (la_int64_t)n;
}

static la_int64_t inner_seek(struct archive *a, void *cd, la_int64_t off, int whence)
{
    (void)a;
    inner_src *s = cd;
    int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)s->pos : (int64_t)s->size;
    int64_t p = base + off;
    if (p < 0 || (uint64_t)p > s->size)
        return ARCHIVE_FATAL;
    s->pos = (uint64_t)p;
    return p;
}

int pd_archive_list_inner(pd_archive *ar, uint64_t offset, uint64_t size, const char *name,
                          size_t head_bytes, pd_tar_visit visit, void *ctx, fl_error *err)
{
    if (!ar->random)
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "%s: %s is a tar inside a compressed tar, which "
                            "can only be read from its start: decompress %s first (a plain .tar "
                            "is read in place)",
                            ar->path, name, ar->path);
    if (offset + size > ar->file_size)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: %s: truncated (its %llu bytes run past the end "
                            "of the file)",
                            ar->path, name, (unsigned long long)size);
    inner_src s = {ar->fd, offset, size, 0, malloc(READ_BLOCK), 0};
    struct archive *a = new_reader();
    if (!s.buf || !a) {
        free(s.buf);
        if (a)
            archive_read_free(a);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", ar->path);
    }
    char what[1024];
    snprintf(what, sizeof what, "%s:%s", ar->path, name);
    archive_read_set_read_callback(a, inner_read);
    archive_read_set_skip_callback(a, inner_skip);
    archive_read_set_seek_callback(a, inner_seek);
    archive_read_set_callback_data(a, &s);
    int r;
    if (archive_read_open1(a) != ARCHIVE_OK) {
        r = fl_error_set(err, FL_E_FORMAT, "%s: not a tar: %s", what,
                         archive_error_string(a) ? archive_error_string(a) : "unknown format");
    } else if (archive_filter_count(a) != 1 || archive_filter_code(a, 0) != ARCHIVE_FILTER_NONE) {
        r = fl_error_set(err, FL_E_UNSUPPORTED,
                         "%s: a compressed tar inside a tar: only plain "
                         "inner tars are read in place",
                         what);
    } else {
        /* inner data offsets: what the reader consumed, i.e. s.pos minus what it still buffers,
         * which archive_filter_bytes(a, 0) reports directly */
        r = list_reader(a, what, offset, 1, head_bytes, visit, ctx, err);
    }
    archive_read_free(a);
    free(s.buf);
    return r;
}

/* In-order read of entry m->entry (ar->m held). */
static int stream_read(pd_archive *ar, const pd_member *m, uint8_t *dst, char *why, size_t why_cap)
{
    uint64_t e = m->entry;
    if (ar->a && ar->have_cur && e == ar->pos - 1) {
        /* the header is read: the data is next */
    } else {
        if (ar->a && e < ar->pos) {
            /* behind the stream: start again from the top (only the dictionary pass, which
             * samples the inputs before the pack reads them in order, gets here) */
            archive_read_free(ar->a);
            ar->a = NULL;
        }
        if (!ar->a) {
            fl_error err;
            if (open_stream(ar, &ar->a, &err)) {
                snprintf(why, why_cap, "%s", err.msg);
                return FL_E_FORMAT;
            }
            ar->pos = 0;
        }
        ar->have_cur = 0;
        struct archive_entry *en;
        while (ar->pos <= e) {
            int r = archive_read_next_header(ar->a, &en);
            if (r == ARCHIVE_EOF || r < ARCHIVE_WARN) {
                snprintf(why, why_cap, "cannot read: the tar %s",
                         r == ARCHIVE_EOF ? "ends before it (did it change since it was listed?)"
                         : archive_error_string(ar->a) ? archive_error_string(ar->a)
                                                       : "is corrupt");
                archive_read_free(ar->a);
                ar->a = NULL;
                return FL_E_FORMAT;
            }
            ar->pos++;
        }
        ar->have_cur = 1;
    }
    ar->have_cur = 0;
    uint64_t got = 0;
    while (got < m->size) {
        la_ssize_t n = archive_read_data(ar->a, dst + got, (size_t)(m->size - got));
        if (n <= 0) {
            snprintf(why, why_cap, "truncated member: %llu of %llu bytes (%s)",
                     (unsigned long long)got, (unsigned long long)m->size,
                     n < 0 && archive_error_string(ar->a) ? archive_error_string(ar->a)
                                                          : "end of data");
            archive_read_free(ar->a);
            ar->a = NULL;
            return FL_E_FORMAT;
        }
        got += (uint64_t)n;
    }
    return 0;
}

int pd_member_read(const pd_member *m, uint8_t **buf, size_t *cap, size_t *len, char *why,
                   size_t why_cap)
{
    pd_archive *ar = m->ar;
    *len = 0;
    if (m->size > (uint64_t)SIZE_MAX / 2 || fl_grow(buf, cap, m->size ? (size_t)m->size : 1)) {
        snprintf(why, why_cap, "out of memory for a %llu-byte member", (unsigned long long)m->size);
        return -ENOMEM;
    }
    if (ar->random) {
        uint64_t got = 0;
        while (got < m->size) {
            ssize_t n =
                pread(ar->fd, *buf + got, (size_t)(m->size - got), (off_t)(m->offset + got));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                int e = errno;
                snprintf(why, why_cap, "cannot read: %s", strerror(e));
                return -e;
            }
            if (n == 0) {
                snprintf(why, why_cap,
                         "truncated member: the tar ends after %llu of its %llu bytes",
                         (unsigned long long)got, (unsigned long long)m->size);
                return FL_E_FORMAT;
            }
            got += (uint64_t)n;
        }
        *len = (size_t)m->size;
        return 0;
    }
    pd_order *o = ar->order;
    int ordered = 0;
    pthread_mutex_lock(&o->m);
    if (o->on && m->ticket != UINT64_MAX) {
        ordered = 1;
        while (o->turn != m->ticket)
            pthread_cond_wait(&o->cv, &o->m);
    }
    pthread_mutex_unlock(&o->m);
    pthread_mutex_lock(&ar->m);
    int r = stream_read(ar, m, *buf, why, why_cap);
    pthread_mutex_unlock(&ar->m);
    if (ordered) {
        pthread_mutex_lock(&o->m);
        o->turn++;
        pthread_cond_broadcast(&o->cv);
        pthread_mutex_unlock(&o->m);
    }
    if (!r)
        *len = (size_t)m->size;
    return r;
}

void pd_archives_begin_ordered(pd_items *items, size_t start)
{
    pd_archive *head = items->archives;
    if (!head)
        return;
    uint64_t k = 0;
    if (items->tar) {
        /* compact members (one tar): pd_tar_item gives item i >= start its turn i - start */
        items->tar->tickets = !items->tar->ar->random;
        items->tar->ticket_start = start;
        k = items->tar->tickets && start < items->n ? items->n - start : 0;
    }
    for (size_t i = 0; i < items->n && !items->tar; i++) {
        pd_member *m = (pd_member *)items->v[i].member; /* the list's own arena */
        if (!m || m->ar->random)
            continue;
        m->ticket = i >= start ? k++ : UINT64_MAX;
    }
    pthread_mutex_lock(&head->order->m);
    head->order->on = k > 0;
    head->order->turn = 0;
    pthread_mutex_unlock(&head->order->m);
}

const char *pd_archives_stream_only(const pd_archive *list)
{
    for (; list; list = list->next)
        if (!list->random)
            return list->path;
    return NULL;
}

void pd_archives_free(pd_archive *list)
{
    pd_archive *head = list;
    while (list) {
        pd_archive *n = list->next;
        if (list->a)
            archive_read_free(list->a);
        if (list->fd >= 0)
            close(list->fd);
        pthread_mutex_destroy(&list->m);
        free(list->path);
        if (list != head)
            free(list);
        list = n;
    }
    if (head) {
        pthread_mutex_destroy(&head->own_order.m);
        pthread_cond_destroy(&head->own_order.cv);
        free(head);
    }
}

#endif
