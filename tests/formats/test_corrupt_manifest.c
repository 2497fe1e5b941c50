/* test_corrupt_manifest.c — broken manifests fail to open with an error naming the manifest or the
 * field: another format version, a dataset id that is malformed or missing, a schema that differs
 * from the shards', byte and record counts that disagree, not a fastload manifest, an unsafe or
 * missing shard name, a class that is not a string, bad JSON (with its byte); an empty or missing
 * manifest, a missing dataset. */
#include "corrupt.h"

int main(void)
{
    fl_error err;
    fl_error_clear(&err);
    const char *good = write_good("good", 0);
    bad_paths B;
    bad_paths_init(&B);
    const char *bad = B.dir, *manifest = B.manifest;
    size_t n;
    uint8_t *m;
    /* manifests */
    copy_dir(good, bad);
    m = tt_slurp(manifest, &n);
    char *text = malloc(n + 64);
    memcpy(text, m, n);
    text[n] = 0;
    free(m);
    struct {
        const char *from, *to;
        int code;
        const char *needle;
    } edits[] = {
        {"\"format_version\": 2", "\"format_version\": 7", FL_E_VERSION, "version 7"},
        {"\"format_version\": 2", "\"format_version\": 1", FL_E_FORMAT,
         "belongs to another dataset"},
        {"\"dataset_id\": \"", "\"dataset_id\": \"x", FL_E_FORMAT, "dataset_id"},
        {"\"dataset_id\": \"", "\"dataset_idx\": \"", FL_E_FORMAT, "dataset_id"},
        {"\"dataset_id\": \"", "\"dataset_id\": \"0", FL_E_FORMAT, "dataset_id"}, /* 33 digits */
        {"\"encoding\": \"jpeg\"", "\"encoding\": \"mixed\"", FL_E_FORMAT, "schema differs"},
        {"\"bytes\": ", "\"bytes\": 1", FL_E_FORMAT, "the manifest says 1"},
        {"\"format\": \"fastload-dataset\"", "\"format\": \"other\"", FL_E_FORMAT,
         "not a fastload manifest"},
        {"\"shard-00001.fls\"", "\"../good/shard-00001.fls\"", FL_E_FORMAT, "plain file name"},
        {"\"records\": 60", "\"records\": 61", FL_E_FORMAT, "manifest says 61"},
        {"\"encoding\": \"jpeg\"", "\"encoding\": \"gif\"", FL_E_FORMAT, "invalid schema"},
        {"\"encoding\": \"jpeg\"", "\"encoding\": \"raw\"", FL_E_FORMAT, "schema differs"},
        {"\"classes\": [", "\"classes\": [1, ", FL_E_FORMAT, "class 0 is not a string"},
        {"{", "[", FL_E_FORMAT, "JSON byte"},
        {"\"shard-00001.fls\"", "\"shard-00077.fls\"", -ENOENT, "shard-00077.fls"},
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        char *at = strstr(text, edits[k].from);
        CHECK(at);
        size_t fl = strlen(edits[k].from), tl = strlen(edits[k].to);
        char *t2 = malloc(n + 64);
        memcpy(t2, text, (size_t)(at - text));
        memcpy(t2 + (at - text), edits[k].to, tl);
        strcpy(t2 + (at - text) + tl, at + fl);
        tt_spit(manifest, t2, strlen(t2));
        free(t2);
        expect_open_fail(bad, edits[k].code, edits[k].needle, "manifest edit");
        if (edits[k].code != -ENOENT)
            CHECK(strstr(err.msg, "") != NULL);
    }
    free(text);
    tt_spit(manifest, "", 0);
    expect_open_fail(bad, FL_E_FORMAT, "manifest.json", "empty manifest");
    tt_rm_rf(manifest);
    expect_open_fail(bad, -ENOENT, "manifest.json", "missing manifest");
    expect_open_fail(tt_path("nonexistent"), -ENOENT, "nonexistent", "missing dataset");

    printf("corrupt manifest ok\n");
    return 0;
}
