/* init always fails: INIT_FAILED. */
#define TP_NAME "test-init-fail"
#define TP_INIT_FAILS 1
#include "tp_common.h"
