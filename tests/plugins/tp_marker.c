/* Leaves a mark when its code runs at all: its constructor appends a line to
 * the file $EDGERT_TEST_MARKER names. The checksum race test swaps it in for
 * tp_good under the manifest's checksum of tp_good: its code must never run. */
#include <stdio.h>
#include <stdlib.h>
#define TP_NAME "test-good"
#define TP_ON_LOAD                                                                             \
    do {                                                                                       \
        const char *tp_mark = getenv("EDGERT_TEST_MARKER");                                    \
        FILE *tp_f = tp_mark ? fopen(tp_mark, "a") : NULL;                                     \
        if (tp_f) {                                                                            \
            fputs("the swapped-in library ran\n", tp_f);                                       \
            fclose(tp_f);                                                                      \
        }                                                                                      \
    } while (0)
#include "tp_common.h"
