/* Fills the whole error buffer without a terminating NUL and fails init: the
 * core terminates the buffer itself (no read past it). */
#include <string.h>
#define TP_NAME "test-overfill-err"
#define TP_ON_INIT                                                                             \
    do {                                                                                       \
        if (err && err_len) {                                                                  \
            memset(err, 'A', err_len);                                                         \
            return EDGERT_E_PLUGIN;                                                            \
        }                                                                                      \
    } while (0)
#include "tp_common.h"
