/* Calls abort() in its self-test: PLUGIN_CRASHED(SIGABRT) at stage self-test. */
#define TP_NAME "test-abort-self-test"
#define TP_ON_SELF_TEST abort()
#include "tp_common.h"
