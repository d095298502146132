/*
 * tests/sandbox/test_sandbox_orphan.c — first contact's child ends with its host.
 *
 * A host killed outright (SIGKILL, the OOM killer) while first contact's
 * child runs a plugin that never returns no longer holds that child's
 * deadline: before core/sandbox/sandbox.c set PR_SET_PDEATHSIG, the child looped on
 * with nobody to stop it, holding the host's descriptors (the lock on
 * `edgert export`'s work folder among them, tools/workdir.h). Here a host
 * process opens a handle on a plugin that loops in its self-test under a
 * 10-minute limit, is SIGKILLed once its child exists, and the child must be
 * gone within seconds.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "edgert/edgert.h"
#include "test_util.h"

/* A child of process pid (of any of its threads), or 0 when it has none.
 * -1 when the kernel does not list children (/proc/PID/task/TID/children). */
static pid_t child_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    pid_t found = 0;
    int listed = 0;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char file[320];
        snprintf(file, sizeof file, "/proc/%ld/task/%s/children", (long)pid, e->d_name);
        FILE *f = fopen(file, "r");
        if (!f)
            continue;
        listed = 1;
        long c = 0;
        if (fscanf(f, "%ld", &c) == 1)
            found = (pid_t)c;
        fclose(f);
    }
    closedir(d);
    return found ? found : listed ? 0 : -1;
}

/* Process pid has ended: no such process, or a zombie waiting for a reaper
 * (a container's pid 1 may never reap it). */
static int ended(pid_t pid)
{
    char path[64], stat[512] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *close_paren = strrchr(stat, ')'); /* "pid (comm) S ..." */
    return close_paren && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_child_ends_with_host(void **state)
{
    (void)state;
    char *saved = NULL, *cache = tu_fresh_cache(&saved), *dir = tu_tmpdir();
    char *lib = tu_plugin("tp_loop_self_test");
    free(tu_manifest(dir, "loop.yaml", "test-loop-self-test", lib, NULL, NULL));
    free(lib);
    pid_t host = fork();
    assert_true(host >= 0);
    if (host == 0) {
        setenv("EDGERT_SANDBOX_TIMEOUT", "600", 1);
        const char *paths[1] = {dir};
        edgert_options o = {.struct_size = sizeof o};
        o.manifest_paths = paths;
        o.manifest_path_count = 1;
        o.threads = 1;
        o.log_level = EDGERT_LOG_ERROR;
        edgert_ctx *ctx = NULL;
        char err[512];
        edgert_open(&o, &ctx, err, sizeof err); /* first contact: 600 s, unless killed */
        _exit(3);
    }
    /* its child appears once edgert_open reaches first contact (qemu, ASan:
     * slower); a host that ended first fails at once */
    pid_t child = 0;
    int status = 0;
    for (int i = 0; i < 1200 && (child = child_of(host)) == 0; i++) {
        if (waitpid(host, &status, WNOHANG) == host)
            fail_msg("the host ended (status 0x%x) before first contact's child was seen",
                     (unsigned)status);
        sleep_ms(50);
    }
    if (child <= 0) {
        kill(host, SIGKILL);
        waitpid(host, NULL, 0);
        tu_restore_cache(cache, saved);
        tu_rmrf(dir);
        if (child < 0)
            tu_skip("the kernel does not list a process's children (/proc/PID/task/TID/children)");
        fail_msg("the host made no first-contact child in 60 s");
    }
    /* a pidfd names this child and no later owner of its pid (-1: by pid) */
    int pfd = (int)syscall(SYS_pidfd_open, child, 0);
    sleep_ms(200); /* into the plugin's loop */
    assert_int_equal(kill(host, SIGKILL), 0);
    assert_int_equal(waitpid(host, &status, 0), host);
    int gone = 0;
    if (pfd >= 0) {
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        gone = poll(&p, 1, 10000) == 1; /* readable once the process ended */
        if (!gone)
            syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0); /* not left looping */
        close(pfd);
    } else {
        for (int i = 0; i < 200 && !(gone = ended(child)); i++)
            sleep_ms(50);
        if (!gone)
            kill(child, SIGKILL);
    }
    tu_restore_cache(cache, saved);
    tu_rmrf(dir);
    if (!gone)
        fail_msg("first contact's child %ld still runs 10 s after its host was killed",
                 (long)child);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_child_ends_with_host),
    };
    return tu_run_group("test_sandbox_orphan", tests, NULL, NULL);
}
