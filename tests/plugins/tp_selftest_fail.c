/* Self-test always fails: SELF_TEST_FAILED. */
#define TP_NAME "test-selftest-fail"
#define TP_SELFTEST_FAILS 1
#include "tp_common.h"
