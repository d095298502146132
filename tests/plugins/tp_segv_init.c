/* Writes to an unmapped page in init: PLUGIN_CRASHED(SIGSEGV) at stage init.
 * Address 16 through a volatile, not NULL: UBSan's null check would report a
 * store to NULL and exit(1) before the fault, and the test wants the real
 * signal; the volatile keeps the compiler from seeing the address. */
#define TP_NAME "test-segv-init"
#define TP_ON_INIT                                                                                 \
    do {                                                                                           \
        volatile unsigned long bad_address = 16;                                                   \
        *(volatile int *)bad_address = 1;                                                          \
    } while (0)
#include "tp_common.h"
