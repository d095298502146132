/*
 * tests/gate/test_checksum.c — edgert_checksum_file and edgert_manifest_stamp
 * (core/gate/checksum.c), and `edgert checksum`'s exit codes:
 * - a checksum is "xxh3-64:" and 16 hex digits, and changes with the bytes;
 * - stamping adds a `checksum:` line after `library:`, in the file's own
 *   line ending (a CRLF manifest stays CRLF: a vendor's walkthrough found
 *   a lone LF added), or replaces the value in place, keeping the rest;
 * - a manifest whose library is missing is named in the error, and nothing
 *   changes;
 * - a manifest named through a symlink: its file is stamped, the link kept;
 * - `edgert checksum` of a file that is not there exits 4, like every
 *   command given a missing input file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "edgert/edgert.h"
#include "common/internal.h" /* test_cli_util.h reads YAML with the core's reader */
#include "test_util.h"
#include "test_cli_util.h"
#include "discover/manifest.h"

static const char *const manifest_lines[] = {
    "manifest_version: 1", "name: stamped", "version: \"1\"", "vendor: t", "library: libx.so",
    "abi: {min: 1, max: 1}", "arch: x86_64", "device_classes: [x86_cpu]", "processor: cpu",
    "layout: {format: f, weight_bits: 4, symmetric: true, activation_dtype: fp32, "
    "bits_per_weight: 4.5}",
    "runs_in_process: true", "verified: false", "rationale: \"t\" # kept", NULL};

/* The manifest with `eol` after every line, into dir/m.yaml; its path. */
static char *write_manifest(const char *dir, const char *eol)
{
    char text[2048] = "";
    for (size_t i = 0; manifest_lines[i]; i++) {
        strcat(text, manifest_lines[i]);
        strcat(text, eol);
    }
    return tu_write(dir, "m.yaml", "%s", text);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_checksum_file(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), sum[EDGERT_CHECKSUM_LEN], again[EDGERT_CHECKSUM_LEN], err[512];
    char *a = tu_write(dir, "a.bin", "one");
    assert_int_equal(edgert_checksum_file(a, sum, sizeof sum, err, sizeof err), EDGERT_OK);
    assert_int_equal(strlen(sum), 24);
    assert_int_equal(strncmp(sum, "xxh3-64:", 8), 0);
    free(tu_write(dir, "a.bin", "two"));
    assert_int_equal(edgert_checksum_file(a, again, sizeof again, err, sizeof err), EDGERT_OK);
    assert_string_not_equal(sum, again);
    assert_int_equal(edgert_checksum_file("/nonexistent.so", sum, sizeof sum, err, sizeof err),
                     EDGERT_E_IO);
    assert_non_null(strstr(err, "no such file"));
    /* a folder is said to be one (it was "no such file", from a stale errno) */
    assert_int_equal(edgert_checksum_file(dir, sum, sizeof sum, err, sizeof err), EDGERT_E_IO);
    assert_non_null(strstr(err, "not a regular file"));
    free(a);
    tu_rmrf(dir);
}

static void test_stamp_keeps_line_endings(void **state)
{
    (void)state;
    const char *eols[] = {"\n", "\r\n"};
    for (size_t e = 0; e < 2; e++) {
        char *dir = tu_tmpdir(), sum[EDGERT_CHECKSUM_LEN], err[1024];
        free(tu_write(dir, "libx.so", "not really a library"));
        char *m = write_manifest(dir, eols[e]);
        assert_int_equal(edgert_manifest_stamp(m, sum, sizeof sum, err, sizeof err), EDGERT_OK);
        char want[128];
        snprintf(want, sizeof want, "library: libx.so%schecksum: \"%s\"%sabi:", eols[e], sum,
                 eols[e]);
        const char *text = slurp(m);
        if (!strstr(text, want))
            fail_msg("eol %zu: no '%s' in\n%s", e, want, text);
        if (e == 0)
            assert_null(strchr(text, '\r'));
        else /* every line ends in CRLF: as many CR as LF */
            for (const char *p = text; (p = strchr(p, '\n')); p++)
                assert_true(p > text && p[-1] == '\r');
        assert_non_null(strstr(text, "# kept"));
        /* again, with another library: the value is replaced in place */
        free(tu_write(dir, "libx.so", "another library"));
        char sum2[EDGERT_CHECKSUM_LEN];
        assert_int_equal(edgert_manifest_stamp(m, sum2, sizeof sum2, err, sizeof err), EDGERT_OK);
        assert_string_not_equal(sum, sum2);
        text = slurp(m);
        assert_non_null(strstr(text, sum2));
        assert_null(strstr(text, sum));
        free(m);
        tu_rmrf(dir);
    }
}

static void test_stamp_missing_library(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), sum[EDGERT_CHECKSUM_LEN], err[1024] = "";
    char *m = write_manifest(dir, "\n");
    char before[4096];
    snprintf(before, sizeof before, "%s", slurp(m));
    assert_int_equal(edgert_manifest_stamp(m, sum, sizeof sum, err, sizeof err), EDGERT_E_IO);
    if (!strstr(err, m) || !strstr(err, "libx.so") || !strstr(err, "no such file"))
        fail_msg("the error does not name the manifest and its library: %s", err);
    assert_string_equal(slurp(m), before);
    /* a checksum_out too short for the value is refused, not cut */
    free(tu_write(dir, "libx.so", "a library"));
    char small[8];
    assert_int_equal(edgert_manifest_stamp(m, small, sizeof small, err, sizeof err),
                     EDGERT_E_USAGE);
    assert_string_equal(slurp(m), before);
    free(m);
    tu_rmrf(dir);
}

/* A manifest named through a symlink (an operator's link into a shared
 * folder) is read and stamped where it really is: the file it names gets
 * the checksum of the library beside it, not of a .so of the same name
 * beside the link, and the link stays a link (before, it was replaced by a
 * stamped copy and the file left unstamped). Loading it through the link
 * finds the same library. */
static void test_stamp_through_symlink(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), sum[EDGERT_CHECKSUM_LEN], want[EDGERT_CHECKSUM_LEN];
    char err[1024] = "", link[4300], sub[4200];
    char *lib = tu_write(dir, "libx.so", "the library beside the manifest");
    char *m = write_manifest(dir, "\n");
    snprintf(sub, sizeof sub, "%s/elsewhere", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    free(tu_write(sub, "libx.so", "another library of the same name"));
    snprintf(link, sizeof link, "%s/link.yaml", sub);
    assert_int_equal(symlink("../m.yaml", link), 0);
    if (edgert_manifest_stamp(link, sum, sizeof sum, err, sizeof err) != EDGERT_OK)
        fail_msg("stamping through a link: %s", err);
    assert_int_equal(edgert_checksum_file(lib, want, sizeof want, err, sizeof err), EDGERT_OK);
    assert_string_equal(sum, want);
    struct stat sb;
    assert_int_equal(lstat(link, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    assert_non_null(strstr(slurp(m), sum));
    er_diags d = {0};
    er_manifest mf;
    assert_int_equal(er_manifest_load(link, &mf, &d), EDGERT_OK);
    char *real = realpath(lib, NULL); /* the folder as resolved (a /tmp that is a link) */
    assert_non_null(real);
    assert_string_equal(mf.library_path, real);
    free(real);
    er_manifest_free(&mf);
    er_diags_free(&d);
    free(lib);
    free(m);
    tu_rmrf(dir);
}

static void test_cli_exit_codes(void **state)
{
    (void)state;
    assert_int_equal(run("checksum /nonexistent/lib.so", NULL), 4);
    assert_int_equal(run("checksum", NULL), 2);
    char *dir = tu_tmpdir(), cmd[4200];
    char *m = write_manifest(dir, "\n");
    snprintf(cmd, sizeof cmd, "checksum --stamp %s", m); /* its library is missing */
    assert_int_equal(run(cmd, NULL), 1);
    free(tu_write(dir, "m.yaml", "manifest_version: 1\nname: [broken\n"));
    assert_int_equal(run(cmd, NULL), 4);
    /* a manifest given without --stamp: its own checksum, and a note saying so */
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "checksum %s", m);
    assert_int_equal(run_all(cmd, &out), 0);
    if (!strstr(out, "looks like a manifest") || !strstr(out, "--stamp"))
        fail_msg("no note for a manifest checksummed without --stamp: %s", out);
    free(out);
    free(m);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checksum_file),
        cmocka_unit_test(test_stamp_keeps_line_endings),
        cmocka_unit_test(test_stamp_missing_library),
        cmocka_unit_test(test_stamp_through_symlink),
        cmocka_unit_test(test_cli_exit_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
