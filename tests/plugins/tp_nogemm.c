/* No GEMM capability while its manifest says runs_in_process: MISSING_CAPABILITY(gemm). */
#define TP_NAME "test-nogemm"
#define TP_CAPS EDGERT_CAP_EXPORT
#include "tp_common.h"
