#include "fl_dataset_impl.h"
#include "fl_lmdb.h"
int fl_lmdb_reader_open(fl_dataset *ds, const fl_manifest *m, fl_error *err) { return fl_error_set(err, FL_E_UNSUPPORTED, "lmdb todo"); }
void fl_lmdb_reader_close(fl_dataset *ds) {}
int fl_lmdb_writer_open(const char *dir, int resume, const void *dict, size_t dict_len, fl_lmdb_writer **out, uint64_t *existing, fl_error *err) { return fl_error_set(err, FL_E_UNSUPPORTED, "lmdb todo"); }
int fl_lmdb_writer_add(fl_lmdb_writer *lw, uint64_t index, const void *stored, size_t stored_len, uint32_t raw_len, int32_t label, uint32_t crc, const char *name, size_t name_len, uint32_t height, uint32_t width, fl_error *err) { return FL_E_UNSUPPORTED; }
int fl_lmdb_writer_finish(fl_lmdb_writer *lw, const char *manifest, size_t len, fl_error *err) { return FL_E_UNSUPPORTED; }
void fl_lmdb_writer_abort(fl_lmdb_writer *lw) {}
