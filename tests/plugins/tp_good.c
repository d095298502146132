#define TP_NAME "test-good"
#include "tp_common.h"
