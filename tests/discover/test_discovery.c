/*
 * tests/discover/test_discovery.c — where manifests are looked for: explicit paths,
 * EDGERT_MANIFEST_PATH (replaces), EDGERT_ADD_MANIFEST_PATH (prepends), the
 * defaults, sorted reading, first-wins duplicates, never the current folder,
 * group/world-writable folders and files (warned; refused as root).
 */
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "test_util.h"

static edgert_ctx *open_with(const char *const *paths, size_t n, int ignore_env, edgert_status *st,
                             char *err, size_t err_len)
{
    edgert_options o = {.struct_size = sizeof o};
    o.manifest_paths = paths;
    o.manifest_path_count = n;
    o.ignore_env = ignore_env;
    o.device_profile = EDGERT_TEST_FIXTURES "/devices/x86-avx2.yaml"; /* plan: no loading */
    o.threads = 1;
    o.log_level = EDGERT_LOG_ERROR;
    edgert_ctx *ctx = NULL;
    *st = edgert_open(&o, &ctx, err, err_len);
    return ctx;
}

static void clear_env(void)
{
    unsetenv("EDGERT_MANIFEST_PATH");
    unsetenv("EDGERT_ADD_MANIFEST_PATH");
    unsetenv("EDGERT_DISABLE");
}

static void test_env_replace_and_add(void **state)
{
    (void)state;
    char *a = tu_tmpdir(), *b = tu_tmpdir(), *c = tu_tmpdir();
    free(tu_manifest(a, "x.yaml", "from-a", NULL, NULL, NULL));
    free(tu_manifest(b, "x.yaml", "from-b", NULL, NULL, NULL));
    free(tu_manifest(c, "x.yaml", "from-c", NULL, NULL, NULL));
    char err[512];
    edgert_status st;

    clear_env();
    setenv("EDGERT_MANIFEST_PATH", a, 1);
    edgert_ctx *ctx = open_with(NULL, 0, 0, &st, err, sizeof err);
    assert_int_equal(st, EDGERT_OK);
    assert_int_equal(edgert_search_path_count(ctx), 1);
    assert_string_equal(edgert_search_path_at(ctx, 0, NULL), a);
    assert_non_null(edgert_candidate_find(ctx, "from-a"));
    edgert_close(ctx);

    /* ADD comes first, MANIFEST_PATH after it. */
    setenv("EDGERT_ADD_MANIFEST_PATH", b, 1);
    ctx = open_with(NULL, 0, 0, &st, err, sizeof err);
    assert_int_equal(edgert_search_path_count(ctx), 2);
    const char *origin = NULL;
    assert_string_equal(edgert_search_path_at(ctx, 0, &origin), b);
    assert_string_equal(origin, "EDGERT_ADD_MANIFEST_PATH");
    assert_string_equal(edgert_search_path_at(ctx, 1, &origin), a);
    assert_string_equal(origin, "EDGERT_MANIFEST_PATH");
    edgert_close(ctx);

    /* Explicit paths replace EDGERT_MANIFEST_PATH (ADD still comes first). */
    const char *paths[1] = {c};
    ctx = open_with(paths, 1, 0, &st, err, sizeof err);
    assert_non_null(edgert_candidate_find(ctx, "from-b"));
    assert_non_null(edgert_candidate_find(ctx, "from-c"));
    assert_null(edgert_candidate_find(ctx, "from-a"));
    edgert_close(ctx);

    /* ignore_env: nothing from the environment. */
    ctx = open_with(paths, 1, 1, &st, err, sizeof err);
    assert_null(edgert_candidate_find(ctx, "from-b"));
    assert_int_equal(edgert_search_path_count(ctx), 1);
    edgert_close(ctx);

    /* Disable list from the environment. */
    setenv("EDGERT_DISABLE", "from-c, other", 1);
    ctx = open_with(paths, 1, 0, &st, err, sizeof err);
    assert_false(edgert_candidate_find(ctx, "from-c")->eligible);
    edgert_close(ctx);
    /* in any case, split by ';' and ':' too: an operator's kill switch that
     * misses by a capital letter or a separator disables nothing */
    for (int i = 0; i < 2; i++) {
        setenv("EDGERT_DISABLE", i ? "other:From-C" : "other;FROM-C", 1);
        ctx = open_with(paths, 1, 0, &st, err, sizeof err);
        assert_false(edgert_candidate_find(ctx, "from-c")->eligible);
        edgert_close(ctx);
    }
    clear_env();
    tu_rmrf(a);
    tu_rmrf(b);
    tu_rmrf(c);
}

/* Empty elements and relative folders in the variables are skipped with a
 * warning: the current directory is never searched. */
static void test_never_cwd(void **state)
{
    (void)state;
    char *cwd = tu_tmpdir(), *a = tu_tmpdir();
    free(tu_manifest(cwd, "evil.yaml", "from-cwd", NULL, NULL, NULL));
    free(tu_manifest(a, "ok.yaml", "from-a", NULL, NULL, NULL));
    char old[4096];
    assert_non_null(getcwd(old, sizeof old));
    assert_int_equal(chdir(cwd), 0);
    char list[8192];
    snprintf(list, sizeof list, ":.:%s::relative/dir", a);
    clear_env();
    setenv("EDGERT_MANIFEST_PATH", list, 1);
    char err[512];
    edgert_status st;
    edgert_ctx *ctx = open_with(NULL, 0, 0, &st, err, sizeof err);
    assert_int_equal(st, EDGERT_OK);
    assert_null(edgert_candidate_find(ctx, "from-cwd"));
    assert_non_null(edgert_candidate_find(ctx, "from-a"));
    assert_int_equal(edgert_search_path_count(ctx), 1);
    int warnings = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        warnings += edgert_diag_at(ctx, i)->level == EDGERT_LOG_WARN;
    assert_true(warnings >= 3);
    edgert_close(ctx);
    clear_env();

    /* With no variables and no explicit paths: the defaults, never cwd. */
    ctx = open_with(NULL, 0, 1, &st, err, sizeof err);
    assert_null(edgert_candidate_find(ctx, "from-cwd"));
    for (size_t i = 0; i < edgert_search_path_count(ctx); i++) {
        const char *origin = NULL;
        const char *p = edgert_search_path_at(ctx, i, &origin);
        assert_true(p[0] == '/');
        assert_non_null(strstr(origin, "default"));
    }
    /* The test binary runs from the build tree: its backends folder is searched. */
    int build = 0;
    for (size_t i = 0; i < edgert_search_path_count(ctx); i++)
        build |= strcmp(edgert_search_path_at(ctx, i, NULL), EDGERT_TEST_BACKEND_DIR) == 0;
    assert_true(build);
    assert_non_null(edgert_candidate_find(ctx, "ref-w4a16"));
    edgert_close(ctx);
    assert_int_equal(chdir(old), 0);
    tu_rmrf(cwd);
    tu_rmrf(a);
}

/* Whether a diagnostic of `level` says `what`. */
static int said(const edgert_ctx *ctx, edgert_log_level level, const char *what)
{
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        if (edgert_diag_at(ctx, i)->level == level &&
            strstr(edgert_diag_at(ctx, i)->message, what))
            return 1;
    return 0;
}

/* What a user who got a name wrong is told: a folder named in a variable
 * that is not there, a folder whose only manifest is invalid (not "none
 * found"), a disable list naming no manifest. */
static void test_mistakes_said(void **state)
{
    (void)state;
    char *a = tu_tmpdir(), bad[4200];
    snprintf(bad, sizeof bad, "%s/broken.yaml", a);
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("name: broken\n  oops: [\n", f);
    fclose(f);
    char list[8400], err[512];
    snprintf(list, sizeof list, "%s:/nonexistent-edgert-folder", a);
    clear_env();
    setenv("EDGERT_MANIFEST_PATH", list, 1);
    setenv("EDGERT_DISABLE", "no_such-backend", 1);
    edgert_status st;
    edgert_ctx *ctx = open_with(NULL, 0, 0, &st, err, sizeof err);
    assert_int_equal(st, EDGERT_OK);
    assert_int_equal(edgert_candidate_count(ctx), 0);
    assert_true(said(ctx, EDGERT_LOG_WARN, "manifest folder not readable"));
    assert_true(said(ctx, EDGERT_LOG_WARN, "the 1 found were all skipped"));
    assert_false(said(ctx, EDGERT_LOG_WARN, "no backend manifest found"));
    assert_true(said(ctx, EDGERT_LOG_WARN, "names 'no_such-backend', which no manifest"));
    edgert_close(ctx);
    clear_env();
    tu_rmrf(a);
}

/* Sorted reading, first wins, the loser is reported; non-YAML files ignored. */
static void test_sorted_first_wins(void **state)
{
    (void)state;
    char *d = tu_tmpdir();
    /* Written in reverse order: readdir order must not matter. */
    free(tu_manifest(d, "b.yaml", "same", NULL, NULL, "notes: \"from b\"\n"));
    free(tu_manifest(d, "a.yml", "same", NULL, NULL, "notes: \"from a\"\n"));
    free(tu_manifest(d, "c.yaml.bak", "bak", NULL, NULL, NULL));
    free(tu_manifest(d, ".hidden.yaml", "hidden", NULL, NULL, NULL));
    const char *paths[1] = {d};
    char err[512];
    edgert_status st;
    edgert_ctx *ctx = open_with(paths, 1, 1, &st, err, sizeof err);
    assert_int_equal(st, EDGERT_OK);
    assert_int_equal(edgert_candidate_count(ctx), 1);
    assert_string_equal(edgert_candidate_find(ctx, "same")->notes, "from a");
    int reported = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *g = edgert_diag_at(ctx, i);
        if (g->file && strstr(g->file, "b.yaml") && strstr(g->message, "first wins"))
            reported = 1;
    }
    assert_true(reported);
    edgert_close(ctx);
    tu_rmrf(d);
}

/* A bad manifest in a folder is skipped; named explicitly it is fatal. */
static void test_explicit_files(void **state)
{
    (void)state;
    char *d = tu_tmpdir();
    char *good = tu_manifest(d, "good.yaml", "good", NULL, NULL, NULL);
    char *bad = tu_write(d, "bad.yaml", "manifest_version: 1\nname: bad\nlayout: 3\n");
    char err[4096]; /* the whole message: every error of bad.yaml, at its position */
    edgert_status st;
    const char *folder[1] = {d};
    edgert_ctx *ctx = open_with(folder, 1, 1, &st, err, sizeof err);
    assert_int_equal(st, EDGERT_OK);
    assert_non_null(edgert_candidate_find(ctx, "good"));
    assert_null(edgert_candidate_find(ctx, "bad"));
    int reported = 0; /* skipped, but said, at the value's line and column */
    for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *g = edgert_diag_at(ctx, i);
        reported |= g->file && strcmp(g->file, bad) == 0 && g->line == 3 && g->column == 9 &&
                    strstr(g->message, "field 'layout': expected a mapping, got '3'") != NULL;
    }
    assert_true(reported);
    edgert_close(ctx);

    const char *files[2] = {good, bad};
    ctx = open_with(files, 2, 1, &st, err, sizeof err);
    assert_null(ctx);
    assert_int_equal(st, EDGERT_E_PARSE);
    assert_non_null(strstr(err, "bad.yaml:3:9: field 'layout': expected a mapping, got '3'"));

    const char *missing[1] = {"/nonexistent/edgert/manifest.yaml"};
    ctx = open_with(missing, 1, 1, &st, err, sizeof err);
    assert_null(ctx);
    assert_int_equal(st, EDGERT_E_NOT_FOUND);
    free(good);
    free(bad);
    tu_rmrf(d);
}

/* Whether a warning names `path` and `mode` ("0777"); when `refused`, it
 * must also say the path was refused. */
static int warned_mode(const edgert_ctx *ctx, const char *path, const char *mode, int refused)
{
    char want[32];
    snprintf(want, sizeof want, "(mode %s)", mode);
    for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *g = edgert_diag_at(ctx, i);
        if (g->level == EDGERT_LOG_WARN && g->file && strcmp(g->file, path) == 0 &&
            strstr(g->message, want) && !strstr(g->message, "refused") == !refused)
            return 1;
    }
    return 0;
}

/* A 0777 folder, a 0666 manifest and a 0620 (group-writable) one, each with
 * a backend: all warned with path and mode; as root or under secure
 * execution (`strict`) they are not read, and the folder and the file, named
 * explicitly, are errors; otherwise they are used. A folder named that
 * cannot be read (0000, for anyone but root) is an error too. Returns the
 * number of failed checks (a forked child reports it as its exit code). */
static int check_writable(const char *root, int strict)
{
    char open_dir[4200], loose_dir[4200], locked[4200], err[4096];
    snprintf(open_dir, sizeof open_dir, "%s/open", root);
    snprintf(loose_dir, sizeof loose_dir, "%s/loose", root);
    snprintf(locked, sizeof locked, "%s/locked", root);
    int bad = 0;
    edgert_status st;
    const char *paths[2] = {open_dir, loose_dir};
    edgert_ctx *ctx = open_with(paths, 2, 1, &st, err, sizeof err);
    if (strict) {
        bad += ctx != NULL || st != EDGERT_E_IO || !strstr(err, open_dir) || !strstr(err, "0777");
        edgert_close(ctx);
        ctx = open_with(paths + 1, 1, 1, &st, err, sizeof err);
    }
    if (!ctx)
        return 100;
    char world[4400], group[4400];
    snprintf(world, sizeof world, "%s/world.yaml", loose_dir);
    snprintf(group, sizeof group, "%s/group.yaml", loose_dir);
    bad += !strict && !warned_mode(ctx, open_dir, "0777", strict);
    bad += !warned_mode(ctx, world, "0666", strict);
    bad += !warned_mode(ctx, group, "0664", strict);
    bad += (edgert_candidate_find(ctx, "in-open") != NULL) == strict;
    bad += (edgert_candidate_find(ctx, "world-writable") != NULL) == strict;
    bad += (edgert_candidate_find(ctx, "group-writable") != NULL) == strict;
    bad += !edgert_candidate_find(ctx, "owner-only"); /* 0644 in the same folder: fine */
    edgert_close(ctx);
    const char *file[1] = {world};
    ctx = open_with(file, 1, 1, &st, err, sizeof err);
    if (strict)
        bad += ctx != NULL || st != EDGERT_E_IO || !strstr(err, world) || !strstr(err, "0666");
    else
        bad += ctx == NULL || !edgert_candidate_find(ctx, "world-writable");
    edgert_close(ctx);
    if (geteuid() != 0) {
        const char *lk[1] = {locked};
        ctx = open_with(lk, 1, 1, &st, err, sizeof err);
        bad += ctx != NULL || st != EDGERT_E_IO || !strstr(err, "not readable");
        edgert_close(ctx);
    }
    return bad;
}

static void test_writable_refused_as_root(void **state)
{
    (void)state;
    char *root = tu_tmpdir(), dir[4200];
    snprintf(dir, sizeof dir, "%s/open", root);
    assert_int_equal(mkdir(dir, 0700), 0);
    free(tu_manifest(dir, "m.yaml", "in-open", NULL, NULL, NULL));
    assert_int_equal(chmod(dir, 0777), 0);
    snprintf(dir, sizeof dir, "%s/loose", root);
    assert_int_equal(mkdir(dir, 0755), 0);
    char *w = tu_manifest(dir, "world.yaml", "world-writable", NULL, NULL, NULL);
    char *g = tu_manifest(dir, "group.yaml", "group-writable", NULL, NULL, NULL);
    char *o = tu_manifest(dir, "owner.yaml", "owner-only", NULL, NULL, NULL);
    assert_int_equal(chmod(w, 0666), 0);
    assert_int_equal(chmod(g, 0664), 0); /* writable by the group only */
    assert_int_equal(chmod(o, 0644), 0);
    snprintf(dir, sizeof dir, "%s/locked", root);
    assert_int_equal(mkdir(dir, 0755), 0);
    free(tu_manifest(dir, "m.yaml", "in-locked", NULL, NULL, NULL));
    assert_int_equal(chmod(dir, 0), 0);
    assert_int_equal(chmod(root, 0755), 0);
    int strict = geteuid() == 0 || getauxval(AT_SECURE) != 0;
    assert_int_equal(check_writable(root, strict), 0);
    /* As root, the same files seen by an unprivileged user: warned, used. */
    if (geteuid() == 0) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
                _exit(99);
            _exit(check_writable(root, 0));
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    free(w);
    free(g);
    free(o);
    snprintf(dir, sizeof dir, "%s/locked", root);
    chmod(dir, 0755); /* so that the folder can be removed by anyone */
    tu_rmrf(root);
}

/* As root, a manifest, plugin or evidence file owned by another user, who
 * may rewrite it (an adversary's, owned by nobody, mode 0644/0755, were
 * taken): refused or ignored, naming the owner. Only root can give a file
 * away: skipped otherwise. */
static void test_owned_by_another_refused_as_root(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        printf("skipped: only root can make a file another user's\n");
        skip();
    }
    char *dir = tu_tmpdir(), lib[4300], cmd[9000], err[1024] = "";
    snprintf(lib, sizeof lib, "%s/libgood.so", dir);
    char *built = tu_plugin("tp_good");
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", built, lib);
    assert_int_equal(system(cmd), 0);
    free(built);
    free(tu_manifest(dir, "good.yaml", "test-good", lib, NULL, NULL));
    char *theirs = tu_manifest(dir, "theirs.yaml", "theirs", NULL, NULL, NULL);
    assert_int_equal(chown(lib, 65534, 65534), 0);
    assert_int_equal(chown(theirs, 65534, 65534), 0);
    const char *paths[1] = {dir};
    edgert_options o = {.struct_size = sizeof o, .manifest_paths = paths,
                        .manifest_path_count = 1, .threads = 1, .log_level = EDGERT_LOG_ERROR};
    char *saved = NULL, *cache = tu_fresh_cache(&saved); /* live: the plugin's gate runs */
    edgert_ctx *ctx = NULL;
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        fail_msg("edgert_open: %s", err);
    tu_restore_cache(cache, saved);
    assert_null(edgert_candidate_find(ctx, "theirs")); /* the manifest: skipped */
    const edgert_candidate *g = edgert_candidate_find(ctx, "test-good");
    assert_non_null(g);
    if (g->eligible || !strstr(g->detail, "owned by uid 65534"))
        fail_msg("a plugin owned by nobody, as root: %s", g->detail);
    int said = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        said |= strstr(edgert_diag_at(ctx, i)->message, "owned by uid 65534") != NULL &&
                strstr(edgert_diag_at(ctx, i)->file, "theirs.yaml") != NULL;
    assert_true(said);
    edgert_close(ctx);
    /* an evidence file another user could have written: ignored, said */
    char *ev = tu_write(dir, "ev.json", "{\"evidence_version\": 1, \"entries\": []}\n");
    assert_int_equal(chown(ev, 65534, 65534), 0);
    o.evidence_file = ev;
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        fail_msg("edgert_open: %s", err);
    said = 0;
    for (size_t i = 0; i < edgert_diag_count(ctx); i++)
        said |= strstr(edgert_diag_at(ctx, i)->message, "evidence file owned by uid 65534") != 0;
    assert_true(said);
    edgert_close(ctx);
    free(ev);
    free(theirs);
    tu_rmrf(dir);
}

/* Options that cannot mean anything are refused, not read as something: an
 * empty or NULL manifest path (which searched nothing), a log level that is
 * no edgert_log_level (99 read as debug). */
static void test_meaningless_options_refused(void **state)
{
    (void)state;
    char err[512];
    edgert_status st;
    const char *empty[2] = {EDGERT_TEST_FIXTURES, ""}, *null[1] = {NULL};
    assert_null(open_with(empty, 2, 1, &st, err, sizeof err));
    assert_int_equal(st, EDGERT_E_USAGE);
    assert_non_null(strstr(err, "manifest_paths[1] is empty"));
    assert_null(open_with(null, 1, 1, &st, err, sizeof err));
    assert_int_equal(st, EDGERT_E_USAGE);
    static const int levels[] = {-3, 5, 99};
    for (size_t i = 0; i < 3; i++) {
        edgert_options o = {.struct_size = sizeof o, .ignore_env = 1, .threads = 1};
        o.device_profile = EDGERT_TEST_FIXTURES "/devices/x86-avx2.yaml";
        o.log_level = levels[i];
        edgert_ctx *ctx = NULL;
        assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_E_USAGE);
        assert_null(ctx);
        assert_non_null(strstr(err, "log_level"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_replace_and_add),
        cmocka_unit_test(test_meaningless_options_refused),
        cmocka_unit_test(test_never_cwd),
        cmocka_unit_test(test_mistakes_said),
        cmocka_unit_test(test_sorted_first_wins),
        cmocka_unit_test(test_explicit_files),
        cmocka_unit_test(test_writable_refused_as_root),
        cmocka_unit_test(test_owned_by_another_refused_as_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
