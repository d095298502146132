/* tools/workload.c — see workload.h. */
#define _GNU_SOURCE
#include "workload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "cli.h"
#include "edgert/edgert.h"

void wl_builtin(workload *w)
{
    static const wl_shape spark[] = {
        {"qkv", 2048, 3072, 28, 0},
        {"o", 2048, 2048, 28, 0},
        {"gate_up", 2048, 13312, 28, 0},
        {"down", 6656, 2048, 28, 0},
        {"lm_head", 2048, 131072, 1, 1},
    };
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "spark-1.7b");
    w->nshapes = sizeof spark / sizeof spark[0];
    memcpy(w->shapes, spark, sizeof spark);
}

uint64_t wl_weights(const workload *w)
{
    uint64_t s = 0;
    for (size_t i = 0; i < w->nshapes; i++)
        s += (uint64_t)w->shapes[i].n * w->shapes[i].k * w->shapes[i].count;
    return s;
}

static yaml_node_t *get(yaml_document_t *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && strcmp((char *)k->data.scalar.value, key) == 0)
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

static int bad(const char *path, const yaml_node_t *n, const char *what)
{
    tfprintf(stderr, "edgert: %s:%zu:%zu: %s\n", path, n ? n->start_mark.line + 1 : 1,
             n ? n->start_mark.column + 1 : 1, what);
    return -1;
}

static int get_u32(const char *path, yaml_document_t *d, yaml_node_t *map, const char *key,
                   uint32_t lo, uint32_t hi, uint32_t *out)
{
    yaml_node_t *v = get(d, map, key);
    char msg[160];
    if (!v) {
        snprintf(msg, sizeof msg, "shape is missing '%s'", key);
        return bad(path, map, msg);
    }
    const char *s = v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value : "";
    char *end;
    errno = 0;
    unsigned long x = strtoul(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-' || x < lo || x > hi) {
        snprintf(msg, sizeof msg, "'%s' must be a whole number from %u to %u, got '%.40s'", key,
                 lo, hi, s);
        return bad(path, v, msg);
    }
    *out = (uint32_t)x;
    return 0;
}

int wl_load(const char *path, workload *w)
{
    memset(w, 0, sizeof *w);
    struct stat st;
    int failed = stat(path, &st) != 0;
    if (failed || !S_ISREG(st.st_mode)) {
        tfprintf(stderr, "edgert: %s: cannot read the workload file (%s)\n", path,
                 failed ? strerror(errno) : "not a regular file");
        return -1;
    }
    if ((unsigned long long)st.st_size > EDGERT_MAX_YAML_BYTES) {
        tfprintf(stderr, "edgert: %s: larger than %u bytes; not parsed\n", path,
                 (unsigned)EDGERT_MAX_YAML_BYTES);
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        tfprintf(stderr, "edgert: %s: %s\n", path, strerror(errno));
        return -1;
    }
    yaml_parser_t p;
    yaml_document_t d;
    int rc = -1, doc = 0;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_file(&p, f);
    if (!yaml_parser_load(&p, &d)) {
        tfprintf(stderr, "edgert: %s:%zu:%zu: YAML syntax: %s\n", path, p.problem_mark.line + 1,
                 p.problem_mark.column + 1, p.problem ? p.problem : "malformed");
        goto out;
    }
    doc = 1;
    yaml_node_t *root = yaml_document_get_root_node(&d);
    if (!root || root->type != YAML_MAPPING_NODE) {
        bad(path, root, "a workload is a mapping with 'name' and 'shapes'");
        goto out;
    }
    yaml_node_t *name = get(&d, root, "name");
    if (!name || name->type != YAML_SCALAR_NODE || !name->data.scalar.length) {
        bad(path, name ? name : root, "'name' must be a non-empty string");
        goto out;
    }
    snprintf(w->name, sizeof w->name, "%s", (char *)name->data.scalar.value);
    yaml_node_t *shapes = get(&d, root, "shapes");
    if (!shapes || shapes->type != YAML_SEQUENCE_NODE ||
        shapes->data.sequence.items.top == shapes->data.sequence.items.start) {
        bad(path, shapes ? shapes : root, "'shapes' must be a non-empty list");
        goto out;
    }
    for (yaml_node_item_t *it = shapes->data.sequence.items.start;
         it < shapes->data.sequence.items.top; it++) {
        yaml_node_t *s = yaml_document_get_node(&d, *it);
        if (w->nshapes == WL_MAX_SHAPES) {
            bad(path, s, "too many shapes (at most 64)");
            goto out;
        }
        if (!s || s->type != YAML_MAPPING_NODE) {
            bad(path, s, "each shape is a mapping {name, k, n, count}");
            goto out;
        }
        wl_shape *sh = &w->shapes[w->nshapes];
        yaml_node_t *sn = get(&d, s, "name");
        if (!sn || sn->type != YAML_SCALAR_NODE || !sn->data.scalar.length) {
            bad(path, sn ? sn : s, "shape 'name' must be a non-empty string");
            goto out;
        }
        snprintf(sh->name, sizeof sh->name, "%s", (char *)sn->data.scalar.value);
        if (get_u32(path, &d, s, "k", 1, 1u << 20, &sh->k) ||
            get_u32(path, &d, s, "n", 1, 1u << 24, &sh->n) ||
            get_u32(path, &d, s, "count", 1, 100000, &sh->count))
            goto out;
        yaml_node_t *h = get(&d, s, "head");
        if (h) {
            const char *v = h->type == YAML_SCALAR_NODE ? (const char *)h->data.scalar.value : "";
            if (strcmp(v, "true") && strcmp(v, "false")) {
                bad(path, h, "'head' must be true or false");
                goto out;
            }
            sh->head = strcmp(v, "true") == 0;
        }
        w->nshapes++;
    }
    rc = 0;
out:
    if (doc)
        yaml_document_delete(&d);
    yaml_parser_delete(&p);
    fclose(f);
    return rc;
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
            sh->head = strstr(l->name, "lm_head") != NULL;
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
