/* The honest kernel with a 200 ms pause in every gemm: measurably slower
 * than anything, whatever its manifest claims (evidence beats claims). */
#include <time.h>
#define TP_NAME "test-slow"
#define TP_ON_GEMM nanosleep(&(struct timespec){0, 200000000}, NULL)
#include "tp_common.h"
