/* src_tar_wds.c — WebDataset shards: tar files whose members are grouped into samples by key. */
#include "archive_source.h"

int pd_src_wds(const char *spec, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
               fl_error *err) {
    (void)so, (void)rc, (void)out;
    return fl_error_set(err, FL_E_UNSUPPORTED, "%s: WebDataset shards are not read yet", spec);
}
