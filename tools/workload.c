/* tools/workload.c — see workload.h. */
#define _GNU_SOURCE
#include "workload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "edgert/edgert.h"
#include "common/workload.h"
#include "formats/yamldoc.h"

void wl_builtin(workload *w)
{
    size_t n;
    const er_ref_shape *ref = er_reference_shapes(&n); /* the one definition */
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", ER_REFERENCE_WORKLOAD);
    w->nshapes = n;
    for (size_t i = 0; i < n; i++) {
        wl_shape *s = &w->shapes[i];
        snprintf(s->name, sizeof s->name, "%s", ref[i].name);
        s->k = ref[i].k;
        s->n = ref[i].n;
        s->count = ref[i].count;
        s->head = ref[i].head;
    }
}

uint64_t wl_weights(const workload *w)
{
    uint64_t s = 0;
    for (size_t i = 0; i < w->nshapes; i++)
        s += (uint64_t)w->shapes[i].n * w->shapes[i].k * w->shapes[i].count;
    return s;
}

/* The keys of a workload file and of each of its shapes. */
static const char *const wl_keys[] = {"name", "shapes", NULL};
static const char *const wl_shape_keys[] = {"name", "k", "n", "count", "head", NULL};

/* A required non-empty string; 0, or -1 after a diagnostic. */
static int wl_name(er_yaml *y, yaml_node_t *map, char *out, size_t len, er_diags *d)
{
    char *v = NULL;
    if (er_yaml_str(y, map, "name", 1, &v, d) != 0)
        return -1;
    int rc = 0;
    if (!*v) {
        yaml_node_t *n = er_yaml_get(y, map, "name");
        er_diag_add(d, EDGERT_LOG_ERROR, y->path, er_yaml_line(n), er_yaml_col(n),
                    "field 'name': must not be empty");
        rc = -1;
    }
    snprintf(out, len, "%s", v);
    free(v);
    return rc;
}

/* One shape of the list; 0, or -1 after a diagnostic. */
static int wl_shape_read(er_yaml *y, yaml_node_t *s, wl_shape *sh, er_diags *d)
{
    long long k = 0, n = 0, count = 0;
    int head = 0;
    int bad = er_yaml_check_keys(y, s, wl_shape_keys, d) != 0;
    if (!s || s->type != YAML_MAPPING_NODE)
        return -1; /* check_keys said so; a duplicate or misspelt key does not stop the rest */
    bad |= wl_name(y, s, sh->name, sizeof sh->name, d);
    bad |= er_yaml_int(y, s, "k", 1, 1, 1 << 20, &k, d) != 0;
    bad |= er_yaml_int(y, s, "n", 1, 1, 1 << 24, &n, d) != 0;
    bad |= er_yaml_int(y, s, "count", 1, 1, 100000, &count, d) != 0;
    bad |= er_yaml_bool(y, s, "head", 0, &head, d) < 0;
    sh->k = (uint32_t)k;
    sh->n = (uint32_t)n;
    sh->count = (uint32_t)count;
    sh->head = head;
    return bad ? -1 : 0;
}

/* Every error of the file on stderr, at file:line:col, and its warnings
 * unless quiet. */
static void wl_report(const er_diags *d, int quiet)
{
    for (size_t i = 0; i < d->count; i++) /* --json's document says them too */
        if (d->items[i].level <= EDGERT_LOG_WARN)
            cli_said(&d->items[i]);
    char lines[8192];
    er_diag_lines(d, 0, quiet ? EDGERT_LOG_ERROR : EDGERT_LOG_WARN, lines, sizeof lines);
    if (lines[0])
        tfprintf_lines(stderr, "edgert: %s\n", lines);
}

/* Read through the core's YAML layer (core/formats/yamldoc.h), as manifests and
 * device profiles are: the same size and nesting limits, duplicate keys
 * refused, unknown keys warned of (one a typo away from a key the shape
 * lacks refused), every problem of the file at its line and column. */
int wl_load(const char *path, workload *w, int quiet)
{
    memset(w, 0, sizeof *w);
    er_yaml y;
    er_diags d = {0};
    int bad = 0;
    edgert_status lst = er_yaml_load(&y, path, &d);
    if (lst != EDGERT_OK) {
        cli_fail_status(lst);
        wl_report(&d, quiet);
        er_diags_free(&d);
        return -1;
    }
    yaml_node_t *root = er_yaml_root(&y), *shapes = NULL;
    bad = er_yaml_check_keys(&y, root, wl_keys, &d) != 0; /* reports every problem of its keys */
    if (root->type == YAML_MAPPING_NODE) {
        bad |= wl_name(&y, root, w->name, sizeof w->name, &d) != 0;
        shapes = er_yaml_get(&y, root, "shapes");
        if (!shapes || shapes->type != YAML_SEQUENCE_NODE ||
            shapes->data.sequence.items.top == shapes->data.sequence.items.start) {
            yaml_node_t *at = shapes ? shapes : root;
            er_diag_add(&d, EDGERT_LOG_ERROR, path, er_yaml_line(at), er_yaml_col(at),
                        "field 'shapes': must be a non-empty list of {name, k, n, count}");
            bad = 1;
            shapes = NULL;
        }
    }
    for (yaml_node_item_t *it = shapes ? shapes->data.sequence.items.start : NULL;
         shapes && it < shapes->data.sequence.items.top; it++) {
        yaml_node_t *s = er_yaml_node(&y, *it);
        if (w->nshapes == WL_MAX_SHAPES) {
            er_diag_add(&d, EDGERT_LOG_ERROR, path, er_yaml_line(s), er_yaml_col(s),
                        "too many shapes (at most %d)", WL_MAX_SHAPES);
            bad = 1;
            break;
        }
        bad |= wl_shape_read(&y, s, &w->shapes[w->nshapes++], &d) != 0;
    }
    wl_report(&d, quiet);
    er_yaml_free(&y);
    er_diags_free(&d);
    if (bad) {
        memset(w, 0, sizeof *w);
        cli_fail_status(EDGERT_E_PARSE);
    }
    return bad ? -1 : 0;
}

/* An output head's layer, by the names the core reads a checkpoint by
 * (head_prefix in core/weights/checkpoint_names.c, which the library does not
 * export): lm_head (a head tied to the embedding is listed so too),
 * GPT-NeoX's embed_out, output. */
static int is_head_layer(const char *name)
{
    size_t n = strlen(name);
    return (n >= 7 && strcmp(name + n - 7, "lm_head") == 0) ||
           (n >= 9 && strcmp(name + n - 9, "embed_out") == 0) || strcmp(name, "output") == 0;
}

/* The role of a layer: its name after the last ".<number>." (the layer
 * index), or the whole name. */
static const char *role_of(const char *name)
{
    const char *r = name;
    for (const char *p = name; *p; p++)
        if (*p == '.' && p[1] >= '0' && p[1] <= '9') {
            const char *q = p + 1;
            while (*q >= '0' && *q <= '9')
                q++;
            if (*q == '.')
                r = q + 1;
        }
    return r;
}

/* Length: one pass that groups layers into shapes, with its two refusals
 * (too many roles, out of memory) where they arise. */
int wl_from_checkpoint(const char *path, workload *w)
{
    memset(w, 0, sizeof *w);
    char err[4096] = "";
    edgert_status st = edgert_checkpoint_open(path, &w->ck, err, sizeof err);
    if (st != EDGERT_OK) {
        tfprintf_lines(stderr, "edgert: %s\n", err);
        cli_fail_status(st);
        return -1;
    }
    snprintf(w->name, sizeof w->name, "%s", path);
    size_t n = edgert_checkpoint_layer_count(w->ck);
    uint32_t *shape_of = calloc(n ? n : 1, sizeof *shape_of);
    if (!shape_of)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        const edgert_layer *l = edgert_checkpoint_layer_at(w->ck, i);
        const char *role = role_of(l->name);
        size_t s = 0;
        while (s < w->nshapes && (strcmp(w->shapes[s].name, role) != 0 ||
                                  w->shapes[s].n != l->n || w->shapes[s].k != l->k))
            s++;
        if (s == WL_MAX_SHAPES) {
            tfprintf(stderr, "edgert: %s: more than %d layer roles or shapes\n", path,
                     WL_MAX_SHAPES);
            free(shape_of);
            wl_free(w);
            return -1;
        }
        if (s == w->nshapes) {
            wl_shape *sh = &w->shapes[w->nshapes++];
            snprintf(sh->name, sizeof sh->name, "%s", role);
            sh->n = l->n, sh->k = l->k;
            sh->head = is_head_layer(l->name);
        }
        w->shapes[s].count++;
        shape_of[i] = (uint32_t)s;
    }
    for (size_t s = 0; s < w->nshapes; s++) {
        w->layers[s] = calloc(w->shapes[s].count, sizeof *w->layers[s]);
        if (!w->layers[s])
            goto oom;
        uint32_t c = 0;
        for (size_t i = 0; i < n; i++)
            if (shape_of[i] == s)
                w->layers[s][c++] = (uint32_t)i;
    }
    free(shape_of);
    return 0;
oom:
    free(shape_of);
    tfprintf(stderr, "edgert: %s: out of memory\n", path);
    wl_free(w);
    return -1;
}

void wl_free(workload *w)
{
    for (size_t s = 0; s < WL_MAX_SHAPES; s++) {
        free(w->layers[s]);
        w->layers[s] = NULL;
    }
    edgert_checkpoint_close(w->ck);
    w->ck = NULL;
}
