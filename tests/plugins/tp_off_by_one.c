/*
 * tests/plugins/tp_off_by_one.c — "test-off-by-one": a vendor's mistake as it
 * was found, a GEMM that leaves the last group of K out, with a self-test
 * that checks nothing. It loads and self-tests; first contact's arithmetic
 * check (core/sandbox/sandbox_check.c) must make it WRONG_RESULTS.
 *
 * tp_common.h with its TP_SKIP_LAST_GROUP and TP_SELFTEST_CHECKS_NOTHING knobs.
 */
#define TP_NAME "test-off-by-one"
#define TP_SKIP_LAST_GROUP 1
#define TP_SELFTEST_CHECKS_NOTHING 1
#define TP_DESCRIBE "test plugin with a deliberate bug: the last group of K left out"
#include "tp_common.h"
