/* abi.c — the library's version and the sizes of the structs it shares with its callers
 * (fl_abi_info_get of fastload.h), for bindings that declare those structs themselves. */
#include "fastload.h"

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
