/*
 * core/os/dl.c — the one place the core loads code or asks the loader: a
 * plugin library opened by the descriptor its file gate checked and hashed
 * (gate.c), never by its path again; and which file holds a piece of code
 * (the folder next to libedgert is searched for backends). See os/trust.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/trust.h"

/* Open the library behind the descriptor the file gate checked and hashed,
 * through /proc/self/fd/N: the bytes that run are the bytes that were
 * checked, even if the file at the path was swapped since. RTLD_NODELETE:
 * a plugin's code stays mapped after dlclose, so a thread it left running
 * cannot jump into unmapped memory later. NULL with the loader's reason in
 * why[] on failure.
 *
 * glibc knows a loaded object by its names before its inode, and a name it
 * has seen stays bound to its object: dlopen("/proc/self/fd/N") either maps
 * a new object under that name or, when the file is already mapped (same
 * device and inode), returns that object and adds the name to it as an
 * alias. With RTLD_NODELETE both last for the process's life, so a later
 * dlopen of the same string returns that object, whatever file N refers to
 * by then: two handles, or two threads, loading different plugins through a
 * reused descriptor number got each other's library (NAME_MISMATCH, seen in
 * test_concurrency). Hence one process-wide table, under a lock, of the
 * files loaded: device, inode and the descriptor whose name glibc bound to
 * it, which is kept open for good (one per distinct plugin file). A file in
 * the table is opened by that name, which adds no alias; any other file by
 * the caller's descriptor, which then joins the table. */
typedef struct os_lib {
    dev_t dev;
    ino_t ino;
    int fd;
    uint64_t hash; /* XXH3-64 of the bytes mapped (gate.c): LIBRARY_REWRITTEN */
} os_lib;
static pthread_mutex_t os_lock = PTHREAD_MUTEX_INITIALIZER;
static os_lib *os_libs; /* process-wide, as glibc's own list of loaded objects */
static size_t os_nlibs;

/* A fork (sandbox.c's first contact) while another thread holds os_lock
 * would leave the child's copy locked for ever: held across every fork. */
static void os_lock_take(void)
{
    pthread_mutex_lock(&os_lock);
}

static void os_lock_give(void)
{
    pthread_mutex_unlock(&os_lock);
}

__attribute__((constructor)) static void os_lock_at_fork(void)
{
    pthread_atfork(os_lock_take, os_lock_give, os_lock_give);
}

/* A file is rewritten in place (cp over it, a linker writing its output
 * again) keeping its device and inode; its mapping (RTLD_NODELETE) and the
 * table's descriptor keep the inode from being reused for another file,
 * even if a host closes that descriptor. So the same device and inode
 * with other bytes is the file this process mapped, changed since: dlopen
 * would return the old object, whose pages not yet copied now read the new
 * bytes. */
int er_dl_mapped_other(dev_t dev, ino_t ino, uint64_t hash, uint64_t *then)
{
    int found = 0;
    pthread_mutex_lock(&os_lock);
    for (size_t i = 0; i < os_nlibs && !found; i++)
        if (os_libs[i].dev == dev && os_libs[i].ino == ino && os_libs[i].hash != hash) {
            *then = os_libs[i].hash;
            found = 1;
        }
    pthread_mutex_unlock(&os_lock);
    return found;
}

void *er_dl_open_fd(int fd, uint64_t hash, int *reserved, char *why, size_t why_len)
{
    struct stat st;
    *reserved = 0;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "fstat: %s", strerror(errno));
        return NULL;
    }
    pthread_mutex_lock(&os_lock);
    int name_fd = fd;
    for (size_t i = 0; i < os_nlibs; i++)
        if (os_libs[i].dev == st.st_dev && os_libs[i].ino == st.st_ino)
            name_fd = os_libs[i].fd;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", name_fd);
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_len, "%s", e ? e : "unknown error");
    } else if (name_fd == fd) { /* glibc bound our name: keep it, and remember the file */
        *reserved = 1;
        os_lib *grown = realloc(os_libs, (os_nlibs + 1) * sizeof *grown);
        if (grown) {
            os_libs = grown;
            os_libs[os_nlibs++] = (os_lib){st.st_dev, st.st_ino, fd, hash};
        }
    }
    pthread_mutex_unlock(&os_lock);
    return h;
}

void *er_dl_symbol(void *lib, const char *name)
{
    dlerror();
    return dlsym(lib, name);
}

void er_dl_close(void *lib)
{
    if (lib)
        dlclose(lib);
}

/* The absolute path of the file mapped at `addr` (this code's library or
 * program), from /proc/self/maps; malloc'd, or NULL. */
static char *mapped_file(const void *addr)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return NULL;
    char line[4608], *found = NULL;
    uintptr_t a = (uintptr_t)addr;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &path_at) < 2 || path_at == 0)
            continue;
        if (a < lo || a >= hi || line[path_at] != '/')
            continue;
        line[strcspn(line, "\n")] = '\0';
        found = strdup(line + path_at);
    }
    fclose(f);
    return found;
}

char *er_dl_file_of(const void *addr)
{
    char *path = mapped_file(addr);
    if (path)
        return path;
    Dl_info info;
    if (!dladdr((void *)(uintptr_t)addr, &info) || !info.dli_fname)
        return NULL;
    return realpath(info.dli_fname, NULL);
}
