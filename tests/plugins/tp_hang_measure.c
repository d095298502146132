/* The honest kernel, which never returns from a GEMM with more than 1,000
 * output columns: its self-test passes (2 columns), the first-contact
 * measurement (thousands of columns) hangs. The verdict stands; the plugin
 * is eligible and unmeasured. */
#include <unistd.h>
#define TP_NAME "test-hang-measure"
#define TP_ON_GEMM                                                                                 \
    do {                                                                                           \
        if (((const tp_packed *)packed)->n > 1000u)                                                \
            for (;;)                                                                               \
                pause();                                                                           \
    } while (0)
#include "tp_common.h"
