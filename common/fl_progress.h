/* fl_progress.h — human-readable output for the command-line tools (common/): byte counts, counts,
 * rates and durations as short strings, and a one-line progress bar with rate and ETA on stderr.
 * Used by packdata, fastload and trainfast (and by fl_cli's option messages). These may print;
 * none of them exits. Built as the static library fl_progress (not part of libfastload). */
#ifndef FL_PROGRESS_H
#define FL_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Format a byte count: "512 B", "1.5 KiB", "23.4 MiB", "118 MiB" (one decimal below 100). Writes at
 * most `cap` bytes (NUL-terminated) into buf and returns buf. */
char *fl_cli_human_bytes(uint64_t bytes, char *buf, size_t cap);
/* Format a count with an SI prefix: "950", "2.3 k", "1.2 M", "118 k". Returns buf. */
char *fl_cli_human_count(double n, char *buf, size_t cap);
/* Format a rate: fl_cli_human_rate(2345, "img/s") → "2.3 k img/s"; with unit "B/s" the binary
 * byte form is used ("12.3 MiB/s"). Returns buf. */
char *fl_cli_human_rate(double per_second, const char *unit, char *buf, size_t cap);
/* Format a duration: "0.42 s", "12.3 s", "4m 05s", "2h 03m". Returns buf. */
char *fl_cli_human_duration(double seconds, char *buf, size_t cap);

/* ---- progress bar --------------------------------------------------------------------------
 * Drawn on stderr, redrawn at most ~10 times a second, only when stderr is a terminal and
 * `quiet` is 0; otherwise every call is a cheap no-op. Not thread-safe: one thread updates. */
typedef struct fl_progress fl_progress;

/* Start a bar labelled `label` for `total` units ("img"; 0 total = unknown: no ETA, no bar).
 * Returns NULL on allocation failure; every fl_progress_* function accepts NULL. */
fl_progress *fl_progress_start(const char *label, uint64_t total, const char *unit, int quiet);
/* Report `done` units completed so far (absolute, not a delta). */
void fl_progress_update(fl_progress *p, uint64_t done);
/* Erase the bar line and free. */
void fl_progress_finish(fl_progress *p);
/* Non-zero when this progress bar is actually drawing. */
int fl_progress_active(const fl_progress *p);

#ifdef __cplusplus
}
#endif
#endif
