/* abi.c — the library's version and the sizes of the structs it shares with its callers
 * (fl_abi_info_get of fastload.h), for bindings that declare those structs themselves. */
#include "fastload.h"

#include <stddef.h>

/* Fields are only ever appended (a binding built for an older layout reads the fields it knows
 * at their old offsets): the last one of each ABI version stays last. */
_Static_assert(offsetof(fl_loader_options, decode_memory) >
                       offsetof(fl_loader_options, box_min_visible) &&
                   offsetof(fl_loader_options, max_batches) ==
                       offsetof(fl_loader_options, decode_memory) + 8 &&
                   offsetof(fl_loader_options, jpeg_index_memory) ==
                       offsetof(fl_loader_options, max_batches) + 8 &&
                   sizeof(fl_loader_options) == offsetof(fl_loader_options, jpeg_index_memory) + 8,
               "fl_loader_options.decode_memory (ABI 3) must follow box_min_visible, then "
               "max_batches (ABI 4), then jpeg_index_memory (ABI 5), last");
_Static_assert(offsetof(fl_loader_stats, jpeg_index_bytes) ==
                       offsetof(fl_loader_stats, decode_memory_wait_s) + 8 &&
                   sizeof(fl_loader_stats) == offsetof(fl_loader_stats, jpeg_index_bytes) + 8 &&
                   offsetof(fl_loader_stats, decode_memory_peak) ==
                       offsetof(fl_loader_stats, pinned_bytes) + 8,
               "fl_loader_stats.decode_memory_peak/_wait_s (ABI 3) must follow pinned_bytes, "
               "then jpeg_index_bytes (ABI 5), last");

const fl_abi_info *fl_abi_info_get(void)
{
    static const fl_abi_info info = {
        .version = FASTLOAD_VERSION,
        .abi_version = FL_ABI_VERSION,
        .sizeof_error = (uint32_t)sizeof(fl_error),
        .sizeof_loader_options = (uint32_t)sizeof(fl_loader_options),
        .sizeof_batch = (uint32_t)sizeof(fl_batch),
        .sizeof_loader_stats = (uint32_t)sizeof(fl_loader_stats),
        .sizeof_batch_field = (uint32_t)sizeof(fl_batch_field),
    };
    return &info;
}
