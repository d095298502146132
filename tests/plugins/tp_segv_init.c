/* Dereferences NULL in init: PLUGIN_CRASHED(SIGSEGV) at stage init. */
#define TP_NAME "test-segv-init"
#define TP_ON_INIT (*(volatile int *)(volatile void *)0 = 1)
#include "tp_common.h"
