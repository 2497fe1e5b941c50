/* fuzz_trainlog.c — libFuzzer harness for trainfast's training-log reader and the HTML report
 * drawn from it (trainer/report/report_log.h): any byte string must either parse and draw a page,
 * or fail with an error code and a message naming file:line; never crash, hang or read out of
 * bounds (absurd numbers must not break the charts' axes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "report_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tf_log g;
    fl_error err;
    if (tf_log_parse((const char *)data, size, "fuzz.jsonl", "fuzz<&>", &g, &err) == 0) {
        fl_tbuf page = {0};
        tf_report_html(&g, 1, "t", &page);
        /* the run's name is escaped wherever it is written */
        if (!page.failed && strstr(page.data, "fuzz<&>"))
            abort();
        fl_tbuf_free(&page);
        tf_log_free(&g);
    } else if (err.code >= 0 || strncmp(err.msg, "fuzz.jsonl", 10) != 0) {
        abort();
    }
    return 0;
}
