/* options.c — loader option defaults and validation (every bad value is named in the error,
 * never silently adjusted). */
#include "loader_internal.h"

#include <math.h>

const char *fl_version(void) { return FASTLOAD_VERSION; }

void fl_loader_options_init(fl_loader_options *o)
{
    memset(o, 0, sizeof *o);
    o->batch_size = 256;
    o->workers = 0;
    o->prefetch = 0;
    o->augment = FL_AUG_NONE;
    o->scale_min = 0.08f;
    o->scale_max = 1.0f;
    o->ratio_min = 3.0f / 4.0f;
    o->ratio_max = 4.0f / 3.0f;
    o->center_ratio = 0.875f;
    o->order = FL_ORDER_SEQUENTIAL;
    o->quasi_block = 0; /* by record size: fl_order_quasi_block */
    o->quasi_window = 32;
    o->seed = 0;
    o->rank = 0;
    o->world = 1;
    o->drop_last = 0;
    o->io = FL_IO_AUTO;
    o->direct = 0;
    o->queue_depth = 32;
    o->on_corrupt = FL_CORRUPT_ERROR;
    o->pinned = 1;
    o->device = -1;
    o->max_batches = 0; /* no end */
}

int fl_loader_options_check(const fl_loader_options *o, fl_error *err)
{
    if (o->batch_size == 0)
        return fl_error_set(err, FL_E_INVALID, "batch_size must be at least 1");
    if (o->channels != 0 && o->channels != 1 && o->channels != 3)
        return fl_error_set(err, FL_E_INVALID, "channels must be 0, 1 or 3 (got %u)", o->channels);
    if ((o->out_height == 0) != (o->out_width == 0))
        return fl_error_set(err, FL_E_INVALID,
                            "out_height and out_width must both be set or both be 0 (got %u×%u)",
                            o->out_height, o->out_width);
    if ((unsigned)o->augment > FL_AUG_OBJECT_CROP)
        return fl_error_set(err, FL_E_INVALID, "unknown augment %d", (int)o->augment);
    if ((unsigned)o->order > FL_ORDER_QUASI)
        return fl_error_set(err, FL_E_INVALID, "unknown order %d", (int)o->order);
    if ((unsigned)o->io > FL_IO_MEMORY)
        return fl_error_set(err, FL_E_INVALID, "unknown io mode %d", (int)o->io);
    if ((o->io == FL_IO_MMAP || o->io == FL_IO_MEMORY) && o->direct)
        return fl_error_set(err, FL_E_INVALID, "direct (O_DIRECT) cannot be used with %s",
                            o->io == FL_IO_MMAP ? "FL_IO_MMAP" : "FL_IO_MEMORY");
    if ((unsigned)o->on_corrupt > FL_CORRUPT_SKIP)
        return fl_error_set(err, FL_E_INVALID, "unknown on_corrupt %d", (int)o->on_corrupt);
    if (o->augment == FL_AUG_RRC || o->augment == FL_AUG_OBJECT_CROP) {
        if (!(o->scale_min > 0 && o->scale_min <= o->scale_max && isfinite(o->scale_max)))
            return fl_error_set(err, FL_E_INVALID,
                                "scale range (%g, %g) must satisfy 0 < min <= max", o->scale_min,
                                o->scale_max);
        if (!(o->ratio_min > 0 && o->ratio_min <= o->ratio_max && isfinite(o->ratio_max)))
            return fl_error_set(err, FL_E_INVALID,
                                "ratio range (%g, %g) must satisfy 0 < min <= max", o->ratio_min,
                                o->ratio_max);
    }
    if (o->augment == FL_AUG_CENTER && !(o->center_ratio > 0 && o->center_ratio <= 1))
        return fl_error_set(err, FL_E_INVALID, "center_ratio %g must lie in (0, 1]",
                            o->center_ratio);
    if (!(o->box_min_visible >= 0 && o->box_min_visible <= 1))
        return fl_error_set(err, FL_E_INVALID, "box_min_visible %g must lie in [0, 1]",
                            o->box_min_visible);
    uint32_t world = o->world ? o->world : 1;
    if (o->rank >= world)
        return fl_error_set(err, FL_E_INVALID, "rank %u out of range for world %u", o->rank, world);
    if (o->decode_flags & ~(uint32_t)FL_DECODE_FAST)
        return fl_error_set(err, FL_E_INVALID, "unknown decode_flags 0x%x", o->decode_flags);
    if (o->queue_depth > 4096)
        return fl_error_set(err, FL_E_INVALID, "queue_depth %u over 4096", o->queue_depth);
    if (o->workers > 1024)
        return fl_error_set(err, FL_E_INVALID, "workers %u over 1024", o->workers);
    if (o->prefetch > 65536)
        return fl_error_set(err, FL_E_INVALID, "prefetch %u over 65536", o->prefetch);
    return 0;
}
