/* page_cache.c — a writer's output leaves the page cache once written (fl_page_cache.h): the
 * streaming-write pattern (start writeback of each chunk, wait for the previous one, drop it) while
 * a file is written, and a whole-file drop once it is durable. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "fl_page_cache.h"

int fl_cache_drop_enabled(void)
{
    const char *k = getenv("FL_WRITER_KEEP_CACHE");
    return !(k && strcmp(k, "1") == 0);
}

int fl_wb_advance(int fd, fl_wb_window *win, uint64_t written)
{
    if (!win->on)
        return 0;
    uint64_t end = written / FL_WB_CHUNK * FL_WB_CHUNK;
    if (end <= win->started)
        return 0;
    if (sync_file_range(fd, (off64_t)win->started, (off64_t)(end - win->started),
                        SYNC_FILE_RANGE_WRITE)) {
        int e = errno;
        if (e == EINVAL || e == ESPIPE || e == ENOSYS || e == EOPNOTSUPP) {
            win->on = 0; /* not a file system that supports it: leave the cache to the kernel */
            return 0;
        }
        return -e;
    }
    if (win->started > win->dropped) {
        /* the chunks started last time have had a chunk's worth of writing to finish */
        off64_t off = (off64_t)win->dropped, len = (off64_t)(win->started - win->dropped);
        if (sync_file_range(fd, off, len,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                SYNC_FILE_RANGE_WAIT_AFTER))
            return -errno;
        (void)posix_fadvise(fd, off, len,
                            POSIX_FADV_DONTNEED); /* a hint: its failure is harmless */
        win->dropped = win->started;
    }
    win->started = end;
    return 0;
}

void fl_cache_drop_file(int fd) { (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); }
