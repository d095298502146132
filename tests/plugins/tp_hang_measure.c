/* The honest kernel, which never returns from a GEMM with more than 64
 * output columns: its self-test passes (2 columns), the first-contact
 * measurement (512 columns and more, however slow or fast the build) hangs:
 * PLUGIN_TIMEOUT at the quick measurement. */
#include <unistd.h>
#define TP_NAME "test-hang-measure"
#define TP_ON_GEMM                                                                                 \
    do {                                                                                           \
        if (((const tp_packed *)packed)->n > 64u)                                                  \
            for (;;)                                                                               \
                pause();                                                                           \
    } while (0)
#include "tp_common.h"
