/*
 * core/os/trust.c — the trust rules, written once (see os/trust.h).
 */
#define _GNU_SOURCE
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/trust.h"

/* Where others' writes refuse a file (as root, under secure execution). */
int er_trust_strict(void)
{
    return geteuid() == 0 || getauxval(AT_SECURE) != 0;
}

int er_owned_by_another(const struct stat *st)
{
    return st->st_uid != 0 && st->st_uid != geteuid();
}

int er_writable_by_others(const struct stat *st)
{
    return (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

int er_others_could_write(const struct stat *st)
{
    return er_owned_by_another(st) || er_writable_by_others(st);
}

const char *er_trust_strict_why(void)
{
    return geteuid() == 0 ? "edgert runs as root" : "under secure execution";
}

int er_trust_refuses(const struct stat *st)
{
    return er_trust_strict() && er_others_could_write(st);
}

int er_refuse_writable(er_diags *d, const char *what, const char *path, const struct stat *st)
{
    if (!er_writable_by_others(st)) {
        /* its owner may rewrite it as surely as a world-writable mode lets
         * anyone: as root, only root's (an adversary's plugin and manifest
         * owned by nobody, mode 0755, were taken) */
        if (!er_trust_refuses(st))
            return 0;
        er_diag_add(d, EDGERT_LOG_WARN, path, 0, 0,
                    "%s is owned by uid %u, neither root nor this user: refused, %s ('chown "
                    "root' it)", what, (unsigned)st->st_uid,
                    er_trust_strict_why());
        return 1;
    }
    int strict = er_trust_refuses(st);
    er_diag_add(d, EDGERT_LOG_WARN, path, 0, 0,
                "%s is %s-writable (mode %04o): %s ('chmod go-w' it)", what,
                (st->st_mode & S_IWOTH) ? "world" : "group", (unsigned)(st->st_mode & 07777),
                !strict               ? "others can change what edgert loads; continuing"
                : geteuid() == 0      ? "refused, edgert runs as root"
                                      : "refused under secure execution");
    return strict;
}
