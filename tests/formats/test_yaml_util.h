/*
 * tests/formats/test_yaml_util.h — assertions on YAML documents and their
 * diagnostics (file, line, column, message), for the direct tests of
 * core/formats/yamldoc.c (test_yamldoc.c, test_yamldoc_fields.c).
 * Header-only; include after cmocka.h, internal.h and test_util.h.
 */
#ifndef EDGERT_TEST_YAML_UTIL_H
#define EDGERT_TEST_YAML_UTIL_H

#include <stdio.h>
#include <string.h>
#include "common/diag.h"
#include "formats/yamldoc.h"

#define YDIR EDGERT_TEST_FIXTURES "/yaml"

__attribute__((unused)) static void print_diags(const char *what, const er_diags *d)
{
    for (size_t i = 0; i < d->count; i++)
        fprintf(stderr, "  [%s] %s %s:%u:%u: %s\n", what,
                d->items[i].level == EDGERT_LOG_ERROR ? "error" : "warning",
                d->items[i].file ? d->items[i].file : "-", d->items[i].line, d->items[i].column,
                d->items[i].message);
}

__attribute__((unused)) static size_t count_level(const er_diags *d, edgert_log_level level)
{
    size_t n = 0;
    for (size_t i = 0; i < d->count; i++)
        n += d->items[i].level == level;
    return n;
}

/* Diagnostic i is exactly (level, file, line:col) and its message is `msg`
 * (exact) or, with `prefix`, starts with it. */
__attribute__((unused)) static void expect_diag_at(const er_diags *d, size_t i,
                                                   edgert_log_level level, const char *file,
                                                   unsigned line, unsigned col, const char *msg,
                                                   int prefix)
{
    if (i >= d->count)
        print_diags(file, d);
    assert_true(i < d->count);
    const edgert_diag *g = &d->items[i];
    int same = prefix ? strncmp(g->message, msg, strlen(msg)) == 0 : strcmp(g->message, msg) == 0;
    if (g->level != level || !same || g->line != line || g->column != col) {
        fprintf(stderr, "diagnostic %zu: expected %s at %u:%u: \"%s\"\n", i,
                level == EDGERT_LOG_ERROR ? "error" : "warning", line, col, msg);
        print_diags(file, d);
    }
    assert_int_equal(g->level, level);
    assert_non_null(g->file);
    assert_string_equal(g->file, file);
    if (prefix)
        assert_memory_equal(g->message, msg, strlen(msg));
    else
        assert_string_equal(g->message, msg);
    assert_int_equal(g->line, line);
    assert_int_equal(g->column, col);
}

/* The only diagnostic is this error. */
__attribute__((unused)) static void expect_one_error(const er_diags *d, const char *file,
                                                     unsigned line, unsigned col, const char *msg)
{
    if (d->count != 1)
        print_diags(file, d);
    assert_int_equal(d->count, 1);
    expect_diag_at(d, 0, EDGERT_LOG_ERROR, file, line, col, msg, 0);
}

/* A document that must load: OK, no diagnostic, a root node. */
__attribute__((unused)) static yaml_node_t *load_ok(er_yaml *y, const char *path)
{
    er_diags d = {0};
    edgert_status st = er_yaml_load(y, path, &d);
    if (st != EDGERT_OK || d.count != 0)
        print_diags(path, &d);
    assert_int_equal(st, EDGERT_OK);
    assert_int_equal(d.count, 0);
    er_diags_free(&d);
    assert_string_equal(y->path, path);
    yaml_node_t *root = er_yaml_root(y);
    assert_non_null(root);
    return root;
}

#endif
