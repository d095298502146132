/*
 * tests/fuzz/fuzz_yaml.c — fuzz target: the YAML layer (core/formats/yamldoc.c).
 *
 * er_yaml_load on the input, then every typed reader on every mapping of the
 * document: each key read as a string, bool, integer, number, string list
 * and mapping (so every reader meets every node type), a required key that
 * is absent, and er_yaml_check_keys. The document is walked as libyaml's flat
 * node array, never by following values: aliases make it a graph (even a
 * cycle, `&a [*a]`), which no edgert reader follows either.
 */
#define _GNU_SOURCE
#include "common/internal.h"

#include "fuzz_util.h"
#include "formats/yamldoc.h"

/* Readers per mapping: enough to reach every reader on every node type, few
 * enough that a mapping of 10,000 keys does not make the harness (whose
 * lookups are linear) the slow part. */
#define FZ_KEYS_PER_MAP 32

static const char *const fz_known[] = {"name", "version", "arch", "layout", "flags", NULL};

static void read_key(er_yaml *y, yaml_node_t *map, const char *key, er_diags *d)
{
    char *s = NULL, **list = NULL;
    int b = 0;
    long long i = 0;
    double x = 0;
    size_t n = 0;
    yaml_node_t *sub = NULL;
    if (er_yaml_str(y, map, key, 1, &s, d) == 0)
        free(s);
    er_yaml_bool(y, map, key, 1, &b, d);
    er_yaml_int(y, map, key, 0, -1000, 1000, &i, d);
    er_yaml_num(y, map, key, 0, &x, d);
    if (er_yaml_strlist(y, map, key, 1, &list, &n, d) == 0)
        er_strlist_free(list);
    er_yaml_map(y, map, key, 0, &sub, d);
}

static void read_mapping(er_yaml *y, yaml_node_t *map, er_diags *d)
{
    er_yaml_check_keys(y, map, fz_known, d);
    size_t done = 0;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
         p < map->data.mapping.pairs.top && done < FZ_KEYS_PER_MAP; p++, done++) {
        yaml_node_t *k = er_yaml_node(y, p->key);
        if (k && k->type == YAML_SCALAR_NODE)
            read_key(y, map, (const char *)k->data.scalar.value, d);
    }
    char *s = NULL;
    er_yaml_str(y, map, "\x01 absent", 1, &s, d); /* the "missing required field" path */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200];
    fz_write(fz_path(path, sizeof path, "doc.yaml"), data, size);
    er_diags d = {0};
    er_yaml y;
    if (er_yaml_load(&y, path, &d) == EDGERT_OK) {
        yaml_node_t *root = er_yaml_root(&y);
        er_yaml_line(root);
        er_yaml_col(root);
        er_yaml_check_keys(&y, root, fz_known, &d); /* also on a list or a scalar */
        for (yaml_node_t *n = y.doc.nodes.start; n < y.doc.nodes.top; n++) {
            if (n->type != YAML_MAPPING_NODE)
                continue;
            y.section = (n - y.doc.nodes.start) % 2 ? "layout" : NULL;
            read_mapping(&y, n, &d);
        }
        y.section = NULL;
        er_yaml_free(&y);
    }
    char msg[512];
    er_diag_last_error(&d, 0, msg, sizeof msg);
    er_diags_free(&d);
    return 0;
}
