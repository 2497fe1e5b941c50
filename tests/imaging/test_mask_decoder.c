/* test_mask_decoder.c — fl_mask_decoder (the reusable mask decoder the loader's workers hold):
 * one decoder through many masks of every stored form (8/16-bit gray PNG into uint8/uint16,
 * palette, interlaced, zstd) gives exactly what fl_mask_decode gives; a partial decode
 * (FL_MASK_CHECKED, `rows`) gives the first rows and leaves the rest of dst untouched; errors
 * still come back through a reused decoder; and, once warm, a decode calls malloc no more
 * (counted by interposing malloc, outside sanitizer builds, which interpose it themselves). */
#include <png.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fl_check.h"
#include "fl_error.h"
#include "fl_image.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNT_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define COUNT_MALLOC 0
#endif
#endif
#ifndef COUNT_MALLOC
#define COUNT_MALLOC 1
#endif

#if COUNT_MALLOC
/* every allocation of the process (libpng's and libzstd's included) goes through these */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static volatile long g_allocs;
void *malloc(size_t n)
{
    g_allocs++;
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    g_allocs++;
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    g_allocs++;
    return __libc_realloc(p, n);
}
void *memalign(size_t a, size_t n)
{
    g_allocs++;
    return __libc_memalign(a, n);
}
#endif

struct mem {
    uint8_t *p;
    size_t n, cap;
};
static void wr(png_structp png, png_bytep d, png_size_t n)
{
    struct mem *m = png_get_io_ptr(png);
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2;
        m->p = realloc(m->p, m->cap);
        if (!m->p)
            abort();
    }
    memcpy(m->p + m->n, d, n);
    m->n += n;
}
static void fl(png_structp png) { (void)png; }

/* A PNG written with libpng (forms fl_mask_encode never makes: palette, interlaced). */
static struct mem make_png(uint32_t w, uint32_t h, int ctype, int depth, int interlace,
                           const uint8_t *rows, size_t rowbytes)
{
    struct mem m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png)))
        abort();
    png_set_write_fn(png, &m, wr, fl);
    png_set_IHDR(png, info, w, h, depth, ctype, interlace, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (ctype == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[256];
        for (int i = 0; i < 256; i++)
            pal[i] = (png_color){(png_byte)i, (png_byte)(i * 3), 7};
        png_set_PLTE(png, info, pal, 256);
    }
    png_write_info(png, info);
    if (depth == 16)
        png_set_swap(png);
    int passes = png_set_interlace_handling(png);
    for (int p = 0; p < passes; p++)
        for (uint32_t y = 0; y < h; y++)
            png_write_row(png, rows + y * rowbytes);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return m;
}

/* One stored mask and how to read it back. */
typedef struct sample {
    struct mem enc;
    fl_mask_codec codec;
    uint32_t w, h;
    fl_dtype dtype;
    const char *name;
} sample;

int main(void)
{
    fl_error err;
    enum { N = 8, MAXW = 301, MAXH = 217 };
    static uint8_t m8[MAXW * MAXH];
    static uint16_t m16[MAXW * MAXH];
    static uint8_t want[MAXW * MAXH * 2], got[MAXW * MAXH * 2];
    sample s[N];
    const uint32_t dims[N][2] = {{301, 217}, {40, 31}, {128, 96}, {301, 217},
                                 {77, 200},  {64, 64}, {255, 1},  {1, 255}};
    int n = 0;
    for (int k = 0; k < N; k++) {
        uint32_t w = dims[k][0], h = dims[k][1];
        for (uint32_t i = 0; i < w * h; i++) {
            /* blocks of a few classes, as masks are */
            m8[i] = (uint8_t)((i % w) / 13 + (i / w) / 11 * 5) % 21;
            m16[i] = (uint16_t)(m8[i] * 397);
        }
        sample *x = &s[n++];
        memset(x, 0, sizeof *x);
        x->w = w;
        x->h = h;
        size_t cap = 0;
        switch (k % 6) {
        case 0: /* 8-bit gray PNG, uint8 */
            x->codec = FL_MASK_PNG, x->dtype = FL_DTYPE_U8, x->name = "png8";
            CHECK_OK(fl_mask_encode(m8, w, h, FL_DTYPE_U8, FL_MASK_PNG, 0, &x->enc.p, &cap,
                                    &x->enc.n, &err),
                     &err);
            break;
        case 1: /* zstd uint16 */
            x->codec = FL_MASK_ZSTD, x->dtype = FL_DTYPE_U16, x->name = "zstd16";
            CHECK_OK(fl_mask_encode(m16, w, h, FL_DTYPE_U16, FL_MASK_ZSTD, 0, &x->enc.p, &cap,
                                    &x->enc.n, &err),
                     &err);
            break;
        case 2: /* 16-bit PNG read as uint8 (values fit) */
            x->codec = FL_MASK_PNG, x->dtype = FL_DTYPE_U8, x->name = "png16->u8";
            for (uint32_t i = 0; i < w * h; i++)
                m16[i] = m8[i];
            CHECK_OK(fl_mask_encode(m16, w, h, FL_DTYPE_U16, FL_MASK_PNG, 0, &x->enc.p, &cap,
                                    &x->enc.n, &err),
                     &err);
            break;
        case 3: /* interlaced palette PNG read as uint16 */
            x->codec = FL_MASK_PNG, x->dtype = FL_DTYPE_U16, x->name = "palette-interlaced->u16";
            x->enc = make_png(w, h, PNG_COLOR_TYPE_PALETTE, 8, PNG_INTERLACE_ADAM7, m8, w);
            break;
        case 4: /* zstd uint8 */
            x->codec = FL_MASK_ZSTD, x->dtype = FL_DTYPE_U8, x->name = "zstd8";
            CHECK_OK(fl_mask_encode(m8, w, h, FL_DTYPE_U8, FL_MASK_ZSTD, 0, &x->enc.p, &cap,
                                    &x->enc.n, &err),
                     &err);
            break;
        default: /* 16-bit interlaced gray PNG, uint16 */
            x->codec = FL_MASK_PNG, x->dtype = FL_DTYPE_U16, x->name = "png16-interlaced";
            x->enc = make_png(w, h, PNG_COLOR_TYPE_GRAY, 16, PNG_INTERLACE_ADAM7, (uint8_t *)m16,
                              2 * (size_t)w);
            break;
        }
    }

    fl_mask_decoder *d;
    CHECK_OK(fl_mask_decoder_create(&d, &err), &err);
    long allocs_warm = -1, allocs_cold = -1;
    for (int round = 0; round < 3; round++) {
#if COUNT_MALLOC
        long a0 = g_allocs;
#endif
        for (int k = 0; k < n; k++) {
            sample *x = &s[k];
            size_t es = x->dtype == FL_DTYPE_U16 ? 2 : 1, bytes = (size_t)x->w * x->h * es;
            /* the one-shot decode is the reference */
            if (round == 0)
                CHECK_OK(fl_mask_decode(x->enc.p, x->enc.n, x->codec, x->w, x->h, x->dtype, want,
                                        sizeof want, x->name, &err),
                         &err);
            else
                CHECK_OK(fl_mask_decode_rows(d, x->enc.p, x->enc.n, x->codec, x->w, x->h, x->dtype,
                                             0, 0, want, sizeof want, x->name, &err),
                         &err);
            memset(got, 0xA5, sizeof got);
            CHECK_OK(fl_mask_decode_rows(d, x->enc.p, x->enc.n, x->codec, x->w, x->h, x->dtype, 0,
                                         FL_MASK_CHECKED, got, sizeof got, x->name, &err),
                     &err);
            EXPECTF(!memcmp(got, want, bytes), "%s %ux%u: reused decoder differs", x->name, x->w,
                    x->h);
            /* the first rows only */
            uint32_t rows = x->h / 3 + 1;
            size_t part = (size_t)rows * x->w * es;
            memset(got, 0xA5, sizeof got);
            CHECK_OK(fl_mask_decode_rows(d, x->enc.p, x->enc.n, x->codec, x->w, x->h, x->dtype,
                                         rows, FL_MASK_CHECKED, got, sizeof got, x->name, &err),
                     &err);
            EXPECTF(!memcmp(got, want, part), "%s: first %u rows differ", x->name, rows);
            /* non-interlaced PNG stops at the last row asked for (zstd decodes whole frames,
             * interlaced PNG needs every pass) */
            int untouched = 1;
            if (k % 6 == 0 || k % 6 == 2)
                for (size_t i = part; i < bytes; i++)
                    untouched &= got[i] == 0xA5;
            EXPECTF(untouched, "%s: rows past %u written", x->name, rows);
            /* without FL_MASK_CHECKED, rows is ignored: the whole mask is decoded and checked */
            memset(got, 0xA5, sizeof got);
            CHECK_OK(fl_mask_decode_rows(d, x->enc.p, x->enc.n, x->codec, x->w, x->h, x->dtype,
                                         rows, 0, got, sizeof got, x->name, &err),
                     &err);
            EXPECTF(!memcmp(got, want, bytes), "%s: unchecked partial decode not whole", x->name);
        }
#if COUNT_MALLOC
        long used = g_allocs - a0;
        if (round == 0)
            allocs_cold = used; /* fl_mask_decode makes a decoder each time */
        if (round == 2)
            allocs_warm = used;
#endif
    }
#if COUNT_MALLOC
    EXPECTF(allocs_cold > 0, "malloc not interposed (%ld allocations counted cold)", allocs_cold);
    EXPECTF(allocs_warm == 0,
            "a warm decoder allocated %ld times in a round of %d masks x 3 decodes", allocs_warm,
            n);
#else
    (void)allocs_warm, (void)allocs_cold;
#endif

    /* errors through a reused decoder, then it still decodes */
    sample *x = &s[0];
    EXPECT_RC(fl_mask_decode_rows(d, x->enc.p, x->enc.n / 2, x->codec, x->w, x->h, x->dtype, 0, 0,
                                  got, sizeof got, "cut", &err),
              FL_E_DECODE, &err);
    EXPECT_RC(fl_mask_decode_rows(d, x->enc.p, x->enc.n, x->codec, x->w + 1, x->h, x->dtype, 0, 0,
                                  got, sizeof got, "size", &err),
              FL_E_FORMAT, &err);
    EXPECTF(strstr(err.msg, "size: mask is 301x217, its image is 302x217") != NULL, "message: %s",
            err.msg);
    x = &s[1]; /* zstd: a short frame, whole and partial */
    int r = fl_mask_decode_rows(d, x->enc.p, x->enc.n / 2, x->codec, x->w, x->h, x->dtype, 0,
                                FL_MASK_CHECKED, got, sizeof got, "zcut", &err);
    EXPECTF(r == FL_E_DECODE || r == FL_E_FORMAT, "zstd cut: %d", r);
    r = fl_mask_decode_rows(d, x->enc.p, x->enc.n / 2, x->codec, x->w, x->h, x->dtype, x->h - 1,
                            FL_MASK_CHECKED, got, sizeof got, "zcut", &err);
    EXPECTF(r == FL_E_DECODE || r == FL_E_FORMAT, "zstd cut, partial: %d", r);
    EXPECT_RC(fl_mask_decode_rows(NULL, x->enc.p, x->enc.n, x->codec, x->w, x->h, x->dtype, 0, 0,
                                  got, sizeof got, "null", &err),
              FL_E_INVALID, &err);
    x = &s[0];
    CHECK_OK(fl_mask_decode_rows(d, x->enc.p, x->enc.n, x->codec, x->w, x->h, x->dtype, 0, 0, got,
                                 sizeof got, x->name, &err),
             &err);
    CHECK_OK(fl_mask_decode(x->enc.p, x->enc.n, x->codec, x->w, x->h, x->dtype, want, sizeof want,
                            x->name, &err),
             &err);
    EXPECT(!memcmp(got, want, (size_t)x->w * x->h));
    fl_mask_decoder_free(d);
    fl_mask_decoder_free(NULL);
    for (int k = 0; k < n; k++)
        free(s[k].enc.p);
    return fl_check_status();
}
