/* manifest.c — reads and writes manifest.json, the dataset's table of contents: schema, class
 * names, shard list and provenance. Manifests are untrusted input: every field is type- and
 * range-checked, shard names may not leave the dataset directory. */
#include "fl_manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fl_shard.h"

void fl_manifest_free(fl_manifest *m) {
    if (!m) return;
    for (uint32_t i = 0; i < m->num_classes; i++) free(m->classes[i]);
    free(m->classes);
    for (uint32_t i = 0; i < m->num_shards; i++) free(m->shards[i].file);
    free(m->shards);
    memset(m, 0, sizeof *m);
}

static int get_u64(const fl_jnode *o, const char *key, uint64_t max, uint64_t *out) {
    const fl_jnode *v = fl_jget(o, key);
    if (!v || v->type != FL_J_NUMBER || !v->is_int || v->ival < 0 || (uint64_t)v->ival > max)
        return -1;
    *out = (uint64_t)v->ival;
    return 0;
}

static const char *get_str(const fl_jnode *o, const char *key) {
    const fl_jnode *v = fl_jget(o, key);
    return v && v->type == FL_J_STRING ? v->str : NULL;
}

static int plain_file_name(const char *s, size_t n) {
    if (n == 0 || n > 255 || memchr(s, '/', n) || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
    return strlen(s) == n;
}

int fl_manifest_parse(const char *text, size_t len, const char *what, fl_manifest *m, fl_error *err) {
    memset(m, 0, sizeof *m);
    fl_jdoc *doc;
    int rc = fl_jparse(text, len, what, &doc, err);
    if (rc) return rc;
    const fl_jnode *root = fl_jroot(doc);
    const char *s;
    uint64_t u;
#define BAD(...) do { rc = fl_error_set(err, FL_E_FORMAT, __VA_ARGS__); goto out; } while (0)
    if (root->type != FL_J_OBJECT) BAD("%s: manifest is not a JSON object", what);
    s = get_str(root, "format");
    if (!s || strcmp(s, FL_MANIFEST_FORMAT) != 0)
        BAD("%s: not a fastload manifest (\"format\" must be \"%s\")", what, FL_MANIFEST_FORMAT);
    if (get_u64(root, "format_version", UINT32_MAX, &u)) BAD("%s: missing or bad \"format_version\"", what);
    if (u < FL_FORMAT_MIN_VERSION || u > FL_FORMAT_VERSION) {
        rc = fl_error_set(err, FL_E_VERSION,
                          "%s: dataset format version %llu, this build reads versions %u to %u", what,
                          (unsigned long long)u, FL_FORMAT_MIN_VERSION, FL_FORMAT_VERSION);
        goto out;
    }
    m->version = (uint32_t)u;
    s = get_str(root, "dataset_id");
    if (m->version >= 2) {
        if (!s || fl_dataset_id_parse(s, m->dataset_id))
            BAD("%s: missing or bad \"dataset_id\" (32 hex digits)", what);
        m->has_id = 1;
    }
    s = get_str(root, "backend");
    if (s && !strcmp(s, "shards")) m->backend = FL_BACKEND_SHARDS;
    else if (s && !strcmp(s, "lmdb")) m->backend = FL_BACKEND_LMDB;
    else BAD("%s: \"backend\" must be \"shards\" or \"lmdb\"", what);
    if (get_u64(root, "records", UINT64_MAX / 2, &m->records)) BAD("%s: missing or bad \"records\"", what);
    const fl_jnode *sc = fl_jget(root, "schema");
    if (!sc || sc->type != FL_J_OBJECT) BAD("%s: missing \"schema\" object", what);
    s = get_str(sc, "encoding");
    m->schema.encoding = s ? fl_encoding_from_name(s) : (fl_encoding)0;
    s = get_str(sc, "compression");
    if (!s || fl_compression_from_name(s, &m->schema.compression)) BAD("%s: bad schema \"compression\"", what);
    uint64_t ch, h, w;
    if (get_u64(sc, "channels", 4, &ch) || get_u64(sc, "height", 1u << 20, &h) ||
        get_u64(sc, "width", 1u << 20, &w))
        BAD("%s: bad schema channels/height/width", what);
    m->schema.channels = (uint32_t)ch;
    m->schema.height = (uint32_t)h;
    m->schema.width = (uint32_t)w;
    if (!fl_schema_valid_in(&m->schema, m->version)) BAD("%s: invalid schema", what);
    const fl_jnode *cl = fl_jget(root, "classes");
    if (!cl || cl->type != FL_J_ARRAY || cl->count > FL_MAX_CLASSES) BAD("%s: missing or bad \"classes\" array", what);
    if (cl->count) {
        m->classes = calloc(cl->count, sizeof *m->classes);
        if (!m->classes) goto nomem;
    }
    for (const fl_jnode *c = cl->child; c; c = c->next) {
        if (c->type != FL_J_STRING) BAD("%s: class %u is not a string", what, m->num_classes);
        m->classes[m->num_classes] = strdup(c->str);
        if (!m->classes[m->num_classes]) goto nomem;
        m->num_classes++;
    }
    const fl_jnode *sh = fl_jget(root, "shards");
    if (!sh || sh->type != FL_J_ARRAY || sh->count > FL_MAX_SHARDS) BAD("%s: missing or bad \"shards\" array", what);
    if (sh->count) {
        m->shards = calloc(sh->count, sizeof *m->shards);
        if (!m->shards) goto nomem;
    }
    uint64_t total = 0;
    for (const fl_jnode *c = sh->child; c; c = c->next) {
        uint32_t i = m->num_shards;
        const fl_jnode *f = fl_jget(c, "file");
        if (!f || f->type != FL_J_STRING || !plain_file_name(f->str, f->str_len))
            BAD("%s: shard %u: \"file\" must be a plain file name", what, i);
        fl_manifest_shard *d = &m->shards[i];
        if (get_u64(c, "records", UINT64_MAX / 2, &d->records) || get_u64(c, "bytes", UINT64_MAX / 2, &d->bytes))
            BAD("%s: shard %u: bad \"records\" or \"bytes\"", what, i);
        d->file = strdup(f->str);
        if (!d->file) goto nomem;
        m->num_shards++;
        total += d->records;
        if (total > UINT64_MAX / 4) BAD("%s: record counts overflow", what);
    }
    if (total != m->records)
        BAD("%s: shards hold %llu records, manifest says %llu", what, (unsigned long long)total,
            (unsigned long long)m->records);
    if (m->backend == FL_BACKEND_LMDB && m->num_shards != 1)
        BAD("%s: an LMDB dataset lists exactly one data file", what);
    const fl_jnode *part = fl_jget(root, "part");
    if (part) { /* optional: which slice of a --part I/N job this dataset is */
        uint64_t pi = 0, pn = 0;
        if (part->type != FL_J_OBJECT || get_u64(part, "index", UINT32_MAX, &pi) ||
            get_u64(part, "count", UINT32_MAX, &pn) || (pn && pi >= pn))
            BAD("%s: bad \"part\" object (want index < count)", what);
        m->part_index = (uint32_t)pi;
        m->part_count = (uint32_t)pn;
    }
    rc = 0;
    goto out;
nomem:
    rc = fl_error_set(err, -ENOMEM, "%s: out of memory", what);
out:
#undef BAD
    fl_jfree(doc);
    if (rc) fl_manifest_free(m);
    return rc;
}

int fl_manifest_write(fl_tbuf *b, const fl_manifest *m) {
    char created[32];
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    fl_tbuf_printf(b, "{\n  \"format\": \"%s\",\n  \"format_version\": %u,\n", FL_MANIFEST_FORMAT,
                  FL_FORMAT_VERSION);
    if (m->has_id) {
        char hex[2 * FL_DATASET_ID_BYTES + 1];
        fl_dataset_id_hex(m->dataset_id, hex);
        fl_tbuf_printf(b, "  \"dataset_id\": \"%s\",\n", hex);
    }
    fl_tbuf_printf(b, "  \"backend\": \"%s\",\n", m->backend == FL_BACKEND_LMDB ? "lmdb" : "shards");
    fl_tbuf_printf(b, "  \"records\": %llu,\n", (unsigned long long)m->records);
    fl_tbuf_puts(b, "  \"classes\": [");
    for (uint32_t i = 0; i < m->num_classes; i++) {
        if (i) fl_tbuf_puts(b, ", ");
        fl_tbuf_json_string(b, m->classes[i], strlen(m->classes[i]));
    }
    fl_tbuf_puts(b, "],\n");
    fl_tbuf_printf(b,
                  "  \"schema\": {\"encoding\": \"%s\", \"compression\": \"%s\", \"channels\": %u, "
                  "\"height\": %u, \"width\": %u},\n",
                  fl_encoding_name(m->schema.encoding), fl_compression_name(m->schema.compression),
                  m->schema.channels, m->schema.height, m->schema.width);
    if (m->schema.compression == FL_COMP_ZSTD)
        fl_tbuf_printf(b, "  \"zstd\": {\"level\": %d, \"dictionary_bytes\": %llu},\n", m->zstd_level,
                      (unsigned long long)m->dict_bytes);
    fl_tbuf_puts(b, "  \"shards\": [");
    uint64_t first = 0;
    for (uint32_t i = 0; i < m->num_shards; i++) {
        fl_tbuf_puts(b, i ? ",\n    {\"file\": " : "\n    {\"file\": ");
        fl_tbuf_json_string(b, m->shards[i].file, strlen(m->shards[i].file));
        fl_tbuf_printf(b, ", \"first\": %llu, \"records\": %llu, \"bytes\": %llu}", (unsigned long long)first,
                      (unsigned long long)m->shards[i].records, (unsigned long long)m->shards[i].bytes);
        first += m->shards[i].records;
    }
    fl_tbuf_puts(b, m->num_shards ? "\n  ],\n" : "],\n");
    fl_tbuf_puts(b, "  \"packdata_version\": ");
    const char *tv = m->tool_version ? m->tool_version : "";
    fl_tbuf_json_string(b, tv, strlen(tv));
    fl_tbuf_puts(b, ",\n  \"options\": ");
    fl_tbuf_puts(b, m->options_json && m->options_json[0] ? m->options_json : "{}");
    fl_tbuf_printf(b, ",\n  \"part\": {\"index\": %u, \"count\": %u},\n", m->part_index, m->part_count);
    fl_tbuf_printf(b, "  \"created\": \"%s\"\n}\n", created);
    return b->failed ? -ENOMEM : 0;
}
