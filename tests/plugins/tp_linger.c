/* Starts a process of its own (setsid) that holds every descriptor of the
 * child for 20 s, then exit(0)s in init: PLUGIN_EXITED(0) at stage init,
 * said when the child ends (an adversary's walkthrough got PLUGIN_TIMEOUT
 * after the whole sandbox deadline, the pipe held open). In init, not the
 * constructor: a fork inside dlopen hangs the child in glibc's locks
 * there, which is a timeout in truth. */
#include <unistd.h>
#define TP_NAME "test-linger"
#define TP_ON_INIT                                                                             \
    do {                                                                                       \
        if (fork() == 0) {                                                                     \
            setsid();                                                                          \
            sleep(20);                                                                         \
            _exit(0);                                                                          \
        }                                                                                      \
        _exit(0);                                                                              \
    } while (0)
#include "tp_common.h"
