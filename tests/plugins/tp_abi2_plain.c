/* ABI 1 and 2, without a mappable packed form (packed_flags 0): loads with
 * ABI 2, and its packed weights cannot be mapped. */
#define TP_NAME "test-abi2-plain"
#define TP_ABI_LO 1u
#define TP_ABI_HI 2u
#include "tp_common.h"
