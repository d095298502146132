/*
 * core/common/util.c — error formatting, strings, paths, environment, bounded
 * file reads and an order's check.
 * Every file the probe reads goes through er_read_file/er_path_exists so a
 * sysroot prefix can present any device to the tests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/internal.h"

edgert_status er_fail(edgert_status st, char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return st;
}

char *er_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

char *er_path_join(const char *a, const char *b)
{
    if (!a || !*a)
        return er_strdup(b);
    if (!b)
        return er_strdup(a);
    size_t la = strlen(a);
    while (la > 1 && a[la - 1] == '/')
        la--;
    while (*b == '/')
        b++;
    size_t lb = strlen(b);
    char *out = malloc(la + 1 + lb + 1);
    if (!out)
        return NULL;
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return out;
}

const char *er_getenv(int ignore_env, const char *name)
{
    if (ignore_env)
        return NULL;
    const char *v = secure_getenv(name);
    return (v && *v) ? v : NULL;
}

char *er_rooted_path(const char *sysroot, const char *path)
{
    if (!sysroot || !*sysroot || strcmp(sysroot, "/") == 0)
        return er_strdup(path);
    return er_path_join(sysroot, path);
}

int er_open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -2;
    }
    return fd;
}

char *er_read_file(const char *sysroot, const char *path, size_t max, size_t *len_out)
{
    char *full = er_rooted_path(sysroot, path);
    char *buf = NULL;
    FILE *f = NULL;
    if (!full)
        goto out;
    /* Only regular files: a FIFO or device in a hostile sysroot would block
     * fopen/fread forever. Files in /proc and /sys are regular files. */
    int fd = er_open_regular(full);
    if (fd < 0)
        goto out;
    f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        goto out;
    }
    /* Files in /proc and /sys report size 0: read until EOF, bounded by max. */
    size_t cap = 4096, len = 0;
    buf = malloc(cap + 1);
    if (!buf)
        goto out;
    for (;;) {
        if (len == cap) {
            if (cap > max) { /* already holds max + 1 bytes: too large */
                free(buf);
                buf = NULL;
                errno = EFBIG;
                goto out;
            }
            size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f) || len > max) {
        int e = len > max ? EFBIG : errno;
        free(buf);
        buf = NULL;
        errno = e;
        goto out;
    }
    buf[len] = '\0';
    if (len_out)
        *len_out = len;
out:;
    int saved = errno; /* why buf is NULL, for the caller's message */
    if (f)
        fclose(f);
    free(full);
    errno = saved;
    return buf;
}

int er_path_exists(const char *sysroot, const char *path)
{
    char *full = er_rooted_path(sysroot, path);
    struct stat st;
    int ok = full && stat(full, &st) == 0;
    free(full);
    return ok;
}

void er_cache_evict(const void *p, size_t n)
{
    if (p == NULL || n == 0)
        return;
    const uintptr_t end = (uintptr_t)p + n;
#if defined(__x86_64__) || defined(__i386__)
    /* clflush is baseline x86-64 (SSE2); the line is 64 bytes on every x86
     * CPU edgert serves, and a smaller step would only repeat lines */
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < end; a += 64)
        __builtin_ia32_clflush((const void *)a);
    __builtin_ia32_mfence();
#elif defined(__aarch64__)
    uint64_t ctr;
    __asm__ volatile("mrs %0, ctr_el0" : "=r"(ctr)); /* Linux lets EL0 read it */
    const uintptr_t line = (uintptr_t)4 << ((ctr >> 16) & 0xFu); /* DminLine: words */
    for (uintptr_t a = (uintptr_t)p & ~(line - 1); a < end; a += line)
        __asm__ volatile("dc civac, %0" : : "r"(a) : "memory");
    __asm__ volatile("dsb ish" : : : "memory");
#else
    (void)end;
#endif
}

edgert_status er_check_unknown_tail(const void *p, size_t given, size_t known, const char *what,
                                    const char *type, char *err, size_t len)
{
    const unsigned char *b = p;
    for (size_t i = known; i < given; i++)
        if (b[i] != 0)
            return er_fail(EDGERT_E_USAGE, err, len,
                           "%s.struct_size %zu is larger than this library's %s (%zu bytes) "
                           "and byte %zu is not zero: a field this library does not know is "
                           "set (the program was built against a newer edgert header); "
                           "zero-initialise the struct, or use a newer libedgert",
                           what, given, type, known, i);
    return EDGERT_OK;
}

uint32_t er_perm_invert(const uint32_t *perm, uint32_t k, uint32_t *inv)
{
    for (uint32_t j = 0; j < k; j++)
        inv[j] = UINT32_MAX; /* no column yet */
    for (uint32_t j = 0; j < k; j++) {
        if (perm[j] >= k || inv[perm[j]] != UINT32_MAX)
            return j;
        inv[perm[j]] = j;
    }
    return k;
}
