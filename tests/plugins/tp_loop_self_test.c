/* Never returns from its self-test: PLUGIN_TIMEOUT at stage self-test. */
#define TP_NAME "test-loop-self-test"
#define TP_ON_SELF_TEST for (volatile unsigned long tp_i = 0;; tp_i++)
#include "tp_common.h"
