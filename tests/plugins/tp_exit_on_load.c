/* Calls exit(0) in its constructor: PLUGIN_EXITED(0) at stage dlopen (it
 * used to end edgert with exit code 0 and empty output). */
#define TP_NAME "test-exit-on-load"
#define TP_ON_LOAD exit(0)
#include "tp_common.h"
