/*
 * tests/tools/test_cli_explain.c — `select --explain` as a person reads it:
 * on every device fixture (and this device) for both priorities, its first
 * line names the backend selected and what decided it, the same backend the
 * "selected:" block names; on a terminal of 100 columns (script(1)'s
 * pseudo-terminal) no line is wider and the whole fits 40 rows; in a pipe,
 * lines stay whole for grep; the short form gives one figure per backend,
 * and --explain=full the provenance (layouts, checksums, the figures as
 * measured, a manifest's note of its measurements whole); another value of
 * --explain is a usage error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/internal.h"
#include "formats/yamldoc.h"
#include "test_util.h"
#include "test_cli_util.h"

#define DEVICES EDGERT_TEST_FIXTURES "/devices"

/* `CLI args` on a terminal of `width` columns (COLUMNS; script(1), from
 * bsdutils, gives it a pseudo-terminal), stdout captured without the
 * terminal's carriage returns; returns the exit code. */
static int run_tty(const char *args, int width, char **out)
{
    char inner[4600], cmd[5200];
    snprintf(inner, sizeof inner, "COLUMNS=%d %s %s 2>/dev/null", width, CLI, args);
    snprintf(cmd, sizeof cmd, "script -qec \"%s\" /dev/null | tr -d '\\r'", inner);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0)
        if ((len += got) + 4096 > cap)
            buf = realloc(buf, cap *= 2);
    buf[len] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Columns of a line: UTF-8 continuation bytes take none. */
static size_t columns(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0u) != 0x80u;
    return c;
}

/* One explain output's checks: the headline names what the selected block
 * names; with `width`, no line is wider; with `rows`, no more lines. */
static void check_explain(const char *what, const char *out, size_t width, size_t rows)
{
    char name[64] = "", block[80], *sel = NULL;
    if (sscanf(out, "selected %63s for ", name) != 1 && sscanf(out, "selected %63s", name) != 1)
        fail_msg("%s: the first line does not say what was selected:\n%.300s", what, out);
    name[strcspn(name, ":")] = '\0';
    snprintf(block, sizeof block, "\nselected: %s (", name);
    sel = strstr(out, block);
    if (!sel)
        fail_msg("%s: the headline names %s, the selected block another:\n%.300s", what, name,
                 out);
    const char *colon = strchr(out, ':');
    if (!colon || colon > strchr(out, '\n') + 1 + (width ? 200 : 0))
        fail_msg("%s: the headline says nothing of what decided:\n%.300s", what, out);
    size_t line = 1;
    for (const char *p = out; *p; line++) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        size_t lead = 0;
        while (lead < n && p[lead] == ' ')
            lead++;
        /* a word longer than a row stays whole, alone on its row */
        int one_word = memchr(p + lead, ' ', n - lead) == NULL;
        if (width && columns(p, n) > width && !one_word)
            fail_msg("%s: line %zu is %zu columns wide (at most %zu):\n%.*s", what, line,
                     columns(p, n), width, (int)n, p);
        p += e ? n + 1 : n;
    }
    if (rows && line - 1 > rows)
        fail_msg("%s: %zu lines (at most %zu):\n%s", what, line - 1, rows, out);
}

static void test_explain_on_every_device(void **state)
{
    (void)state;
    DIR *d = opendir(DEVICES);
    assert_non_null(d);
    const char *prios[2] = {"speed", "fidelity"};
    size_t checked = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0)
            continue;
        for (int p = 0; p < 2; p++) {
            char args[4096], what[512], *out;
            snprintf(args, sizeof args, "select --explain --priority %s --device %s/%s",
                     prios[p], DEVICES, e->d_name);
            snprintf(what, sizeof what, "%s, %s", e->d_name, prios[p]);
            assert_int_equal(run_tty(args, 100, &out), 0);
            check_explain(what, out, 100, 40);
            free(out);
            checked++;
        }
    }
    closedir(d);
    assert_true(checked >= 16); /* the fixtures: 8 devices, 2 priorities */
    /* this device (live: first contact's figures, the path chosen). Its
     * rows are not held to the 40 of the fixtures: what it says depends on
     * the moment (a first contact measured under contention adds 3 rows per
     * backend and 3 to the ranking, a decode group split by a hair 2 per
     * split; 46 rows with five eligible backends on a busy AVX-512 machine) */
    char *out;
    assert_int_equal(run_tty("select --explain", 100, &out), 0);
    check_explain("this device", out, 100, 0);
    free(out);
    assert_int_equal(run_tty("select --explain --priority fidelity", 60, &out), 0);
    check_explain("this device, 60 columns", out, 60, 0);
    free(out);
}

/* A pipe: lines whole (a script greps them), COLUMNS or not; the short form
 * without provenance, --explain=full with it, a manifest's note whole. */
static void test_explain_width_and_full(void **state)
{
    (void)state;
    char *out, *full;
    const char *args = "select --explain --device " DEVICES "/x86-avx512.yaml";
    assert_int_equal(run_redirected("COLUMNS=60", args, "2>/dev/null", &out), 0);
    check_explain("x86-avx512, a pipe", out, 0, 0);
    assert_int_equal(run_redirected("env -u COLUMNS", "select --explain=full --device " DEVICES
                                    "/x86-avx512.yaml", "2>/dev/null", &full), 0);
    /* provenance in the full form only: checksums, declared figures
     * with the manifest's note of where they were measured, whole */
    const char *prov[] = {"checksum: ", "declared: ", "(verified: ", "manifest folders searched"};
    for (size_t i = 0; i < sizeof prov / sizeof prov[0]; i++) {
        if (strstr(out, prov[i]))
            fail_msg("the short form says '%s':\n%s", prov[i], out);
        if (!strstr(full, prov[i]))
            fail_msg("--explain=full does not say '%s':\n%s", prov[i], full);
    }
    /* the rank lines give each backend's one figure, with its source */
    assert_non_null(strstr(out, " tok/s (declared), "));
    /* a whole line of the short output is wider than COLUMNS: not wrapped */
    int wide = 0;
    for (const char *p = out; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        wide |= columns(p, n) > 60;
        p += e ? n + 1 : n;
    }
    assert_true(wide);
    free(out);
    free(full);
    assert_int_equal(run_redirected("", "select --explain=most", "2>&1", &out), 2);
    assert_non_null(strstr(out, "--explain takes nothing or =full, not '=most'"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explain_on_every_device),
        cmocka_unit_test(test_explain_width_and_full),
    };
    return tu_run_group("cli explain", tests, NULL, NULL);
}
