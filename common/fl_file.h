/* fl_file.h — the file helpers of fastload (common/): whole writes and reads that retry EINTR,
 * reading a whole (small) file into memory, syncing a directory, a path's directory, and the one
 * durable write of an output file (fl_file_replace, fl_file_begin/commit). Every layer that
 * touches files uses these (formats' writer and reader, packdata, the trainer's outputs).
 * Errors are returned as negative codes; the caller words the message (each caller names its own
 * file), so these never print and take no fl_error. */
#ifndef FL_FILE_H
#define FL_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

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
    FL_READ_REGULAR =
        1u, /* refuse anything but a regular file (-EISDIR, step FL_READ_NOT_REGULAR) */
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

/* ---- opening a file we read -----------------------------------------------------------------
 * The one safe open of a file that may have been handed to us (a downloaded data set, a
 * checkpoint, an image): opened O_RDONLY | O_NONBLOCK | O_CLOEXEC, so a FIFO in its place never
 * blocks the open; fstat must say a regular file; then O_NONBLOCK is cleared so reads behave as
 * usual. FL_OPEN_NOFOLLOW also refuses a symbolic link as the last component (a shard must be a
 * file of its data set's folder, not a link leading out of it). */
enum { FL_OPEN_NOFOLLOW = 1u };

/* Open `path` relative to directory fd `dirfd` (or AT_FDCWD) as above. Returns the fd (>= 0), or
 * -errno: -ELOOP a symbolic link under FL_OPEN_NOFOLLOW, -EISDIR anything but a regular file
 * (directory, FIFO, socket, device), or what openat/fstat/fcntl failed with. `st` (may be NULL)
 * receives the fstat of the opened file. Callers word the message and never print the size of
 * a file they refused. */
int fl_open_regular_at(int dirfd, const char *path, unsigned flags, struct stat *st);

/* ---- the durable write ----------------------------------------------------------------------
 * The one way fastload writes an output file (checkpoints, ONNX models, reports, predictions):
 *
 *   target (after following a symlink)   how it is written
 *   missing or a regular file            PATH.tmp in the same directory, written, fsync'ed, closed,
 *                                        renamed onto PATH, then the directory fsync'ed: a reader
 *                                        sees the old file or the whole new one, never half
 *   a symlink to a regular file          the same, onto the symlink's final target (the link stays)
 *   a character or block device, a FIFO,  written in place (opened O_WRONLY, never truncated,
 *   a dangling symlink                   renamed or replaced): `--logits /dev/null` discards,
 *                                        `/proc/self/fd/1` is stdout, a FIFO feeds its reader
 *                                        (opening it waits for one); a dangling symlink creates
 *                                        its target
 *   a directory (or a socket)            refused: -EISDIR (-ENXIO), step FL_WRITE_NOT_FILE
 *
 * The directory sync rule: after the rename, fsync of the directory failing with -EINVAL (a file
 * system that cannot sync directories) is not an error; any other failure is returned with step
 * FL_WRITE_SYNC_DIR — the new file is then in place but its name may not survive a crash.
 * Any earlier failure removes PATH.tmp and leaves PATH as it was. */
typedef enum fl_write_step {
    FL_WRITE_DONE = 0,
    FL_WRITE_NOT_FILE, /* the target is a directory (-EISDIR) or a socket (-ENXIO) */
    FL_WRITE_OPEN,     /* creating PATH.tmp, or opening the target in place, failed: -errno */
    FL_WRITE_WRITE,    /* writing failed: -errno (-ENOSPC on a full disk) */
    FL_WRITE_SYNC,     /* fsync of the file failed: -errno */
    FL_WRITE_CLOSE,    /* close failed: -errno (NFS reports late write errors here) */
    FL_WRITE_RENAME,   /* rename onto the target failed: -errno */
    FL_WRITE_SYNC_DIR  /* the file is in place; fsync of its directory failed: -errno */
} fl_write_step;

/* What step names, for messages: "refuse", "create", "write", "fsync", "close", "rename into
 * place", "sync the directory of"; "" for FL_WRITE_DONE. */
const char *fl_write_step_name(fl_write_step step);

/* Would writing `out` replace or add to `in` (what a command reads): 1 when out names the same
 * file as in (through links), or in is a folder and out lies directly in it (a file of a packed
 * dataset); 0 otherwise, and when in does not exist. */
int fl_file_clobbers(const char *out, const char *in);

/* 1 when paths a and b name the same place, whether or not anything is there yet: the same
 * existing file (through links), or the same name in the same existing folder ("out" and
 * "./dir/../out", trailing slashes ignored); 0 otherwise (also when a parent folder is missing). */
int fl_file_same_name(const char *a, const char *b);

/* A write in progress, for writers that stream (fl_file_begin ... fl_file_commit). The fields are
 * read-only for the caller except that it writes to `fd`. */
typedef struct fl_file_writer {
    int fd;       /* write the content here (fl_write_all, or fdopen(dup(fd))) */
    int in_place; /* 1: the target itself is open (device, FIFO...): no temporary, no rename */
    char *path;   /* the file that receives the content: PATH, or a symlink's final target */
    char *tmp;    /* the temporary name (path + ".tmp"); NULL in place */
} fl_file_writer;

/* Open `path` for a durable write as the table above says; `mode` is the new file's permission
 * bits (before the umask), e.g. 0666. On success returns 0 and *w holds the open write; on
 * failure returns -errno with *step naming the step (FL_WRITE_NOT_FILE or FL_WRITE_OPEN) and *w
 * needs no cleanup. `step` may be NULL. */
int fl_file_begin(const char *path, unsigned mode, fl_file_writer *w, fl_write_step *step);

/* Finish the write: fsync (a regular file), close, rename the temporary onto the target, fsync
 * the directory (the rule above). Returns 0 or -errno with *step naming the failed step; on any
 * failure before FL_WRITE_SYNC_DIR the temporary is removed. Either way *w is released. */
int fl_file_commit(fl_file_writer *w, fl_write_step *step);

/* Give the write up: close, remove the temporary; the target is left as it was. Safe on a
 * released or zeroed writer (fd 0 in a zeroed writer is not closed: set fd = -1 first, or only
 * call it after fl_file_begin succeeded). */
void fl_file_abort(fl_file_writer *w);

/* fl_file_begin + fl_write_all(data, len) + fl_file_commit: write a whole file durably. Returns 0
 * or -errno with *step (may be NULL) naming the failed step. */
int fl_file_replace(const char *path, const void *data, size_t len, unsigned mode,
                    fl_write_step *step);

#ifdef __cplusplus
}
#endif
#endif
