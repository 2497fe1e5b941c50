/* fuzz_checkpoint.c — libFuzzer harness for the trainfast checkpoint reader: any byte string must
 * either parse (and then re-serialise to the identical bytes) or fail with an error code and a
 * message, never crash or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tf_checkpoint ck;
    fl_error err;
    if (tf_checkpoint_parse(data, size, "fuzz", &ck, &err) == 0) {
        uint8_t *out;
        size_t len;
        if (tf_checkpoint_serialize(&ck, &out, &len) == 0) {
            /* a valid file round-trips exactly */
            if (len != size || memcmp(out, data, size) != 0)
                abort();
            free(out);
        }
        tf_checkpoint_free(&ck);
    } else if (err.code >= 0 || !err.msg[0]) {
        abort();
    }
    return 0;
}
