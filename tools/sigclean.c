/*
 * tools/sigclean.c — the folder removed on SIGINT, SIGTERM or SIGHUP
 * (sigclean.h). The handler uses only calls that are safe in one: open,
 * getdents64, lseek, unlinkat, rmdir, close, sigaction, raise, getpid,
 * strcmp. It takes workdir.h's WORKDIR_OWNER last, once nothing else is
 * left. Found by Ctrl-C during `edgert export`, which left its work folder
 * (up to 3.4 GB of generated weights) behind. A process forked after
 * sigclean_arm (first contact's child, which keeps the handlers) removes
 * nothing: the folder is its parent's.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sigclean.h"
#include "workdir.h"

#define SC_DEPTH 8 /* export's tree is two levels deep */

static const int sc_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define SC_NSIG (sizeof sc_signals / sizeof sc_signals[0])
static struct sigaction sc_saved[SC_NSIG];
static int sc_installed[SC_NSIG];
static char sc_dir[4200];
static volatile sig_atomic_t sc_armed, sc_held, sc_pending;
static volatile pid_t sc_pid; /* a child forked since (first contact's) removes nothing */

/* Everything below the open folder dfd. */
static void rm_below(int dfd, unsigned depth)
{
    char buf[2048];
    long n;
    while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            const struct dirent64 *d = (const struct dirent64 *)(const void *)(buf + off);
            off += d->d_reclen;
            const char *name = d->d_name;
            if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
                continue;
            if (depth == 0 && strcmp(name, WORKDIR_OWNER) == 0)
                continue; /* last (workdir.h): a removal cut short stays sweepable */
            if (unlinkat(dfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM) ||
                depth >= SC_DEPTH)
                continue;
            int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                rm_below(sub, depth + 1u);
                close(sub);
            }
            unlinkat(dfd, name, AT_REMOVEDIR);
        }
    }
}

/* The open folder dfd holds nothing but WORKDIR_OWNER (read again from
 * its start). */
static int only_owner(int dfd)
{
    char buf[1024];
    long n;
    if (lseek(dfd, 0, SEEK_SET) != 0)
        return 0;
    while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            const struct dirent64 *d = (const struct dirent64 *)(const void *)(buf + off);
            off += d->d_reclen;
            const char *name = d->d_name;
            if (!(name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) &&
                strcmp(name, WORKDIR_OWNER) != 0)
                return 0;
        }
    }
    return n == 0;
}

static void on_signal(int sig)
{
    int e = errno;
    if (sc_held) {
        sc_pending = sig;
        errno = e;
        return;
    }
    if (sc_armed && sc_dir[0] && getpid() == sc_pid) {
        sc_armed = 0;
        int dfd = open(sc_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd >= 0) {
            rm_below(dfd, 0);
            if (only_owner(dfd)) /* else the mark stays, for the next sweep */
                unlinkat(dfd, WORKDIR_OWNER, 0);
            close(dfd);
        }
        rmdir(sc_dir);
    }
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig); /* delivered once the handler returns: the process ends by sig */
    errno = e;
}

void sigclean_arm(void)
{
    sc_dir[0] = '\0';
    sc_pending = 0;
    sc_held = 1;
    sc_pid = getpid();
    sc_armed = 1;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < SC_NSIG; i++)
        sigaddset(&sa.sa_mask, sc_signals[i]); /* one handler at a time */
    for (size_t i = 0; i < SC_NSIG; i++) {
        sc_installed[i] = sigaction(sc_signals[i], NULL, &sc_saved[i]) == 0 &&
                          sc_saved[i].sa_handler != SIG_IGN &&
                          sigaction(sc_signals[i], &sa, NULL) == 0;
    }
}

void sigclean_folder(const char *dir)
{
    int held = sc_held;
    sc_held = 1; /* the path is not read half written */
    if (snprintf(sc_dir, sizeof sc_dir, "%s", dir) >= (int)sizeof sc_dir)
        sc_dir[0] = '\0'; /* too long to keep: not removed */
    sc_held = held;
}

void sigclean_disarm(void)
{
    sc_armed = 0;
    for (size_t i = 0; i < SC_NSIG; i++)
        if (sc_installed[i])
            sigaction(sc_signals[i], &sc_saved[i], NULL);
    sc_held = 0;
    sc_dir[0] = '\0';
    memset(sc_installed, 0, sizeof sc_installed);
}

void sigclean_hold(void)
{
    sc_held = 1;
}

void sigclean_release(void)
{
    sc_held = 0;
    if (sc_pending)
        raise(sc_pending); /* through the handler, with its mask */
}
