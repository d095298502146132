/*
 * tools/profile_out.c — `edgert probe --profile`: the device facts written as
 * a device profile (docs/device-profile.md, profile_version 1), so that
 * `--device FILE` elsewhere plans for this device (the declarative gates
 * only: nothing is loaded there). The keys are the profile's own; every string goes through the
 * tree's one JSON string writer, whose output is also a YAML double-quoted
 * scalar (escapes \" \\ \n \r \t \uXXXX only; every control character,
 * C1 included, escaped; invalid UTF-8 as U+FFFD), so a hostile CPU name
 * still reads back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "formats/json_string.h"

static void flag_list(FILE *f, const char *key, uint64_t mask)
{
    fprintf(f, "%s: [", key);
    const char *sep = "";
    for (unsigned i = 0; i < EDGERT_CPU_FLAG_COUNT; i++)
        if (EDGERT_HAS_FLAG(mask, i)) {
            fprintf(f, "%s%s", sep, edgert_cpu_flag_name((edgert_cpu_flag)i));
            sep = ", ";
        }
    fputs("]\n", f);
}

static void string_key(FILE *f, const char *key, const char *s)
{
    fprintf(f, "%s: ", key);
    json_write_string(f, s);
    fputc('\n', f);
}

int print_profile(FILE *f, const edgert_device *d)
{
    fputs("# A device profile (docs/device-profile.md) written by `edgert probe --profile`;\n"
          "# `--device FILE` plans for this device with it.\n"
          "profile_version: 1\n",
          f);
    string_key(f, "name", d->name[0] ? d->name : "unnamed");
    fprintf(f, "arch: %s\n", edgert_arch_name(d->arch));
    fprintf(f, "device_class: %s\n", edgert_device_class_name(d->device_class));
    flag_list(f, "cpu_flags", d->cpu_flags);
    flag_list(f, "os_disabled_flags", d->cpu_flags_os_disabled);
    int missing = 0;
    if (d->logical_cores > 0) {
        fprintf(f, "logical_cores: %u\n", d->logical_cores);
    } else { /* required, and no number would be true: left for the user */
        fputs("# logical_cores: the probe could not tell; write the device's count here\n", f);
        missing++;
    }
    if (d->mem_total_bytes) { /* else unknown, as in the profile */
        unsigned long long total = d->mem_total_bytes >> 20, avail = d->mem_available_bytes >> 20;
        fprintf(f, "memory_total_mb: %llu\n", total);
        fprintf(f, "memory_available_mb: %llu\n", avail < total ? avail : total);
    }
    fprintf(f, "bf16: %s\n", d->bf16 ? "true" : "false");
    if (d->accelerator[0])
        string_key(f, "accelerator", d->accelerator);
    char notes[1200];
    snprintf(notes, sizeof notes, "from %s%s%s; class: %s; bf16: %s", d->source,
             d->cpu_id[0] ? "; cpu " : "", d->cpu_id,
             d->class_evidence[0] ? d->class_evidence : "-", d->bf16_source);
    string_key(f, "notes", notes);
    return missing;
}

/* Read `text` back the way --device will (the core's own profile loader):
 * 0 when it takes it, else -1 with the loader's errors in `why`, one line
 * (-2 when no scratch folder could be made to check it: why says so),
 * the scratch file's name replaced by "<stdout>". Whatever the writer's facts
 * cannot satisfy (a class the build's arch lacks when --sysroot holds
 * another machine's files, a core count above the profile's limit, a name
 * too long once escaped) is caught by the rule that will judge it, not by
 * a second copy of that rule here. */
int profile_check(const char *text, char *why, size_t why_len)
{
    const char *tmp = secure_getenv("TMPDIR");
    char dir[4096], file[4200], sub[4200];
    snprintf(dir, sizeof dir, "%s/edgert-profile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) { /* a TMPDIR that is not there: /tmp, before giving up */
        int e = errno;
        snprintf(dir, sizeof dir, "/tmp/edgert-profile-XXXXXX");
        if (!mkdtemp(dir)) {
            snprintf(why, why_len, "no scratch folder to check it in (%s: %s)",
                     tmp && *tmp ? tmp : "/tmp", strerror(e));
            return -2;
        }
    }
    snprintf(file, sizeof file, "%s/profile.yaml", dir);
    snprintf(sub, sizeof sub, "%s/no-manifests", dir);
    FILE *f = fopen(file, "w");
    int rc = -1, wrote = 0;
    if (f) {
        wrote = fputs(text, f) >= 0;
        wrote = fclose(f) == 0 && wrote;
    }
    if (wrote && mkdir(sub, 0700) == 0) {
        const char *paths[1] = {sub};
        edgert_options o = {.struct_size = sizeof o};
        o.device_profile = file;
        o.manifest_paths = paths;
        o.manifest_path_count = 1;
        o.ignore_env = 1;
        o.defer_load = 1;
        o.threads = 1;
        o.log_level = EDGERT_LOG_ERROR;
        edgert_ctx *ctx = NULL;
        char err[1024] = "";
        rc = edgert_open(&o, &ctx, err, sizeof err) == EDGERT_OK ? 0 : -1;
        edgert_close(ctx);
        size_t used = 0;
        why[0] = '\0';
        for (const char *p = err; rc != 0 && *p && used + 1 < why_len;) {
            const char *at = strstr(p, file);
            size_t n = at ? (size_t)(at - p) : strlen(p);
            int w = snprintf(why + used, why_len - used, "%.*s%s", (int)n, p,
                             at ? "<stdout>" : "");
            used += w > 0 ? (size_t)w : 0;
            p = at ? at + strlen(file) : p + n;
        }
        char *to = why; /* the loader's lines as one: each break and its indent, one blank */
        for (const char *q = why; *q; q++) {
            if (*q == '\n') {
                while (q[1] == ' ')
                    q++;
                *to++ = ' ';
            } else {
                *to++ = *q;
            }
        }
        *to = '\0';
    } else {
        snprintf(why, why_len, "cannot write a scratch file to check it");
    }
    unlink(file);
    rmdir(sub);
    rmdir(dir);
    return rc;
}
