/* archive_source.h — tar files read in place (libarchive): list their members once (names,
 * sizes, where the bytes are), then hand each member's bytes to the pack workers without
 * extracting anything to disk. An uncompressed tar on a regular file is read at random (pread at
 * the member's data offset; a tar inside such a tar too, since tar stores members uncompressed);
 * a compressed one (.tar.gz, .tar.zst, ...) only in order, one member at a time.
 * Without libarchive at build time every function that opens a tar fails with FL_E_UNSUPPORTED
 * and a message saying so. */
#ifndef PD_ARCHIVE_SOURCE_H
#define PD_ARCHIVE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "packdata.h"

/* One opened tar file; the list of them hangs off pd_items.archives and is freed with it. */
typedef struct pd_archive pd_archive;

/* A member: everything a worker needs to get its bytes. Lives in the item list's arena. */
typedef struct pd_member {
    pd_archive *ar;     /* the (outer) tar file */
    uint64_t offset;    /* random access: the data's byte offset in ar's file */
    uint64_t entry;     /* ordinal of the (outer) entry in ar's stream: in-order reading */
    uint64_t size;      /* bytes */
    const char *source; /* "a.tar:dir/x.jpg" or "train.tar:n01440764.tar:x.JPEG", for messages */
    uint64_t ticket;    /* in-order archives under pd_archives_begin_ordered: its turn */
    uint8_t format;     /* fl_image_format of the first bytes, sniffed while listing */
} pd_member;

/* A tar member held compactly (src_tar.c): 24 bytes, no per-member heap object. Its name is the
 * item list's names[i] (relative to its class: class_prefix), its label labels[i]; the pd_member a
 * worker reads it through is built on demand by pd_tar_item. */
typedef struct pd_tar_rec {
    uint64_t offset;      /* as pd_member.offset */
    uint64_t size_format; /* size << 8 | the fl_image_format sniffed while listing */
    uint32_t entry;       /* as pd_member.entry */
    uint32_t inner;       /* index in pd_tar_list.inner (ImageNet layout), else UINT32_MAX */
} pd_tar_rec;

/* The compact member list of a tar source (pd_items.tar; freed with the items): recs[i] is item
 * i's member (parallel to names/labels, shuffled and sliced with them). */
typedef struct pd_tar_list {
    pd_archive *ar;  /* the (outer) tar */
    const char *tar; /* its path as given, for messages (items arena) */
    const char *top; /* a class-folder tar's common top folder with its '/', or "" (arena) */
    char **inner;    /* inner tar names (ImageNet layout; arena), n_inner of them */
    uint32_t n_inner, cap_inner;
    pd_tar_rec *recs; /* items->cap of them */
    size_t cap;
    /* pd_archives_begin_ordered over an in-order (compressed) tar: item i >= ticket_start reads
     * its member at turn i - ticket_start */
    int tickets;
    uint64_t ticket_start;
} pd_tar_list;

/* Item i of a list holding compact tar members (items->tar): *tmp with its name (class/path)
 * and a pd_member (ar, offset, size, source "tar:inner:path", ticket) built in *buf (grow-only,
 * malloc'ed, *cap its size; the caller frees it, and the item lives as long as *buf is not
 * reused). NULL when buf is NULL or out of memory. */
const pd_item *pd_tar_item(const pd_items *items, size_t i, pd_item *tmp, char **buf, size_t *cap);
/* Free a compact member list (not the archive: pd_items.archives owns it). */
void pd_tar_list_free(pd_tar_list *t);

/* What pd_archive_list reports for each entry. */
typedef struct pd_tar_entry {
    const char *path; /* the member's path as stored (NUL-terminated, untrusted) */
    int type;         /* PD_TAR_FILE, _DIR, _LINK (symbolic or hard), _OTHER */
    uint64_t size;
    uint64_t offset;     /* data offset in the file (random access) */
    uint64_t entry;      /* ordinal in the stream */
    const uint8_t *head; /* the first head_len bytes of the data (up to the listing's want) */
    size_t head_len;
    int sparse;   /* a GNU sparse member: its bytes are not one range of the file */
    void *reader; /* the listing's reader, for pd_tar_entry_read */
} pd_tar_entry;
enum { PD_TAR_FILE = 0, PD_TAR_DIR, PD_TAR_LINK, PD_TAR_OTHER };

/* Called for each entry; return 0 to go on, another value to stop the listing (returned by
 * pd_archive_list). `want` (set by the caller through pd_archive_list's head_bytes) bounds
 * entry->head. */
typedef int (*pd_tar_visit)(void *ctx, const pd_tar_entry *entry);

/* Open the tar at `path` and add it to items->archives. *random is set to 1 when its members can
 * be read at random (an uncompressed tar on a regular file). Errors: FL_E_UNSUPPORTED (no
 * libarchive in this build), FL_E_FORMAT (not a tar), -errno, -ENOMEM; err names the file. */
int pd_archive_open(pd_items *items, const char *path, pd_archive **out, int *random,
                    fl_error *err);

/* The archive's path and its stamp for --resume ("MTIME_NS:SIZE" of the file). */
const char *pd_archive_path(const pd_archive *ar);
const char *pd_archive_stamp(const pd_archive *ar);

/* List the entries of `ar` (head_bytes: how many first bytes of each file entry to read and pass
 * as entry->head, 0 for none). A truncated or corrupt archive ends the listing with FL_E_FORMAT
 * (err: the file, the entry count so far and libarchive's reason); *complete is 0 then. */
int pd_archive_list(pd_archive *ar, size_t head_bytes, pd_tar_visit visit, void *ctx,
                    fl_error *err);

/* From a visitor: the whole data of file entry e (e->size bytes into dst, head included).
 * Returns 0, or FL_E_FORMAT with `why` (a truncated or corrupt tar). */
int pd_tar_entry_read(const pd_tar_entry *e, uint8_t *dst, char *why, size_t why_cap);

/* List a tar stored as one uncompressed member [offset, offset + size) of a random-access
 * archive `ar` (ImageNet's per-class tars): entry offsets are absolute offsets in ar's file.
 * `name` names the inner tar in messages. Errors as pd_archive_list. */
int pd_archive_list_inner(pd_archive *ar, uint64_t offset, uint64_t size, const char *name,
                          size_t head_bytes, pd_tar_visit visit, void *ctx, fl_error *err);

/* Read member m's bytes into a grow-only buffer (buf and cap realloc'ed as needed; len set).
 * Random access: pread, safe from any thread. In-order archives: under the archive's lock,
 * forward from the current position (reopening the file when m lies behind it); with
 * pd_archives_begin_ordered in effect, callers are served in item order (see there).
 * Returns 0, -ENOMEM, or FL_E_FORMAT / -errno with `why` (cap bytes) saying what happened. */
int pd_member_read(const pd_member *m, uint8_t **buf, size_t *cap, size_t *len, char *why,
                   size_t why_cap);

/* The pack pipeline is about to process items->v[start..n) with several threads: from now on
 * the members of in-order archives are served strictly in item order (a thread reading the
 * member of item k waits until those of the earlier items were read), so concurrent workers
 * never make a stream seek back. Every such member from `start` on must then be read exactly
 * once (the pipeline reads each item's member first thing). */
void pd_archives_begin_ordered(pd_items *items, size_t start);

/* The path of the first archive of the list that can only be read in order (compressed), or
 * NULL when every one is read at random (or there is none). */
const char *pd_archives_stream_only(const pd_archive *list);

/* Close every archive and free the list. */
void pd_archives_free(pd_archive *list);

/* The tar sources (the dispatch is source.c's). An ImageFolder in a tar (src_tar.c): ImageNet's
 * tar of per-class tars, or a tar of class folders. Errors as the other sources (packdata.h). */
int pd_src_tar(const char *path, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
               fl_error *err);
/* WebDataset shards (src_tar_wds.c): `spec` is a brace pattern (shards-{000000..000009}.tar), a
 * folder of tar files, one tar file, or a text file listing tar paths one per line. */
int pd_src_wds(const char *spec, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
               fl_error *err);

/* 1 when this build reads tar files. */
int pd_archive_supported(void);

/* 1 when `path` names a tar file by its extension (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz,
 * .tar.zst, .tar.lz4; any case). */
int pd_is_tar_name(const char *path);

/* 1 when a member path is safe to use as a record name: relative, no "." or ".." component, no
 * empty component, no NUL. */
int pd_tar_path_safe(const char *p);

#endif
