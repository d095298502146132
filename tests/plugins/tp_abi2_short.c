/* Answers ABI 2 with a descriptor of ABI 1's size (built against an ABI-1
 * plugin.h, say, but claiming 2): must be refused with ABI_UNSUPPORTED. */
#define TP_NAME "test-abi2-short"
#define TP_ABI_LO 1u
#define TP_ABI_HI 2u
#define TP_STRUCT_SIZE EDGERT_PLUGIN_V1_SIZE
#include "tp_common.h"
