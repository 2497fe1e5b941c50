/* pattern_jpeg.h — the JPEG test pattern the entropy-decoder tests share (test_jpeg_entropy,
 * test_jpeg_pairs, test_jpeg_restart_copy): diagonal ramps plus LCG noise, with tiles inverted so
 * the DC coefficient steps sharply, written by libjpeg with the sampling, quality, Huffman
 * optimisation, progression and restart settings a test asks for; and where a file's entropy-coded
 * data starts (to damage it there). Needs only libjpeg. */
#ifndef FL_PATTERN_JPEG_H
#define FL_PATTERN_JPEG_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jpeglib.h>

typedef struct pattern_jpeg {
    uint32_t w, h;
    int comps;        /* 1 (gray) or 3 (RGB) */
    int hs, vs;       /* the luma sampling factors (chroma 1x1) */
    int quality;      /* libjpeg's 1..100 */
    int optimize;     /* optimised Huffman tables */
    int progressive;  /* jpeg_simple_progression */
    unsigned restart; /* restart interval in MCUs (0: none) */
    int restart_rows; /* or in MCU rows (0: none) */
    int noise_shift;  /* noise of a sample: (r >> noise_shift) - noise_bias */
    int noise_bias;
    uint32_t tile_w, tile_h; /* tiles (x / tile_w + y / tile_h) % 3 == 0 are inverted */
    uint32_t seed;
} pattern_jpeg;

/* The file's bytes (malloc'd by libjpeg's memory destination) and their count in *len. */
static inline uint8_t *make_pattern_jpeg(const pattern_jpeg *o, unsigned long *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    *len = 0;
    jpeg_mem_dest(&c, &out, len);
    c.image_width = o->w;
    c.image_height = o->h;
    c.input_components = o->comps;
    c.in_color_space = o->comps == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, o->quality, TRUE);
    if (o->comps == 3) {
        c.comp_info[0].h_samp_factor = o->hs;
        c.comp_info[0].v_samp_factor = o->vs;
        c.comp_info[1].h_samp_factor = c.comp_info[1].v_samp_factor = 1;
        c.comp_info[2].h_samp_factor = c.comp_info[2].v_samp_factor = 1;
    }
    c.optimize_coding = o->optimize;
    if (o->progressive)
        jpeg_simple_progression(&c);
    c.restart_interval = o->restart;
    c.restart_in_rows = o->restart_rows;
    jpeg_start_compress(&c, TRUE);
    uint8_t *row = malloc((size_t)o->w * o->comps);
    uint32_t r = o->seed * 2654435761u + 1;
    while (c.next_scanline < o->h) {
        uint32_t y = c.next_scanline;
        for (uint32_t x = 0; x < o->w; x++)
            for (int k = 0; k < o->comps; k++) {
                r = r * 1664525u + 1013904223u;
                int v = (int)((x * (3 + k) + y * (5 - k)) % 256) + (int)(r >> o->noise_shift) -
                        o->noise_bias;
                if ((x / o->tile_w + y / o->tile_h) % 3 == 0)
                    v = 255 - v; /* edges: large DC steps */
                row[(size_t)x * o->comps + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        JSAMPROW rp = row;
        jpeg_write_scanlines(&c, &rp, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    return out;
}

/* Offset of the first entropy-coded byte (after SOS), 0 if none. */
static inline size_t entropy_start(const uint8_t *p, size_t n)
{
    for (size_t i = 2; i + 4 <= n && p[i] == 0xFF;) {
        size_t l = (size_t)p[i + 2] << 8 | p[i + 3];
        if (p[i + 1] == 0xDA)
            return i + 2 + l;
        i += 2 + l;
    }
    return 0;
}

#endif
