/* fuzz_image.c — libFuzzer harness for imaging/: probe, full decode (1 or 3 channels, full or
 * DCT-scaled size) and crop decode + resample of arbitrary bytes: JPEG, PNG and WebP (through
 * libwebp where the build has it). Must never crash, leak, read out of bounds or hang; errors are
 * expected and ignored. JPEG crop decodes also run with the entry-point index the full decode
 * learned (fl_decoder_jpeg_index), as it is and with entry bytes the input chooses. Seed corpus:
 * corpus/image/ (*.webp: lossy, lossless, with alpha). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fl_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* One decoder for the whole run, as in the loader: exercises scratch reuse and recovery after
     * errors. 4 megapixels keeps each input fast and progressive coefficient buffers small. */
    static fl_decoder *d;
    static uint8_t out[48 * 40 * 3];
    if (!d && fl_decoder_create(4u << 20, &d, NULL))
        return 0;
    fl_image_info info;
    if (fl_image_probe(data, size, &info, NULL))
        return 0;
    /* The last byte picks the variant, so the fuzzer can steer it. */
    uint8_t sel = data[size - 1];
    uint32_t ch = (sel & 1) ? 1 : 3;
    fl_decoder_set_flags(d, (sel >> 3) & FL_DECODE_FAST);
    uint32_t mw = (sel & 2) ? info.width / 3 : 0, mh = (sel & 2) ? info.height / 3 : 0;
    fl_image img;
    if (fl_decode(d, data, size, ch, mw, mh, &img, NULL) == 0) {
        /* Touch every byte so MSan/ASan see uninitialised or out-of-bounds output. */
        volatile uint32_t sum = 0;
        for (uint32_t y = 0; y < img.height; y++)
            for (size_t x = 0; x < (size_t)img.width * img.channels; x++)
                sum += img.pixels[y * img.stride + x];
        (void)sum;
    }
    static uint8_t ix[8192];
    const void *learned;
    size_t ixn = fl_decoder_jpeg_index(d, &learned);
    if (ixn > sizeof ix)
        ixn = 0;
    if (ixn)
        memcpy(ix, learned, ixn);
    fl_rect r = {info.width / 4, info.height / 5, info.width / 2 ? info.width / 2 : 1,
                 info.height / 3 ? info.height / 3 : 1};
    uint32_t ow = (sel & 4) ? 48 : 7, oh = (sel & 4) ? 40 : 5;
    fl_decode_crop_resize(d, data, size, &r, ow, oh, ch, sel & 0x20, out, NULL);
    if (ixn) {
        fl_decoder_set_jpeg_index(d, ix, ixn);
        fl_decode_crop_resize(d, data, size, &r, ow, oh, ch, sel & 0x20, out, NULL);
        for (size_t i = 32; i < ixn; i++) /* past the head (which must match the file) */
            ix[i] ^= data[(i * 7) % size];
        fl_decoder_set_jpeg_index(d, ix, ixn);
        fl_decode_crop_resize(d, data, size, &r, ow, oh, ch, sel & 0x20, out, NULL);
    }
    /* packdata's lossless restart-marker rewrite parses the same untrusted bytes (its own
     * Huffman parser for sequential files); what it writes must decode as well */
    static fl_encoder *e;
    if (info.format == FL_IMG_JPEG && (e || fl_encoder_create(&e, NULL) == 0)) {
        const uint8_t *rw;
        size_t rwlen;
        if (fl_jpeg_add_restarts(e, data, size, (sel >> 6) ? 4 : 0, &rw, &rwlen, NULL) == 0)
            fl_decode_crop_resize(d, rw, rwlen, &r, ow, oh, ch, sel & 0x20, out, NULL);
    }
    return 0;
}
