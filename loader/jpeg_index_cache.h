/* jpeg_index_cache.h — the loader's JPEG entry-point indexes (fl_decoder_set_jpeg_index of
 * fl_image.h), one per record: what the first decodes of a record learn lets later epochs' crop
 * decodes of it skip the Huffman-coded bits above and beside their crop. Shared by the workers
 * (a record's index is copied out and replaced under one of a few striped locks), within a
 * memory limit: once the indexes hold that many bytes, records without one get none (and decode
 * as without the cache). An index never changes pixels, so the cache changes no output. */
#ifndef FL_JPEG_INDEX_CACHE_H
#define FL_JPEG_INDEX_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FL_JIDX_LOCKS 64

typedef struct fl_jidx_cache {
    uint64_t records;
    uint64_t limit; /* bytes the indexes may hold (0: the cache is off) */
    uint64_t held;  /* bytes they hold; under `total` */
    void **slot;    /* per record: NULL or malloc'd (uint32_t length, then the index) */
    pthread_mutex_t total;
    pthread_mutex_t lock[FL_JIDX_LOCKS];
} fl_jidx_cache;

/* The default limit: 1/32 of physical memory, at most 512 MiB, shared out among the loader
 * processes of the node (fl_local_ranks). */
uint64_t fl_jidx_default_limit(void);
/* A cache for `records` records holding at most `limit` bytes of indexes (0: off; nothing is
 * allocated and get/put do nothing). 0 or -ENOMEM. */
int fl_jidx_cache_init(fl_jidx_cache *c, uint64_t records, uint64_t limit);
void fl_jidx_cache_destroy(fl_jidx_cache *c);
/* Copy record idx's index into *buf (grown as needed, *cap its size; free()able). Its length,
 * 0 when there is none (or no memory for the copy). */
size_t fl_jidx_cache_get(fl_jidx_cache *c, uint64_t idx, uint8_t **buf, size_t *cap);
/* Keep `index` (len bytes, what fl_decoder_jpeg_index handed out after decoding record idx) as
 * the record's index when it is longer than the one kept and the limit allows. */
void fl_jidx_cache_put(fl_jidx_cache *c, uint64_t idx, const void *index, size_t len);
/* Bytes the indexes hold. */
uint64_t fl_jidx_cache_bytes(fl_jidx_cache *c);

#endif
