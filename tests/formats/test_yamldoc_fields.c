/*
 * tests/formats/test_yamldoc_fields.c — reading loaded YAML documents (core/formats/yamldoc.c:
 * the typed field readers er_yaml_str/bool/int/num/strlist/map,
 * er_yaml_get, er_yaml_check_keys), tested directly on the documents of
 * tests/fixtures/yaml/:
 *   - each typed reader on every shape of value (types.yaml), absent and null
 *     values, required fields, the section prefix of messages;
 *   - duplicate and non-scalar keys, unknown keys;
 *   - anchors and aliases (an alias is the anchored node itself), merge keys
 *     (not applied), a cycle; tags (not interpreted).
 * Every error is asserted with its exact file, line, column and message, as
 * in tests/formats/test_yamldoc.c (loading) and tests/discover/test_manifest.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/internal.h"
#include "test_util.h"
#include "test_yaml_util.h"
#include "formats/yamldoc.h"

/* ---- positions and lookups ------------------------------------------------- */

static void test_accessors(void **state)
{
    (void)state;
    assert_int_equal(er_yaml_line(NULL), 0);
    assert_int_equal(er_yaml_col(NULL), 0);
    er_yaml y;
    yaml_node_t *root = load_ok(&y, YDIR "/types.yaml");
    assert_int_equal(er_yaml_line(root), 4); /* the first key, after the comment */
    assert_int_equal(er_yaml_col(root), 1);
    assert_null(er_yaml_get(&y, NULL, "str_plain"));
    assert_null(er_yaml_get(&y, root, "no_such_key"));
    yaml_node_t *list = er_yaml_get(&y, root, "list_flow");
    assert_non_null(list);
    assert_null(er_yaml_get(&y, list, "a")); /* not a mapping */
    yaml_node_t *v = er_yaml_get(&y, root, "str_plain");
    assert_non_null(v);
    assert_int_equal(er_yaml_line(v), 4);
    assert_int_equal(er_yaml_col(v), 12);
    er_yaml_free(&y);
}

/* ---- typed readers on tests/fixtures/yaml/types.yaml ------------------------- */

#define TYPES YDIR "/types.yaml"

typedef struct reader_fx {
    er_yaml y;
    yaml_node_t *root;
    er_diags d;
} reader_fx;

static int types_setup(void **state)
{
    reader_fx *f = calloc(1, sizeof *f);
    if (!f || er_yaml_load(&f->y, TYPES, &f->d) != EDGERT_OK || f->d.count != 0) {
        fprintf(stderr, "%s does not load\n", TYPES);
        free(f);
        return -1;
    }
    f->root = er_yaml_root(&f->y);
    *state = f;
    return 0;
}

static int types_teardown(void **state)
{
    reader_fx *f = *state;
    er_diags_free(&f->d);
    er_yaml_free(&f->y);
    free(f);
    return 0;
}

/* The reader returned -1 with exactly this one error; the list is emptied. */
static void expect_reader_error(reader_fx *f, int rc, unsigned line, unsigned col,
                                const char *msg)
{
    assert_int_equal(rc, -1);
    expect_one_error(&f->d, TYPES, line, col, msg);
    er_diags_free(&f->d);
}

static void expect_no_diag(reader_fx *f)
{
    if (f->d.count)
        print_diags(TYPES, &f->d);
    assert_int_equal(f->d.count, 0);
}

static void test_read_str(void **state)
{
    reader_fx *f = *state;
    static const struct {
        const char *key, *want;
    } ok[] = {
        {"str_plain", "hello"}, {"str_quoted", "two words"}, {"str_number", "42"},
        {"str_empty", ""}, /* quoted: a value, not null */
        {"bool_true", "true"}, {"num_dot_nan", ".nan"},
    };
    char *s = NULL;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(er_yaml_str(&f->y, f->root, ok[i].key, 1, &s, &f->d), 0);
        assert_string_equal(s, ok[i].want);
        free(s);
    }
    expect_no_diag(f);
    /* absent: "key:" with nothing, ~, NULL, or no key at all */
    static const char *absent[] = {"str_absent", "str_tilde", "str_null", "no_such_key"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        s = (char *)"untouched";
        assert_int_equal(er_yaml_str(&f->y, f->root, absent[i], 0, &s, &f->d), 1);
        assert_null(s);
    }
    expect_no_diag(f);
    /* required: missing, at the mapping's own place */
    expect_reader_error(f, er_yaml_str(&f->y, f->root, "str_tilde", 1, &s, &f->d), 4, 1,
                        "missing required field 'str_tilde'");
    assert_null(s);
    expect_reader_error(f, er_yaml_str(&f->y, f->root, "str_nul", 1, &s, &f->d), 8, 10,
                        "field 'str_nul': NUL character in the string");
    assert_null(s);
    expect_reader_error(f, er_yaml_str(&f->y, f->root, "map_flow", 1, &s, &f->d), 39, 11,
                        "field 'map_flow': expected a string, got a mapping");
    expect_reader_error(f, er_yaml_str(&f->y, f->root, "list_flow", 0, &s, &f->d), 31, 12,
                        "field 'list_flow': expected a string, got a list");
    assert_null(s);
}

static void test_read_bool(void **state)
{
    reader_fx *f = *state;
    int b = -1;
    assert_int_equal(er_yaml_bool(&f->y, f->root, "bool_true", 1, &b, &f->d), 0);
    assert_int_equal(b, 1);
    b = -1;
    assert_int_equal(er_yaml_bool(&f->y, f->root, "bool_upper", 1, &b, &f->d), 0);
    assert_int_equal(b, 1);
    assert_int_equal(er_yaml_bool(&f->y, f->root, "bool_false", 1, &b, &f->d), 0);
    assert_int_equal(b, 0);
    b = 7;
    assert_int_equal(er_yaml_bool(&f->y, f->root, "str_absent", 0, &b, &f->d), 1);
    assert_int_equal(b, 7); /* untouched when absent */
    expect_no_diag(f);
    /* YAML 1.1's yes/no are not booleans here, nor is a quoted "true" */
    expect_reader_error(f, er_yaml_bool(&f->y, f->root, "bool_yes", 1, &b, &f->d), 15, 11,
                        "field 'bool_yes': expected true or false, got 'yes'");
    expect_reader_error(f, er_yaml_bool(&f->y, f->root, "bool_quoted", 1, &b, &f->d), 16, 14,
                        "field 'bool_quoted': expected true or false, got 'true'");
    expect_reader_error(f, er_yaml_bool(&f->y, f->root, "list_flow", 1, &b, &f->d), 31, 12,
                        "field 'list_flow': expected true or false, got a list");
    expect_reader_error(f, er_yaml_bool(&f->y, f->root, "no_such_key", 1, &b, &f->d), 4, 1,
                        "missing required field 'no_such_key'");
    assert_int_equal(b, 7);
}

static void test_read_int(void **state)
{
    reader_fx *f = *state;
    long long v = 0;
    assert_int_equal(er_yaml_int(&f->y, f->root, "int_plain", 1, -100, 100, &v, &f->d), 0);
    assert_int_equal(v, -17);
    assert_int_equal(er_yaml_int(&f->y, f->root, "int_plus", 1, 0, 9, &v, &f->d), 0);
    assert_int_equal(v, 5);
    assert_int_equal(er_yaml_int(&f->y, f->root, "str_number", 1, 42, 42, &v, &f->d), 0);
    assert_int_equal(v, 42); /* the bounds are inclusive */
    v = 3;
    assert_int_equal(er_yaml_int(&f->y, f->root, "str_null", 0, 0, 9, &v, &f->d), 1);
    assert_int_equal(v, 3);
    expect_no_diag(f);
    expect_reader_error(f, er_yaml_int(&f->y, f->root, "int_float", 1, 0, 9, &v, &f->d), 19, 12,
                        "field 'int_float': expected an integer, got '1.5'");
    expect_reader_error(f, er_yaml_int(&f->y, f->root, "int_hex", 1, 0, 99, &v, &f->d), 20, 10,
                        "field 'int_hex': expected an integer, got '0x10'");
    expect_reader_error(f, er_yaml_int(&f->y, f->root, "int_quoted", 1, 0, 9, &v, &f->d), 21,
                        13, "field 'int_quoted': expected an integer, got '5'");
    expect_reader_error(f, er_yaml_int(&f->y, f->root, "int_overflow", 1, 0, 9, &v, &f->d), 22,
                        15,
                        "field 'int_overflow': expected an integer, got '99999999999999999999'");
    expect_reader_error(f, er_yaml_int(&f->y, f->root, "int_big", 1, 1, 65535, &v, &f->d), 23, 10,
                        "field 'int_big': 70000 is out of range [1, 65535]");
    expect_reader_error(f, er_yaml_int(&f->y, f->root, "int_plain", 1, 0, 9, &v, &f->d), 17, 12,
                        "field 'int_plain': -17 is out of range [0, 9]");
    expect_reader_error(f, er_yaml_int(&f->y, f->root, "str_empty", 1, 0, 9, &v, &f->d), 7, 12,
                        "field 'str_empty': expected an integer, got ''");
    expect_reader_error(f, er_yaml_int(&f->y, f->root, "map_block", 1, 0, 9, &v, &f->d), 41, 3,
                        "field 'map_block': expected an integer, got a mapping");
    assert_int_equal(v, 3); /* never written on an error */
}

static void test_read_num(void **state)
{
    reader_fx *f = *state;
    double x = 0;
    assert_int_equal(er_yaml_num(&f->y, f->root, "num_plain", 1, &x, &f->d), 0);
    assert_true(x == 2.5e-3);
    assert_int_equal(er_yaml_num(&f->y, f->root, "num_int", 1, &x, &f->d), 0);
    assert_true(x == 7.0);
    assert_int_equal(er_yaml_num(&f->y, f->root, "int_plain", 1, &x, &f->d), 0);
    assert_true(x == -17.0);
    x = 1.25;
    assert_int_equal(er_yaml_num(&f->y, f->root, "no_such_key", 0, &x, &f->d), 1);
    assert_true(x == 1.25);
    expect_no_diag(f);
    /* NaN and infinities are refused, in YAML's spelling or C's */
    expect_reader_error(f, er_yaml_num(&f->y, f->root, "num_dot_nan", 1, &x, &f->d), 26, 14,
                        "field 'num_dot_nan': expected a finite number, got '.nan'");
    expect_reader_error(f, er_yaml_num(&f->y, f->root, "num_nan", 1, &x, &f->d), 27, 10,
                        "field 'num_nan': expected a finite number, got 'nan'");
    expect_reader_error(f, er_yaml_num(&f->y, f->root, "num_overflow", 1, &x, &f->d), 28, 15,
                        "field 'num_overflow': expected a finite number, got '1e999'");
    /* a quoted number is text; a word is "not a finite number" too */
    expect_reader_error(f, er_yaml_num(&f->y, f->root, "num_quoted", 1, &x, &f->d), 29, 13,
                        "field 'num_quoted': expected a number, got '2.5'");
    expect_reader_error(f, er_yaml_num(&f->y, f->root, "num_word", 1, &x, &f->d), 30, 11,
                        "field 'num_word': expected a finite number, got 'fast'");
    expect_reader_error(f, er_yaml_num(&f->y, f->root, "list_empty", 1, &x, &f->d), 32, 13,
                        "field 'list_empty': expected a number, got a list");
    assert_true(x == 1.25);
}

static void test_read_strlist(void **state)
{
    reader_fx *f = *state;
    char **list = NULL;
    size_t n = 99;
    assert_int_equal(er_yaml_strlist(&f->y, f->root, "list_flow", 1, &list, &n, &f->d), 0);
    assert_int_equal(n, 3);
    assert_string_equal(list[0], "a");
    assert_string_equal(list[1], "b c");
    assert_string_equal(list[2], "3");
    assert_null(list[3]);
    er_strlist_free(list);
    assert_int_equal(er_yaml_strlist(&f->y, f->root, "list_empty", 1, &list, &n, &f->d), 0);
    assert_int_equal(n, 0);
    assert_non_null(list); /* an empty list, not an absent one */
    assert_null(list[0]);
    er_strlist_free(list);
    assert_int_equal(er_yaml_strlist(&f->y, f->root, "str_absent", 0, &list, NULL, &f->d), 1);
    assert_null(list);
    er_strlist_free(NULL);
    expect_no_diag(f);

    n = 99;
    expect_reader_error(f, er_yaml_strlist(&f->y, f->root, "list_scalar", 1, &list, &n, &f->d),
                        33, 14, "field 'list_scalar': expected a list, got 'just-one'");
    assert_null(list);
    assert_int_equal(n, 0);
    /* an item's error names the item, at the item's place */
    expect_reader_error(f, er_yaml_strlist(&f->y, f->root, "list_null_item", 1, &list, &n, &f->d),
                        34, 21, "field 'list_null_item[1]': expected a string, got '~'");
    expect_reader_error(f, er_yaml_strlist(&f->y, f->root, "list_map_item", 1, &list, &n, &f->d),
                        35, 20, "field 'list_map_item[1]': expected a string, got a mapping");
    expect_reader_error(f, er_yaml_strlist(&f->y, f->root, "list_block", 1, &list, &n, &f->d),
                        38, 5, "field 'list_block[1]': expected a string, got a mapping");
    assert_null(list);
    assert_int_equal(n, 0);
}

static void test_read_map(void **state)
{
    reader_fx *f = *state;
    yaml_node_t *m = NULL;
    assert_int_equal(er_yaml_map(&f->y, f->root, "map_flow", 1, &m, &f->d), 0);
    assert_non_null(m);
    assert_int_equal(er_yaml_line(m), 39);
    assert_int_equal(er_yaml_col(m), 11);
    assert_int_equal(er_yaml_map(&f->y, f->root, "map_block", 1, &m, &f->d), 0);
    assert_int_equal(er_yaml_line(m), 41); /* a block mapping starts at its first key */
    assert_int_equal(er_yaml_col(m), 3);
    assert_int_equal(er_yaml_map(&f->y, f->root, "str_tilde", 0, &m, &f->d), 1);
    assert_null(m);
    expect_no_diag(f);
    expect_reader_error(f, er_yaml_map(&f->y, f->root, "map_list", 1, &m, &f->d), 43, 11,
                        "field 'map_list': expected a mapping, got a list");
    expect_reader_error(f, er_yaml_map(&f->y, f->root, "map_scalar", 1, &m, &f->d), 44, 13,
                        "field 'map_scalar': expected a mapping, got 'word'");
    /* a missing field of a nested mapping is reported at that mapping */
    assert_int_equal(er_yaml_map(&f->y, f->root, "map_block", 1, &m, &f->d), 0);
    long long v;
    expect_reader_error(f, er_yaml_int(&f->y, m, "group", 1, 0, 9, &v, &f->d), 41, 3,
                        "missing required field 'group'");
}

/* y->section prefixes field names in every message. */
static void test_section_prefix(void **state)
{
    reader_fx *f = *state;
    yaml_node_t *m = NULL;
    assert_int_equal(er_yaml_map(&f->y, f->root, "map_block", 1, &m, &f->d), 0);
    f->y.section = "layout";
    long long v;
    expect_reader_error(f, er_yaml_int(&f->y, m, "b", 1, 0, 9, &v, &f->d), 42, 6,
                        "field 'layout.b': expected an integer, got a list");
    expect_reader_error(f, er_yaml_int(&f->y, m, "c", 1, 0, 9, &v, &f->d), 41, 3,
                        "missing required field 'layout.c'");
    static const char *const known[] = {"a", NULL};
    assert_int_equal(er_yaml_check_keys(&f->y, m, known, &f->d), 0);
    assert_int_equal(f->d.count, 1);
    expect_diag_at(&f->d, 0, EDGERT_LOG_WARN, TYPES, 42, 3, "unknown key 'layout.b' ignored", 0);
    er_diags_free(&f->d);
    yaml_node_t *list = er_yaml_get(&f->y, f->root, "map_list");
    expect_reader_error(f, er_yaml_check_keys(&f->y, list, known, &f->d), 43, 11,
                        "layout: expected a mapping of fields, got a list");
    f->y.section = NULL;
    expect_reader_error(f, er_yaml_check_keys(&f->y, er_yaml_get(&f->y, f->root, "map_scalar"),
                                              known, &f->d),
                        44, 13, "expected a mapping of fields, got a scalar");
    /* no node at all: -1, and nothing to point at */
    assert_int_equal(er_yaml_check_keys(&f->y, NULL, known, &f->d), -1);
    expect_no_diag(f);
}

/* ---- keys -------------------------------------------------------------------- */

/* The first of two equal keys is the one read; every later one is an error
 * at its own place (quoted or not), and so is a key that is not a scalar. */
static void test_duplicate_keys(void **state)
{
    (void)state;
    const char *path = YDIR "/duplicate-keys.yaml";
    er_yaml y;
    yaml_node_t *root = load_ok(&y, path);
    er_diags d = {0};
    char *s = NULL;
    assert_int_equal(er_yaml_str(&y, root, "name", 1, &s, &d), 0);
    assert_string_equal(s, "first");
    free(s);

    static const char *const known[] = {"name", "vendor", "layout", NULL};
    assert_int_equal(er_yaml_check_keys(&y, root, known, &d), -1);
    if (d.count != 3)
        print_diags(path, &d);
    assert_int_equal(d.count, 3);
    expect_diag_at(&d, 0, EDGERT_LOG_ERROR, path, 5, 1, "duplicate key 'name'", 0);
    expect_diag_at(&d, 1, EDGERT_LOG_ERROR, path, 6, 1, "duplicate key 'name'", 0);
    expect_diag_at(&d, 2, EDGERT_LOG_ERROR, path, 10, 3, "a key must be a plain name, got a list",
                   0);
    er_diags_free(&d);

    /* in a section; an unknown duplicated key is also warned about, each time */
    yaml_node_t *layout = er_yaml_get(&y, root, "layout");
    y.section = "layout";
    long long bits = 0;
    assert_int_equal(er_yaml_int(&y, layout, "bits", 1, 0, 16, &bits, &d), 0);
    assert_int_equal(bits, 4);
    static const char *const layout_known[] = {"group", NULL};
    assert_int_equal(er_yaml_check_keys(&y, layout, layout_known, &d), -1);
    assert_int_equal(d.count, 3);
    expect_diag_at(&d, 0, EDGERT_LOG_WARN, path, 8, 3, "unknown key 'layout.bits' ignored", 0);
    expect_diag_at(&d, 1, EDGERT_LOG_ERROR, path, 9, 3, "duplicate key 'layout.bits'", 0);
    expect_diag_at(&d, 2, EDGERT_LOG_WARN, path, 9, 3, "unknown key 'layout.bits' ignored", 0);
    er_diags_free(&d);
    er_yaml_free(&y);
}

/* ---- anchors, aliases, merge keys, tags ------------------------------------- */

/* An alias IS the anchored node (libyaml's document API): values read
 * through it are the anchored ones, and an error in such a value names the
 * anchor's place, not the alias's. Merge keys ("<<") are not applied: "<<"
 * is an ordinary key. A self-referencing anchor makes a cycle, which the
 * readers (none of them recursive) refuse like any other wrong type. */
static void test_anchors_and_aliases(void **state)
{
    (void)state;
    const char *path = YDIR "/anchors.yaml";
    er_yaml y;
    yaml_node_t *root = load_ok(&y, path);
    er_diags d = {0};

    long long v = 0;
    assert_int_equal(er_yaml_int(&y, root, "workers", 1, 1, 64, &v, &d), 0);
    assert_int_equal(v, 4);
    assert_ptr_equal(er_yaml_get(&y, root, "workers"), er_yaml_get(&y, root, "threads"));
    assert_int_equal(er_yaml_int(&y, root, "size", 1, 0, 9, &v, &d), -1);
    expect_one_error(&d, path, 6, 7, "field 'size': expected an integer, got 'not a number'");
    er_diags_free(&d);

    yaml_node_t *copy = NULL;
    assert_int_equal(er_yaml_map(&y, root, "copy", 1, &copy, &d), 0);
    assert_ptr_equal(copy, er_yaml_get(&y, root, "base"));
    assert_int_equal(er_yaml_line(copy), 8);
    assert_int_equal(er_yaml_col(copy), 7); /* the anchor is part of the node */
    assert_int_equal(er_yaml_int(&y, copy, "bits", 1, 0, 16, &v, &d), 0);
    assert_int_equal(v, 4);

    yaml_node_t *req = NULL;
    char **flags = NULL;
    size_t n = 0;
    assert_int_equal(er_yaml_map(&y, root, "requires", 1, &req, &d), 0);
    assert_int_equal(er_yaml_strlist(&y, req, "cpu_flags", 1, &flags, &n, &d), 0);
    assert_int_equal(n, 2);
    assert_string_equal(flags[0], "avx2");
    assert_string_equal(flags[1], "fma");
    er_strlist_free(flags);
    assert_int_equal(d.count, 0);

    yaml_node_t *merged = er_yaml_get(&y, root, "merged");
    assert_null(er_yaml_get(&y, merged, "format"));
    assert_ptr_equal(er_yaml_get(&y, merged, "<<"), copy);
    assert_int_equal(er_yaml_int(&y, merged, "bits", 1, 0, 16, &v, &d), 0);
    assert_int_equal(v, 8);
    static const char *const known[] = {"format", "bits", NULL};
    assert_int_equal(er_yaml_check_keys(&y, merged, known, &d), 0);
    assert_int_equal(d.count, 1);
    expect_diag_at(&d, 0, EDGERT_LOG_WARN, path, 13, 3, "unknown key '<<' ignored", 0);
    er_diags_free(&d);

    assert_int_equal(er_yaml_strlist(&y, root, "list_of_aliases", 1, &flags, &n, &d), -1);
    expect_one_error(&d, path, 8, 7,
                     "field 'list_of_aliases[2]': expected a string, got a mapping");
    er_diags_free(&d);

    yaml_node_t *cycle = er_yaml_get(&y, root, "cycle");
    assert_int_equal(cycle->type, YAML_SEQUENCE_NODE);
    assert_ptr_equal(er_yaml_node(&y, cycle->data.sequence.items.start[1]), cycle);
    assert_int_equal(er_yaml_strlist(&y, root, "cycle", 1, &flags, &n, &d), -1);
    expect_one_error(&d, path, 16, 8, "field 'cycle[1]': expected a string, got a list");
    er_diags_free(&d);
    er_yaml_free(&y);
}

/* Tags are not interpreted: a value is read by its text and quoting style. */
static void test_tags(void **state)
{
    (void)state;
    const char *path = YDIR "/tags.yaml";
    er_yaml y;
    yaml_node_t *root = load_ok(&y, path);
    er_diags d = {0};
    long long v = 0;
    assert_int_equal(er_yaml_int(&y, root, "str_tagged_int", 1, 0, 99, &v, &d), 0);
    assert_int_equal(v, 12); /* !!str does not make it a string */
    assert_int_equal(er_yaml_int(&y, root, "int_tagged_quoted", 1, 0, 99, &v, &d), -1);
    expect_one_error(&d, path, 4, 20,
                     "field 'int_tagged_quoted': expected an integer, got '12'");
    er_diags_free(&d);
    char *s = NULL;
    assert_int_equal(er_yaml_str(&y, root, "custom", 1, &s, &d), 0);
    assert_string_equal(s, "value");
    free(s);
    int b = 0;
    assert_int_equal(er_yaml_bool(&y, root, "verbatim", 1, &b, &d), 0);
    assert_int_equal(b, 1);
    /* !!null on a quoted "" is still a (empty) string, not absent */
    assert_int_equal(er_yaml_str(&y, root, "tagged_null", 1, &s, &d), 0);
    assert_string_equal(s, "");
    free(s);
    yaml_node_t *m = NULL;
    assert_int_equal(er_yaml_map(&y, root, "tagged_map", 1, &m, &d), 0);
    assert_int_equal(er_yaml_col(m), 13); /* the tag is part of the node */
    char **list = NULL;
    size_t n = 0;
    assert_int_equal(er_yaml_strlist(&y, root, "tagged_list", 1, &list, &n, &d), 0);
    assert_int_equal(n, 2);
    er_strlist_free(list);
    assert_int_equal(d.count, 0);
    er_yaml_free(&y);
}

#define READER(fn) cmocka_unit_test_setup_teardown(fn, types_setup, types_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accessors),
        READER(test_read_str),
        READER(test_read_bool),
        READER(test_read_int),
        READER(test_read_num),
        READER(test_read_strlist),
        READER(test_read_map),
        READER(test_section_prefix),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_anchors_and_aliases),
        cmocka_unit_test(test_tags),
    };
    return tu_run_group("yamldoc: fields", tests, NULL, NULL);
}
