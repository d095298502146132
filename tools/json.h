/*
 * tools/json.h — a small streaming JSON writer for the CLI's --json output.
 * Commas, nesting and string escaping are handled here; NaN/inf print as null.
 * Strings come out as valid UTF-8 with every control character escaped.
 */
#ifndef EDGERT_TOOLS_JSON_H
#define EDGERT_TOOLS_JSON_H

#include <stdint.h>
#include <stdio.h>

typedef struct json_w {
    FILE *f;
    int depth;
    int first[64];  /* per level: nothing written yet */
    int pending_key;
} json_w;

void json_init(json_w *w, FILE *f);
void json_obj(json_w *w);     /* { */
void json_end_obj(json_w *w); /* } */
void json_arr(json_w *w);     /* [ */
void json_end_arr(json_w *w); /* ] */
void json_key(json_w *w, const char *k);
void json_str(json_w *w, const char *s); /* NULL → null */
void json_num(json_w *w, double v);      /* non-finite → null */
void json_int(json_w *w, long long v);
void json_bool(json_w *w, int v);
void json_null(json_w *w);
/* key + value shorthands */
void json_kstr(json_w *w, const char *k, const char *s);
void json_knum(json_w *w, const char *k, double v);
void json_kint(json_w *w, const char *k, long long v);
void json_kbool(json_w *w, const char *k, int v);
void json_finish(json_w *w); /* newline at the end */

/* utf8_seq, which the text printers (cli.h) decide what to escape with, and
 * the string escaper are the core's one copy. */
#include "formats/json_string.h"

#endif
