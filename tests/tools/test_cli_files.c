/*
 * tests/tools/test_cli_files.c — files a user names on the `edgert` command line that
 * are not what they should be: a FIFO or a device where a file belongs (refused, never
 * read: reading a FIFO blocks), and workload files with the faults the YAML layer catches
 * in manifests (duplicate keys, runaway nesting, misspelt keys), each at its line and
 * column; options an operator gets wrong; and an output file's writer killed half way
 * (Ctrl-C during `edgert pack`), or `edgert export` stopped by Ctrl-C, which leave
 * nothing behind; `edgert export` killed outright, whose work folder the next export
 * removes; and a first-contact verdict cache that cannot be used, said.
 * Length: many small cases over the helpers they share (dense_of, run_all).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "edgert/export.h"
#include "common/internal.h"
#include "formats/safetensors.h"
#include "test_util.h"
#include "test_cli_util.h"
#include "test_st_util.h"
#include "formats/yamldoc.h"

/* A FIFO or a device named with --manifests is a bad file (exit 4, not 3 for
 * "nothing eligible"), said so, and never opened: reading a FIFO blocks. */
static void test_manifest_not_a_file(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), fifo[4200], args[8400], *out;
    snprintf(fifo, sizeof fifo, "%s/m.yaml", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "select --manifests %s", fifo);
    assert_int_equal(run_all(args, &out), 4);
    assert_non_null(strstr(out, "is a FIFO, not a manifest file or folder"));
    free(out);
    assert_int_equal(run_all("list --manifests /dev/null", &out), 4);
    assert_non_null(strstr(out, "/dev/null: is a device"));
    free(out);
    /* every other file a command names: refused the same way, never read
     * (each of these blocked forever before) */
    static const char *const cmds[] = {
        "select --weights %s", "pack %s --backend ref-w4a16 -o %s.packed",
        "verify --quick --weights %s", "bench --weights %s", "bench --workload %s",
        "checksum %s", "quantize %s %s.out --asym",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, cmds[i], fifo, fifo);
        assert_true(strlen(cmd) < sizeof cmd - 1);
        int rc = run_redirected("timeout 20", cmd, "2>&1", &out);
        if (rc != 4 || !strstr(out, "not a regular file"))
            fail_msg("%s: exit %d (want 4, 'not a regular file'):\n%s", cmd, rc, out);
        free(out);
    }
    tu_rmrf(dir);
}

/* A workload file goes through the YAML layer manifests do: duplicate keys
 * and runaway nesting refused (the nesting in no time: it was quadratic,
 * minutes for 600 KB), a typo of a key the shape lacks refused, a harmless
 * unknown key warned of, each at its line and column; exit 4. */
static void test_workload_file_checked(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[4300], *out;
    struct {
        const char *text, *says;
        int rc;
    } cases[] = {
        {"name: x\nshapes:\n  - {name: qkv, k: 2048, k: 4096, n: 3072, count: 28}\n",
         "w.yaml:3:26: duplicate key 'k'", 4},
        {"name: x\nshapes:\n  - {name: qkv, k: 256, n: 64, count: 1, haed: true}\n",
         "w.yaml:3:42: unknown key 'haed' (did you mean 'head'?)", 4},
        {"name: x\nshapes:\n  - {name: qkv, k: 256, n: 64, count: 1, color: red}\n",
         "w.yaml:3:42: unknown key 'color' ignored", 3},
        {"name: x\nshapes: []\n", "w.yaml:2:9: field 'shapes': must be a non-empty list", 4},
        {NULL, "w.yaml:2:136: collections nested deeper than 128 levels", 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *deep = NULL;
        if (!cases[i].text) { /* 100,000 nested lists */
            size_t n = 100000, at = 0;
            deep = malloc(2 * n + 32);
            assert_non_null(deep);
            at += (size_t)sprintf(deep, "name: x\nshapes: ");
            memset(deep + at, '[', n);
            memset(deep + at + n, ']', n);
            deep[at + 2 * n] = '\0';
        }
        free(tu_write(dir, "w.yaml", "%s", deep ? deep : cases[i].text));
        free(deep);
        snprintf(args, sizeof args, "bench --workload %s/w.yaml --backend no-such-backend", dir);
        int rc = run_redirected("timeout 20", args, "2>&1", &out);
        if (rc != cases[i].rc || !strstr(out, cases[i].says))
            fail_msg("case %zu: exit %d (want %d), must say '%s':\n%s", i, rc, cases[i].rc,
                     cases[i].says, out);
        free(out);
    }
    tu_rmrf(dir);
}

/* What an operator gets wrong on the command line, said and not silently
 * taken: a repeated --disable adds up, an empty value is refused, a backend
 * named by EDGERT_BACKEND is said to be, a plan refused where the command
 * runs here, a folder as calibrate's output refused before any measuring,
 * the folders searched named when no manifest is found. */
static void test_options_said(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[4400], *out = NULL;
    static const struct {
        const char *env, *args;
        int rc;
        const char *says;
    } cases[] = {
        {"", "select --priority ''", 2, "option '--priority' needs a value"},
        {"", "list --manifests ''", 2, "option '--manifests' needs a value"},
        {"", "help select", 0, "usage: edgert select"},
        {"EDGERT_BACKEND=no-such-backend", "select", 3, "named by EDGERT_BACKEND"},
        {"EDGERT_MANIFEST_PATH=/nonexistent-edgert-folder", "list", 0,
         "  /nonexistent-edgert-folder  [EDGERT_MANIFEST_PATH]"},
        {"", "calibrate --quick --out %s", 2, "is not a regular file (a folder?)"},
        {"", "pack %s/w.safetensors --backend auto -o %s/p.packed --device " EDGERT_TEST_FIXTURES
             "/devices/x86-avx512.yaml", 2, "--device plans for another machine"},
    };
    static const float w[4 * 64];
    char *wf = tu_safetensors(dir, "w.safetensors",
                              "{\"l.0.mlp.up_proj.weight\":{\"dtype\":\"F32\",\"shape\":[4,64],"
                              "\"data_offsets\":[0,1024]}}", w, sizeof w);
    assert_non_null(wf);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, cases[i].args, dir, dir);
        int rc = run_redirected(cases[i].env, args, "2>&1", &out);
        if (rc != cases[i].rc || !strstr(out, cases[i].says))
            fail_msg("%s edgert %s: exit %d (want %d), must say '%s':\n%s", cases[i].env, args,
                     rc, cases[i].rc, cases[i].says, out);
        free(out);
    }
    /* pack never replaces a file it did not write, --force or not: not its
     * own input (that destroyed the checkpoint), not another checkpoint */
    struct stat before, after;
    assert_int_equal(stat(wf, &before), 0);
    snprintf(args, sizeof args, "pack %s --backend ref-w4a16 -o %s --force", wf, wf);
    if (run_all(args, &out) != 1 || !strstr(out, "not a file 'edgert pack' wrote"))
        fail_msg("edgert %s: want exit 1, refused:\n%s", args, out);
    free(out);
    assert_int_equal(stat(wf, &after), 0);
    assert_true(after.st_size == before.st_size && after.st_mtime == before.st_mtime);
    /* --disable twice: both lists apply */
    assert_int_equal(run_all("list --disable avx512-w4a16 --disable ref-w4a16", &out), 0);
    size_t disabled = 0;
    for (const char *p = out; (p = strstr(p, "DISABLED_BY_USER")); p++)
        disabled++;
    if (disabled != 2)
        fail_msg("list --disable a --disable b: %zu backends disabled, want 2:\n%s", disabled,
                 out);
    free(out);
    free(wf);
    tu_rmrf(dir);
}

/* A packed file whose plugin file was rebuilt since: select --weights turns
 * its backend away (it checked the backend's name only, and bench then
 * failed on the stale bytes), saying to pack again. */
static void test_stale_packed_file(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[4400], *out = NULL;
    static const float w[4 * 128];
    char *wf = tu_safetensors(dir, "w.safetensors",
                              "{\"l.0.mlp.up_proj.weight\":{\"dtype\":\"F32\",\"shape\":[4,128],"
                              "\"data_offsets\":[0,2048]}}", w, sizeof w);
    snprintf(args, sizeof args, "pack %s --backend ref-w4a16 -o %s/p.packed", wf, dir);
    assert_int_equal(run_all(args, &out), 0);
    free(out);
    /* a packed file bench takes: pack's and quantize's refusal, exit 1 (it was 2 and 4) */
    snprintf(args, sizeof args, "pack %s/p.packed --backend ref-w4a16 -o %s/q", dir, dir);
    assert_int_equal(run_all(args, &out), 1);
    free(out);
    snprintf(args, sizeof args, "quantize %s/p.packed %s/q --asym", dir, dir);
    assert_int_equal(run_all(args, &out), 1);
    free(out);
    snprintf(args, sizeof args, "%s/p.packed", dir);
    FILE *f = fopen(args, "r+b");
    assert_non_null(f);
    static char head[65536];
    size_t n = fread(head, 1, sizeof head - 1, f);
    head[n] = '\0';
    char *h = n > 8 ? strstr(head + 8, "\"plugin_xxh3\":\"") : NULL; /* past the length */
    assert_non_null(h);
    h += strlen("\"plugin_xxh3\":\"");
    memcpy(h, h[0] == '0' ? "1111111111111111" : "0000000000000000", 16); /* another build */
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    assert_int_equal(fwrite(head, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    snprintf(args, sizeof args, "select --explain --backend ref-w4a16 --weights %s/p.packed", dir);
    int rc = run_all(args, &out);
    if (rc != 3 || !strstr(out, "LAYOUT_MISMATCH(packed by another build)") ||
        !strstr(out, "pack it again"))
        fail_msg("edgert %s: exit %d (want 3, packed by another build):\n%s", args, rc, out);
    free(out);
    free(wf);
    tu_rmrf(dir);
}

/* A dense file of n tensors named names[i], each F32 [rows[i]][128]. */
static char *dense_of(const char *dir, const char *file, const char *const *names,
                      const unsigned *rows, size_t n)
{
    char header[2048] = "{";
    size_t off = 0, at = 1;
    for (size_t i = 0; i < n; i++) {
        size_t bytes = (size_t)rows[i] * 128u * sizeof(float);
        at += (size_t)snprintf(header + at, sizeof header - at,
                               "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%u,128],"
                               "\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i], rows[i],
                               off, off + bytes);
        off += bytes;
    }
    snprintf(header + at, sizeof header - at, "}");
    float *w = malloc(off);
    assert_non_null(w);
    for (size_t i = 0; i < off / sizeof(float); i++)
        w[i] = 0.01f * (float)((i * 7919u) % 97u) - 0.48f;
    char *path = tu_safetensors(dir, file, header, w, off);
    free(w);
    assert_non_null(path);
    return path;
}

/* quantize unties a head from the token embedding, never from another
 * embedding (OPT's embed_positions came first, and became a 130-row head),
 * and takes GPT-NeoX's embed_out as the head it is (it was skipped as an
 * embedding, and embed_in tied in its place); the dense file's own layer
 * list names the same layers. */
static void test_quantize_head(void **state)
{
    (void)state;
    TU_SKIP_EMULATED("21 s");
    char *dir = tu_tmpdir(), args[4400], err[1024] = "", *out = NULL;
    static const struct {
        const char *names[3];
        unsigned rows[3];
        const char *head;
        uint32_t head_n;
    } cases[] = {
        {{"model.decoder.embed_positions.weight", "model.decoder.embed_tokens.weight",
          "model.decoder.layers.0.fc1.weight"}, {130, 500, 256}, "lm_head", 500},
        {{"gpt_neox.embed_in.weight", "gpt_neox.layers.0.mlp.dense_h_to_4h.weight",
          "embed_out.weight"}, {500, 256, 500}, "embed_out", 500},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *in = dense_of(dir, "in.safetensors", cases[i].names, cases[i].rows, 3);
        snprintf(args, sizeof args, "quantize %s %s/q.safetensors --asym", in, dir);
        assert_int_equal(run_all(args, &out), 0);
        free(out);
        snprintf(args, sizeof args, "%s/q.safetensors", dir);
        edgert_checkpoint *ck = NULL;
        assert_int_equal(edgert_checkpoint_open(args, &ck, err, sizeof err), EDGERT_OK);
        assert_int_equal(edgert_checkpoint_layer_count(ck), 2); /* the layer and the head */
        const edgert_layer *h = edgert_checkpoint_layer_at(ck, 1);
        if (strcmp(h->name, cases[i].head) || h->n != cases[i].head_n)
            fail_msg("case %zu: the head is %s [%u rows], want %s [%u]", i, h->name, h->n,
                     cases[i].head, cases[i].head_n);
        /* the dense file read as it is lists the same layers, tied head too */
        edgert_checkpoint *dk = NULL;
        assert_int_equal(edgert_checkpoint_open(in, &dk, err, sizeof err), EDGERT_OK);
        assert_int_equal(edgert_checkpoint_layer_count(dk), 2);
        for (size_t l = 0; l < 2; l++) {
            const edgert_layer *a = edgert_checkpoint_layer_at(ck, l),
                               *b = edgert_checkpoint_layer_at(dk, l);
            if (strcmp(a->name, b->name) || a->n != b->n || a->k != b->k)
                fail_msg("case %zu, layer %zu: quantized %s [%u x %u], dense %s [%u x %u]", i,
                         l, a->name, a->n, a->k, b->name, b->n, b->k);
        }
        edgert_checkpoint_close(dk);
        edgert_checkpoint_close(ck);
        /* bench takes the same layer for the head (prefill: M = 1) */
        snprintf(args, sizeof args, "bench --weights %s --backend ref-w4a16 --phase prefill "
                 "--m 4 --json", in);
        assert_int_equal(run_all(args, &out), 0);
        er_yaml y;
        char *jdir = NULL;
        yaml_node_t *sh = er_yaml_get(&y, parse(out, &y, &jdir), "shapes");
        int heads = 0;
        for (yaml_node_item_t *it = sh->data.sequence.items.start;
             it < sh->data.sequence.items.top; it++) {
            yaml_node_t *n = er_yaml_node(&y, *it);
            int head = strcmp(sval(&y, n, "head"), "true") == 0;
            heads += head;
            if (head != (strcmp(sval(&y, n, "name"), cases[i].head) == 0))
                fail_msg("case %zu: bench's shape %s has head %d", i, sval(&y, n, "name"), head);
        }
        assert_int_equal(heads, 1);
        er_yaml_free(&y);
        tu_rmrf(jdir);
        free(out);
        free(in);
    }
    /* a tied head with K = 132: the reader lists it; quantize refuses it by
     * name (GPTQ packs 8 codes per int32), as any such layer, and writes
     * nothing, where it once left the head tied without a word */
    char hdr[512];
    const size_t bytes = (50u * 132u + 16u * 128u) * sizeof(float);
    snprintf(hdr, sizeof hdr, "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":"
             "[50,132],\"data_offsets\":[0,%zu]},\"model.layers.0.mlp.up_proj.weight\":{"
             "\"dtype\":\"F32\",\"shape\":[16,128],\"data_offsets\":[%zu,%zu]}}",
             50u * 132u * sizeof(float), 50u * 132u * sizeof(float), bytes);
    float *w = calloc(1, bytes);
    char *odd = tu_safetensors(dir, "odd.safetensors", hdr, w, bytes);
    free(w);
    edgert_checkpoint *ok = NULL;
    assert_int_equal(edgert_checkpoint_open(odd, &ok, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_checkpoint_layer_count(ok), 2);
    assert_string_equal(edgert_checkpoint_layer_at(ok, 1)->name, "lm_head");
    edgert_checkpoint_close(ok);
    snprintf(args, sizeof args, "quantize %s %s/odd-q.safetensors --asym", odd, dir);
    assert_int_equal(run_all(args, &out), 1); /* pack takes it: a refusal */
    if (!strstr(out, "model.embed_tokens.weight' (the head tied to it): K = 132"))
        fail_msg("quantize of a tied head with K = 132:\n%s", out);
    free(out);
    snprintf(args, sizeof args, "%s/odd-q.safetensors", dir);
    assert_int_equal(access(args, F_OK), -1);
    free(odd);
    tu_rmrf(dir);
}

static int not_the_head(const st_tensor *t)
{
    return strncmp(t->name, "lm_head.", 8) != 0;
}

/* A symmetric GPTQ file whose head is tied to the embedding: the head is a
 * dense layer, quantized for the backend it is packed for, so a symmetric
 * layout takes the file (the gate once read the dense head as asymmetric). */
static void test_tied_head_of_a_gptq_file(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[4400], err[1024] = "", *out = NULL;
    const char *names[] = {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"};
    const unsigned rows[] = {300, 256};
    char *in = dense_of(dir, "in.safetensors", names, rows, 2);
    snprintf(args, sizeof args, "quantize %s %s/q.safetensors --sym", in, dir);
    assert_int_equal(run_all(args, &out), 0);
    free(out);
    /* a third-party GPTQ file whose head is tied: quantize's without lm_head */
    char *tied = NULL, q[4200];
    snprintf(q, sizeof q, "%s/q.safetensors", dir);
    assert_true(asprintf(&tied, "%s/tied-gptq.safetensors", dir) > 0);
    tu_st_copy(q, tied, 8, not_the_head, NULL);
    edgert_checkpoint *ck = NULL;
    assert_int_equal(edgert_checkpoint_open(tied, &ck, err, sizeof err), EDGERT_OK);
    assert_int_equal(edgert_checkpoint_layer_count(ck), 2);
    const edgert_layer *h = edgert_checkpoint_layer_at(ck, 1);
    assert_string_equal(h->name, "lm_head");
    assert_true(h->n == 300 && h->k == 128 && h->symmetric == -1);
    edgert_checkpoint_close(ck);
    /* a symmetric 4-bit layout (the shipped W4A8 ones take zero points):
     * the gate is declarative, nothing is loaded */
    free(tu_manifest(dir, "sym.yaml", "test-sym", "libnone.so",
                     "{format: int4-sym-g128, weight_bits: 4, group_size: 128, symmetric: true, "
                     "activation_dtype: int8, bits_per_weight: 4.125}", NULL));
    const char *paths[2] = {EDGERT_TEST_BACKEND_DIR, dir};
    edgert_options o = {.struct_size = sizeof o, .manifest_paths = paths,
                        .manifest_path_count = 2, .weights = tied, .defer_load = 1};
    edgert_ctx *ctx = NULL;
    assert_int_equal(edgert_open(&o, &ctx, err, sizeof err), EDGERT_OK);
    int symmetric = 0;
    for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
        const edgert_candidate *c = edgert_candidate_at(ctx, i);
        if (c->layout.symmetric != 1 || c->layout.weight_bits != 4)
            continue;
        symmetric++;
        for (size_t r = 0; r < c->reason_count; r++)
            if (strncmp(c->reasons[r], "LAYOUT_MISMATCH", 15) == 0)
                fail_msg("%s: %s", c->name, c->reasons[r]);
    }
    assert_true(symmetric > 0); /* test-sym, on any arch */
    edgert_close(ctx);
    free(tied);
    free(in);
    tu_rmrf(dir);
}

/* The entries of dir other than . and ..: how many, the first in *first
 * and, when list is not NULL, each after a space in *list. */
static int dir_entries(const char *dir, char *first, size_t len, char *list, size_t list_len)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    if (list != NULL)
        list[0] = '\0';
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n++ == 0)
            snprintf(first, len, "%s", e->d_name);
        if (list != NULL)
            snprintf(list + strlen(list), list_len - strlen(list), " %s", e->d_name);
    }
    closedir(d);
    return n;
}

/* Begin a file of one F32 tensor of 2^20 values at path and write `values`
 * of them (zeros); commit when they are all. 0, or -1 with err. */
static int write_some(st_writer *w, const char *path, size_t values, char *err, size_t len)
{
    static float zeros[1u << 16];
    const uint64_t shape[1] = {1u << 20};
    st_writer_init(w, path);
    if (st_writer_tensor(w, "t", ST_F32, 1, shape, err, len) ||
        st_writer_begin(w, 8, err, len))
        return -1;
    for (size_t done = 0; done < values; done += 1u << 16)
        if (st_writer_write(w, zeros, sizeof zeros, err, len))
            return -1;
    return values == shape[0] ? st_writer_commit(w, err, len) : 0;
}

/* quantize_config.json is a folder: refused before any work, and OUT never
 * appears (an operator found OUT written and then the config refused). */
static void test_quantize_config_folder(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), args[4400], first[256], list[1024], *out = NULL;
    const char *names[] = {"model.layers.0.mlp.up_proj.weight"};
    const unsigned rows[] = {256};
    char *in = dense_of(dir, "in.safetensors", names, rows, 1);
    snprintf(args, sizeof args, "%s/quantize_config.json", dir);
    assert_int_equal(mkdir(args, 0755), 0);
    snprintf(args, sizeof args, "quantize %s %s/q.safetensors --asym", in, dir);
    int rc = run_all(args, &out);
    if (rc != 1 || !strstr(out, "quantize_config.json") || !strstr(out, "not a regular file"))
        fail_msg("quantize with a folder for its config: exit %d\n%s", rc, out);
    if (dir_entries(dir, first, sizeof first, list, sizeof list) != 2)
        fail_msg("left beside the input:%s", list);
    free(out);
    free(in);
    tu_rmrf(dir);
}

/* The writer behind quantize's and pack's outputs, killed while writing
 * (SIGKILL: no handler, no cleanup runs), leaves nothing in the folder: the
 * file has no name until it is complete (O_TMPFILE). A folder whose
 * filesystem has no O_TMPFILE keeps the named temporary: reported skipped.
 * Completed, the file is there under its name, with the mode a new file
 * gets (0666 less the umask), and a stale "<out>.tmp.<pid>" someone left
 * (a container's process has the same pid every run) neither stopped it
 * nor was removed: it is not this writer's. */
static void test_killed_writer_leaves_nothing(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), path[4200], first[256] = "", err[512] = "";
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        st_writer w;
        if (write_some(&w, path, 1u << 19, err, sizeof err) != 0)
            _exit(3);
        raise(SIGKILL);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
        fail_msg("the writer did not reach its kill (status 0x%x)", (unsigned)status);
    if (dir_entries(dir, first, sizeof first, NULL, 0) != 0) {
        /* the writer's own condition (core/formats/tmpfile.c): an unnamed file here
         * that can be linked through /proc/self/fd */
        char probe[4300], proc[64];
        snprintf(probe, sizeof probe, "%s/probe", dir);
        int fd = open(dir, O_TMPFILE | O_WRONLY, 0600), linked = 0;
        if (fd >= 0) {
            snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
            linked = linkat(AT_FDCWD, proc, AT_FDCWD, probe, AT_SYMLINK_FOLLOW) == 0;
            close(fd);
        }
        tu_rmrf(dir);
        if (!linked)
            tu_skip("no O_TMPFILE file can be made and named where the tests write, so a "
                    "killed writer leaves its named temporary");
        fail_msg("a killed writer left '%s'", first);
    }

    char stale[4300];
    snprintf(stale, sizeof stale, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(stale, "wx");
    assert_non_null(f);
    assert_int_equal(fputs("not ours", f) >= 0 && fclose(f) == 0, 1);
    st_writer w;
    if (write_some(&w, path, 1u << 20, err, sizeof err) != 0)
        fail_msg("writing the whole file beside a stale temporary: %s", err);
    st_writer_free(&w);
    struct stat st;
    assert_int_equal(stat(stale, &st), 0);
    assert_int_equal(st.st_size, 8);
    assert_int_equal(unlink(stale), 0);
    assert_int_equal(dir_entries(dir, first, sizeof first, NULL, 0), 1);
    assert_string_equal(first, "out.safetensors");
    mode_t mask = umask(022);
    umask(mask);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
    assert_true(st.st_size >= 8 + 4 * (1 << 20)); /* the length, the header, every value */
    tu_rmrf(dir);
}

/* A full export started in dir (--out dir/exp), once it says "generating":
 * its work folder is made and the handler armed, and generating the full
 * model then takes seconds. Returns the pid; said[len] has its stderr so far,
 * *err_fd the rest: close it only once the export ended (SIGPIPE otherwise). */
static pid_t start_export(const char *dir, char *said, size_t len, int *err_fd)
{
    char cmd[8400];
    /* through the shell, which becomes the CLI (exec): CLI may be "qemu-aarch64 -L / ..." */
    snprintf(cmd, sizeof cmd, "exec %s export --out '%s/exp' --device '%s' >/dev/null", CLI, dir,
             EDGERT_TEST_FIXTURES "/devices/android-hexagon.yaml");
    int err_pipe[2];
    assert_int_equal(pipe(err_pipe), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(err_pipe[1], STDERR_FILENO);
        close(err_pipe[0]);
        close(err_pipe[1]);
        signal(SIGINT, SIG_DFL); /* a runner started in the background ignores it */
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(err_pipe[1]);
    size_t have = 0;
    ssize_t got;
    said[0] = '\0';
    while (!strstr(said, "generating") && have + 1 < len &&
           (got = read(err_pipe[0], said + have, len - 1 - have)) > 0)
        said[have += (size_t)got] = '\0';
    *err_fd = err_pipe[0];
    return pid;
}

/* `edgert export` stopped by Ctrl-C (SIGINT) while it works removes its
 * work folder next to --out, which holds gigabytes of generated weights
 * while it runs, and ends by SIGINT as the user asked (tools/sigclean.c). */
static void test_export_interrupted(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), first[256] = "", said[4096];
    int err_fd;
    pid_t pid = start_export(dir, said, sizeof said, &err_fd);
    int seen = dir_entries(dir, first, sizeof first, NULL, 0);
    kill(pid, SIGINT);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(err_fd);
    if (!seen)
        fail_msg("no work folder next to --out when export said: %s (status 0x%x)", said,
                 (unsigned)status);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGINT)
        fail_msg("export did not end by SIGINT (status 0x%x; work folder '%s')",
                 (unsigned)status, first);
    if (dir_entries(dir, first, sizeof first, NULL, 0) != 0)
        fail_msg("an interrupted export left '%s' next to --out", first);
    tu_rmrf(dir);
}

/* A work folder dir/name with its owner file, marked (not empty) or not;
 * with `previous`, an earlier export inside it as put_in_place moves one
 * aside. */
static void fake_work(const char *dir, const char *name, int marked, int previous)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(mkdir(path, 0700), 0);
    free(tu_write(path, "owner", "%s", marked ? "pid 1\n" : ""));
    if (!previous)
        return;
    snprintf(path, sizeof path, "%s/%s/previous", dir, name);
    assert_int_equal(mkdir(path, 0755), 0);
    char *f = tu_write(path, EDGERT_EXPORT_REPORT_FILE, "{\"%s\": 1}\n",
                       EDGERT_EXPORT_REPORT_MARKER);
    assert_non_null(f);
    free(f);
    free(tu_write(path, ".edgert-export-files", "report.json\n")); /* export_files.h */
}

/* SIGKILL, which no handler sees, leaves the work folder; the next export
 * to the same --out removes it, puts back an earlier export a killed one
 * had moved aside, and leaves alone a folder whose export still runs (its
 * lock held: here by this test) and one without the owner mark. An earlier
 * export that cannot go back (something else is at --out now) keeps its
 * folder, said in --json; one whose --out is an empty folder goes back. */
static void test_export_killed_swept(void **state)
{
    (void)state;
    TU_SKIP_EMULATED("24 s");
    char *dir = tu_tmpdir(), first[256] = "", said[4096], path[4400], args[8400], *out;
    char left[1024], any[256];
    int err_fd;
    pid_t pid = start_export(dir, said, sizeof said, &err_fd);
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(err_fd);
    if (dir_entries(dir, first, sizeof first, NULL, 0) != 1 ||
        !strstr(first, ".exp.edgert-export-"))
        fail_msg("no work folder left by SIGKILL ('%s'); export said: %s", first, said);
    fake_work(dir, ".exp.edgert-export-prev00", 1, 1);
    fake_work(dir, ".exp.edgert-export-live00", 1, 0);
    fake_work(dir, ".exp.edgert-export-nomark", 0, 0);
    snprintf(path, sizeof path, "%s/.exp.edgert-export-live00/owner", dir);
    int live = open(path, O_RDWR | O_CLOEXEC);
    assert_true(live >= 0);
    assert_int_equal(flock(live, LOCK_EX), 0);
    const char *dev = EDGERT_TEST_FIXTURES "/devices/android-hexagon.yaml";
    snprintf(args, sizeof args, "export --quick --out '%s/exp' --device '%s'", dir, dev);
    int rc = run_all(args, &out);
    close(live);
    if (rc != 0 || !strstr(out, "put back the earlier export") ||
        !strstr(out, "replaced the earlier export") || !strstr(out, first))
        fail_msg("export after a killed one: exit %d:\n%s", rc, out);
    free(out);
    dir_entries(dir, any, sizeof any, left, sizeof left);
    /* readdir's order is the file system's: look for each */
    if (!strstr(left, " exp") || !strstr(left, "live00") || !strstr(left, "nomark") ||
        strstr(left, "prev00") || strstr(left, first))
        fail_msg("after the sweep, next to --out:%s", left);

    /* --out is now someone's folder: the earlier export stays where it is */
    fake_work(dir, ".exp2.edgert-export-prev00", 1, 1);
    snprintf(path, sizeof path, "%s/exp2", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    free(tu_write(path, "mine.txt", "not an export\n"));
    snprintf(args, sizeof args, "export --quick --json --out '%s/exp2' --device '%s'", dir, dev);
    rc = run_all(args, &out);
    if (rc != 2 || !strstr(out, "\"stale_work_folders_left\":1") ||
        !strstr(out, "cannot go back"))
        fail_msg("export to a folder that is not an export: exit %d:\n%s", rc, out);
    free(out);
    snprintf(path, sizeof path, "%s/.exp2.edgert-export-prev00/previous/%s", dir,
             EDGERT_EXPORT_REPORT_FILE);
    assert_int_equal(access(path, F_OK), 0);

    /* an empty folder at --out: the earlier export goes back in its place */
    fake_work(dir, ".exp3.edgert-export-prev00", 1, 1);
    snprintf(path, sizeof path, "%s/exp3", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(args, sizeof args, "export --quick --json --out '%s/exp3' --device '%s'", dir, dev);
    rc = run_all(args, &out);
    if (rc != 0 || !strstr(out, "\"replaced_earlier_export\":true") ||
        !strstr(out, "\"restored_earlier_export\":true"))
        fail_msg("export to an empty folder beside a killed one: exit %d:\n%s", rc, out);
    free(out);
    tu_rmrf(dir);
}

/* A verdict cache that cannot be used: no folder named (neither HOME nor
 * XDG_CACHE_HOME), or one that cannot be made. Every process then meets its
 * plugins again; select says so, in the same run (first contact runs inside
 * edgert_select, after the first round of warnings). */
static void test_verdict_cache_unusable_said(void **state)
{
    (void)state;
    char *said = NULL;
    assert_int_equal(run_redirected("env -u HOME -u XDG_CACHE_HOME", "select",
                                    "2>&1 >/dev/null", &said), 0);
    if (!strstr(said, "first contact's verdicts are not kept"))
        fail_msg("select without HOME or XDG_CACHE_HOME: %s", said);
    free(said);
    /* ... or that the folder named cannot hold them */
    assert_int_equal(run_redirected("env XDG_CACHE_HOME=/dev/null/cache", "select",
                                    "2>&1 >/dev/null", &said), 0);
    if (!strstr(said, "verdicts are not kept: /dev/null/cache/edgert/first-contact/"))
        fail_msg("select with an XDG_CACHE_HOME that cannot be made: %s", said);
    free(said);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest_not_a_file),
        cmocka_unit_test(test_workload_file_checked),
        cmocka_unit_test(test_options_said),
        cmocka_unit_test(test_quantize_head),
        cmocka_unit_test(test_tied_head_of_a_gptq_file),
        cmocka_unit_test(test_stale_packed_file),
        cmocka_unit_test(test_killed_writer_leaves_nothing),
        cmocka_unit_test(test_quantize_config_folder),
        cmocka_unit_test(test_export_interrupted),
        cmocka_unit_test(test_export_killed_swept),
        cmocka_unit_test(test_verdict_cache_unusable_said),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
