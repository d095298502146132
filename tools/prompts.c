/*
 * tools/prompts.c — prompt files of token ids (prompts.h).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "prompts.h"

void prompts_free(prompts *p)
{
    for (size_t i = 0; i < p->count; i++)
        free(p->ids[i]);
    free(p->ids);
    free(p->len);
    memset(p, 0, sizeof *p);
}

/* One line's ids; -1 with msg on a bad one. */
static int parse_line(const char *line, const char *where, unsigned lineno, int32_t **out,
                      uint32_t *n, char *msg, size_t len)
{
    size_t cap = 16;
    *out = malloc(cap * sizeof **out);
    *n = 0;
    const char *p = line;
    while (*out) {
        while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r')
            p++;
        if (!*p || *p == '\n' || *p == '#')
            return 0;
        const char *start = p;
        if (!isdigit((unsigned char)*p)) {
            snprintf(msg, len, "%s:%u:%zu: expected a token id (a number), not '%.*s'", where,
                     lineno, (size_t)(start - line) + 1, (int)strcspn(start, " \t,\r\n"),
                     start);
            return -1;
        }
        errno = 0;
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (errno || v > INT32_MAX) {
            snprintf(msg, len, "%s:%u:%zu: token id %.20s is too large", where, lineno,
                     (size_t)(start - line) + 1, start);
            return -1;
        }
        p = end;
        if (*n == cap) {
            int32_t *g = realloc(*out, 2 * cap * sizeof *g);
            if (!g)
                break;
            *out = g;
            cap *= 2;
        }
        (*out)[(*n)++] = (int32_t)v;
    }
    snprintf(msg, len, "out of memory");
    return -1;
}

/* --prompt-ids / --prompts: a file, or (when no such file exists and it is
 * ids and commas) a list on the command line. Empty prompts are an error. */
int read_prompts(const char *opt, const char *arg, prompts *p, char *msg, size_t len)
{
    memset(p, 0, sizeof *p);
    int list = strspn(arg, "0123456789, ") == strlen(arg) && access(arg, F_OK) != 0;
    FILE *f = list ? fmemopen((void *)arg, strlen(arg), "r") : fopen(arg, "r");
    if (!f) {
        snprintf(msg, len, "%s %s: %s", opt, arg, strerror(errno));
        return EXIT_BADFILE;
    }
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int rc = EXIT_OK;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        int32_t *ids = NULL;
        uint32_t n = 0;
        if (parse_line(line, list ? opt : arg, lineno, &ids, &n, msg, len) != 0) {
            free(ids);
            rc = EXIT_BADFILE;
            break;
        }
        if (n == 0) { /* a blank or comment line */
            free(ids);
            continue;
        }
        int32_t **gi = realloc(p->ids, (p->count + 1) * sizeof *gi);
        uint32_t *gl = gi ? realloc(p->len, (p->count + 1) * sizeof *gl) : NULL;
        if (gi)
            p->ids = gi;
        if (!gi || !gl) {
            free(ids);
            snprintf(msg, len, "out of memory");
            rc = EXIT_FAIL;
            break;
        }
        p->len = gl;
        p->ids[p->count] = ids;
        p->len[p->count++] = n;
    }
    free(line);
    fclose(f);
    if (rc == EXIT_OK && p->count == 0) {
        snprintf(msg, len, "%s %s: no prompt (a line of token ids)", opt, arg);
        rc = EXIT_BADFILE;
    }
    if (rc != EXIT_OK)
        prompts_free(p);
    return rc;
}
