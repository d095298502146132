/*
 * tools/tprint.c — the CLI's printers for text from outside the program
 * (manifests, plugins, sysroot files, file names, the library's messages):
 * tprintf / tfprintf / tfprintf_lines write every %s argument with what a
 * terminal would act on made visible (put_text). Moved out of cli_common.c,
 * unchanged, when that file reached its length limit.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- text from outside the program ----------------------------------------------- */

/* What a terminal acts on instead of showing: C0 controls (but newline and
 * tab when keep_lines), DEL, C1 controls (CSI is U+009B), the line and
 * paragraph separators, and the bidirectional marks, embeddings, overrides
 * and isolates that reorder what is shown. */
static int acts_on_terminal(uint32_t cp, int keep_lines)
{
    if (keep_lines && (cp == '\n' || cp == '\t'))
        return 0;
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x061C || cp == 0x200E ||
           cp == 0x200F || (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

void put_text(FILE *f, const char *s, size_t len, int keep_lines)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        uint32_t cp = 0;
        size_t n = utf8_seq(p, (size_t)(end - p), &cp);
        if (n == 0)
            fprintf(f, "\\x%02x", *p); /* not UTF-8: the byte */
        else if (!acts_on_terminal(cp, keep_lines))
            fwrite(p, 1, n, f);
        else if (cp == '\n' || cp == '\t' || cp == '\r')
            fprintf(f, "\\%c", cp == '\n' ? 'n' : cp == '\t' ? 't' : 'r');
        else
            fprintf(f, cp < 0x80 ? "\\x%02x" : "\\u%04x", (unsigned)cp);
        p += n ? n : 1;
    }
}

/* A %s of tprintf: at most `prec` bytes of s (all when prec < 0), escaped,
 * then padded to `width` (left-aligned when `left`) as printf would. */
static void put_arg(FILE *f, const char *s, int left, int width, int prec, int keep_lines)
{
    if (!s)
        s = "(null)";
    size_t len = prec < 0 ? strlen(s) : strnlen(s, (size_t)prec);
    char *buf = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&buf, &size);
    if (!m) {
        put_text(f, s, len, keep_lines); /* unpadded, still escaped */
        return;
    }
    put_text(m, s, len, keep_lines);
    fclose(m);
    fprintf(f, left ? "%-*s" : "%*s", width, buf ? buf : "");
    free(buf);
}

/* The integer argument of a d/i/u/o/x/X conversion with length modifier
 * `lm`, printed with spec. */
static void put_int(FILE *f, const char *spec, char conv, const char *lm, va_list *ap)
{
    int sgn = conv == 'd' || conv == 'i';
    if (strcmp(lm, "l") == 0)
        sgn ? fprintf(f, spec, va_arg(*ap, long)) : fprintf(f, spec, va_arg(*ap, unsigned long));
    else if (strcmp(lm, "ll") == 0)
        sgn ? fprintf(f, spec, va_arg(*ap, long long))
            : fprintf(f, spec, va_arg(*ap, unsigned long long));
    else if (strcmp(lm, "z") == 0)
        sgn ? fprintf(f, spec, va_arg(*ap, ssize_t)) : fprintf(f, spec, va_arg(*ap, size_t));
    else if (strcmp(lm, "j") == 0)
        sgn ? fprintf(f, spec, va_arg(*ap, intmax_t)) : fprintf(f, spec, va_arg(*ap, uintmax_t));
    else if (strcmp(lm, "t") == 0)
        fprintf(f, spec, va_arg(*ap, ptrdiff_t));
    else /* none, h, hh: promoted to int */
        sgn ? fprintf(f, spec, va_arg(*ap, int)) : fprintf(f, spec, va_arg(*ap, unsigned));
}

/* Digits at *q (advanced past them) as a number, or one int argument for a
 * '*'; NONE when neither is there. */
#define NONE INT_MIN
static int spec_number(const char **q, va_list *ap)
{
    if (**q == '*') {
        ++*q;
        return va_arg(*ap, int);
    }
    if (**q < '0' || **q > '9')
        return NONE;
    int v = 0;
    for (; **q >= '0' && **q <= '9'; ++*q)
        v = v < 100000 ? v * 10 + (**q - '0') : v;
    return v;
}

/* One conversion, `pct` at its '%': its arguments taken from *ap, written to
 * f (a %s through put_arg, the others by fprintf with any '*' resolved).
 * Returns what follows it. %n, %ls, %lc and %m are not supported (the
 * compiler checks every call's format; the CLI uses none of them). */
static const char *convert(FILE *f, const char *pct, va_list *ap, int keep_lines)
{
    const char *q = pct + 1, *flags = q;
    q += strspn(q, "-+ #0");
    int nflags = (int)(q - flags), left = memchr(flags, '-', (size_t)nflags) != NULL;
    int width = spec_number(&q, ap), prec = NONE, minus = 0;
    if (*q == '.') {
        q++;
        prec = spec_number(&q, ap);
        prec = prec == NONE ? 0 : prec; /* "%.d" is precision 0; a negative '*': none */
    }
    if (width != NONE && width < 0) { /* a negative '*' width means left-aligned */
        left = minus = 1;
        width = -width;
    }
    size_t nlm = strspn(q, "hlzjtL");
    char lm[3] = "", spec[64], conv = q[nlm];
    if (!conv || nlm > 2) {
        fputs(pct, f);
        return pct + strlen(pct);
    }
    memcpy(lm, q, nlm);
    int used = snprintf(spec, sizeof spec, "%%%.*s%s", nflags, flags, minus ? "-" : "");
    if (width != NONE)
        used += snprintf(spec + used, sizeof spec - (size_t)used, "%d", width);
    if (prec >= 0)
        used += snprintf(spec + used, sizeof spec - (size_t)used, ".%d", prec);
    snprintf(spec + used, sizeof spec - (size_t)used, "%s%c", lm, conv);
    if (conv == 's')
        put_arg(f, va_arg(*ap, const char *), left, width == NONE ? 0 : width, prec < 0 ? -1 : prec,
                keep_lines);
    else if (strchr("diuoxX", conv))
        put_int(f, spec, conv, lm, ap);
    else if (strchr("fFeEgGaA", conv) && lm[0] == 'L')
        fprintf(f, spec, va_arg(*ap, long double));
    else if (strchr("fFeEgGaA", conv))
        fprintf(f, spec, va_arg(*ap, double));
    else if (conv == 'c')
        fprintf(f, spec, va_arg(*ap, int));
    else if (conv == 'p')
        fprintf(f, spec, va_arg(*ap, void *));
    else if (conv == '%')
        fputc('%', f);
    else
        fwrite(pct, 1, (size_t)(q + nlm + 1 - pct), f);
    return q + nlm + 1;
}

/* The last message written to stderr: what --json reports when a command
 * fails before its document (json_failed). */
static char last_error[1024];

const char *tprint_last_error(void)
{
    return last_error;
}

static void vtext(FILE *f, int keep_lines, const char *fmt, va_list ap)
{
    va_list aq;
    /* an error line: not a log line (cli_log: "edgert: info: ..."), a
     * warning, an indented line of a list or a note in parentheses after
     * the error (EDGERT_BACKEND named the backend) */
    if (f == stderr && strncmp(fmt, "edgert: %s: %s", 14) != 0 && fmt[0] != ' ' &&
        !strstr(fmt, "warning") && strncmp(fmt, "edgert: (", 9) != 0) {
        va_copy(aq, ap);
        vsnprintf(last_error, sizeof last_error, fmt, aq);
        va_end(aq);
        last_error[strcspn(last_error, "\n")] = '\0';
    }
    va_copy(aq, ap);
    for (const char *p = fmt; *p;) {
        const char *pct = strchr(p, '%');
        if (!pct) {
            fputs(p, f);
            break;
        }
        fwrite(p, 1, (size_t)(pct - p), f);
        p = convert(f, pct, &aq, keep_lines);
    }
    va_end(aq);
}

void tprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vtext(stdout, 0, fmt, ap);
    va_end(ap);
}

void tfprintf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vtext(f, 0, fmt, ap);
    va_end(ap);
}

void tfprintf_lines(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vtext(f, 1, fmt, ap);
    va_end(ap);
}
