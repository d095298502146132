/* Logs from init at level 99, which is no edgert_log_level, and at 0: the
 * core passes neither on as a level the integrator's callback would not
 * know (test_loader: test_plugin_log_levels). */
#define TP_NAME "test-log-level"
#define TP_ON_INIT                                                                                \
    do {                                                                                          \
        host->log(host->host_ctx, (edgert_log_level)99, "a made-up level");                     \
        host->log(host->host_ctx, (edgert_log_level)0, "level zero");                            \
    } while (0)
#include "tp_common.h"
