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

static void write_string(FILE *f, const char *s)
{
    json_write_string(f, s); /* the tree's one JSON string writer */
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
