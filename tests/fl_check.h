/* fl_check.h — the fatal assertion the C tests share: on failure print file:line and the condition,
 * exit 1 (the test program fails). Tests that count failures and go on keep their own macro. */
#ifndef FL_CHECK_H
#define FL_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#endif
