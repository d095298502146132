/*
 * core/common/diag.c — diagnostics collected while opening a handle, and the
 * bounded error-buffer formatter used everywhere.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/internal.h"

void er_set_plugin_err(char *err, size_t len, const char *name, const char *self,
                       const char *context, const char *perr, edgert_status st)
{
    size_t sl = strlen(self);
    if (perr && perr[0] && strncmp(perr, self, sl) == 0 && perr[sl] == ':')
        edgert_errf(err, len, "%s%s%s", strcmp(self, name) != 0 ? name : "",
                    strcmp(self, name) != 0 ? ": " : "", perr);
    else
        edgert_errf(err, len, "%s: %s%s%s", name, context ? context : "", context ? ": " : "",
                    perr && perr[0] ? perr : edgert_status_name(st));
}

static int same_file(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

int er_diag_room(const er_diags *d, const char *file)
{
    return d && (d->count == 0 || !same_file(d->items[d->count - 1].file, file) ||
                 d->in_file <= ER_DIAGS_PER_FILE); /* the closing line too */
}

/* One more item; 0, or -1 when out of memory (the diagnostic is lost). */
static int append(er_diags *d, edgert_log_level level, const char *file, unsigned line,
                  unsigned column, const char *msg)
{
    if (d->count == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        edgert_diag *items = realloc(d->items, cap * sizeof *items);
        if (!items)
            return -1;
        d->items = items;
        d->cap = cap;
    }
    edgert_diag *it = &d->items[d->count];
    it->level = level;
    it->file = file ? er_strdup(file) : NULL;
    it->line = line;
    it->column = column;
    it->message = er_strdup(msg);
    if (!it->message) {
        free((char *)it->file);
        return -1;
    }
    d->count++;
    return 0;
}

void er_diag_add(er_diags *d, edgert_log_level level, const char *file, unsigned line,
                 unsigned column, const char *fmt, ...)
{
    if (!d)
        return;
    int same = d->count && same_file(d->items[d->count - 1].file, file);
    if (same && d->in_file > ER_DIAGS_PER_FILE) {
        /* not listed; the closing line takes the worst level it stands for */
        if (level < d->items[d->count - 1].level)
            d->items[d->count - 1].level = level;
        return;
    }
    char msg[1024];
    if (same && d->in_file == ER_DIAGS_PER_FILE) {
        snprintf(msg, sizeof msg, "more problems from here on are not listed (the first %u are)",
                 ER_DIAGS_PER_FILE);
    } else {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    if (append(d, level, file, line, column, msg) == 0)
        d->in_file = same ? d->in_file + 1 : 1;
}

void er_diags_free(er_diags *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->count; i++) {
        free((char *)d->items[i].file);
        free((char *)d->items[i].message);
    }
    free(d->items);
    d->items = NULL;
    d->count = d->cap = 0;
}

void er_diag_last_error(const er_diags *d, size_t since, char *buf, size_t len)
{
    er_diag_lines(d, since, EDGERT_LOG_ERROR, buf, len);
}

void er_diag_lines(const er_diags *d, size_t since, edgert_log_level max_level, char *buf,
                   size_t len)
{
    /* Every problem since `since`, one per line, so a user fixes them in one
     * pass; warnings (an unknown key: often the typo behind a "missing
     * field" error) say so. */
    if (!buf || len == 0)
        return;
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = since; d && i < d->count && used + 1 < len; i++) {
        const edgert_diag *it = &d->items[i];
        if (it->level > max_level || (it->level != EDGERT_LOG_ERROR && !it->line))
            continue; /* warnings only where they point into a file */
        const char *sep = used ? (it->level == EDGERT_LOG_ERROR ? "\n  " : "\n  warning: ")
                               : (it->level == EDGERT_LOG_ERROR ? "" : "warning: ");
        int w;
        if (it->file && it->line)
            w = snprintf(buf + used, len - used, "%s%s:%u:%u: %s", sep, it->file, it->line,
                         it->column, it->message);
        else if (it->file)
            w = snprintf(buf + used, len - used, "%s%s: %s", sep, it->file, it->message);
        else
            w = snprintf(buf + used, len - used, "%s%s", sep, it->message);
        if (w < 0)
            break;
        used += (size_t)w < len - used ? (size_t)w : len - used - 1;
    }
}
