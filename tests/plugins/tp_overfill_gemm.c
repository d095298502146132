/* Fills the whole error buffer without a terminating NUL and fails a gemm
 * with m = 7 (its self-test uses other m): the core terminates the buffer
 * after every plugin call, so nothing reads past it (ASan would see it). */
#include <string.h>
#define TP_NAME "test-overfill-gemm"
#define TP_ON_GEMM                                                                             \
    do {                                                                                       \
        if (a && a->m == 7u && err && err_len) {                                               \
            memset(err, 'B', err_len);                                                         \
            return EDGERT_E_PLUGIN;                                                            \
        }                                                                                      \
    } while (0)
#include "tp_common.h"
