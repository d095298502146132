/* ABI 2, EDGERT_PACKED_MAPPABLE without packed_data and packed_map: must be
 * refused at load, INVALID_DESCRIPTOR (fail closed). */
#define TP_NAME "test-abi2-nomap"
#define TP_ABI_LO 1u
#define TP_ABI_HI 2u
#define TP_PACKED_FLAGS EDGERT_PACKED_MAPPABLE
#define TP_PACKED_LAYOUT "test-abi2-nomap/1"
#include "tp_common.h"
