/* fl_page_cache.h — keeping a writer's output out of the page cache.
 * A writer streaming a data set bigger than RAM would otherwise fill the page cache with pages it
 * never reads again (and, inside a memory cgroup, make the kernel reclaim them under pressure,
 * stalling the writer). These are hints only: durability still comes from fsync, so a file's
 * crash safety does not change (an interrupted .tmp shard is redone by --resume as before). */
#ifndef FL_PAGE_CACHE_H
#define FL_PAGE_CACHE_H

#include <stdint.h>

/* Writeback in chunks of this many bytes: at most ~3 chunks of one file are dirty or cached. */
#define FL_WB_CHUNK (8u << 20)

/* The progress of one file written front to back. Zero it (and set `on`) when the file is
 * created; off (0) makes every call a no-op. */
typedef struct fl_wb_window {
    uint64_t started; /* writeback started for [0, started) */
    uint64_t dropped; /* written back and dropped from the cache: [0, dropped) */
    int on;
} fl_wb_window;

/* `written` bytes of fd are written (by write(2), front to back). For each whole FL_WB_CHUNK not
 * yet started: start its writeback (sync_file_range WRITE); then wait for the chunks started by the
 * previous call and drop their pages (POSIX_FADV_DONTNEED). A file system without sync_file_range
 * turns the window off. Returns 0, or -errno of a writeback error (EIO, ENOSPC): the file's data
 * did not reach the disk, the caller fails as for a failed write. */
int fl_wb_advance(int fd, fl_wb_window *win, uint64_t written);

/* Drop every cached page of fd (POSIX_FADV_DONTNEED over the whole file). Call it only once the
 * data is durable (after fsync): then no page is dirty and all of them can go. Pages a process maps
 * stay. */
void fl_cache_drop_file(int fd);

/* Whether a writer drops its output from the page cache: on unless the environment has
 * FL_WRITER_KEEP_CACHE=1 (benchmarks compare both). */
int fl_cache_drop_enabled(void);

#endif
