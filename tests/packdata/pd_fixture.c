/* pd_fixture.c — makes packdata test fixtures (ImageFolder, list, CSV, IDX, CIFAR, bad inputs)
 * from a deterministic pixel pattern, and checks a packed dataset against that pattern:
 *   pd_fixture make DIR
 *   pd_fixture check DST FORM MODE [ROOT]   FORM: folder|idx|cifar10|cifar100; MODE: keep|raw|jpeg
 * Exit 0 pass, 1 fail. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "fl_check.h"

#include "fl_dataset.h"
#include "fl_image.h"

/* class folder names: label = index in sorted order; includes a space and non-ASCII */
static const char *classes[3] = {"0cat", "1dog", "2 \xc3\xa9t\xc3\xa9 x"};

static uint8_t pat(uint32_t s, uint32_t x, uint32_t y, uint32_t c)
{
    return (uint8_t)(s * 37u + x * 5u + y * 3u + c * 85u);
}

static void fill(uint8_t *p, uint32_t w, uint32_t h, uint32_t ch, uint32_t s)
{
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t c = 0; c < ch; c++)
                p[((size_t)y * w + x) * ch + c] = pat(s, x, y, c);
}

static int die(const char *what)
{
    fprintf(stderr, "pd_fixture: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void put_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n || fclose(f))
        die(path);
}

static void mk(const char *p)
{
    if (mkdir(p, 0755) && errno != EEXIST)
        die(p);
}

static fl_encoder *enc;

static void write_img(const char *path, uint32_t w, uint32_t h, uint32_t s, int png)
{
    uint8_t *px = malloc((size_t)w * h * 3);
    fill(px, w, h, 3, s);
    fl_image img = {px, w, h, 3, (size_t)w * 3};
    const uint8_t *out;
    size_t n;
    fl_error err;
    int r = png ? fl_encode_png(enc, &img, &out, &n, &err)
                : fl_encode_jpeg(enc, &img, 92, &out, &n, &err);
    if (r) {
        fprintf(stderr, "pd_fixture: encode %s: %s\n", path, err.msg);
        exit(1);
    }
    put_file(path, out, n);
    free(px);
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void write_gz(const char *path, const void *d, size_t n)
{
    gzFile g = gzopen(path, "wb");
    if (!g || gzwrite(g, d, (unsigned)n) != (int)n || gzclose(g) != Z_OK)
        die(path);
}

static int make(const char *dir)
{
    char p[4096], q[4096];
    mk(dir);
    if (fl_encoder_create(&enc, NULL))
        return 1;
    /* ImageFolder of PNGs (one fixed size: good for raw), and one of JPEGs of varying sizes */
    const char *trees[2] = {"png", "jpg"};
    for (int t = 0; t < 2; t++) {
        snprintf(p, sizeof p, "%s/%s", dir, trees[t]);
        mk(p);
        for (int c = 0; c < 3; c++) {
            snprintf(q, sizeof q, "%s/%s/%s", dir, trees[t], classes[c]);
            mk(q);
            for (int k = 0; k < 4; k++) {
                uint32_t s = (uint32_t)(c * 10 + k);
                snprintf(q, sizeof q, "%s/%s/%s/img_%d.%s", dir, trees[t], classes[c], s,
                         t ? "jpg" : "png");
                if (t == 0)
                    write_img(q, 24, 16, s, 1);
                else
                    write_img(q, 40 + 8 * (uint32_t)k, 30 + 4 * (uint32_t)c, s, 0);
            }
        }
    }
    /* a PNG whose extension says JPEG, in its own folder (mixing formats breaks keep) */
    snprintf(p, sizeof p, "%s/liar", dir);
    mk(p);
    snprintf(p, sizeof p, "%s/liar/0a", dir);
    mk(p);
    snprintf(p, sizeof p, "%s/liar/0a/img_5.jpg", dir);
    write_img(p, 24, 16, 5, 1);
    snprintf(p, sizeof p, "%s/liar/0a/img_6.png", dir);
    write_img(p, 24, 16, 6, 1);
    /* list and CSV over the PNG tree */
    snprintf(p, sizeof p, "%s/list.txt", dir);
    FILE *l = fopen(p, "w");
    snprintf(p, sizeof p, "%s/data.csv", dir);
    FILE *cs = fopen(p, "w");
    if (!l || !cs)
        die("list");
    fprintf(l, "# path label\n");
    fprintf(cs, "id,path,label\n");
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 4; k++) {
            fprintf(l, "png/%s/img_%d.png %d\n", classes[c], c * 10 + k, c);
            fprintf(cs, "%d,\"png/%s/img_%d.png\",%d\n", c * 4 + k, classes[c], c * 10 + k, c);
        }
    fclose(l);
    fclose(cs);
    /* IDX (gzip'ed): 40 images 7x5, labels i % 10 */
    snprintf(p, sizeof p, "%s/idx", dir);
    mk(p);
    {
        uint32_t n = 40, h = 7, w = 5;
        uint8_t *im = malloc(16 + n * h * w), lb[8 + 40];
        be32(im, 0x803);
        be32(im + 4, n);
        be32(im + 8, h);
        be32(im + 12, w);
        be32(lb, 0x801);
        be32(lb + 4, n);
        for (uint32_t i = 0; i < n; i++) {
            fill(im + 16 + i * h * w, w, h, 1, i);
            lb[8 + i] = (uint8_t)(i % 10);
        }
        snprintf(p, sizeof p, "%s/idx/train-images-idx3-ubyte.gz", dir);
        write_gz(p, im, 16 + n * h * w);
        snprintf(p, sizeof p, "%s/idx/train-labels-idx1-ubyte.gz", dir);
        write_gz(p, lb, sizeof lb);
        /* uncompressed copy for --idx */
        snprintf(p, sizeof p, "%s/idx-plain-images", dir);
        put_file(p, im, 16 + n * h * w);
        snprintf(p, sizeof p, "%s/idx-plain-labels", dir);
        put_file(p, lb, sizeof lb);
        /* truncated image file */
        snprintf(p, sizeof p, "%s/idx-trunc-images", dir);
        put_file(p, im, 16 + n * h * w - 3);
        free(im);
    }
    /* CIFAR-10: two training batches + a test batch of 6 records; CIFAR-100: train.bin */
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/cifar10", dir);
        mk(p);
        snprintf(p, sizeof p, "%s/cifar100", dir);
        mk(p);
    }
    {
        const char *files[3] = {"data_batch_1.bin", "data_batch_2.bin", "test_batch.bin"};
        uint8_t rec[3074], px[3072];
        for (int f = 0; f < 3; f++) {
            snprintf(p, sizeof p, "%s/cifar10/%s", dir, files[f]);
            FILE *o = fopen(p, "wb");
            if (!o)
                die(p);
            for (uint32_t i = 0; i < 6; i++) {
                uint32_t s = (uint32_t)f * 100 + i;
                fill(px, 32, 32, 3, s);
                rec[0] = (uint8_t)(s % 10);
                for (int j = 0; j < 1024; j++) {
                    rec[1 + j] = px[3 * j];
                    rec[1 + 1024 + j] = px[3 * j + 1];
                    rec[1 + 2048 + j] = px[3 * j + 2];
                }
                fwrite(rec, 1, 3073, o);
            }
            fclose(o);
        }
        snprintf(p, sizeof p, "%s/cifar10/batches.meta.txt", dir);
        FILE *m = fopen(p, "w");
        const char *names10[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                   "dog",      "frog",       "horse", "ship", "truck"};
        for (int i = 0; i < 10; i++)
            fprintf(m, "%s\n", names10[i]);
        fprintf(m, "\n");
        fclose(m);
        snprintf(p, sizeof p, "%s/cifar100/train.bin", dir);
        FILE *o = fopen(p, "wb");
        for (uint32_t i = 0; i < 5; i++) {
            fill(px, 32, 32, 3, 500 + i);
            rec[0] = (uint8_t)(i % 20);
            rec[1] = (uint8_t)(i * 7 % 100);
            for (int j = 0; j < 1024; j++) {
                rec[2 + j] = px[3 * j];
                rec[2 + 1024 + j] = px[3 * j + 1];
                rec[2 + 2048 + j] = px[3 * j + 2];
            }
            fwrite(rec, 1, 3074, o);
        }
        fclose(o);
        snprintf(p, sizeof p, "%s/cifar100/fine_label_names.txt", dir);
        m = fopen(p, "w");
        for (int i = 0; i < 100; i++)
            fprintf(m, "fine%d\n", i);
        fclose(m);
        snprintf(p, sizeof p, "%s/cifar100/coarse_label_names.txt", dir);
        m = fopen(p, "w");
        for (int i = 0; i < 20; i++)
            fprintf(m, "coarse%d\n", i);
        fclose(m);
    }
    /* bad inputs, one folder each (class "0x"): the tests point list files at them */
    snprintf(p, sizeof p, "%s/bad", dir);
    mk(p);
    {
        snprintf(p, sizeof p, "%s/bad/empty.jpg", dir);
        put_file(p, "", 0);
        snprintf(p, sizeof p, "%s/bad/text.jpg", dir);
        put_file(p, "hello, not an image\n", 20);
        /* truncated JPEG and PNG: the first 60% of a real one */
        uint8_t *px = malloc(64 * 48 * 3);
        fill(px, 64, 48, 3, 7);
        fl_image img = {px, 64, 48, 3, 64 * 3};
        const uint8_t *out;
        size_t n;
        fl_encode_jpeg(enc, &img, 90, &out, &n, NULL);
        snprintf(p, sizeof p, "%s/bad/trunc.jpg", dir);
        put_file(p, out, n * 6 / 10);
        fl_encode_png(enc, &img, &out, &n, NULL);
        snprintf(p, sizeof p, "%s/bad/trunc.png", dir);
        put_file(p, out, n * 6 / 10);
        free(px);
        /* a PNG header declaring 100000 x 100000 pixels (10^10): must be refused unread */
        static const uint8_t big[] = {0x89, 'P',  'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0,    0, 0,
                                      13,   'I',  'H', 'D', 'R',  0,    1,    0x86, 0xa0, 0, 1,
                                      0x86, 0xa0, 8,   2,   0,    0,    0,    0,    0,    0, 0};
        uint8_t b2[sizeof big + 12];
        memcpy(b2, big, sizeof big);
        uLong crc = crc32(0, big + 12, 17);
        be32(b2 + 29, (uint32_t)crc);
        memcpy(b2 + 33, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
        snprintf(p, sizeof p, "%s/bad/huge.png", dir);
        put_file(p, b2, sizeof b2);
        snprintf(p, sizeof p, "%s/bad/good one.png", dir);
        write_img(p, 24, 16, 3, 1);
    }
    fl_encoder_free(enc);
    return 0;
}

/* ---- check -------------------------------------------------------------------------------- */

/* a difference: counted (fl_check.h), the first 20 reported */
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        EXPECTF(0, "pd_fixture check: " __VA_ARGS__);                                              \
        if (fl_check_failures > 20)                                                                \
            exit(1);                                                                               \
    } while (0)

static int read_all(const char *path, uint8_t **d, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    *d = malloc((size_t)l + 1);
    *n = fread(*d, 1, (size_t)l, f);
    fclose(f);
    return 0;
}

static int check(const char *dst, const char *form, const char *mode, const char *root)
{
    fl_dataset *ds;
    fl_error err;
    if (fl_dataset_open(dst, &ds, &err)) {
        fprintf(stderr, "pd_fixture check: open %s: %s\n", dst, err.msg);
        return 1;
    }
    const fl_schema *sc = fl_dataset_schema(ds);
    uint64_t n = fl_dataset_count(ds);
    size_t cap = fl_dataset_max_raw_len(ds) + 1;
    uint8_t *buf = malloc(cap);
    fl_decoder *dec;
    fl_decoder_create(0, &dec, NULL);
    int is_folder = !strcmp(form, "folder");
    if (is_folder) {
        if (fl_dataset_num_classes(ds) != 3)
            FAIL("want 3 classes, got %u", fl_dataset_num_classes(ds));
        for (uint32_t c = 0; c < 3 && c < fl_dataset_num_classes(ds); c++)
            if (strcmp(fl_dataset_class_name(ds, c), classes[c]) &&
                strcmp(fl_dataset_class_name(ds, c), (char[]){(char)('0' + c), 0}))
                FAIL("class %u is '%s'", c, fl_dataset_class_name(ds, c));
    }
    for (uint64_t i = 0; i < n; i++) {
        fl_record_info ri;
        const uint8_t *data, *pl;
        size_t len, pll, nl;
        if (fl_dataset_record_info(ds, i, &ri, &err) ||
            fl_dataset_get(ds, i, &data, &len, 1, &err) ||
            fl_dataset_payload(ds, i, data, len, buf, cap, &pl, &pll, &err)) {
            FAIL("record %llu: %s", (unsigned long long)i, err.msg);
            continue;
        }
        const char *nm = fl_dataset_record_name(ds, i, &nl);
        char name[4096];
        snprintf(name, sizeof name, "%.*s", (int)nl, nm);
        uint32_t seed = 0, w = 0, h = 0, ch = 3;
        int32_t want_label = -1;
        const char *hash = strrchr(name, '#');
        if (is_folder) {
            /* "png/<class>/img_S.png" or "<class>/img_S.png" */
            const char *im = strstr(name, "img_");
            if (!im) {
                FAIL("record %llu: unexpected name %s", (unsigned long long)i, name);
                continue;
            }
            seed = (uint32_t)atoi(im + 4);
            want_label = (int32_t)(seed / 10);
            if (strstr(name, "liar"))
                want_label = 0;
            w = 24;
            h = 16;
        } else if (!strcmp(form, "idx")) {
            if (!hash) {
                FAIL("bad name %s", name);
                continue;
            }
            seed = (uint32_t)atoi(hash + 1);
            want_label = (int32_t)(seed % 10);
            w = 5;
            h = 7;
            ch = 1;
        } else if (!strcmp(form, "cifar10")) {
            if (!hash) {
                FAIL("bad name %s", name);
                continue;
            }
            int f = strstr(name, "test_batch") ? 2 : strstr(name, "data_batch_2") ? 1 : 0;
            seed = (uint32_t)f * 100 + (uint32_t)atoi(hash + 1);
            want_label = (int32_t)(seed % 10);
            w = h = 32;
        } else {
            if (!hash) {
                FAIL("bad name %s", name);
                continue;
            }
            uint32_t k = (uint32_t)atoi(hash + 1);
            seed = 500 + k;
            want_label = (int32_t)(strstr(mode, "coarse") ? k % 20 : k * 7 % 100);
            w = h = 32;
        }
        if (want_label >= 0 && ri.label != want_label)
            FAIL("record %llu (%s): label %d, want %d", (unsigned long long)i, name, ri.label,
                 want_label);
        if (!strcmp(mode, "keep")) {
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", root, name);
            uint8_t *orig;
            size_t on;
            if (read_all(path, &orig, &on)) {
                FAIL("cannot read %s", path);
                continue;
            }
            if (on != pll || memcmp(orig, pl, on))
                FAIL("record %llu (%s): bytes differ from the file", (unsigned long long)i, name);
            free(orig);
            continue;
        }
        if (!strncmp(mode, "raw", 3)) {
            uint32_t sch = sc->channels;
            if (ri.width != w || ri.height != h || pll != (size_t)w * h * sch) {
                FAIL("record %llu (%s): %ux%u %zu bytes, want %ux%ux%u", (unsigned long long)i,
                     name, ri.width, ri.height, pll, w, h, sch);
                continue;
            }
            for (uint32_t y = 0; y < h; y++)
                for (uint32_t x = 0; x < w; x++)
                    for (uint32_t c = 0; c < sch; c++) {
                        uint8_t want = pat(seed, x, y, c);
                        if (sch == 1 && ch == 3)
                            want =
                                (uint8_t)((299u * pat(seed, x, y, 0) + 587u * pat(seed, x, y, 1) +
                                           114u * pat(seed, x, y, 2) + 500u) /
                                          1000u);
                        if (sch == 3 && ch == 1)
                            want = pat(seed, x, y, 0);
                        uint8_t got = pl[((size_t)y * w + x) * sch + c];
                        if (got != want) {
                            FAIL("record %llu (%s): pixel (%u,%u,%u) = %u, want %u",
                                 (unsigned long long)i, name, x, y, c, got, want);
                            goto next;
                        }
                    }
            continue;
        }
        /* jpeg: must decode to the indexed size */
        {
            fl_image img;
            if (fl_decode(dec, pl, pll, sc->channels, 0, 0, &img, &err)) {
                FAIL("record %llu (%s): does not decode: %s", (unsigned long long)i, name, err.msg);
                continue;
            }
            if (img.width != ri.width || img.height != ri.height)
                FAIL("record %llu: decodes to %ux%u, index says %ux%u", (unsigned long long)i,
                     img.width, img.height, ri.width, ri.height);
        }
    next:;
    }
    free(buf);
    fl_decoder_free(dec);
    fl_dataset_close(ds);
    if (fl_check_failures)
        return 1;
    printf("pd_fixture check: %s: %llu records ok\n", dst, (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "make"))
        return make(argv[2]);
    if (argc >= 5 && !strcmp(argv[1], "check"))
        return check(argv[2], argv[3], argv[4], argc > 5 ? argv[5] : ".");
    fprintf(stderr, "usage: pd_fixture make DIR | check DST FORM MODE [ROOT]\n");
    return 2;
}
