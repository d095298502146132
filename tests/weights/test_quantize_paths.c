/*
 * tests/weights/test_quantize_paths.c — what `edgert quantize` may replace. Its two
 * renames at the end (OUT, then quantize_config.json beside it) are vetted
 * before any work (an adversary's walkthrough found /dev/null and a FIFO
 * replaced by checkpoints, another model's config overwritten, and OUT
 * named quantize_config.json overwritten by the config):
 * - OUT that exists and is no regular file (a FIFO here): refused, exit 1,
 *   the FIFO still a FIFO;
 * - OUT named quantize_config.json: a usage error, exit 2, nothing written;
 * - a quantize_config.json beside OUT that edgert did not write: kept as it
 *   is, exit 1; one edgert wrote is replaced (a second quantize into the
 *   same folder runs);
 * - IN named quantize_config.json beside OUT: never replaced.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "common/internal.h"
#include "test_util.h"
#include "test_cli_util.h"

/* A dense checkpoint of one layer F32 [16][128] at dir/name. */
static char *dense(const char *dir, const char *name)
{
    static float w[16 * 128];
    for (size_t i = 0; i < 16u * 128u; i++)
        w[i] = 0.01f * (float)(i % 97u) - 0.4f;
    char *p = tu_safetensors(dir, name,
                             "{\"model.layers.0.mlp.up_proj.weight\":{\"dtype\":\"F32\","
                             "\"shape\":[16,128],\"data_offsets\":[0,8192]}}",
                             w, sizeof w);
    assert_non_null(p);
    return p;
}

/* Run `quantize args` expecting exit `want` and a message holding `says`. */
static void expect(const char *args, int want, const char *says)
{
    char *out = NULL;
    int rc = run_all(args, &out);
    if (rc != want || !strstr(out, says))
        fail_msg("edgert %s: exit %d (want %d, saying '%s'):\n%s", args, rc, want, says, out);
    free(out);
}

static void test_out_not_regular(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[8600], path[4200];
    char *in = dense(dir, "in.safetensors");
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    snprintf(args, sizeof args, "quantize %s %s --sym", in, path);
    expect(args, 1, "not a regular file");
    struct stat sb;
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    snprintf(args, sizeof args, "quantize %s %s/quantize_config.json --sym", in, dir);
    expect(args, 2, "cannot be named quantize_config.json");
    snprintf(path, sizeof path, "%s/quantize_config.json", dir);
    assert_int_equal(access(path, F_OK), -1);
    free(in);
    tu_rmrf(dir);
}

static void test_foreign_config_kept(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[8600];
    char *in = dense(dir, "in.safetensors");
    static const char theirs[] = "{\"bits\": 4, \"group_size\": 32, \"desc_act\": true}\n";
    char *cfg = tu_write(dir, "quantize_config.json", "%s", theirs);
    snprintf(args, sizeof args, "quantize %s %s/q.safetensors --sym", in, dir);
    expect(args, 1, "not written by edgert");
    char back[256] = "";
    FILE *f = fopen(cfg, "rb");
    assert_non_null(f);
    back[fread(back, 1, sizeof back - 1, f)] = '\0';
    fclose(f);
    assert_string_equal(back, theirs);
    /* edgert's own is replaced: quantize twice into one folder */
    assert_int_equal(unlink(cfg), 0);
    snprintf(args, sizeof args, "quantize %s %s/q.safetensors --sym", in, dir);
    expect(args, 0, "wrote");
    snprintf(args, sizeof args, "quantize %s %s/q2.safetensors --asym", in, dir);
    expect(args, 0, "wrote");
    /* the input is the config's name beside OUT */
    char *named = dense(dir, "quantize_config.json");
    snprintf(args, sizeof args, "quantize %s %s/q3.safetensors --sym", named, dir);
    expect(args, 1, "would replace the input");
    free(named);
    free(cfg);
    free(in);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_out_not_regular),
        cmocka_unit_test(test_foreign_config_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
