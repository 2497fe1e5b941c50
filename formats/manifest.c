/* manifest.c — reads and writes manifest.json, the dataset's table of contents: schema, class
 * names, shard list and provenance. Manifests are untrusted input: every field is type- and
 * range-checked, shard names may not leave the dataset directory. */
#include "fl_manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fl_shard.h"

void fl_manifest_free(fl_manifest *m)
{
    if (!m)
        return;
    for (uint32_t i = 0; i < m->num_classes; i++)
        free(m->classes[i]);
    free(m->classes);
    for (uint32_t i = 0; i < m->num_shards; i++)
        free(m->shards[i].file);
    free(m->shards);
    memset(m, 0, sizeof *m);
}

static int get_u64(const fl_jnode *o, const char *key, uint64_t max, uint64_t *out)
{
    const fl_jnode *v = fl_jget(o, key);
    if (!v || v->type != FL_J_NUMBER || !v->is_int || v->ival < 0 || (uint64_t)v->ival > max)
        return -1;
    *out = (uint64_t)v->ival;
    return 0;
}

static const char *get_str(const fl_jnode *o, const char *key)
{
    const fl_jnode *v = fl_jget(o, key);
    return v && v->type == FL_J_STRING ? v->str : NULL;
}

static int plain_file_name(const char *s, size_t n)
{
    if (n == 0 || n > 255 || memchr(s, '/', n) || !strcmp(s, ".") || !strcmp(s, ".."))
        return 0;
    return strlen(s) == n;
}

/* ---- fields ------------------------------------------------------------------------------------
 */

void fl_fields_write_json(fl_tbuf *b, const fl_field *f, uint32_t n, int with_max, const char *sep)
{
    fl_tbuf_puts(b, "[");
    for (uint32_t i = 0; i < n; i++) {
        const fl_field *x = &f[i];
        if (i)
            fl_tbuf_puts(b, sep);
        fl_tbuf_puts(b, "{\"name\": ");
        fl_tbuf_json_string(b, x->name, strlen(x->name));
        fl_tbuf_printf(b, ", \"type\": \"%s\"", fl_field_type_name(x->type));
        if (x->type == FL_FIELD_MASK || x->type == FL_FIELD_NDARRAY)
            fl_tbuf_printf(b, ", \"dtype\": \"%s\"", fl_dtype_name(x->dtype));
        if (x->ndim) {
            fl_tbuf_puts(b, ", \"shape\": [");
            for (uint32_t d = 0; d < x->ndim && d < FL_MAX_DIMS; d++)
                fl_tbuf_printf(b, d ? ", %u" : "%u", x->shape[d]);
            fl_tbuf_puts(b, "]");
        }
        if (x->type == FL_FIELD_MASK)
            fl_tbuf_printf(b, ", \"codec\": \"%s\"", x->codec == FL_MASK_PNG ? "png" : "zstd");
        if (x->of >= 0 && (uint32_t)x->of < n) {
            fl_tbuf_puts(b, ", \"of\": ");
            fl_tbuf_json_string(b, f[x->of].name, strlen(f[x->of].name));
        }
        if (with_max && fl_field_is_variable(x->type))
            fl_tbuf_printf(b, ", \"max_count\": %u", x->max_count);
        fl_tbuf_puts(b, "}");
    }
    fl_tbuf_puts(b, "]");
}

/* One member of the "fields" array; `of` is resolved by the caller (*of_name). */
static int field_from_json(const fl_jnode *o, uint32_t i, const char *what, fl_field *f,
                           const char **of_name, fl_error *err)
{
    memset(f, 0, sizeof *f);
    f->of = -1;
    *of_name = NULL;
    if (o->type != FL_J_OBJECT)
        return fl_error_set(err, FL_E_FORMAT, "%s: field %u is not an object", what, i);
    const char *name = get_str(o, "name"), *type = get_str(o, "type");
    if (!name || strlen(name) > FL_MAX_FIELD_NAME)
        return fl_error_set(err, FL_E_FORMAT, "%s: field %u: missing or bad \"name\"", what, i);
    strcpy(f->name, name);
    if (!type || fl_field_type_from_name(type, &f->type))
        return fl_error_set(err, FL_E_FORMAT, "%s: field \"%s\": unknown \"type\" %s%s%s", what,
                            name, type ? "\"" : "", type ? type : "(missing)", type ? "\"" : "");
    f->dtype = fl_field_type_dtype(f->type);
    const fl_jnode *v = fl_jget(o, "dtype");
    if (v && (v->type != FL_J_STRING || fl_dtype_from_name(v->str, &f->dtype)))
        return fl_error_set(err, FL_E_FORMAT, "%s: field \"%s\": unknown \"dtype\"", what, name);
    if ((v = fl_jget(o, "shape"))) {
        if (v->type != FL_J_ARRAY || v->count < 1 || v->count > FL_MAX_DIMS)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: field \"%s\": \"shape\" must be 1 to %u sizes", what, name,
                                FL_MAX_DIMS);
        for (const fl_jnode *d = v->child; d; d = d->next) {
            if (d->type != FL_J_NUMBER || !d->is_int || d->ival < 1 || d->ival > (1 << 28))
                return fl_error_set(err, FL_E_FORMAT, "%s: field \"%s\": bad size in \"shape\"",
                                    what, name);
            f->shape[f->ndim++] = (uint32_t)d->ival;
        }
    }
    const char *codec = get_str(o, "codec");
    if (codec) {
        if (!strcmp(codec, "png"))
            f->codec = FL_MASK_PNG;
        else if (!strcmp(codec, "zstd"))
            f->codec = FL_MASK_ZSTD;
        else
            return fl_error_set(err, FL_E_FORMAT, "%s: field \"%s\": unknown \"codec\"", what,
                                name);
    } else if (fl_jget(o, "codec")) {
        return fl_error_set(err, FL_E_FORMAT, "%s: field \"%s\": bad \"codec\"", what, name);
    }
    uint64_t mc = 0;
    if (fl_jget(o, "max_count") && get_u64(o, "max_count", UINT32_MAX, &mc))
        return fl_error_set(err, FL_E_FORMAT, "%s: field \"%s\": bad \"max_count\"", what, name);
    f->max_count = (uint32_t)mc;
    if (fl_jget(o, "of") && !(*of_name = get_str(o, "of")))
        return fl_error_set(err, FL_E_FORMAT, "%s: field \"%s\": \"of\" must be a field name", what,
                            name);
    return 0;
}

int fl_fields_parse_json(const fl_jnode *arr, const char *what, fl_field *f, uint32_t *n,
                         fl_error *err)
{
    *n = 0;
    if (!arr || arr->type != FL_J_ARRAY || arr->count < 1 || arr->count > FL_MAX_FIELDS)
        return fl_error_set(err, FL_E_FORMAT, "%s: \"fields\" must be an array of 1 to %u fields",
                            what, FL_MAX_FIELDS);
    const char *of[FL_MAX_FIELDS];
    uint32_t k = 0;
    for (const fl_jnode *c = arr->child; c; c = c->next, k++) {
        int rc = field_from_json(c, k, what, &f[k], &of[k], err);
        if (rc)
            return rc;
    }
    for (uint32_t i = 0; i < k; i++) {
        if (!of[i])
            continue;
        f[i].of = fl_fields_find(f, k, of[i]);
        if (f[i].of < 0)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: field \"%s\": \"of\" names no field (\"%s\")", what, f[i].name,
                                of[i]);
    }
    fl_error e;
    if (fl_fields_validate(f, k, &e))
        return fl_error_set(err, FL_E_FORMAT, "%s: bad \"fields\": %s", what, e.msg);
    *n = k;
    return 0;
}

/* The "fields" member: required from version 3 on (and then consistent with the schema: an image
 * field exactly when there is an image), absent before (the classic pair is synthesized). */
static int manifest_fields(const fl_jnode *root, const char *what, fl_manifest *m, fl_error *err)
{
    const fl_jnode *fj = fl_jget(root, "fields");
    if (m->version < 3) {
        if (fj)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: \"fields\" in a version %u manifest (fields "
                                "need version 3)",
                                what, m->version);
        fl_fields_classic(m->fields);
        m->num_fields = 2;
        return 0;
    }
    if (!fj)
        return fl_error_set(err, FL_E_FORMAT, "%s: missing \"fields\" (version 3)", what);
    int rc = fl_fields_parse_json(fj, what, m->fields, &m->num_fields, err);
    if (rc)
        return rc;
    int has_image = fl_fields_image_index(m->fields, m->num_fields) >= 0;
    if (has_image != (m->schema.encoding != FL_ENC_NONE))
        return fl_error_set(err, FL_E_FORMAT, "%s: %s", what,
                            has_image ? "an image field with schema encoding \"none\""
                                      : "no image field but a schema encoding other than \"none\"");
    return 0;
}

int fl_manifest_parse(const char *text, size_t len, const char *what, fl_manifest *m, fl_error *err)
{
    memset(m, 0, sizeof *m);
    fl_jdoc *doc;
    int rc = fl_jparse(text, len, what, &doc, err);
    if (rc)
        return rc;
    const fl_jnode *root = fl_jroot(doc);
    const char *s;
    uint64_t u;
#define BAD(...)                                                                                   \
    do {                                                                                           \
        rc = fl_error_set(err, FL_E_FORMAT, __VA_ARGS__);                                          \
        goto out;                                                                                  \
    } while (0)
    if (root->type != FL_J_OBJECT)
        BAD("%s: manifest is not a JSON object", what);
    s = get_str(root, "format");
    if (!s || strcmp(s, FL_MANIFEST_FORMAT) != 0)
        BAD("%s: not a fastload manifest (\"format\" must be \"%s\")", what, FL_MANIFEST_FORMAT);
    if (get_u64(root, "format_version", UINT32_MAX, &u))
        BAD("%s: missing or bad \"format_version\"", what);
    if (u < FL_FORMAT_MIN_VERSION || u > FL_FORMAT_VERSION) {
        rc = fl_error_set(err, FL_E_VERSION,
                          "%s: dataset format version %llu, this build reads versions %u to %u",
                          what, (unsigned long long)u, FL_FORMAT_MIN_VERSION, FL_FORMAT_VERSION);
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
    if (s && !strcmp(s, "shards"))
        m->backend = FL_BACKEND_SHARDS;
    else if (s && !strcmp(s, "lmdb"))
        m->backend = FL_BACKEND_LMDB;
    else
        BAD("%s: \"backend\" must be \"shards\" or \"lmdb\"", what);
    if (get_u64(root, "records", UINT64_MAX / 2, &m->records))
        BAD("%s: missing or bad \"records\"", what);
    const fl_jnode *sc = fl_jget(root, "schema");
    if (!sc || sc->type != FL_J_OBJECT)
        BAD("%s: missing \"schema\" object", what);
    s = get_str(sc, "encoding");
    m->schema.encoding = s ? fl_encoding_from_name(s) : (fl_encoding)0;
    s = get_str(sc, "compression");
    if (!s || fl_compression_from_name(s, &m->schema.compression))
        BAD("%s: bad schema \"compression\"", what);
    uint64_t ch, h, w;
    if (get_u64(sc, "channels", 4, &ch) || get_u64(sc, "height", 1u << 20, &h) ||
        get_u64(sc, "width", 1u << 20, &w))
        BAD("%s: bad schema channels/height/width", what);
    m->schema.channels = (uint32_t)ch;
    m->schema.height = (uint32_t)h;
    m->schema.width = (uint32_t)w;
    if (!fl_schema_valid_in(&m->schema, m->version))
        BAD("%s: invalid schema", what);
    rc = manifest_fields(root, what, m, err);
    if (rc)
        goto out;
    const fl_jnode *cl = fl_jget(root, "classes");
    if (!cl || cl->type != FL_J_ARRAY || cl->count > FL_MAX_CLASSES)
        BAD("%s: missing or bad \"classes\" array", what);
    if (cl->count) {
        m->classes = calloc(cl->count, sizeof *m->classes);
        if (!m->classes)
            goto nomem;
    }
    for (const fl_jnode *c = cl->child; c; c = c->next) {
        if (c->type != FL_J_STRING)
            BAD("%s: class %u is not a string", what, m->num_classes);
        m->classes[m->num_classes] = strdup(c->str);
        if (!m->classes[m->num_classes])
            goto nomem;
        m->num_classes++;
    }
    const fl_jnode *sh = fl_jget(root, "shards");
    if (!sh || sh->type != FL_J_ARRAY || sh->count > FL_MAX_SHARDS)
        BAD("%s: missing or bad \"shards\" array", what);
    if (sh->count) {
        m->shards = calloc(sh->count, sizeof *m->shards);
        if (!m->shards)
            goto nomem;
    }
    uint64_t total = 0;
    for (const fl_jnode *c = sh->child; c; c = c->next) {
        uint32_t i = m->num_shards;
        const fl_jnode *f = fl_jget(c, "file");
        if (!f || f->type != FL_J_STRING || !plain_file_name(f->str, f->str_len))
            BAD("%s: shard %u: \"file\" must be a plain file name", what, i);
        fl_manifest_shard *d = &m->shards[i];
        if (get_u64(c, "records", UINT64_MAX / 2, &d->records) ||
            get_u64(c, "bytes", UINT64_MAX / 2, &d->bytes))
            BAD("%s: shard %u: bad \"records\" or \"bytes\"", what, i);
        d->file = strdup(f->str);
        if (!d->file)
            goto nomem;
        m->num_shards++;
        total += d->records;
        if (total > UINT64_MAX / 4)
            BAD("%s: record counts overflow", what);
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
    if (rc)
        fl_manifest_free(m);
    return rc;
}

int fl_manifest_write(fl_tbuf *b, const fl_manifest *m)
{
    char created[32];
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    uint32_t version = m->version ? m->version : FL_FORMAT_VERSION_CLASSIC;
    fl_tbuf_printf(b, "{\n  \"format\": \"%s\",\n  \"format_version\": %u,\n", FL_MANIFEST_FORMAT,
                   version);
    if (m->has_id) {
        char hex[2 * FL_DATASET_ID_BYTES + 1];
        fl_dataset_id_hex(m->dataset_id, hex);
        fl_tbuf_printf(b, "  \"dataset_id\": \"%s\",\n", hex);
    }
    fl_tbuf_printf(b, "  \"backend\": \"%s\",\n",
                   m->backend == FL_BACKEND_LMDB ? "lmdb" : "shards");
    fl_tbuf_printf(b, "  \"records\": %llu,\n", (unsigned long long)m->records);
    fl_tbuf_puts(b, "  \"classes\": [");
    for (uint32_t i = 0; i < m->num_classes; i++) {
        if (i)
            fl_tbuf_puts(b, ", ");
        fl_tbuf_json_string(b, m->classes[i], strlen(m->classes[i]));
    }
    fl_tbuf_puts(b, "],\n");
    fl_tbuf_printf(
        b,
        "  \"schema\": {\"encoding\": \"%s\", \"compression\": \"%s\", \"channels\": %u, "
        "\"height\": %u, \"width\": %u},\n",
        fl_encoding_name(m->schema.encoding), fl_compression_name(m->schema.compression),
        m->schema.channels, m->schema.height, m->schema.width);
    if (version >= 3) {
        fl_tbuf_puts(b, "  \"fields\": ");
        fl_fields_write_json(b, m->fields, m->num_fields, 1, ",\n    ");
        fl_tbuf_puts(b, ",\n");
    }
    if (m->schema.compression == FL_COMP_ZSTD)
        fl_tbuf_printf(b, "  \"zstd\": {\"level\": %d, \"dictionary_bytes\": %llu},\n",
                       m->zstd_level, (unsigned long long)m->dict_bytes);
    fl_tbuf_puts(b, "  \"shards\": [");
    uint64_t first = 0;
    for (uint32_t i = 0; i < m->num_shards; i++) {
        fl_tbuf_puts(b, i ? ",\n    {\"file\": " : "\n    {\"file\": ");
        fl_tbuf_json_string(b, m->shards[i].file, strlen(m->shards[i].file));
        fl_tbuf_printf(b, ", \"first\": %llu, \"records\": %llu, \"bytes\": %llu}",
                       (unsigned long long)first, (unsigned long long)m->shards[i].records,
                       (unsigned long long)m->shards[i].bytes);
        first += m->shards[i].records;
    }
    fl_tbuf_puts(b, m->num_shards ? "\n  ],\n" : "],\n");
    fl_tbuf_puts(b, "  \"packdata_version\": ");
    const char *tv = m->tool_version ? m->tool_version : "";
    fl_tbuf_json_string(b, tv, strlen(tv));
    fl_tbuf_puts(b, ",\n  \"options\": ");
    fl_tbuf_puts(b, m->options_json && m->options_json[0] ? m->options_json : "{}");
    fl_tbuf_printf(b, ",\n  \"part\": {\"index\": %u, \"count\": %u},\n", m->part_index,
                   m->part_count);
    fl_tbuf_printf(b, "  \"created\": \"%s\"\n}\n", created);
    return b->failed ? -ENOMEM : 0;
}
