/* tools/json.c — see json.h. */
#include "json.h"

#include <math.h>
#include <string.h>

void json_init(json_w *w, FILE *f)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->first[0] = 1;
}

static void before_value(json_w *w)
{
    if (w->pending_key) {
        w->pending_key = 0;
        return;
    }
    if (!w->first[w->depth])
        fputc(',', w->f);
    w->first[w->depth] = 0;
}

static void open_level(json_w *w, char c)
{
    before_value(w);
    fputc(c, w->f);
    if (w->depth < 63)
        w->depth++;
    w->first[w->depth] = 1;
}

static void close_level(json_w *w, char c)
{
    fputc(c, w->f);
    if (w->depth > 0)
        w->depth--;
}

void json_obj(json_w *w) { open_level(w, '{'); }
void json_end_obj(json_w *w) { close_level(w, '}'); }
void json_arr(json_w *w) { open_level(w, '['); }
void json_end_arr(json_w *w) { close_level(w, ']'); }

size_t utf8_seq(const unsigned char *p, size_t avail, uint32_t *cp)
{
    static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (avail == 0)
        return 0;
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    size_t n = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 0;
    if (!n || p[0] > 0xF4 || n > avail)
        return 0;
    uint32_t v = p[0] & (0x3Fu >> (n - 1));
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (p[i] & 0x3Fu);
    }
    if (v < least[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n;
}

/* JSON requires \u escapes below U+0020; the rest escaped here is what a
 * YAML reader (the tests read JSON with libyaml) refuses or folds, and what
 * a terminal showing the JSON would act on: DEL, C1 controls, U+2028/9, the
 * BOM and U+FFFE/F. Bytes that are not UTF-8 are written as U+FFFD: the
 * output is always valid UTF-8. */
static void write_string(FILE *f, const char *s)
{
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    while (p < end) {
        uint32_t cp = 0xFFFD;
        size_t n = utf8_seq(p, (size_t)(end - p), &cp);
        switch (cp) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (n == 0 || cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 ||
                cp == 0x2029 || cp == 0xFEFF || cp == 0xFFFE || cp == 0xFFFF)
                fprintf(f, "\\u%04x", (unsigned)cp);
            else
                fwrite(p, 1, n, f);
        }
        p += n ? n : 1;
    }
    fputc('"', f);
}

void json_key(json_w *w, const char *k)
{
    before_value(w);
    write_string(w->f, k);
    fputc(':', w->f);
    w->pending_key = 1;
}

void json_str(json_w *w, const char *s)
{
    before_value(w);
    if (s)
        write_string(w->f, s);
    else
        fputs("null", w->f);
}

void json_num(json_w *w, double v)
{
    before_value(w);
    if (isfinite(v))
        fprintf(w->f, "%.6g", v);
    else
        fputs("null", w->f);
}

void json_int(json_w *w, long long v)
{
    before_value(w);
    fprintf(w->f, "%lld", v);
}

void json_bool(json_w *w, int v)
{
    before_value(w);
    fputs(v ? "true" : "false", w->f);
}

void json_null(json_w *w)
{
    before_value(w);
    fputs("null", w->f);
}

void json_kstr(json_w *w, const char *k, const char *s) { json_key(w, k); json_str(w, s); }
void json_knum(json_w *w, const char *k, double v) { json_key(w, k); json_num(w, v); }
void json_kint(json_w *w, const char *k, long long v) { json_key(w, k); json_int(w, v); }
void json_kbool(json_w *w, const char *k, int v) { json_key(w, k); json_bool(w, v); }

void json_finish(json_w *w)
{
    fputc('\n', w->f);
    fflush(w->f);
}
