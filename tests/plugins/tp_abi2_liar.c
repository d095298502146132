/* ABI 2, mappable on paper, but packed_data answers a misaligned pointer and
 * packed_map succeeds without a handle: loads, and the core refuses both
 * answers (EDGERT_E_PLUGIN) instead of passing them on. */
#define TP_NAME "test-abi2-liar"
#define TP_ABI_LO 1u
#define TP_ABI_HI 2u
#define TP_PACKED_FLAGS EDGERT_PACKED_MAPPABLE
#define TP_PACKED_LAYOUT "test-abi2-liar/1"
#define TP_PACKED_FNS 1
#include "tp_common.h"
