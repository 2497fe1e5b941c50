/* fastload.h — the public C API of libfastload: stream a packed dataset into decoded, augmented
 * uint8 batches in pinned host memory (and optionally onto a CUDA device).
 *
 * Life cycle:  fl_loader_options_init(&o); o.batch_size = 256; ...
 *              fl_loader_create(path, &o, &L, &err);
 *              for (;;) { fl_batch *b; fl_loader_next(L, &b, &err); ...use b...;
 * fl_loader_release(L, b); } fl_loader_close(L);
 *
 * Order and augmentation are pure functions of (seed, epoch, sample index): the same options give
 * byte-identical batches whatever the worker count, I/O mode or backend, and a loader created with
 * a saved position (start_epoch, start_batch) continues exactly as an uninterrupted run would.
 *
 * Thread safety: one loader is driven by one consumer thread (next/release); position, stats and
 * the counts may be read from any thread. Distinct loaders are independent (no global state).
 * The library never prints or exits; errors come back as codes (fl_error.h) with a message
 * naming shard, record and reason; notes (I/O fallbacks) go only to the optional log callback.
 *
 * How it works: `workers` threads claim chunks of up to queue_depth samples of the batch being
 * filled (each worker claims its next chunk and starts its reads before decoding the current
 * one), read their records (io_uring with registered buffers, or pread; LMDB through its mmap),
 * check each record's CRC32C, decompress into a per-worker scratch buffer and decode + augment
 * straight into the sample's place in the batch. Raw, uncompressed records that need no change
 * are read into the batch directly. Batches are handed out strictly in order.
 *
 * Order: the epoch's sequence of records (sequential, a random permutation, or quasi-random:
 * blocks of quasi_block consecutive records shuffled, then the samples of each window of
 * quasi_window blocks shuffled together) is split between the ranks: sequential and random
 * orders deal it round-robin, sample j of rank r being sequence position j*world + r (as
 * PyTorch's DistributedSampler); quasi order gives rank r the contiguous positions
 * r*per_rank + j, so a block's records go to one rank and each rank reads its blocks as whole
 * extents (read once per epoch on the node, not once per rank). Every rank gets the same
 * number of full batches: with drop_last the tail is dropped, otherwise positions past the end
 * wrap to the start of the sequence. Sample augmentation draws from (seed, epoch, position).
 *
 * Memory bound (resident, whatever the dataset size and the number of epochs; the read buffers
 * are touched at create, the ring as the workers fill its first `prefetch` batches, or at create
 * when it is pinned):
 *   ring      prefetch × batch_size × (out_height × out_width × channels + 4
 *             + the other fields' bytes per sample: 4 per INT/FLOAT, 4 × n per FLOAT_VECTOR,
 *             M × row bytes + 4 per variable field (INT_LIST 4, BOXES 16, BYTES/TEXT 1;
 *             M its max_count), out_height × out_width × 1 or 2 per MASK, the element count
 *             × dtype size per NDARRAY; each array rounded up to 64 bytes)   (pinned)
 *   indices   prefetch × batch_size × 8
 *   order     8 bytes per dataset record (the epoch's sequence)
 *   JPEG indexes  up to jpeg_index_memory bytes of entry-point indexes, learned as records
 *             are decoded, + 8 bytes per record (JPEG and mixed data sets)
 *   FL_ORDER_QUASI read as coalesced extents (io_uring): up to twice the quasi
 *             window's stored bytes + 16 MiB of extent buffers (at most 256 MiB and a quarter of
 *             the page cache the run can expect, divided by the loader processes on the node
 *             when the launcher says how many: LOCAL_WORLD_SIZE (torchrun),
 *             OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS or SLURM_NTASKS_PER_NODE; a larger
 *             window is read record by record)
 *   per worker  2 × queue_depth × (largest stored record [+ 8 KiB with O_DIRECT]) read buffers
 *             (the next chunk's reads are in flight while the current chunk decodes)
 *             + largest decompressed record + one replacement-read buffer
 *             + with fields: the output maps, the fields' parsed values and the kept-box rows
 *             (max_count)
 *   decoding  the decode_memory budget, shared by all workers: what decoding an image (and
 *             its masks) can use, estimated from its header, is reserved before and given back
 *             after; a decode that needs at most FL_DECODE_SMALL bytes reserves nothing, and a
 *             worker keeps at most FL_DECODE_KEEP bytes of grow-only scratch between samples
 *             (more is freed), so decoding holds at most decode_memory + workers ×
 *             (FL_DECODE_SMALL + FL_DECODE_KEEP + 8 MiB of a PNG's ancillary chunks)
 *   plus the dataset's index (fl_dataset); for FL_IO_MEMORY (which FL_IO_AUTO picks for
 *   raw-pixel datasets of at most `memory_max` bytes) the shard files' bytes; and, for
 *   LMDB and FL_IO_MMAP, the page-cache pages of the dataset that the mapping touches
 *   (file-backed, shared and reclaimable by the kernel).
 * fl_loader_stats.pinned_bytes reports the ring. */
#ifndef FASTLOAD_H
#define FASTLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "fl_dataset.h"
#include "fl_error.h"
#include "fl_fields.h"
#include "fl_image.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FASTLOAD_VERSION ("MAJOR.MINOR.PATCH") and its parts: generated at build time from
 * project(fastload VERSION ...) in CMakeLists.txt, the one place the version is written. */
#include "fl_version.h"

/* Library version string (same as FASTLOAD_VERSION of the build). */
FL_API const char *fl_version(void);

/* What a binding that declares these structs itself (python/fastload/_native.py, through ctypes)
 * checks before its first call: the library's version and the size of every struct the caller and
 * the library share. A binding built for another version or layout refuses to run, naming both,
 * instead of reading fields at the wrong offsets. */
typedef struct fl_abi_info {
    const char *version;            /* FASTLOAD_VERSION of the library */
    uint32_t abi_version;           /* FL_ABI_VERSION of the library */
    uint32_t sizeof_error;          /* sizeof(fl_error) */
    uint32_t sizeof_loader_options; /* sizeof(fl_loader_options) */
    uint32_t sizeof_batch;          /* sizeof(fl_batch) */
    uint32_t sizeof_loader_stats;   /* sizeof(fl_loader_stats) */
    uint32_t sizeof_batch_field;    /* sizeof(fl_batch_field) (ABI 2 on) */
} fl_abi_info;

/* Incremented whenever a shared struct changes layout or a function changes signature.
 * 2: fl_batch.num_fields/fields (fl_batch_field), fl_loader_options.box_min_visible,
 *    fl_abi_info.sizeof_batch_field, FL_AUG_OBJECT_CROP.
 * 3: fl_loader_options.decode_memory, fl_loader_stats.decode_memory_peak/_wait_s.
 * 4: fl_loader_options.max_batches.
 * 5: fl_loader_options.jpeg_index_memory, fl_loader_stats.jpeg_index_bytes,
 *    fl_loader_prefetch, fl_loader_set_max_batches. */
#define FL_ABI_VERSION 5

/* The library's fl_abi_info (static storage, never NULL). */
FL_API const fl_abi_info *fl_abi_info_get(void);

typedef enum fl_order {
    FL_ORDER_SEQUENTIAL = 0, /* records in dataset order */
    FL_ORDER_RANDOM = 1,     /* a full random permutation per epoch */
    FL_ORDER_QUASI = 2 /* shuffled blocks of records, samples shuffled within a window of blocks */
} fl_order;

typedef enum fl_augment {
    FL_AUG_NONE = 0,       /* resize the whole image to out size (no-op for fixed-size raw data) */
    FL_AUG_CENTER = 1,     /* resize shorter side to out/center_ratio, center crop (evaluation) */
    FL_AUG_RRC = 2,        /* random-resized-crop (scale and ratio ranges) */
    FL_AUG_OBJECT_CROP = 3 /* detection: a random crop (scale and ratio ranges as RRC) whose
                              window holds the centre of at least one box of the sample's first
                              BOXES field (up to 50 draws from the sample's stream, else the whole
                              image; the whole image when the sample has no box), as SSD and
                              DALI's RandomBBoxCrop; needs a data set with a BOXES field */
} fl_augment;

typedef enum fl_io_mode {
    FL_IO_AUTO = 0,  /* FL_IO_MEMORY for shard datasets of raw pixels (where reads, not
                        decoding, are the cost) of at most `memory_max` bytes (default 256 MiB
                        and 1/16 of physical memory: MNIST, CIFAR) unless `direct`; otherwise
                        io_uring when the kernel allows it, else the pread pool (one log line);
                        with O_DIRECT (one log line) when the data set is larger than the page
                        cache the run can expect (MemAvailable, the cgroup's memory limit):
                        fl_loader_io_describe says which and why.
                        Never the mapping: reads name the shard and record of a file that
                        shrinks or fails under them at no cost, a mapping only through its guard
                        (below). LMDB datasets are always read through LMDB's mmap. */
    FL_IO_URING = 1, /* io_uring only; fails when unavailable */
    FL_IO_PREAD = 2, /* a pool of pread threads */
    FL_IO_MMAP = 3,  /* shards read through the dataset's read-only mapping: no system call per
                        record, the fastest for small records held in the page cache (measured:
                        per-record io_uring reads top out near 1 M records/s on 2 cores);
                        not combinable with `direct`. A page of a mapping past the end of a file
                        truncated while the loader runs faults (SIGBUS), as does one the disk
                        fails to read: with FL_IO_MMAP and LMDB the loader copies each record
                        out of the mapping under a SIGBUS handler of its own (installed at
                        create, chained to the process's previous one), so such a record fails
                        with FL_E_TRUNCATED naming file and record, like a failed read. */
    FL_IO_MEMORY = 4 /* every shard file read once, at create, into the loader's own memory
                        (huge pages where the kernel allows); records are then copied from there
                        with their CRC32C checked on every use, as fast as the mapping without
                        its SIGBUS: a file changed or truncated later does not affect the run.
                        Costs the dataset's size in resident memory; shard datasets only (LMDB
                        is mapped); not combinable with `direct`. */
} fl_io_mode;

typedef enum fl_on_corrupt {
    FL_CORRUPT_ERROR = 0, /* a bad record makes fl_loader_next fail */
    FL_CORRUPT_SKIP = 1   /* a bad record (checksum, decompression or decode failure) is
                             replaced by the next good record in dataset order (index+1, +2, ...)
                             with the same augmentation draw, and counted (fl_batch.skipped) */
} fl_on_corrupt;

/* Optional log sink (the library's only output); level 0 info, 1 warning. */
typedef void (*fl_log_fn)(void *user, int level, const char *msg);

typedef struct fl_loader_options {
    uint32_t batch_size; /* samples per batch (default 256) */
    uint32_t workers;    /* decode threads; 0 = number of online CPUs */
    uint32_t prefetch;   /* batches in the ring (bound on memory); 0 = workers + 2, or for
                            small batches as many as fit in FL_PREFETCH_SMALL_BYTES, at most
                            FL_PREFETCH_SMALL_MAX (fast batches need a deeper ring).
                            The caller may hold at most prefetch - 1 batches at once. */
    uint32_t out_height; /* output size; 0 = the dataset's fixed size */
    uint32_t out_width;
    uint32_t channels; /* 1 or 3; 0 = the dataset's */
    fl_augment augment;
    int flip;                   /* random horizontal flip with p = 0.5 */
    float scale_min, scale_max; /* RRC area fraction range (default 0.08, 1.0) */
    float ratio_min, ratio_max; /* RRC aspect ratio range (default 3/4, 4/3) */
    float center_ratio;         /* FL_AUG_CENTER crop ratio (default 0.875) */
    fl_order order;
    uint32_t quasi_block;  /* records per block for FL_ORDER_QUASI; 0 = 64, or fewer for
                              records over 16 KiB: as many as make ~1 MiB (at least 1) */
    uint32_t quasi_window; /* blocks mixed together (default 32) */
    uint64_t seed;
    uint32_t rank, world; /* data-parallel share: rank in [0, world); world 0 or 1 = all */
    int drop_last;        /* 1: drop the incomplete tail batch / uneven samples; 0: pad by
                             wrapping around so every rank gets the same number of full batches */
    fl_io_mode io;
    int direct;           /* O_DIRECT reads (for datasets larger than RAM): the 4 KiB-aligned
                             span covering each record is read. Where the filesystem refuses
                             O_DIRECT (tmpfs), buffered reads are used with one log line. */
    uint32_t queue_depth; /* io_uring reads in flight per worker, also the number of samples
                             a worker claims at once (default 32; 0 = 32; at most 4096) */
    fl_on_corrupt on_corrupt;
    int pinned;           /* 1 (default): cudaHostAlloc when a CUDA runtime can be loaded */
    int device;           /* -1 (default): host only; >= 0: also copy each batch to this GPU
                             on the loader's own stream (see fl_batch.device_images) */
    uint64_t start_epoch; /* resume position: first batch returned is (start_epoch, start_batch);
                             start_batch >= batches per epoch carries into later epochs */
    uint64_t start_batch;
    fl_log_fn log; /* may be NULL: nothing is logged */
    void *log_user;
    /* Fields added after 0.1.0 (fl_loader_options_init sets them; keep structs you allocate
     * yourself zero-filled or initialised by it). */
    uint32_t decode_flags; /* JPEG speed/accuracy flags of fl_image.h (FL_DECODE_FAST...);
                              0 (default): libjpeg's accurate IDCT and smooth upsampling.
                              Output stays deterministic for any value. */
    int64_t memory_max;    /* FL_IO_AUTO reads raw-pixel shard datasets of at most this many
                              bytes (on disk) into memory (FL_IO_MEMORY); 0 (default): 256 MiB
                              or 1/16 of physical memory, the smaller; negative: never */
    /* ABI 2 */
    float box_min_visible; /* BOXES fields: after the sample's crop, a box is kept when its
                              part inside the output is at least 1 output pixel wide and high
                              and holds at least this fraction (0..1) of the box's transformed
                              area; dropped boxes take their rows of the INT_LIST fields
                              aligned to them (`of`) along. Default 0.0 */
    /* ABI 3 */
    int64_t decode_memory; /* bytes of decode memory the workers share (see "Memory bound"
                              above): before decoding an image a worker reserves what the
                              decode can use (fl_decode_crop_resize_bytes, plus its masks) and
                              waits while the others' reservations leave too little; an image
                              needing more than the whole budget fails with FL_E_TOO_LARGE
                              naming the record, its size and the budget (the same whatever the
                              worker count). 0 (default): FL_DECODE_MEMORY_DEFAULT, 1 GiB, which
                              every image under the decoders' 100-megapixel limit fits except a
                              progressive CMYK one near it; negative: unlimited (each worker
                              alone bounded by the pixel limit) */
    /* ABI 4 */
    uint64_t max_batches; /* the loader's last batch: it delivers at most this many batches from
                             its start position (start_epoch, start_batch), and its workers
                             read and decode none past them (without it they fill the ring
                             ahead: `prefetch` batches past wherever the caller stops), then
                             stop; fl_loader_next after the last returns FL_E_RANGE. For a
                             caller that reads a known run of batches (a DataLoader worker's
                             share of an epoch). 0 (default): no end */
    /* ABI 5 */
    int64_t jpeg_index_memory; /* JPEG records: the first decodes of a record learn where its
                                  Huffman-coded rows start (fl_decoder_jpeg_index, about 1.5 KiB
                                  an image) and later epochs' crop decodes of it skip the bits
                                  above and beside their crop (same pixels; RRC decodes about
                                  1.3x as fast). Bytes those indexes may hold; records beyond
                                  that decode without one. 0 (default): 1/32 of physical
                                  memory, at most 512 MiB, divided by the loader processes of
                                  the node (as for the quasi extents); negative: off */
} fl_loader_options;

/* prefetch 0 with small batches: up to this many slots, within this many bytes of ring. */
#define FL_PREFETCH_SMALL_MAX   16
#define FL_PREFETCH_SMALL_BYTES (8ull << 20)

/* decode_memory's default, and the bytes per worker it does not count (see "Memory bound"). */
#define FL_DECODE_MEMORY_DEFAULT (1ll << 30)
#define FL_DECODE_SMALL          (1u << 20)
#define FL_DECODE_KEEP           (8u << 20)

/* Fill `o` with the defaults documented above. */
FL_API void fl_loader_options_init(fl_loader_options *o);

/* The region of a src_w x src_h source image that the loader decodes and resamples to its
 * output for the evaluation augmentations, so that a caller decoding images itself (a predict
 * command reading image files, say) gets the pixels the loader gives for the same image
 * (fl_decode_crop_resize over `crop` to out_width x out_height). Uses o->augment (FL_AUG_CENTER:
 * torchvision's Resize(shorter side = out / center_ratio) + CenterCrop(out) as one crop;
 * FL_AUG_NONE: the whole image), o->out_width, o->out_height and o->center_ratio.
 * Returns 0 with *crop filled (inside the image, at least 1 x 1), or FL_E_INVALID (in err) when
 * o->augment is a random one (FL_AUG_RRC, FL_AUG_OBJECT_CROP) or o->flip is set (their crop
 * depends on the sample's place in an epoch), when out_width, out_height, src_w or src_h is 0,
 * or when center_ratio is outside (0, 1] with FL_AUG_CENTER. */
FL_API int fl_loader_eval_crop(const fl_loader_options *o, uint32_t src_w, uint32_t src_h,
                               fl_rect *crop, fl_error *err);

/* One field of a batch: the values of one schema field for every sample, in pinned host memory
 * (and, in device mode, on the device). B is the batch size; M = the field's max_count (the
 * largest count of any record, from the manifest; at least 1); H x W the output size of the
 * image (out_height x out_width); C its channels.
 *   type          dtype     shape (ndim)               geometry applied
 *   IMAGE         uint8     [B, H, W, C] (4)           the sample's crop, resize and flip
 *   INT           int32     [B] (1)                    -
 *   FLOAT         float32   [B] (1)                    -
 *   INT_LIST      int32     [B, M] (2) + counts        rows of dropped boxes removed when `of`
 *   FLOAT_VECTOR  float32   [B, n] (2)                 -
 *   BOXES         float32   [B, M, 4] (3) + counts     x0 y0 x1 y1 in output pixels: transformed,
 *                                                      clipped, flipped, kept by box_min_visible
 *   MASK          uint8 or  [B, H, W] (3)              nearest neighbour through the image's crop,
 *                 uint16                               resize and flip (no new class id appears)
 *   NDARRAY       any       [B, shape...] (1 + ndim)   -
 *   BYTES, TEXT   uint8     [B, M] (2) + counts        - (TEXT: UTF-8, not NUL-terminated)
 * Variable fields (+ counts): counts[i] = rows of sample i that are real (boxes, ints, bytes);
 * rows counts[i] .. M-1 are zeros. Fixed fields have counts NULL. Arrays are row-major and
 * packed: data holds `bytes` bytes = B x (product of shape[1..]) x the dtype's size. The image
 * field's data is fl_batch.images; the label field's (the schema's first INT) is
 * fl_batch.labels. */
typedef struct fl_batch_field {
    const char *name; /* the schema's name ("image", "label", "boxes", ...) */
    fl_field_type type;
    fl_dtype dtype;
    uint32_t ndim; /* dimensions of shape, the batch's included */
    uint64_t shape[FL_MAX_DIMS + 2];
    void *data;             /* pinned host memory, 64-byte aligned */
    int32_t *counts;        /* variable fields: B counts; else NULL */
    uint64_t bytes;         /* bytes of data */
    void *device_data;      /* device mode: device copy of data, ready when `event` completes */
    int32_t *device_counts; /* device mode, variable fields: device copy of counts */
} fl_batch_field;

/* One batch. All pointers stay valid until fl_loader_release(batch). Every batch is full
 * (size == batch_size): the epoch's tail is padded or dropped (see drop_last).
 * Device mode: device_images/device_labels are filled by an asynchronous copy on `stream`;
 * order your work after `event` (cudaStreamWaitEvent) and release the batch only once that work
 * has finished reading them: the next copy into the same device buffers follows the release. */
typedef struct fl_batch {
    uint8_t *images;   /* size × height × width × channels uint8, NHWC, pinned host memory */
    int32_t *labels;   /* size labels */
    uint64_t *indices; /* size dataset record indices (traceability) */
    uint32_t size;     /* samples in this batch */
    uint32_t height, width, channels;
    uint64_t epoch;      /* epoch this batch belongs to */
    uint64_t batch;      /* batch number within the epoch */
    int last_in_epoch;   /* 1 for the epoch's final batch */
    uint32_t skipped;    /* corrupt records replaced in this batch (FL_CORRUPT_SKIP) */
    void *device_images; /* device mode: device copy of images, ready when `event` completes */
    void *device_labels; /* device mode: device copy of labels */
    void *event;         /* device mode: cudaEvent_t recorded after the copies */
    void *stream;        /* device mode: the loader's cudaStream_t */
    /* ABI 2 */
    uint32_t num_fields;          /* the schema's fields (fl_dataset_num_fields): 2 for a
                                     classification data set (image, label), whose arrays are images and
                                     labels above; 0..1 image fields (a data set without images has
                                     none: height = width = channels = 0 and images holds no bytes) */
    const fl_batch_field *fields; /* num_fields entries, schema order */
} fl_batch;

typedef struct fl_loader fl_loader;

/* Open the dataset at `path` and start the workers. The options are copied. On success *out
 * owns the loader (fl_loader_close); on failure *out is NULL and nothing is left open.
 * Errors: those of fl_dataset_open (a truncated or corrupt shard index: FL_E_TRUNCATED /
 * FL_E_FORMAT / FL_E_CHECKSUM naming the file), FL_E_INVALID (bad option, or a variable-size
 * dataset without out_height/out_width, or no full batch for this rank: the message says which),
 * FL_E_UNSUPPORTED (FL_IO_URING without io_uring, device mode without a CUDA runtime or GPU),
 * FL_E_CUDA, -ENOMEM, -errno opening a shard. */
FL_API int fl_loader_create(const char *path, const fl_loader_options *opt, fl_loader **out,
                            fl_error *err);

/* Block until the next batch in order is complete and return it. Epochs follow each other without
 * end; check batch->epoch / last_in_epoch. Errors: FL_E_CHECKSUM / FL_E_DECODE / FL_E_FORMAT /
 * FL_E_TRUNCATED / -EIO naming the shard file and record (with FL_CORRUPT_ERROR; when several
 * records of a batch are bad, the first in batch order is reported); after such an error the
 * loader can only be closed (next returns the same error again). FL_E_INVALID when the caller
 * holds every ring slot (release one and call again: not fatal). FL_E_RANGE once the
 * max_batches batches of the option were delivered (every later call too). */
FL_API int fl_loader_next(fl_loader *L, fl_batch **out, fl_error *err);

/* Give a batch's slot back to the ring. Batches may be released in any order and held as long as
 * the caller likes: the workers go on with the other slots (a held slot is never refilled); only
 * when every slot is held does fl_loader_next fail. A pointer that is not a held batch of L is
 * ignored. Device mode: waits for the batch's host-to-device copy. */
FL_API void fl_loader_release(fl_loader *L, fl_batch *b);

/* Decode worker threads started at create (the `workers` option; 0 there: the online CPUs). */
FL_API uint32_t fl_loader_workers(const fl_loader *L);

/* Batch slots in the ring: the `prefetch` option, or what its default gave (ABI 5). */
FL_API uint32_t fl_loader_prefetch(const fl_loader *L);

/* The max_batches option set after create, for a caller that learns how many batches it will
 * read from fl_loader_batches_per_epoch (fastload bench: its epochs): at most n batches (0: no
 * end) from the start position; the workers claim none past them from now on, and none past
 * them is delivered. ABI 5. */
FL_API void fl_loader_set_max_batches(fl_loader *L, uint64_t n);

/* Let only n (1 <= n <= fl_loader_workers(L)) decode workers work from now on: the others finish
 * the samples they hold and wait, holding none, until a later call lets them work again (all of
 * them work from create). For a caller whose own threads share the cores with decoding (a
 * trainer) and that sizes decoding to what its steps need. Batches stay byte-identical: order and
 * augmentation do not depend on which worker decodes. Any thread, any time. Returns 0, or
 * FL_E_INVALID (n out of range; nothing changed). */
FL_API int fl_loader_set_workers(fl_loader *L, uint32_t n, fl_error *err);

/* Batches each epoch yields for this rank, and samples they hold. */
FL_API uint64_t fl_loader_batches_per_epoch(const fl_loader *L);
FL_API uint64_t fl_loader_samples_per_epoch(const fl_loader *L);

/* Position of the next batch fl_loader_next will return: store it in a checkpoint and pass it back
 * as start_epoch/start_batch to continue exactly. */
FL_API void fl_loader_position(const fl_loader *L, uint64_t *epoch, uint64_t *batch);

/* Counters since create. Stage times are summed over workers and include batches prefetched
 * but not yet delivered. */
typedef struct fl_loader_stats {
    uint64_t images; /* samples delivered */
    uint64_t batches;
    uint64_t bytes_read;    /* stored bytes read (aligned spans with O_DIRECT) */
    uint64_t skipped;       /* corrupt records replaced in the delivered batches */
    double io_wait_s;       /* summed over workers: waiting for reads */
    double decode_s;        /* decompression + image decode */
    double augment_s;       /* crop/resize/flip outside the decoder */
    double slot_wait_s;     /* workers waiting for a free ring slot (consumer is the bottleneck) */
    double consumer_wait_s; /* consumer blocked in fl_loader_next (loader is the bottleneck) */
    double wall_s;          /* since create */
    const char *io_backend; /* "io_uring", "pread", "memory" (FL_IO_MEMORY), or "mmap"
                               (FL_IO_MMAP, LMDB) */
    uint64_t pinned_bytes;  /* ring memory */
    /* ABI 3 */
    uint64_t decode_memory_peak; /* the most decode memory reserved at once (decode_memory) */
    double decode_memory_wait_s; /* summed over workers: waiting for decode memory */
    /* ABI 5 */
    uint64_t jpeg_index_bytes; /* JPEG entry-point indexes held (jpeg_index_memory) */
} fl_loader_stats;

FL_API void fl_loader_stats_get(const fl_loader *L, fl_loader_stats *out);

/* How records are read, as decided at create, in words: the backend ("io_uring", "pread",
 * "memory", "mmap"), "O_DIRECT", "buffered" or "from memory", and why when FL_IO_AUTO chose
 * O_DIRECT, e.g. "io_uring, O_DIRECT (io auto: the data set (1100.0 MiB) is larger than the
 * page cache it can expect (256.0 MiB, cgroup memory limit))"; ", drop-behind" when buffered
 * reads of such a data set drop their pages once used; ", quasi blocks read as coalesced
 * extents (B records x W blocks a window)" for FL_ORDER_QUASI's block reads. Valid until
 * fl_loader_close. */
FL_API const char *fl_loader_io_describe(const fl_loader *L);

/* 1 when records are read with O_DIRECT: the `direct` option or FL_IO_AUTO's choice (0 where the
 * filesystem refused it and buffered reads are used). */
FL_API int fl_loader_direct(const fl_loader *L);

/* The dataset being read (class names, schema, count). */
FL_API const fl_dataset *fl_loader_dataset(const fl_loader *L);

/* Stop workers, free the ring, close the dataset. NULL allowed. Batches not released are freed. */
FL_API void fl_loader_close(fl_loader *L);

#ifdef __cplusplus
}
#endif
#endif
