/* Closes every descriptor it did not open, first contact's pipe among them,
 * then never returns from its self-test: the child's end of the pipe is not
 * its end, so this is PLUGIN_TIMEOUT at stage self-test, not a parent
 * waiting for ever. */
#include <unistd.h>
#define TP_NAME "test-close-loop"
#define TP_ON_SELF_TEST                                                                          \
    for (int tp_fd = 3; tp_fd < 4096; tp_fd++)                                                   \
        close(tp_fd);                                                                            \
    for (volatile unsigned long tp_i = 0;; tp_i++)
#include "tp_common.h"
