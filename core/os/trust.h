/*
 * core/os/trust.h — the OS and trust layer: the one place the core decides
 * whose files it believes and loads code. Not installed.
 *
 * The rules, each written once (trust.c):
 * - strict mode: running as root or under secure execution (AT_SECURE,
 *   setuid/setgid/capabilities), where a file another user could have
 *   written is refused instead of warned about;
 * - who could have written a file: a user other than root and this
 *   process's effective user owns it, or its group or others may write it.
 * Loading code (dl.c): a plugin library opened by the descriptor its file
 * gate checked and hashed, through one process-wide table of the files
 * mapped; symbols and closing too (the dl* calls are made nowhere else in
 * the core).
 * First contact's child process is the sandbox's (sandbox/sandbox.c).
 */
#ifndef EDGERT_CORE_TRUST_H
#define EDGERT_CORE_TRUST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"

struct stat;

/** 1 when running as root or under secure execution: where a file others
 *  could have written is refused. */
int er_trust_strict(void);
/** Why er_trust_strict holds: "edgert runs as root" or "under secure execution". */
const char *er_trust_strict_why(void);
/** Owned by a user other than root and this process's effective user. */
int er_owned_by_another(const struct stat *st);
/** Its mode lets its group or others write it. */
int er_writable_by_others(const struct stat *st);
/** Another user could have written it: er_owned_by_another or er_writable_by_others. */
int er_others_could_write(const struct stat *st);
/** er_trust_strict and er_others_could_write: a file strict mode refuses. */
int er_trust_refuses(const struct stat *st);
/** A file or folder edgert reads code or manifests from that is group- or
 *  world-writable: a warning naming `what`, the path and its mode; refused
 *  (returns 1) in strict mode, else 0. Owned by another user: refused in
 *  strict mode with a warning, else 0 without a word. */
int er_refuse_writable(er_diags *d, const char *what, const char *path, const struct stat *st);

/** Open the library behind `fd` (checked and hashed as XXH3-64 `hash`) by
 *  its descriptor; *reserved = 1 when fd now names a mapped library and must
 *  never be closed. NULL with the loader's reason in why[] on failure. */
void *er_dl_open_fd(int fd, uint64_t hash, int *reserved, char *why, size_t why_len);
/** The address of `name` in a library er_dl_open_fd opened, or NULL. */
void *er_dl_symbol(void *lib, const char *name);
/** Close it (NULL: nothing); RTLD_NODELETE keeps its code mapped. */
void er_dl_close(void *lib);
/** 1 (and *then: the hash mapped then) when this process mapped the file
 *  dev/ino with bytes other than `hash`: rewritten in place since. */
int er_dl_mapped_other(dev_t dev, ino_t ino, uint64_t hash, uint64_t *then);
/** The absolute path of the file mapped at `addr` (the library or program
 *  holding that code): /proc/self/maps, else dladdr made absolute;
 *  malloc'd, or NULL. discovery.c finds the backends folder next to it. */
char *er_dl_file_of(const void *addr);

#endif /* EDGERT_CORE_TRUST_H */
