/* Starts a thread in init that keeps running this library's code after fini
 * and after the core unloads the plugin: with RTLD_NODELETE its code stays
 * mapped, so nothing crashes later. (The self-test passes; the test forces
 * an unload by disabling... it simply closes the handle and waits.) */
#include <pthread.h>
#include <time.h>
static volatile unsigned long tp_stray_spins;
static void *tp_stray_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        tp_stray_spins++;
    }
    return NULL;
}
static void tp_start_stray(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, tp_stray_main, NULL) == 0)
        pthread_detach(t);
}
#define TP_NAME "test-stray-thread"
#define TP_ON_INIT tp_start_stray()
#include "tp_common.h"
