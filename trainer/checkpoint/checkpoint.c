/* checkpoint.c — serialise, verify and atomically write trainfast checkpoints (checkpoint.h); the
 * run's config section is checkpoint_config.c. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_dataset.h"
#include "fl_file.h"

/* checkpoint_config.c: the config section. encode: out NULL = only its length. */
int tf_ckpt_config_encode(const tf_run_config *c, uint8_t *out, size_t *len);
int tf_ckpt_config_decode(const uint8_t *b, size_t len, const char *name, tf_run_config *c,
                          fl_error *err);
int tf_ckpt_config_decode_v1(const char *text, size_t len, const char *name, tf_run_config *c,
                             fl_error *err);

static const char MAGIC[8] = {'T', 'F', 'C', 'K', 'P', 'T', '\r', '\n'};

#define FLAG_EMA 1u

/* fixed header, written field by field (little-endian hosts only: x86-64/aarch64) */
typedef struct __attribute__((packed)) tf_ckpt_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    char model[32];
    uint32_t spec_id;
    int32_t in_c, in_h, in_w, num_classes;
    int32_t width, residual, gelu;
    float mean[3], std[3];
    int64_t param_count, stat_count;
    uint32_t flags;
    uint32_t accum_count;
    uint64_t step, micro_step;
    float loss_scale;
    uint32_t good_steps;
    uint64_t skipped_steps;
    uint64_t epoch, batch, seed;
    double epoch_loss_sum;
    uint64_t epoch_correct, epoch_seen;
    double wall_s;
    uint64_t config_len;
} tf_ckpt_header;

int tf_checkpoint_alloc(tf_checkpoint *ck, int64_t P, int64_t S, int has_ema)
{
    memset(ck, 0, sizeof *ck);
    if (P < 0 || S < 0)
        return -EINVAL;
    size_t n = (size_t)(3 * P + S + (has_ema ? P + S : 0));
    ck->storage = calloc(n ? n : 1, sizeof(float));
    ck->version = TF_CKPT_VERSION;
    if (!ck->storage) {
        tf_checkpoint_free(ck);
        return -ENOMEM;
    }
    ck->param_count = P;
    ck->stat_count = S;
    ck->has_ema = has_ema;
    float *p = ck->storage;
    ck->st.params = p;
    p += P;
    ck->st.momentum = p;
    p += P;
    ck->st.grad_accum = p;
    p += P;
    ck->st.stats = p;
    p += S;
    if (has_ema) {
        ck->st.ema_params = p;
        p += P;
        ck->st.ema_stats = p;
    }
    ck->st.loss_scale = 1.0f;
    return 0;
}

int tf_checkpoint_for_model(tf_checkpoint *ck, const tf_model_spec *spec,
                            const tf_model_options *mopt, int has_ema)
{
    int rc = tf_checkpoint_alloc(ck, spec->param_count, spec->stat_count, has_ema);
    if (rc)
        return rc;
    snprintf(ck->model, sizeof ck->model, "%s", spec->name);
    ck->spec_id = spec->spec_id;
    ck->in_c = spec->in_c;
    ck->in_h = spec->in_h;
    ck->in_w = spec->in_w;
    ck->num_classes = spec->num_classes;
    if (mopt)
        ck->mopt = *mopt;
    memcpy(ck->mean, spec->mean, sizeof spec->mean);
    memcpy(ck->std, spec->std, sizeof spec->std);
    return 0;
}

void tf_checkpoint_free(tf_checkpoint *ck)
{
    if (!ck)
        return;
    free(ck->storage);
    free(ck->v1_config);
    tf_run_config_free(&ck->cfg);
    memset(ck, 0, sizeof *ck);
}

static size_t array_floats(int64_t P, int64_t S, int ema)
{
    return (size_t)(3 * P + S + (ema ? P + S : 0));
}

int tf_checkpoint_serialize(const tf_checkpoint *ck, uint8_t **out, size_t *len)
{
    tf_ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    const int v1 = ck->version == 1;
    if (ck->version && ck->version != TF_CKPT_VERSION && !v1)
        return -EINVAL;
    h.version = v1 ? 1 : TF_CKPT_VERSION;
    h.header_bytes = sizeof h;
    memcpy(h.model, ck->model, sizeof h.model);
    h.spec_id = ck->spec_id;
    h.in_c = ck->in_c;
    h.in_h = ck->in_h;
    h.in_w = ck->in_w;
    h.num_classes = ck->num_classes;
    h.width = ck->mopt.width;
    h.residual = ck->mopt.residual;
    h.gelu = ck->mopt.gelu;
    memcpy(h.mean, ck->mean, sizeof h.mean);
    memcpy(h.std, ck->std, sizeof h.std);
    h.param_count = ck->param_count;
    h.stat_count = ck->stat_count;
    h.flags = ck->has_ema ? FLAG_EMA : 0;
    h.accum_count = ck->st.accum_count;
    h.step = ck->st.step;
    h.micro_step = ck->st.micro_step;
    h.loss_scale = ck->st.loss_scale;
    h.good_steps = ck->st.good_steps;
    h.skipped_steps = ck->st.skipped_steps;
    h.epoch = ck->epoch;
    h.batch = ck->batch;
    h.seed = ck->seed;
    h.epoch_loss_sum = ck->epoch_loss_sum;
    h.epoch_correct = ck->epoch_correct;
    h.epoch_seen = ck->epoch_seen;
    h.wall_s = ck->wall_s;
    size_t clen = v1 ? (ck->v1_config ? strlen(ck->v1_config) : 0) : 0;
    if (!v1 && tf_ckpt_config_encode(&ck->cfg, NULL, &clen))
        return -EINVAL;
    h.config_len = clen;
    size_t arr = array_floats(ck->param_count, ck->stat_count, ck->has_ema) * sizeof(float);
    size_t total = sizeof h + arr + clen + 4;
    uint8_t *buf = malloc(total);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, ck->storage, arr);
    if (v1 && clen)
        memcpy(buf + sizeof h + arr, ck->v1_config, clen);
    else if (!v1)
        tf_ckpt_config_encode(&ck->cfg, buf + sizeof h + arr, &clen);
    uint32_t crc = fl_crc32c(0, buf, total - 4);
    memcpy(buf + total - 4, &crc, 4);
    *out = buf;
    *len = total;
    return 0;
}

static void from_header(const tf_ckpt_header *h, tf_checkpoint *ck);

int tf_checkpoint_parse(const void *data, size_t len, const char *name, tf_checkpoint *ck,
                        fl_error *err)
{
    memset(ck, 0, sizeof *ck);
    const uint8_t *buf = data;
    if (!name)
        name = "checkpoint";
    if (len < 16 || memcmp(buf, MAGIC, 8) != 0)
        return fl_error_set(err, FL_E_FORMAT, "%s: not a trainfast checkpoint (bad magic)", name);
    uint32_t version, hbytes;
    memcpy(&version, buf + 8, 4);
    memcpy(&hbytes, buf + 12, 4);
    if (version < TF_CKPT_VERSION_MIN || version > TF_CKPT_VERSION)
        return fl_error_set(err, FL_E_VERSION,
                            "%s: checkpoint version %u, this trainfast reads versions %u to %u",
                            name, version, TF_CKPT_VERSION_MIN, TF_CKPT_VERSION);
    if (hbytes != sizeof(tf_ckpt_header))
        return fl_error_set(err, FL_E_FORMAT, "%s: header size %u, expected %zu", name, hbytes,
                            sizeof(tf_ckpt_header));
    if (len < sizeof(tf_ckpt_header) + 4)
        return fl_error_set(err, FL_E_TRUNCATED, "%s: truncated: %zu bytes, header needs %zu", name,
                            len, sizeof(tf_ckpt_header) + 4);
    tf_ckpt_header h;
    memcpy(&h, buf, sizeof h);
    /* bound the declared sizes before any multiplication can overflow */
    const int64_t LIM = (int64_t)1 << 36;
    if (h.param_count < 0 || h.param_count > LIM || h.stat_count < 0 || h.stat_count > LIM ||
        h.config_len > ((uint64_t)1 << 30) || (h.flags & ~FLAG_EMA))
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: implausible sizes (params %" PRId64 ", stats %" PRId64
                            ", config %" PRIu64 ", flags %#x)",
                            name, h.param_count, h.stat_count, h.config_len, h.flags);
    int ema = (h.flags & FLAG_EMA) != 0;
    uint64_t arr = (uint64_t)array_floats(h.param_count, h.stat_count, ema) * 4u;
    uint64_t need = sizeof h + arr + h.config_len + 4;
    if (len < need)
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s: truncated: %zu bytes, its header declares %" PRIu64
                            " (unfinished write?)",
                            name, len, need);
    if (len > need)
        return fl_error_set(err, FL_E_FORMAT, "%s: %zu bytes, header declares %" PRIu64, name, len,
                            need);
    uint32_t want, got = fl_crc32c(0, buf, len - 4);
    memcpy(&want, buf + len - 4, 4);
    if (got != want)
        return fl_error_set(err, FL_E_CHECKSUM,
                            "%s: checksum mismatch (stored %08x, computed %08x): file is damaged",
                            name, want, got);
    if (h.model[sizeof h.model - 1] != 0 || h.in_c <= 0 || h.in_h <= 0 || h.in_w <= 0 ||
        h.num_classes < 2)
        return fl_error_set(err, FL_E_FORMAT, "%s: bad model description", name);
    /* the loader delivers at most 1 GiB a sample image (a record's limit): a model whose input
     * is larger could never be fed, so the file is damaged or crafted */
    if ((uint64_t)h.in_c * (uint64_t)h.in_h * (uint64_t)h.in_w > (1ull << 30))
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: model input %dx%dx%d is larger than any image "
                            "the loader can deliver (1 GiB a sample): damaged or crafted",
                            name, h.in_c, h.in_h, h.in_w);
    if (tf_checkpoint_alloc(ck, h.param_count, h.stat_count, ema))
        return fl_error_set(err, -ENOMEM, "%s: out of memory", name);
    const uint8_t *cbuf = buf + sizeof h + arr;
    int rc;
    if (version == 1) {
        /* the JSON text as read, written back by serialize (a NUL in it ends the text) */
        ck->v1_config = malloc(h.config_len + 1);
        if (!ck->v1_config)
            rc = fl_error_set(err, -ENOMEM, "%s: out of memory", name);
        else if (memchr(cbuf, 0, h.config_len))
            rc = fl_error_set(err, FL_E_FORMAT, "%s: a NUL byte in its config", name);
        else
            rc = tf_ckpt_config_decode_v1((const char *)cbuf, h.config_len, name, &ck->cfg, err);
        if (ck->v1_config) {
            memcpy(ck->v1_config, cbuf, h.config_len);
            ck->v1_config[h.config_len] = 0;
        }
    } else {
        rc = tf_ckpt_config_decode(cbuf, h.config_len, name, &ck->cfg, err);
    }
    if (rc) {
        tf_checkpoint_free(ck);
        return rc;
    }
    ck->version = version;
    memcpy(ck->storage, buf + sizeof h, arr);
    from_header(&h, ck);
    return 0;
}

/* the header's fields into ck (the arrays and the config are the caller's) */
static void from_header(const tf_ckpt_header *hp, tf_checkpoint *ck)
{
    const tf_ckpt_header h = *hp;
    memcpy(ck->model, h.model, sizeof ck->model);
    ck->spec_id = h.spec_id;
    ck->in_c = h.in_c;
    ck->in_h = h.in_h;
    ck->in_w = h.in_w;
    ck->num_classes = h.num_classes;
    ck->mopt.width = h.width;
    ck->mopt.residual = h.residual;
    ck->mopt.gelu = h.gelu;
    memcpy(ck->mean, h.mean, sizeof ck->mean);
    memcpy(ck->std, h.std, sizeof ck->std);
    ck->st.accum_count = h.accum_count;
    ck->st.step = h.step;
    ck->st.micro_step = h.micro_step;
    ck->st.loss_scale = h.loss_scale;
    ck->st.good_steps = h.good_steps;
    ck->st.skipped_steps = h.skipped_steps;
    ck->epoch = h.epoch;
    ck->batch = h.batch;
    ck->seed = h.seed;
    ck->epoch_loss_sum = h.epoch_loss_sum;
    ck->epoch_correct = h.epoch_correct;
    ck->epoch_seen = h.epoch_seen;
    ck->wall_s = h.wall_s;
}

/* step number of "ckpt-<digits>.tfc", or -1 */
static long long ckpt_step(const char *name)
{
    if (strncmp(name, "ckpt-", 5) != 0)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(name + 5, &end, 10);
    if (errno || end == name + 5 || strcmp(end, ".tfc") != 0 || v < 0)
        return -1;
    return v;
}

/* newest-first list of checkpoint steps in dir */
static int list_steps(const char *dir, long long **out, int *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long s = ckpt_step(e->d_name);
        if (s < 0)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            long long *np = realloc(*out, sizeof(long long) * (size_t)cap);
            if (!np) {
                closedir(d);
                return -ENOMEM;
            }
            *out = np;
        }
        (*out)[(*n)++] = s;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort, descending */
        for (int j = i; j > 0 && (*out)[j] > (*out)[j - 1]; j--) {
            long long t = (*out)[j];
            (*out)[j] = (*out)[j - 1];
            (*out)[j - 1] = t;
        }
    return 0;
}

/* Take DIR/.trainfast.lock (an exclusive flock, held through fd until the process ends; the
 * file stays, holding the pid of its last holder, for the message of a run that finds it taken). */
static int dir_lock(const char *dir, int *lock_fd, fl_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, TF_CKPT_LOCK_NAME);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
        return fl_error_set(err, -errno, "--checkpoint %s: cannot create the lock file %s: %s", dir,
                            path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return fl_error_set(err, -EINVAL, "--checkpoint %s: %s is not a regular file: move it away",
                            dir, path);
    }
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        char b[32] = "";
        ssize_t n = e == EWOULDBLOCK ? pread(fd, b, sizeof b - 1, 0) : -1;
        close(fd);
        if (e != EWOULDBLOCK)
            return fl_error_set(err, -e, "--checkpoint %s: cannot lock %s: %s", dir, path,
                                strerror(e));
        long pid = n > 0 ? strtol(b, NULL, 10) : 0;
        char who[48] = "another process";
        if (pid > 0)
            snprintf(who, sizeof who, "process %ld", pid);
        return fl_error_set(err, -EBUSY,
                            "--checkpoint %s is in use by another training run (%s; lock: %s): "
                            "two runs in one folder overwrite and delete each other's "
                            "checkpoints; give each run its own --checkpoint folder",
                            dir, who, path);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) != n && ftruncate(fd, 0)) {
        /* the lock works without the pid (a full disk): the message then says "another" */
    }
    *lock_fd = fd;
    return 0;
}

int tf_checkpoint_dir_check(const char *dir, int fresh, int *lock_fd, fl_error *err)
{
    *lock_fd = -1;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return fl_error_set(err, -errno, "--checkpoint %s: cannot create the folder: %s", dir,
                            strerror(errno));
    /* access(2) is no answer for root nor for a read-only mount: try a real file */
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.ckpt-probe-%ld.tmp", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return fl_error_set(err, -errno, "--checkpoint %s: cannot write checkpoints there: %s", dir,
                            strerror(errno));
    close(fd);
    unlink(probe);
    int rc = dir_lock(dir, lock_fd, err);
    if (rc || !fresh)
        return rc;
    /* a new run among an earlier run's checkpoints: those of later steps would stay the newest
     * (what --resume and eval DIR take), the others would be deleted as it writes its own */
    long long *steps;
    int n;
    if (list_steps(dir, &steps, &n) == 0 && n > 0) {
        long long newest = steps[0];
        free(steps);
        close(*lock_fd);
        *lock_fd = -1;
        return fl_error_set(err, -EEXIST,
                            "--checkpoint %s already holds checkpoints of an earlier run (newest: "
                            "ckpt-%08lld.tfc): --resume continues that run; to start a new one, "
                            "choose an empty folder (or move those checkpoints away)",
                            dir, newest);
    }
    free(steps); /* none (NULL) */
    return 0;
}

int tf_checkpoint_save(const char *dir, const tf_checkpoint *ck, char *path_out, size_t cap,
                       fl_error *err)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return fl_error_set(err, -errno, "%s: cannot create checkpoint directory: %s", dir,
                            strerror(errno));
    char path[4096];
    snprintf(path, sizeof path, "%s/ckpt-%08llu.tfc", dir, (unsigned long long)ck->st.micro_step);
    uint8_t *buf;
    size_t len;
    if (tf_checkpoint_serialize(ck, &buf, &len))
        return fl_error_set(err, -ENOMEM, "%s: out of memory serialising checkpoint", path);
    fl_write_step step;
    int rc = fl_file_replace(path, buf, len, 0666, &step);
    free(buf);
    if (rc && step == FL_WRITE_SYNC_DIR)
        return fl_error_set(err, rc,
                            "%s: cannot sync the checkpoint directory after writing %s: %s", dir,
                            path, strerror(-rc));
    if (rc)
        return fl_error_set(err, rc, "%s: writing checkpoint failed (%s): %s", path,
                            fl_write_step_name(step), strerror(-rc));
    if (path_out)
        snprintf(path_out, cap, "%s", path);
    /* leftovers of a run killed mid-write (never renamed, so never valid checkpoints) */
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (strncmp(e->d_name, "ckpt-", 5) == 0 && l > 8 &&
                strcmp(e->d_name + l - 8, ".tfc.tmp") == 0) {
                char old[4400];
                snprintf(old, sizeof old, "%s/%s", dir, e->d_name);
                unlink(old);
            }
        }
        closedir(d);
    }
    /* keep the one just written and its predecessor; older ones go. Newer ones (damaged files
     * a --resume skipped) stay: counting them among "the newest two" would delete the one just
     * written and the one the run resumed from */
    long long *steps;
    int n;
    if (list_steps(dir, &steps, &n) == 0) {
        int first = 0;
        while (first < n && steps[first] > (long long)ck->st.micro_step)
            first++;
        for (int i = first + 2; i < n; i++) {
            char old[4096];
            snprintf(old, sizeof old, "%s/ckpt-%08llu.tfc", dir, steps[i]);
            unlink(old);
        }
        free(steps);
    }
    return 0;
}

int tf_checkpoint_load(const char *path, tf_checkpoint *ck, fl_error *err)
{
    memset(ck, 0, sizeof *ck);
    uint8_t *buf = NULL;
    size_t got = 0;
    fl_read_step step;
    /* a file that shrank since fstat is kept short: parse reports it as truncated; a FIFO or
     * device in a checkpoint's place is refused without blocking in open */
    int rc = fl_read_file_at(AT_FDCWD, path, SIZE_MAX,
                             FL_READ_SHORT_OK | FL_READ_REGULAR | FL_READ_NONBLOCK, &buf, NULL,
                             &got, &step);
    if (rc) {
        free(buf);
        if (step == FL_READ_NOT_REGULAR)
            return fl_error_set(err, FL_E_FORMAT, "%s: not a regular file", path);
        if (step == FL_READ_ALLOC)
            return fl_error_set(err, -ENOMEM, "%s: out of memory (%zu bytes)", path, got);
        if (step == FL_READ_READ) /* an I/O error is not a damaged file: say which it was */
            return fl_error_set(err, rc, "%s: read error at byte %zu: %s", path, got,
                                strerror(-rc));
        return fl_error_set(err, rc, "%s: %s", path, strerror(-rc));
    }
    rc = tf_checkpoint_parse(buf, got, path, ck, err);
    free(buf);
    return rc;
}

int tf_checkpoint_load_latest(const char *dir, tf_checkpoint *ck, char *path_out, size_t cap,
                              char *skipped, size_t skipped_cap, fl_error *err)
{
    memset(ck, 0, sizeof *ck);
    if (skipped && skipped_cap)
        skipped[0] = 0;
    long long *steps;
    int n;
    int rc = list_steps(dir, &steps, &n);
    if (rc)
        return fl_error_set(err, rc, "%s: %s", dir, strerror(-rc));
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ckpt-%08llu.tfc", dir, steps[i]);
        fl_error e;
        if (tf_checkpoint_load(path, ck, &e) == 0) {
            if (path_out)
                snprintf(path_out, cap, "%s", path);
            free(steps);
            return 0;
        }
        if (skipped && skipped_cap) {
            size_t l = strlen(skipped);
            snprintf(skipped + l, skipped_cap - l, "%s%s", l ? "\n" : "", e.msg);
        }
    }
    free(steps);
    return fl_error_set(err, -ENOENT, "%s: no valid checkpoint (%d damaged ones skipped)", dir, n);
}
