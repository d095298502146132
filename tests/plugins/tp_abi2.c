/* Speaks only ABI 2..3: must be refused with ABI_UNSUPPORTED. */
#define TP_NAME "test-abi2"
#define TP_ABI_LO 2u
#define TP_ABI_HI 3u
#include "tp_common.h"
