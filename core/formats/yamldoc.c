/*
 * core/formats/yamldoc.c — YAML documents with positions, over libyaml's document API.
 *
 * Manifests and device profiles are small, strict documents. Every reader
 * here reports problems as "file:line:col" diagnostics and never aborts the
 * caller: a bad file is skipped, the others go on.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/internal.h"
#include "formats/yamldoc.h"

unsigned er_yaml_line(const yaml_node_t *n)
{
    return n ? (unsigned)n->start_mark.line + 1u : 0u;
}

unsigned er_yaml_col(const yaml_node_t *n)
{
    return n ? (unsigned)n->start_mark.column + 1u : 0u;
}

/* Deepest nesting of collections a document may have. Manifests and
 * profiles need 3; the limit exists because libyaml's scanner checks every
 * open flow level on every token, so N nested flow collections cost O(N^2)
 * (10,000 took 0.4 s, a 1 MiB file of brackets minutes). */
#define ER_YAML_MAX_DEPTH 128

/* 1-based line and column (in characters, as libyaml counts them) of byte
 * offset `off` of the text; a UTF-8 byte-order mark is not a character. */
static void pos_of(const char *text, size_t len, size_t off, unsigned *line, unsigned *col)
{
    size_t i = len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    *line = 1;
    *col = 1;
    for (; i < off && i < len; i++) {
        if (text[i] == '\n') {
            ++*line;
            *col = 1;
        } else if (((unsigned char)text[i] & 0xC0u) != 0x80u) {
            ++*col; /* continuation bytes belong to the character before */
        }
    }
}

/* libyaml's error, where it is: reader errors (bad UTF-8, control
 * characters) carry a byte offset, the others a mark. */
static void parse_error(er_diags *d, const char *path, const yaml_parser_t *parser,
                        const char *text, size_t len)
{
    unsigned line = (unsigned)parser->problem_mark.line + 1u;
    unsigned col = (unsigned)parser->problem_mark.column + 1u;
    if (parser->error == YAML_READER_ERROR)
        pos_of(text, len, parser->problem_offset, &line, &col);
    er_diag_add(d, EDGERT_LOG_ERROR, path, line, col, "YAML syntax: %s%s%s",
                parser->problem ? parser->problem : "malformed document",
                parser->context ? " " : "", parser->context ? parser->context : "");
}

/* A first pass over the events that stops at the first collection nested
 * deeper than ER_YAML_MAX_DEPTH, so the composer never sees one: the cost
 * is bounded by the depth reached. 0, or -1 after a diagnostic (a syntax
 * error is left to the composer's pass, which reports it). */
static int check_depth(const char *path, const char *text, size_t len, er_diags *d)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return 0;
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, rc = 0;
    for (int done = 0; !done;) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e))
            break;
        done = e.type == YAML_STREAM_END_EVENT;
        if (e.type == YAML_SEQUENCE_START_EVENT || e.type == YAML_MAPPING_START_EVENT) {
            if (++depth > ER_YAML_MAX_DEPTH) {
                er_diag_add(d, EDGERT_LOG_ERROR, path, (unsigned)e.start_mark.line + 1u,
                            (unsigned)e.start_mark.column + 1u,
                            "collections nested deeper than %d levels; not parsed further",
                            ER_YAML_MAX_DEPTH);
                rc = -1;
                done = 1;
            }
        } else if (e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        yaml_event_delete(&e);
    }
    yaml_parser_delete(&p);
    return rc;
}

edgert_status er_yaml_load(er_yaml *y, const char *path, er_diags *d)
{
    return er_yaml_load_max(y, path, EDGERT_MAX_YAML_BYTES, d);
}

edgert_status er_yaml_load_max(er_yaml *y, const char *path, size_t max_bytes, er_diags *d)
{
    memset(y, 0, sizeof *y);
    y->path = path;
    edgert_status st = EDGERT_OK;
    char *text = NULL;
    yaml_parser_t parser;
    int parser_ok = 0;

    struct stat sb;
    if (stat(path, &sb) != 0) {
        er_diag_add(d, EDGERT_LOG_ERROR, path, 0, 0, "cannot read: %s", strerror(errno));
        return EDGERT_E_IO;
    }
    if (!S_ISREG(sb.st_mode)) {
        er_diag_add(d, EDGERT_LOG_ERROR, path, 0, 0, "not a regular file");
        return EDGERT_E_IO;
    }
    if ((unsigned long long)sb.st_size > max_bytes) {
        er_diag_add(d, EDGERT_LOG_ERROR, path, 0, 0,
                    "file is %lld bytes, larger than the %u-byte limit; not parsed",
                    (long long)sb.st_size, (unsigned)max_bytes);
        return EDGERT_E_PARSE;
    }
    size_t len = 0;
    errno = 0;
    text = er_read_file(NULL, path, max_bytes, &len);
    if (!text) { /* it changed since the stat, or cannot be opened: say which */
        int e = errno; /* before er_diag_add, which may change it */
        if (e == EFBIG)
            er_diag_add(d, EDGERT_LOG_ERROR, path, 0, 0,
                        "grew past the %u-byte limit while read; not parsed",
                        (unsigned)max_bytes);
        else
            er_diag_add(d, EDGERT_LOG_ERROR, path, 0, 0, "cannot read: %s",
                        e ? strerror(e) : "out of memory");
        return e == EFBIG ? EDGERT_E_PARSE : EDGERT_E_IO;
    }
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        unsigned line, col;
        pos_of(text, len, (size_t)(nul - text), &line, &col);
        er_diag_add(d, EDGERT_LOG_ERROR, path, line, col, "NUL byte in a text file");
        st = EDGERT_E_PARSE;
        goto out;
    }
    if (check_depth(path, text, len, d) != 0) {
        st = EDGERT_E_PARSE;
        goto out;
    }
    if (!yaml_parser_initialize(&parser)) {
        er_diag_add(d, EDGERT_LOG_ERROR, path, 0, 0, "out of memory creating the YAML parser");
        st = EDGERT_E_NOMEM;
        goto out;
    }
    parser_ok = 1;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &y->doc)) {
        parse_error(d, path, &parser, text, len);
        st = EDGERT_E_PARSE;
        goto out;
    }
    y->loaded = 1;
    if (!yaml_document_get_root_node(&y->doc)) {
        er_diag_add(d, EDGERT_LOG_ERROR, path, 1, 1, "empty document");
        st = EDGERT_E_PARSE;
        goto out;
    }
    /* A second document in the same file is almost certainly a mistake. */
    yaml_document_t extra;
    if (yaml_parser_load(&parser, &extra)) {
        yaml_node_t *r = yaml_document_get_root_node(&extra);
        if (r) {
            er_diag_add(d, EDGERT_LOG_ERROR, path, er_yaml_line(r), er_yaml_col(r),
                        "more than one YAML document in the file");
            st = EDGERT_E_PARSE;
        }
        yaml_document_delete(&extra);
    } else {
        er_diag_add(d, EDGERT_LOG_ERROR, path, (unsigned)parser.problem_mark.line + 1u,
                    (unsigned)parser.problem_mark.column + 1u, "YAML syntax: %s",
                    parser.problem ? parser.problem : "malformed document");
        st = EDGERT_E_PARSE;
    }
out:
    if (parser_ok)
        yaml_parser_delete(&parser);
    free(text);
    if (st != EDGERT_OK)
        er_yaml_free(y);
    return st;
}

void er_yaml_free(er_yaml *y)
{
    if (y && y->loaded) {
        yaml_document_delete(&y->doc);
        y->loaded = 0;
    }
}

yaml_node_t *er_yaml_root(er_yaml *y)
{
    return y->loaded ? yaml_document_get_root_node(&y->doc) : NULL;
}

yaml_node_t *er_yaml_node(er_yaml *y, int id)
{
    return yaml_document_get_node(&y->doc, id);
}

static const char *scalar(const yaml_node_t *n)
{
    return (n && n->type == YAML_SCALAR_NODE) ? (const char *)n->data.scalar.value : NULL;
}

static int plain(const yaml_node_t *n)
{
    return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* A plain scalar that YAML means as null: "", "~", "null". */
static int is_null(const yaml_node_t *n)
{
    const char *s = scalar(n);
    return s && plain(n) && (!*s || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0);
}

static const char *type_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return is_null(n) ? "nothing (null)" : "a scalar";
    }
}

#define FIELD_FMT "%s%s%s"
#define FIELD_ARGS(y, key) (y)->section ? (y)->section : "", (y)->section ? "." : "", (key)

yaml_node_t *er_yaml_get(er_yaml *y, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *k = scalar(er_yaml_node(y, p->key));
        if (k && strcmp(k, key) == 0)
            return er_yaml_node(y, p->value);
    }
    return NULL;
}

/* Common front of every reader: 1 absent (ok), -1 missing required, 0 found. */
static int lookup(er_yaml *y, yaml_node_t *map, const char *key, int required, yaml_node_t **out,
                  er_diags *d)
{
    yaml_node_t *v = er_yaml_get(y, map, key);
    if (v && is_null(v))
        v = NULL; /* "key:" with no value counts as absent */
    *out = v;
    if (v)
        return 0;
    if (!required)
        return 1;
    er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(map), er_yaml_col(map),
                "missing required field '" FIELD_FMT "'", FIELD_ARGS(y, key));
    return -1;
}

static int type_error(er_yaml *y, yaml_node_t *v, const char *key, const char *want, er_diags *d)
{
    const char *s = scalar(v);
    if (s)
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                    "field '" FIELD_FMT "': expected %s, got '%.60s'", FIELD_ARGS(y, key), want, s);
    else
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                    "field '" FIELD_FMT "': expected %s, got %s", FIELD_ARGS(y, key), want,
                    type_name(v));
    return -1;
}

int er_yaml_str(er_yaml *y, yaml_node_t *map, const char *key, int required, char **out,
                er_diags *d)
{
    yaml_node_t *v;
    *out = NULL;
    int r = lookup(y, map, key, required, &v, d);
    if (r)
        return r;
    const char *s = scalar(v);
    if (!s)
        return type_error(y, v, key, "a string", d);
    if (strlen(s) != v->data.scalar.length) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                    "field '" FIELD_FMT "': NUL character in the string", FIELD_ARGS(y, key));
        return -1;
    }
    *out = er_strdup(s);
    if (!*out) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v), "out of memory");
        return -1;
    }
    return 0;
}

int er_yaml_bool(er_yaml *y, yaml_node_t *map, const char *key, int required, int *out,
                 er_diags *d)
{
    yaml_node_t *v;
    int r = lookup(y, map, key, required, &v, d);
    if (r)
        return r;
    const char *s = scalar(v);
    if (s && plain(v) && strcasecmp(s, "true") == 0)
        *out = 1;
    else if (s && plain(v) && strcasecmp(s, "false") == 0)
        *out = 0;
    else
        return type_error(y, v, key, "true or false", d);
    return 0;
}

int er_yaml_int(er_yaml *y, yaml_node_t *map, const char *key, int required, long long lo,
                long long hi, long long *out, er_diags *d)
{
    yaml_node_t *v;
    int r = lookup(y, map, key, required, &v, d);
    if (r)
        return r;
    const char *s = scalar(v);
    if (!s || !plain(v) || !*s)
        return type_error(y, v, key, "an integer", d);
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (*end || errno)
        return type_error(y, v, key, "an integer", d);
    if (x < lo || x > hi) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v),
                    "field '" FIELD_FMT "': %lld is out of range [%lld, %lld]", FIELD_ARGS(y, key),
                    x, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int er_yaml_num(er_yaml *y, yaml_node_t *map, const char *key, int required, double *out,
                er_diags *d)
{
    yaml_node_t *v;
    int r = lookup(y, map, key, required, &v, d);
    if (r)
        return r;
    const char *s = scalar(v);
    if (!s || !plain(v) || !*s)
        return type_error(y, v, key, "a number", d);
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (*end || errno || !isfinite(x))
        return type_error(y, v, key, "a finite number", d);
    *out = x;
    return 0;
}

void er_strlist_free(char **list)
{
    if (!list)
        return;
    for (char **p = list; *p; p++)
        free(*p);
    free(list);
}

int er_yaml_strlist(er_yaml *y, yaml_node_t *map, const char *key, int required, char ***out,
                    size_t *count, er_diags *d)
{
    yaml_node_t *v;
    *out = NULL;
    if (count)
        *count = 0;
    int r = lookup(y, map, key, required, &v, d);
    if (r)
        return r;
    if (v->type != YAML_SEQUENCE_NODE)
        return type_error(y, v, key, "a list", d);
    size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    char **list = calloc(n + 1, sizeof *list);
    if (!list) {
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(v), er_yaml_col(v), "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *it = er_yaml_node(y, v->data.sequence.items.start[i]);
        const char *s = scalar(it);
        if (!s || is_null(it)) {
            char what[64];
            snprintf(what, sizeof what, "%s[%zu]", key, i);
            er_strlist_free(list);
            return type_error(y, it, what, "a string", d);
        }
        list[i] = er_strdup(s);
        if (!list[i]) {
            er_strlist_free(list);
            er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(it), er_yaml_col(it),
                        "out of memory");
            return -1;
        }
    }
    *out = list;
    if (count)
        *count = n;
    return 0;
}

int er_yaml_map(er_yaml *y, yaml_node_t *map, const char *key, int required, yaml_node_t **out,
                er_diags *d)
{
    yaml_node_t *v;
    *out = NULL;
    int r = lookup(y, map, key, required, &v, d);
    if (r)
        return r;
    if (v->type != YAML_MAPPING_NODE)
        return type_error(y, v, key, "a mapping", d);
    *out = v;
    return 0;
}

const char *er_near_miss(const char *k, const char *const *known)
{
    size_t lk = strlen(k);
    if (lk < 4 || lk > 40) /* two edits turn any short key into any other */
        return NULL;
    const char *best_word = NULL;
    unsigned best_dist = 3;
    for (const char *const *kk = known; kk && *kk; kk++) {
        size_t lw = strlen(*kk);
        if (lw > 40 || (lw > lk ? lw - lk : lk - lw) > 2)
            continue;
        unsigned row[41], prev;
        for (size_t j = 0; j <= lw; j++)
            row[j] = (unsigned)j;
        for (size_t i = 1; i <= lk; i++) {
            prev = row[0];
            row[0] = (unsigned)i;
            for (size_t j = 1; j <= lw; j++) {
                unsigned cur = row[j];
                unsigned best = prev + (k[i - 1] != (*kk)[j - 1]);
                best = row[j] + 1 < best ? row[j] + 1 : best;
                best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
                row[j] = best;
                prev = cur;
            }
        }
        if (row[lw] < best_dist) { /* the closest; the first of equals */
            best_dist = row[lw];
            best_word = *kk;
        }
    }
    return best_word;
}

typedef struct key_at {
    const char *k;
    size_t i; /* the pair's index in the mapping */
} key_at;

static int cmp_key_at(const void *a, const void *b)
{
    const key_at *x = a, *y = b;
    int c = strcmp(x->k, y->k);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}


int er_yaml_misspelt(er_yaml *y, yaml_node_t *map, const char *const *known, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE || er_yaml_get(y, map, key))
        return 0;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *kn = er_yaml_node(y, p->key);
        if (!kn || kn->type != YAML_SCALAR_NODE)
            continue;
        const char *k = (const char *)kn->data.scalar.value;
        int found = 0;
        for (const char *const *kk = known; kk && *kk && !found; kk++)
            found = strcmp(*kk, k) == 0;
        const char *meant = found ? NULL : er_near_miss(k, known);
        if (meant && strcmp(meant, key) == 0)
            return 1;
    }
    return 0;
}

/* dup[i] = 1 for every pair whose key an earlier pair already has. Sorted,
 * so O(n log n): a quadratic scan took 25 s on 95,000 keys of a 1 MiB file.
 * NULL when out of memory (then no pair is reported as a duplicate). */
static unsigned char *find_duplicates(er_yaml *y, yaml_node_t *map, size_t n)
{
    key_at *keys = malloc((n ? n : 1) * sizeof *keys);
    unsigned char *dup = calloc(n ? n : 1, 1);
    if (!keys || !dup) {
        free(keys);
        free(dup);
        return NULL;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *k = scalar(er_yaml_node(y, map->data.mapping.pairs.start[i].key));
        if (k)
            keys[m++] = (key_at){k, i};
    }
    qsort(keys, m, sizeof *keys, cmp_key_at);
    for (size_t j = 1; j < m; j++)
        if (strcmp(keys[j].k, keys[j - 1].k) == 0)
            dup[keys[j].i] = 1;
    free(keys);
    return dup;
}

int er_yaml_check_keys(er_yaml *y, yaml_node_t *map, const char *const *known, er_diags *d)
{
    if (!map || map->type != YAML_MAPPING_NODE) {
        if (map)
            er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(map), er_yaml_col(map),
                        "%s%sexpected a mapping of fields, got %s", y->section ? y->section : "",
                        y->section ? ": " : "", type_name(map));
        return -1;
    }
    int rc = 0;
    size_t n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    unsigned char *dup = find_duplicates(y, map, n);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *kn = er_yaml_node(y, p->key);
        const char *k = scalar(kn);
        if (!k) {
            er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(kn), er_yaml_col(kn),
                        "a key must be a plain name, got %s", type_name(kn));
            rc = -1;
            continue;
        }
        if (dup && dup[p - map->data.mapping.pairs.start]) {
            er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(kn), er_yaml_col(kn),
                        "duplicate key '" FIELD_FMT "'", FIELD_ARGS(y, k));
            rc = -1;
        }
        int found = 0;
        for (const char *const *kk = known; kk && *kk; kk++)
            if (strcmp(*kk, k) == 0) {
                found = 1;
                break;
            }
        if (found)
            continue;
        /* A key a newer schema added is a warning; one within two edits of
         * a known key that the mapping lacks is a typo, and an error:
         * ignoring a misspelt `requires` would load a backend without its
         * gate. Checked even when no more messages are listed, so that 64
         * harmless unknown keys cannot hide it. */
        const char *meant = er_near_miss(k, known);
        if (meant && er_yaml_get(y, map, meant))
            meant = NULL; /* the known key is there too: a new key beside it */
        if (meant)
            rc = -1;
        if (!er_diag_room(d, y->path))
            continue;
        if (meant) {
            er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(kn), er_yaml_col(kn),
                        "unknown key '" FIELD_FMT "' (did you mean '%s'?)", FIELD_ARGS(y, k),
                        meant);
        } else {
            er_diag_add(d, EDGERT_LOG_WARN, y->path, er_yaml_line(kn), er_yaml_col(kn),
                        "unknown key '" FIELD_FMT "' ignored", FIELD_ARGS(y, k));
        }
    }
    free(dup);
    return rc;
}
