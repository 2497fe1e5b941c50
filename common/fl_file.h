/* fl_file.h — the file helpers of fastload (common/): whole writes and reads that retry EINTR,
 * reading a whole (small) file into memory, syncing a directory, a path's directory. Every layer
 * that touches files uses these (formats' writer and reader, packdata, the trainer's checkpoints).
 * Errors are returned as negative codes; the caller words the message (each caller names its own
 * file), so these never print and take no fl_error. */
#ifndef FL_FILE_H
#define FL_FILE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Write all `n` bytes of `buf` to `fd`, retrying after EINTR and short writes. Returns 0, -errno,
 * or -EIO when write() makes no progress. */
int fl_write_all(int fd, const void *buf, size_t n);

/* Read from `fd` until `n` bytes are in `buf` or end of file, retrying after EINTR. *got receives
 * the bytes read (less than n at end of file), also on error. Returns 0 or -errno. */
int fl_read_full(int fd, void *buf, size_t n, size_t *got);

/* The same with pread(2) at file offset `off` (the file position is not used or moved). */
int fl_pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got);

/* fsync a directory (after creating, renaming or removing names in it). Returns 0 or -errno. */
int fl_fsync_dir(const char *dir);

/* The directory part of `path` ("a/b/c.txt" → "a/b", "c.txt" → ".", "/c" → "/"), malloc'ed;
 * NULL when out of memory. */
char *fl_dir_of(const char *path);

/* ---- reading a whole file -----------------------------------------------------------------
 * fl_read_file_at opens `path` (relative to directory fd `dirfd`, or AT_FDCWD), checks it as
 * `flags` ask, and reads all of it into *buf, followed by a NUL byte that *len does not count.
 * (*buf, *cap) is a caller-owned buffer that only grows (realloc, at least doubling; pass NULL
 * and 0 to allocate a new one; cap may be NULL for a new buffer sized exactly). On failure
 * *step names the step that failed, so the caller can word its message, and the buffer stays
 * the caller's to free (may be NULL). */
enum {
    FL_READ_REGULAR = 1u,  /* refuse anything but a regular file (-EISDIR, step FL_READ_NOT_REGULAR) */
    FL_READ_SHORT_OK = 2u, /* a file that shrinks while read: keep what was read (else step
                              FL_READ_SHRANK, FL_E_TRUNCATED) */
    FL_READ_NONBLOCK = 4u, /* open with O_NONBLOCK: opening a FIFO does not wait for a writer */
};
typedef enum fl_read_step {
    FL_READ_DONE = 0,
    FL_READ_OPEN,        /* open failed: -errno */
    FL_READ_STAT,        /* fstat failed: -errno */
    FL_READ_NOT_REGULAR, /* FL_READ_REGULAR and not a regular file: -EISDIR */
    FL_READ_TOO_LARGE,   /* larger than `max`: -EFBIG, *len = the file's size */
    FL_READ_ALLOC,       /* -ENOMEM, *len = the file's size */
    FL_READ_READ,        /* read failed: -errno, *len = bytes read before */
    FL_READ_SHRANK       /* ended before its size (without FL_READ_SHORT_OK): FL_E_TRUNCATED,
                            *len = bytes read */
} fl_read_step;

/* Returns 0 (step FL_READ_DONE) or the negative code of *step (see above). `max`: the largest
 * size accepted (SIZE_MAX: any). `step` may be NULL. */
int fl_read_file_at(int dirfd, const char *path, size_t max, unsigned flags, uint8_t **buf,
                    size_t *cap, size_t *len, fl_read_step *step);

#ifdef __cplusplus
}
#endif
#endif
