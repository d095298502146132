/* Writes to stdout in its constructor and init: `--json` must stay valid. */
#include <stdio.h>
#define TP_NAME "test-chatty"
#define TP_ON_LOAD (printf("chatty plugin constructor says hello\n"), fflush(stdout))
#define TP_ON_INIT (printf("chatty plugin init says hello\n"), fflush(stdout))
#include "tp_common.h"
