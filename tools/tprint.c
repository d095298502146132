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
#include <sys/ioctl.h>
#include <unistd.h>

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

/* ---- text wrapped to the terminal ---------------------------------------------- */

/* The width a person reads text at, on a terminal: COLUMNS when it holds a
 * number (the shell's own setting), else the terminal's; never over 100.
 * Not a terminal (a pipe, a file): 0, lines as written, whatever COLUMNS
 * says (a script greps them whole; some tools export COLUMNS to their
 * children, pytest among them). */
int wrap_width(void)
{
    if (!isatty(STDOUT_FILENO))
        return 0;
    const char *cols = getenv("COLUMNS");
    char *end = NULL;
    long w = cols ? strtol(cols, &end, 10) : 0;
    struct winsize ws;
    if (!(cols && end && end != cols && *end == '\0' && w >= 20))
        w = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20 ? ws.ws_col : 100;
    return w > 100 ? 100 : (int)w;
}

/* Columns of the n bytes at s: UTF-8 continuation bytes take none. */
static size_t columns(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0u) != 0x80u;
    return c;
}

/* Where a line's continuations start: under its last column that starts in
 * the first half of the width (text after a gap of two spaces or more:
 * "  cpu flags     avx2", "  amx-w4a8         rejected  MISSING..."), else
 * 4 past its indent; at most half the width. */
static size_t continuation(const char *s, size_t n, size_t width)
{
    size_t i = 0;
    while (i < n && s[i] == ' ')
        i++;
    size_t cont = i + 4u;
    for (size_t j = i; j + 2u < n && columns(s, j) < width / 2u; j++)
        if (s[j] != ' ' && s[j + 1] == ' ' && s[j + 2] == ' ') { /* the last such gap */
            size_t k = j + 1u;
            while (k < n && s[k] == ' ')
                k++;
            if (k < n && columns(s, k) <= width / 2u)
                cont = columns(s, k);
            j = k;
        }
    return cont < width / 2u ? cont : width / 2u;
}

/* One line (no newline) at most `width` columns a row where it has spaces
 * to break at, each continuation indented (continuation()); a word longer
 * than a row stays whole. */
static void wrap_line(FILE *f, const char *s, size_t n, size_t width)
{
    size_t indent = 0;
    while (indent < n && s[indent] == ' ')
        indent++;
    size_t cont = continuation(s, n, width), lead = 0;
    for (;;) {
        if (lead + columns(s, n) <= width) {
            fprintf(f, "%*s%.*s\n", (int)lead, "", (int)n, s);
            return;
        }
        size_t cut = 0, i = 0, col = lead;
        for (; i < n && col <= width; i++) { /* the last space that fits */
            if (s[i] == ' ' && i > (lead ? 0u : indent))
                cut = i;
            col += ((unsigned char)s[i] & 0xC0u) != 0x80u;
        }
        if (!cut) /* a word longer than the row: up to the next space */
            for (cut = i; cut < n && s[cut] != ' '; cut++)
                ;
        fprintf(f, "%*s%.*s\n", (int)lead, "", (int)cut, s);
        while (cut < n && s[cut] == ' ')
            cut++;
        if (cut >= n)
            return;
        s += cut, n -= cut, lead = cont;
    }
}

void wrap_text(FILE *f, const char *text, size_t len, int width)
{
    while (len > 0) {
        const char *nl = memchr(text, '\n', len);
        size_t n = nl ? (size_t)(nl - text) : len;
        if (width > 0)
            wrap_line(f, text, n, (size_t)width);
        else
            fprintf(f, "%.*s\n", (int)n, text);
        text += nl ? n + 1u : n, len -= nl ? n + 1u : n;
    }
}

int wrap_begin(wrap_capture *w)
{
    *w = (wrap_capture){.width = wrap_width(), .saved = -1, .file = NULL};
    if (w->width <= 0)
        return 0;
    fflush(stdout);
    w->file = tmpfile();
    w->saved = w->file ? dup(STDOUT_FILENO) : -1;
    if (w->saved < 0 || dup2(fileno(w->file), STDOUT_FILENO) < 0) {
        if (w->saved >= 0)
            close(w->saved);
        if (w->file)
            fclose(w->file);
        *w = (wrap_capture){.width = 0, .saved = -1, .file = NULL};
    }
    return 0;
}

void wrap_end(wrap_capture *w)
{
    if (!w->file)
        return;
    fflush(stdout);
    dup2(w->saved, STDOUT_FILENO);
    close(w->saved);
    long len = fseek(w->file, 0, SEEK_END) == 0 ? ftell(w->file) : -1;
    char *text = len > 0 ? malloc((size_t)len) : NULL;
    if (text && fseek(w->file, 0, SEEK_SET) == 0 && fread(text, 1, (size_t)len, w->file) ==
                                                       (size_t)len)
        wrap_text(stdout, text, (size_t)len, w->width);
    free(text);
    fclose(w->file);
    fflush(stdout);
    w->file = NULL;
}
