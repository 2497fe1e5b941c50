/* jpeg_index_cache.c — per-record JPEG entry-point indexes shared by the loader's workers
 * (see jpeg_index_cache.h). */
#include "jpeg_index_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader_internal.h"

uint64_t fl_jidx_default_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    uint64_t limit = phys / 32;
    if (limit == 0 || limit > (512ull << 20))
        limit = 512ull << 20;
    return limit / fl_local_ranks();
}

int fl_jidx_cache_init(fl_jidx_cache *c, uint64_t records, uint64_t limit)
{
    memset(c, 0, sizeof *c);
    if (limit == 0 || records == 0)
        return 0;
    c->slot = calloc(records, sizeof *c->slot); /* pages untouched until records get indexes */
    if (!c->slot)
        return -ENOMEM;
    c->records = records;
    c->limit = limit;
    pthread_mutex_init(&c->total, NULL);
    for (int i = 0; i < FL_JIDX_LOCKS; i++)
        pthread_mutex_init(&c->lock[i], NULL);
    return 0;
}

void fl_jidx_cache_destroy(fl_jidx_cache *c)
{
    if (!c->slot)
        return;
    for (uint64_t i = 0; i < c->records; i++)
        free(c->slot[i]);
    free(c->slot);
    pthread_mutex_destroy(&c->total);
    for (int i = 0; i < FL_JIDX_LOCKS; i++)
        pthread_mutex_destroy(&c->lock[i]);
    memset(c, 0, sizeof *c);
}

static inline uint32_t slot_len(const void *s)
{
    uint32_t n;
    memcpy(&n, s, sizeof n);
    return n;
}

size_t fl_jidx_cache_get(fl_jidx_cache *c, uint64_t idx, uint8_t **buf, size_t *cap)
{
    if (!c->slot || idx >= c->records)
        return 0;
    pthread_mutex_t *m = &c->lock[idx % FL_JIDX_LOCKS];
    pthread_mutex_lock(m);
    const uint8_t *s = c->slot[idx];
    size_t n = s ? slot_len(s) : 0;
    if (n > *cap) {
        uint8_t *nb = realloc(*buf, n);
        if (!nb) {
            n = 0;
        } else {
            *buf = nb;
            *cap = n;
        }
    }
    if (n)
        memcpy(*buf, s + sizeof(uint32_t), n);
    pthread_mutex_unlock(m);
    return n;
}

/* Take `delta` more bytes (or give back, negative) of the limit; 0 when it would be passed. */
static int charge(fl_jidx_cache *c, int64_t delta)
{
    pthread_mutex_lock(&c->total);
    int ok = delta <= 0 || c->held + (uint64_t)delta <= c->limit;
    if (ok)
        c->held += (uint64_t)delta;
    pthread_mutex_unlock(&c->total);
    return ok;
}

void fl_jidx_cache_put(fl_jidx_cache *c, uint64_t idx, const void *index, size_t len)
{
    if (!c->slot || idx >= c->records || len == 0 || len > UINT32_MAX - sizeof(uint32_t))
        return;
    pthread_mutex_t *m = &c->lock[idx % FL_JIDX_LOCKS];
    pthread_mutex_lock(m);
    uint8_t *old = c->slot[idx];
    size_t oldn = old ? slot_len(old) : 0;
    if (len > oldn && charge(c, (int64_t)len - (int64_t)oldn)) {
        uint8_t *s = malloc(sizeof(uint32_t) + len);
        if (s) {
            uint32_t n = (uint32_t)len;
            memcpy(s, &n, sizeof n);
            memcpy(s + sizeof n, index, len);
            c->slot[idx] = s;
            free(old);
        } else {
            charge(c, (int64_t)oldn - (int64_t)len);
        }
    }
    pthread_mutex_unlock(m);
}

uint64_t fl_jidx_cache_bytes(fl_jidx_cache *c)
{
    if (!c->slot)
        return 0;
    pthread_mutex_lock(&c->total);
    uint64_t n = c->held;
    pthread_mutex_unlock(&c->total);
    return n;
}
