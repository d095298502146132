/*
 * tests/test_cli_util.h — running the `edgert` binary from a test and
 * reading its --json output back (JSON is YAML, so libyaml parses it).
 * Header-only; include after cmocka.h, internal.h and test_util.h.
 */
#ifndef EDGERT_TEST_CLI_UTIL_H
#define EDGERT_TEST_CLI_UTIL_H

#include <sys/wait.h>
#include "common/diag.h"
#include "formats/yamldoc.h"

#define CLI EDGERT_TEST_CLI

/* Run `prefix CLI args redirect` (redirect: a shell redirection of
 * stderr), capture stdout into a malloc'd string; returns the exit code. */
__attribute__((unused)) static int run_redirected(const char *prefix, const char *args,
                                                  const char *redirect, char **out)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s %s %s", prefix, CLI, args, redirect);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 4096) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Run `CLI args`, capture stdout into a malloc'd string; returns the exit code. */
__attribute__((unused)) static int run(const char *args, char **out)
{
    return run_redirected("", args, "2>/dev/null", out);
}

/* The same with stderr captured too (2>&1), for commands that should finish
 * quickly: one that takes over 100 s is killed (exit 124), so a CLI that
 * blocks fails its test instead of hanging it. */
__attribute__((unused)) static int run_all(const char *args, char **out)
{
    return run_redirected("timeout 100", args, "2>&1", out);
}

/* Parse JSON text; the caller frees with er_yaml_free + tu_rmrf(*dir). */
__attribute__((unused)) static yaml_node_t *parse(const char *text, er_yaml *y, char **dir)
{
    *dir = tu_tmpdir();
    char *path = tu_write(*dir, "out.json", "%s", text);
    er_diags d = {0};
    edgert_status st = er_yaml_load(y, path, &d);
    if (st != EDGERT_OK)
        fail_msg("output is not one JSON document: %s\n---\n%.2000s",
                 d.count ? d.items[0].message : "?", text);
    er_diags_free(&d);
    free(path);
    yaml_node_t *root = er_yaml_root(y);
    assert_int_equal(root->type, YAML_MAPPING_NODE);
    return root;
}

__attribute__((unused)) static const char *sval(er_yaml *y, yaml_node_t *map, const char *key)
{
    yaml_node_t *n = er_yaml_get(y, map, key);
    if (!n)
        fail_msg("missing key '%s'", key);
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A key's value as a number; the key must be there. */
__attribute__((unused)) static double num(er_yaml *y, yaml_node_t *map, const char *key)
{
    const char *v = sval(y, map, key);
    assert_non_null(v);
    return strtod(v, NULL);
}

#endif
