/*
 * tools/edgert.c — the `edgert` command line.
 *
 *   edgert probe    what this device is (or what a device profile says)
 *   edgert list     every backend manifest found, with its verdict
 *   edgert select   the backend to use for a priority, and why
 *   edgert bench / verify / calibrate   evidence measured on this device
 *                   (tools/bench.c, tools/verify.c, tools/calibrate.c)
 *   edgert export   an exported graph for an export-only backend (tools/export.c)
 *   edgert quantize / pack   a user's checkpoint, quantized or packed for one
 *                   backend (tools/quantize.c, tools/pack.c)
 *
 * Output: short human text on stdout, or one JSON object with --json.
 * Diagnostics go to stderr. Exit codes: 0 ok, 1 other failure, 2 usage error,
 * 3 nothing eligible (or a forced backend is not), 4 a file named explicitly
 * (manifest, device profile, workload, checkpoint or other input) is missing
 * or malformed.
 *
 * Length: the main help, each command's help, the one option table and the
 * dispatch: the CLI's whole surface in one file, so one concept keeps one
 * name across commands.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- help ------------------------------------------------------------------ */

static const char common_help[] =
    "Common options:\n"
    "  --json              print one JSON object on stdout instead of text (when\n"
    "                      opening fails: {\"error\": ..., \"status\": ...})\n"
    "  --sysroot DIR       probe files under DIR instead of / (tests, containers)\n"
    "  --device FILE       plan for the device a profile YAML describes instead of\n"
    "                      probing this one (format: device-profile.md); bench,\n"
    "                      verify, calibrate and pack, which run here, refuse it\n"
    "  --manifests PATH    a manifest folder or file; repeatable; replaces the\n"
    "                      default folders and EDGERT_MANIFEST_PATH\n"
    "  --disable LIST      backend names never to use (, ; or space between)\n"
    "  --strict            never fall back to the reference backend\n"
    "  --threads N         thread pool size (default: all logical cores)\n"
    "  -v, --verbose       log what the loader does (to stderr)\n"
    "  -q, --quiet         only errors on stderr\n"
    "  -h, --help          this help\n";

static const char env_help[] =
    "Environment:\n"
    "  EDGERT_MANIFEST_PATH      colon-separated absolute folders; replaces the defaults\n"
    "  EDGERT_ADD_MANIFEST_PATH  colon-separated absolute folders searched first\n"
    "  EDGERT_DISABLE            backend names never to use (, ; : or space between)\n"
    "  EDGERT_PRIORITY           speed|fidelity, the default of --priority\n"
    "  EDGERT_BACKEND            the default of --backend (not for verify, which checks\n"
    "                            every eligible backend unless --backend names one)\n"
    "  EDGERT_LOG                error|warn|info|debug (default warn)\n"
    "  EDGERT_SANDBOX_TIMEOUT    seconds a plugin's first contact may take (default 60)\n"
    "  EDGERT_CONTENTION         judge|ignore: set aside figures measured under other\n"
    "                            load (default judge), or keep them\n"
    "  XDG_CACHE_HOME            evidence lives in $XDG_CACHE_HOME/edgert/evidence.json\n"
    "                            (default ~/.cache/edgert/evidence.json), first-contact\n"
    "                            verdicts in $XDG_CACHE_HOME/edgert/first-contact/\n"
    "  XDG_DATA_HOME             the per-user backends folder (below)\n"
    "Default manifest folders, in this order: <dir of libedgert>/edgert/backends (an\n"
    "install, or the build tree, which mirrors it); $XDG_DATA_HOME/edgert/backends\n"
    "(default ~/.local/share/edgert/backends; not under setuid); <sysconfdir>/edgert/\n"
    "backends.d; <datadir>/edgert/backends. 'edgert select --explain' lists them with\n"
    "their origin. The current directory is never searched.\n";

/* The commands' exit codes; pack and export print their own instead. */
static const char exit_help[] =
    "Exit codes: 0 ok, 1 failure (including a backend failing verify), 2 usage\n"
    "error, 3 nothing eligible (or the forced backend is not), 4 a file named\n"
    "explicitly (manifest, device profile, workload, checkpoint or other input) is\n"
    "missing or malformed.\n";

static void usage_main(FILE *f)
{
    fprintf(f,
            "usage: edgert COMMAND [options]\n"
            "\n"
            "edgert probes this device, reads backend manifests, loads the 4-bit kernel\n"
            "plugins the device can run and picks one for a priority (speed or fidelity).\n"
            "\n"
            "Commands:\n"
            "  probe      show the device facts (CPU flags the OS enables, device class)\n"
            "  list       list every backend manifest found and its verdict on this device\n"
            "  select     pick the backend for a priority; --explain says why\n"
            "  bench      measure a backend's decode/prefill speed against this device's\n"
            "             memory bandwidth and compute peaks\n"
            "  verify     check backends against the reference (correctness) and against\n"
            "             dense fp32 (fidelity: SQNR, top-1 agreement, KL)\n"
            "  calibrate  bench + verify every eligible backend and store the results as\n"
            "             evidence that 'select' then ranks by\n"
            "  export     write a calibrated w8a16 ONNX graph for a phone NPU (npu-export),\n"
            "             with encodings and an SQNR report\n"
            "  checksum   print a plugin file's checksum, or write it into a manifest\n"
            "             (--stamp)\n"
            "  quantize   quantize a dense safetensors checkpoint to 4-bit GPTQ\n"
            "  pack       pack a checkpoint for one backend into a file later runs map\n"
            "  run        run a Hugging Face model folder (Llama, Mistral, Qwen2/3) on a\n"
            "             backend: greedy tokens, tokens/s; --compare: fidelity vs fp32\n"
            "\n"
            "Run 'edgert COMMAND --help' (or 'edgert help COMMAND') for a command's\n"
            "options; 'edgert --version' prints the version and the plugin ABI range.\n\n%s\n%s%s",
            common_help, env_help, exit_help);
}

/* select's --help: how the ranking works, in the words of edgert.h */
static const char select_help[] =
    "usage: edgert select [--priority speed|fidelity] [--backend NAME] [--explain[=full]] "
    "[options]\n\n"
    "Pick the backend for a priority. Gates first, in the order they run, as\n"
    "--explain lists them (disable list, arch, device class, CPU flags, OS\n"
    "state, ABI, layout of --weights, strict mode, library file, checksum; then\n"
    "a sandboxed first contact: dlopen, entry symbol, ABI answer, init,\n"
    "self-test; then a failed verify in the evidence); then the\n"
    "accelerator of the device class, then CPU backends, then the reference\n"
    "backend. Within a tier, 'speed' ranks by decode tok/s (measured here: by one\n"
    "calibrate run, else by first contact for the whole tier; else declared);\n"
    "measured rates within each other's rounds (calibrate) or calls (first\n"
    "contact) form one decode group, inside which prefill decides; then the\n"
    "cheaper arithmetic (activation bits, bits per weight), fidelity, the backend\n"
    "written for more of this device (more of its CPU flags), name. 'fidelity'\n"
    "ranks by top-1 (measured ones within two standard errors of each other form\n"
    "one group, inside which KL decides) and KL, measured else declared; then\n"
    "activation bits, weight bits, the backend written for more of this device,\n"
    "speed, name.\n\n"
    "  --priority P        speed (default) or fidelity\n"
    "  --backend NAME      use this backend; an error if it is not eligible\n"
    "  --explain           show the device, the folders searched, every manifest\n"
    "                      with its verdict and figures, and the ranking, after one\n"
    "                      line that says what was selected and what decided it;\n"
    "                      on a terminal, wrapped at its width (COLUMNS) and at\n"
    "                      most 100 columns; in a pipe, lines whole. Rejected\n"
    "                      backends on one line each, notes cut short; with\n"
    "                      --explain=full: every fact, layout, checksum and note\n"
    "  --no-evidence       ignore measured evidence; rank by declared figures\n"
    "  --evidence FILE     read evidence from FILE (as written by calibrate --out)\n"
    "  --weights FILE      only backends whose layout takes this checkpoint (GPTQ,\n"
    "                      dense or packed): LAYOUT_MISMATCH(<why>) for the others\n\n";

/* Each command's help text. Length: one text per command, bench's the
 * longest (each of its options explained where a user looks for it). */
static void usage_cmd(FILE *f, const char *cmd)
{
    if (strcmp(cmd, "probe") == 0)
        fprintf(f, "usage: edgert probe [--profile] [options]\n\nShow the device facts the "
                   "selection uses: CPU name and id (family, model),\narch, class (and the files "
                   "that decided it), CPU flags usable here, flags the\nOS disabled, cores, "
                   "memory, bf16.\n\n"
                   "  --profile           print them as a device profile (docs/device-profile.md):"
                   "\n"
                   "                      'edgert probe --profile > dev.yaml' here, then "
                   "'--device\n"
                   "                      dev.yaml' on another machine plans for this one;\n"
                   "                      exit 1 when it must be edited before --device takes "
                   "it\n"
                   "                      (why: on stderr)\n\n");
    else if (strcmp(cmd, "list") == 0)
        fprintf(f, "usage: edgert list [options]\n\nList every backend manifest found, in search "
                   "order, with its verdict on this\ndevice: eligible, or the reason codes of the "
                   "gates it failed. list runs no plugin\ncode: its verdict is the gates' that "
                   "need none (files, CPU flags, checksum, ...)\nand a first contact cached "
                   "by an earlier command; 'edgert select' loads and\nself-tests (\"eligible*\": "
                   "verdict without loading the plugin).\n\n"
                   "  --evidence FILE     read evidence from FILE (as written by calibrate --out)"
                   "\n\n");
    else if (strcmp(cmd, "select") == 0)
        fputs(select_help, f);
    else if (strcmp(cmd, "bench") == 0)
        fprintf(f,
                "usage: edgert bench [--backend NAME] [--workload FILE] [--phase P] [options]\n\n"
                "Measure one backend on a workload: decode (M = 1, every layer's weights in\n"
                "their own buffers so they stream from DRAM), prefill (M rows), and pack\n"
                "(time, peak and settled RssAnon). In the same run it measures the read\n"
                "bandwidth ceiling (the best of plain, three software-prefetched and\n"
                "interleaved-stream reads) and the compute peaks of this CPU, and reports\n"
                "decode as a fraction of bandwidth and prefill as a fraction of the compute\n"
                "peak its kernel relies on. The ceiling is measured again right after the\n"
                "decode steps: the decode is reported against both ends of its window, and\n"
                "a run whose two ceilings differ by more than 15%% is flagged UNSTABLE\n"
                "(\"unstable\": true in JSON), a run to repeat rather than cite; so are the\n"
                "compute peaks after the prefill (the higher of the two counts, and a\n"
                "prefill whose peaks differ by more than 15%% is flagged alike). Right after\n"
                "the decode, the step's own packed bytes are read the same way (the loop\n"
                "that read best in calls), through the same pool and calls, with\n"
                "no arithmetic (\"step read\"): decode's fraction of that read is what the\n"
                "kernel's instructions cost, the read's own fraction of the ceiling what\n"
                "the step's structure costs (absent when the backend keeps its packed\n"
                "bytes private). Last, the step's GEMMs that fit together in half the\n"
                "last-level cache (at most 8 MiB; taken in its order, the others skipped)\n"
                "run over and over from the cache (\"in-cache rate\"; --backend's run\n"
                "only): what the kernel's instructions allow; decode near it is bound by\n"
                "its arithmetic, not by memory.\n\n"
                "  --backend NAME      default: the backend 'select' picks for --priority\n"
                "  --priority P        speed (default) or fidelity, to pick the backend\n"
                "  --options STR       plugin options, after the manifest's (e.g. path=fma)\n"
                "  --weights FILE      a checkpoint's own layers (GPTQ, dense or packed: see\n"
                "                      'edgert quantize', 'edgert pack') instead of generated\n"
                "                      ones; shapes from the file\n"
                "  --workload FILE     YAML list of shapes (default: built-in spark-1.7b):\n"
                "                        name: my-model\n"
                "                        shapes:\n"
                "                          - {name: qkv, k: 2048, n: 3072, count: 28}\n"
                "                          - {name: lm_head, k: 2048, n: 131072, count: 1, head: "
                "true}\n"
                "                      (head: true shapes run once per prompt in prefill, M = 1)\n"
                "  --phase P           decode, prefill or both (default both)\n"
                "  --m N               prefill rows (default 512)\n"
                "  --repeat N          timed repeats (default 5 decode steps, 3 prefill passes)\n"
                "  --calls             time decode as one edgert_gemm per GEMM instead of one\n"
                "                      edgert_step per decode step (which reads the next\n"
                "                      weights' head while a GEMM's last chunks finish)\n"
                "  --paired-read       decode only, not with --versus: after each decode step,\n"
                "                      read its packed bytes once with no arithmetic (the step\n"
                "                      read) and give decode's fraction of that read step by\n"
                "                      step, and over the third of the steps whose read was\n"
                "                      fastest (with fewer than 3 steps: the fastest): a window\n"
                "                      one step long (a shared host's can be under a second)\n"
                "  --versus NAME       decode only: NAME's steps too, alternating with\n"
                "                      --backend's in pairs (AB, BA, ...), and the ratio of\n"
                "                      their step times pair by pair: both in one window of a\n"
                "                      shared machine's bandwidth. --repeat: pairs (default 16)\n"
                "  --versus-options STR  plugin options for --versus (to compare options,\n"
                "                      name the same backend as --backend)\n"
                "  --seed N            weight generator seed (default 1)\n"
                "  --group N           generated weights in groups of N: 32, 64 or 128\n"
                "                      (default: the layout's own group)\n"
                "  --versus-group N    --versus's generated weights in groups of N (to compare\n"
                "                      group sizes per byte, name the same backend)\n"
                "  --versus-weights FILE  --versus's layers from FILE, whose shapes are\n"
                "                      --weights' (two checkpoints of one model: act order\n"
                "                      against in order; name the same backend)\n"
                "  --read-mib N        the read ceiling's buffer, in MiB (default 1024; at\n"
                "                      least 16): a device short of memory can take less, but\n"
                "                      a buffer the last-level cache holds measures the cache\n"
                "  --evidence FILE     evidence to pick the backend by (as 'edgert select')\n"
                "  --no-evidence       pick the backend by declared figures only\n\n");
    else if (strcmp(cmd, "verify") == 0)
        fprintf(f,
                "usage: edgert verify [--backend NAME] [--quick] [--tokens T] [options]\n\n"
                "Correctness: each eligible in-process backend (or --backend) against the\n"
                "reference backend on the same canonical weights, over odd shapes (M in\n"
                "1,2,3,16,17,64,512; N odd; K a multiple of the group and not), with a\n"
                "tolerance derived from the backend's activation arithmetic.\n"
                "Fidelity: against dense fp32 from the unquantized weights: SQNR per workload\n"
                "shape, and on an output-head-shaped projection fed with LLM-like activations\n"
                "(heavy-tailed, a few outlier channels), top-1 agreement and mean KL of the\n"
                "softmax over T tokens. The reference backend is reported too (beside\n"
                "--backend, its fidelity: each case checked it against a double loop).\n\n"
                "  --backend NAME      verify only this backend\n"
                "  --options STR       plugin options, after the manifest's (e.g. path=fma)\n"
                "  --tokens T          tokens for top-1/KL (default 64)\n"
                "  --quick             smaller head (N = 16384) and fewer shapes\n"
                "  --weights FILE      fidelity on a checkpoint's own layers (GPTQ or dense):\n"
                "                      its dense values (GPTQ layers: dequantized) as reference\n"
                "  --workload FILE     shapes for the SQNR table (see 'edgert bench --help')\n"
                "  --seed N            generator seed (default 1)\n\n");
    else if (strcmp(cmd, "export") == 0)
        export_help(f);
    else if (strcmp(cmd, "pack") == 0)
        pack_help(f);
    else if (strcmp(cmd, "run") == 0)
        run_help(f);
    else
        fprintf(f,
                "usage: edgert calibrate [--out FILE] [--quick] [options]\n\n"
                "Run bench (decode, 3 rounds; then prefill) and verify (fidelity) for\n"
                "every eligible in-process backend and store the results as evidence,\n"
                "keyed by this device's fingerprint (XXH3 of the probe's facts) and each\n"
                "plugin file's XXH3, so a changed plugin or another device never reuses\n"
                "them. 'edgert select' then ranks by them. The file is replaced atomically.\n"
                "A round whose threads waited for a CPU a fifth of their time or more\n"
                "(other load) is set aside and measured again, up to 3 times; the evidence\n"
                "counts them (EDGERT_CONTENTION=ignore keeps such rounds).\n\n"
                "  -o, --out FILE      write here instead of the per-user cache\n"
                "  --repeat N          decode steps per backend and round (default 5; 3\n"
                "                      interleaved rounds, the median stored)\n"
                "  --quick             the quick verify set (see 'edgert verify --help')\n"
                "  --workload FILE     shapes (default: built-in spark-1.7b). The decode\n"
                "                      rates stored are then this workload's: select ranks\n"
                "                      by them as by any others\n"
                "  --tokens T          tokens for verify's top-1/KL (default 64)\n"
                "  --seed N            generator seed (default 1)\n\n");
    /* pack and export end their own part with their exit codes */
    int own = strcmp(cmd, "export") == 0 || strcmp(cmd, "pack") == 0;
    fprintf(f, "%s\n%s%s", common_help, env_help, own ? "" : exit_help);
}

/* ---- option parsing ---------------------------------------------------------- */

enum {
    OPT_JSON = 256, OPT_SYSROOT, OPT_DEVICE, OPT_MANIFESTS, OPT_DISABLE, OPT_STRICT, OPT_THREADS,
    OPT_PRIORITY, OPT_BACKEND, OPT_EXPLAIN, OPT_NO_EVIDENCE, OPT_WORKLOAD, OPT_PHASE, OPT_M,
    OPT_REPEAT, OPT_SEED, OPT_TOKENS, OPT_QUICK, OPT_OUT, OPT_OPTIONS, OPT_EVIDENCE,
    OPT_WEIGHTS, OPT_CALIBRATION, OPT_SCHEME, OPT_RANGES, OPT_FORCE, OPT_GOLDEN, OPT_ROWS,
    OPT_CALLS, OPT_VERSUS, OPT_VERSUS_OPTIONS, OPT_PAIRED_READ, OPT_PROFILE, OPT_PROMPT_IDS,
    OPT_PROMPTS, OPT_MAX_NEW, OPT_COMPARE, OPT_GROUP, OPT_CONTEXT, OPT_KV_CACHE, OPT_PACKED,
    OPT_IGNORE_EOS,
    OPT_LOGITS, OPT_PAIRED, OPT_VERSUS_GROUP, OPT_READ_MIB, OPT_STORE, OPT_REFERENCE,
    OPT_VERSUS_WEIGHTS
};

/* Which command takes which command-specific option. */
static int allowed(const char *cmd, int o)
{
    static const struct {
        int opt;
        const char *cmds;
    } table[] = {
        {OPT_PRIORITY, " select bench export pack run "},
        {OPT_BACKEND, " select bench verify export pack run "},
        {OPT_EXPLAIN, " select "},
        {OPT_NO_EVIDENCE, " select bench "},
        {OPT_WORKLOAD, " bench verify calibrate "},
        {OPT_PHASE, " bench "},
        {OPT_M, " bench "},
        {OPT_REPEAT, " bench calibrate "},
        {OPT_SEED, " bench verify calibrate export "},
        {OPT_TOKENS, " verify calibrate export run "},
        {OPT_QUICK, " verify calibrate export "},
        {OPT_OUT, " calibrate export pack run "},
        {OPT_STORE, " run "},
        {OPT_WEIGHTS, " export select bench verify "},
        {OPT_CALIBRATION, " export "},
        {OPT_SCHEME, " export "},
        {OPT_RANGES, " export "},
        {OPT_FORCE, " export pack "},
        {OPT_GOLDEN, " export "},
        {OPT_ROWS, " export "},
        {OPT_CALLS, " bench "},
        {OPT_PAIRED_READ, " bench "},
        {OPT_VERSUS, " bench "},
        {OPT_VERSUS_OPTIONS, " bench "},
        {OPT_VERSUS_GROUP, " bench "},
        {OPT_VERSUS_WEIGHTS, " bench "},
        {OPT_READ_MIB, " bench "},
        {OPT_OPTIONS, " bench verify pack run "},
        {OPT_PROMPT_IDS, " run "},
        {OPT_PROMPTS, " run "},
        {OPT_MAX_NEW, " run "},
        {OPT_COMPARE, " run "},
        {OPT_GROUP, " run bench "},
        {OPT_CONTEXT, " run "},
        {OPT_KV_CACHE, " run "},
        {OPT_PACKED, " run "},
        {OPT_IGNORE_EOS, " run "},
        {OPT_LOGITS, " run "},
        {OPT_REFERENCE, " run "},
        {OPT_PAIRED, " run "},
        {OPT_EVIDENCE, " select list bench "},
        {OPT_PROFILE, " probe "},
    };
    char key[32];
    snprintf(key, sizeof key, " %s ", cmd);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].opt == o)
            return strstr(table[i].cmds, key) != NULL;
    return 1; /* common option */
}

static int parse_uint(const char *opt, const char *v, unsigned long long lo, unsigned long long hi,
                      unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi || v[0] == '-') {
        tfprintf(stderr, "edgert: %s takes a whole number from %llu to %llu, not '%s'\n", opt, lo,
                 hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* --disable, once more: its names after the earlier ones. */
static int append_disable(cli *c, const char *list)
{
    size_t at = strlen(c->disable_list);
    int n = snprintf(c->disable_list + at, sizeof c->disable_list - at, "%s%s", at ? "," : "",
                     list);
    if (n < 0 || (size_t)n >= sizeof c->disable_list - at) {
        tfprintf(stderr, "edgert: the --disable lists are longer than %zu bytes\n",
                 sizeof c->disable_list - 1);
        return -1;
    }
    c->disable = c->disable_list;
    return 0;
}

/* Options whose empty value is a mistake, not a choice: an empty --priority
 * fell back to the default (over EDGERT_PRIORITY), an empty --manifests
 * replaced every default folder with none. --options, --disable and
 * --sysroot ('' is /) may be empty. */
static int empty_refused(int o)
{
    return o != OPT_OPTIONS && o != OPT_VERSUS_OPTIONS && o != OPT_DISABLE && o != OPT_SYSROOT;
}

/* Length: the option table and one switch case per option, every option of
 * every command parsed in one place (getopt_long); splitting the switch would
 * scatter the options without making any case simpler. */
static int parse_args(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'},
        {"verbose", no_argument, 0, 'v'},
        {"quiet", no_argument, 0, 'q'},
        {"json", no_argument, 0, OPT_JSON},
        {"sysroot", required_argument, 0, OPT_SYSROOT},
        {"device", required_argument, 0, OPT_DEVICE},
        {"manifests", required_argument, 0, OPT_MANIFESTS},
        {"disable", required_argument, 0, OPT_DISABLE},
        {"strict", no_argument, 0, OPT_STRICT},
        {"threads", required_argument, 0, OPT_THREADS},
        {"priority", required_argument, 0, OPT_PRIORITY},
        {"backend", required_argument, 0, OPT_BACKEND},
        {"explain", optional_argument, 0, OPT_EXPLAIN},
        {"no-evidence", no_argument, 0, OPT_NO_EVIDENCE},
        {"workload", required_argument, 0, OPT_WORKLOAD},
        {"phase", required_argument, 0, OPT_PHASE},
        {"m", required_argument, 0, OPT_M},
        {"repeat", required_argument, 0, OPT_REPEAT},
        {"seed", required_argument, 0, OPT_SEED},
        {"tokens", required_argument, 0, OPT_TOKENS},
        {"quick", no_argument, 0, OPT_QUICK},
        {"out", required_argument, 0, OPT_OUT},
        {"options", required_argument, 0, OPT_OPTIONS},
        {"evidence", required_argument, 0, OPT_EVIDENCE},
        {"weights", required_argument, 0, OPT_WEIGHTS},
        {"calibration", required_argument, 0, OPT_CALIBRATION},
        {"scheme", required_argument, 0, OPT_SCHEME},
        {"ranges", required_argument, 0, OPT_RANGES},
        {"force", no_argument, 0, OPT_FORCE},
        {"golden", no_argument, 0, OPT_GOLDEN},
        {"rows", required_argument, 0, OPT_ROWS},
        {"calls", no_argument, 0, OPT_CALLS},
        {"paired-read", no_argument, 0, OPT_PAIRED_READ},
        {"profile", no_argument, 0, OPT_PROFILE},
        {"versus", required_argument, 0, OPT_VERSUS},
        {"versus-options", required_argument, 0, OPT_VERSUS_OPTIONS},
        {"versus-group", required_argument, 0, OPT_VERSUS_GROUP},
        {"versus-weights", required_argument, 0, OPT_VERSUS_WEIGHTS},
        {"read-mib", required_argument, 0, OPT_READ_MIB},
        {"prompt-ids", required_argument, 0, OPT_PROMPT_IDS},
        {"prompts", required_argument, 0, OPT_PROMPTS},
        {"max-new-tokens", required_argument, 0, OPT_MAX_NEW},
        {"compare", no_argument, 0, OPT_COMPARE},
        {"store", no_argument, 0, OPT_STORE},
        {"group", required_argument, 0, OPT_GROUP},
        {"context", required_argument, 0, OPT_CONTEXT},
        {"kv-cache", required_argument, 0, OPT_KV_CACHE},
        {"packed", required_argument, 0, OPT_PACKED},
        {"ignore-eos", no_argument, 0, OPT_IGNORE_EOS},
        {"logits", required_argument, 0, OPT_LOGITS},
        {"reference", required_argument, 0, OPT_REFERENCE},
        {"paired", required_argument, 0, OPT_PAIRED},
        {0, 0, 0, 0},
    };
    c->m = 512;
    c->seed = 1;
    c->tokens = 64;
    c->max_new = 32;
    optind = 1;
    opterr = 0;
    for (;;) {
        int o = getopt_long(argc, argv, ":hvqo:", opts, NULL);
        if (o == -1)
            break;
        if (o == 'o') /* -o FILE is --out FILE */
            o = OPT_OUT;
        /* by its name: argv[optind - 1] is its value when it takes one */
        const char *name = o == OPT_OUT ? "out" : "?";
        for (const struct option *p = opts; p->name; p++)
            if (p->val == o)
                name = p->name;
        if (o >= OPT_JSON && !allowed(c->cmd, o)) {
            tfprintf(stderr,
                     "edgert %s: option '--%s' does not apply to '%s' (see 'edgert %s --help')\n",
                     c->cmd, name, c->cmd, c->cmd);
            return -1;
        }
        unsigned long long v = 0;
        if (optarg && !*optarg && empty_refused(o)) {
            tfprintf(stderr, "edgert %s: option '--%s' needs a value, not an empty one\n",
                     c->cmd, name);
            return -1;
        }
        switch (o) {
        case 'h':
            usage_cmd(stdout, c->cmd);
            exit(EXIT_OK);
        case 'v': c->verbose = 1; break;
        case 'q': c->quiet = 1; break;
        case OPT_JSON: c->json = 1; break;
        case OPT_SYSROOT: c->sysroot = optarg; break;
        case OPT_DEVICE: c->device = optarg; break;
        case OPT_MANIFESTS:
            if (c->npaths == MAX_PATHS) {
                tfprintf(stderr, "edgert: at most %d --manifests\n", MAX_PATHS);
                return -1;
            }
            c->paths[c->npaths++] = optarg;
            break;
        case OPT_DISABLE: /* repeatable: the lists add up */
            if (append_disable(c, optarg) != 0)
                return -1;
            break;
        case OPT_STRICT: c->strict = 1; break;
        case OPT_THREADS:
            if (parse_uint("--threads", optarg, 1, 1024, &v))
                return -1;
            c->threads = (unsigned)v;
            break;
        case OPT_PRIORITY: c->priority_s = optarg; break;
        case OPT_BACKEND: c->backend = optarg; break;
        case OPT_EXPLAIN: /* --explain, or --explain=full: every note in full */
            if (optarg && strcmp(optarg, "full") != 0) {
                tfprintf(stderr, "edgert: --explain takes nothing or =full, not '=%s'\n", optarg);
                return -1;
            }
            c->explain = optarg ? 2 : 1;
            break;
        case OPT_NO_EVIDENCE: c->no_evidence = 1; break;
        case OPT_WORKLOAD: c->workload = optarg; break;
        case OPT_OPTIONS: c->options = optarg; break;
        case OPT_OUT: c->out = optarg; break;
        case OPT_EVIDENCE: c->evidence = optarg; break;
        case OPT_QUICK: c->quick = 1; break;
        case OPT_WEIGHTS: c->weights = optarg; break;
        case OPT_CALIBRATION: c->calibration = optarg; break;
        case OPT_SCHEME: c->scheme = optarg; break;
        case OPT_RANGES: c->ranges = optarg; break;
        case OPT_FORCE: c->force = 1; break;
        case OPT_GOLDEN: c->golden = 1; break;
        case OPT_CALLS: c->calls = 1; break;
        case OPT_PAIRED_READ: c->paired_read = 1; break;
        case OPT_PROFILE: c->profile = 1; break;
        case OPT_VERSUS: c->versus = optarg; break;
        case OPT_VERSUS_OPTIONS: c->versus_options = optarg; break;
        case OPT_VERSUS_WEIGHTS: c->versus_weights = optarg; break;
        case OPT_PROMPT_IDS: c->prompt_ids = optarg; break;
        case OPT_PROMPTS: c->prompts = optarg; break;
        case OPT_COMPARE: c->compare = 1; break;
        case OPT_STORE: c->store = 1; break;
        case OPT_PACKED: c->packed = optarg; break;
        case OPT_IGNORE_EOS: c->ignore_eos = 1; break;
        case OPT_LOGITS: c->logits = optarg; break;
        case OPT_REFERENCE: c->reference = optarg; break;
        case OPT_PAIRED:
            if (parse_uint("--paired", optarg, 1, 100000, &v))
                return -1;
            c->paired = (unsigned)v;
            break;
        case OPT_READ_MIB:
            if (parse_uint("--read-mib", optarg, 16, 1 << 20, &v))
                return -1;
            c->read_mib = (unsigned)v;
            break;
        case OPT_MAX_NEW:
            if (parse_uint("--max-new-tokens", optarg, 1, 1 << 20, &v))
                return -1;
            c->max_new = (unsigned)v;
            break;
        case OPT_GROUP:
        case OPT_VERSUS_GROUP: {
            const char *oname = o == OPT_GROUP ? "--group" : "--versus-group";
            if (parse_uint(oname, optarg, 32, 128, &v))
                return -1;
            if (v != 32 && v != 64 && v != 128) {
                tfprintf(stderr, "edgert %s: %s is 32, 64 or 128, not %llu\n", c->cmd, oname, v);
                return -1;
            }
            *(o == OPT_GROUP ? &c->group : &c->versus_group) = (unsigned)v;
            break;
        }
        case OPT_KV_CACHE:
            if (strcmp(optarg, "f16") == 0 || strcmp(optarg, "f32") == 0) {
                c->kv_cache_bits = optarg[1] == '1' ? 16u : 32u;
                break;
            }
            tfprintf(stderr, "edgert run: --kv-cache is f16 or f32, not '%s'\n", optarg);
            return -1;
        case OPT_CONTEXT:
            if (parse_uint("--context", optarg, 1, 1 << 24, &v))
                return -1;
            c->context = (unsigned)v;
            break;
        case OPT_PHASE:
            if (strcmp(optarg, "decode") == 0)
                c->phase = PHASE_DECODE;
            else if (strcmp(optarg, "prefill") == 0)
                c->phase = PHASE_PREFILL;
            else if (strcmp(optarg, "both") == 0)
                c->phase = PHASE_BOTH;
            else {
                tfprintf(stderr, "edgert: --phase is decode, prefill or both, not '%s'\n", optarg);
                return -1;
            }
            break;
        case OPT_M:
            if (parse_uint("--m", optarg, 1, 65536, &v))
                return -1;
            c->m = (unsigned)v;
            break;
        case OPT_REPEAT:
            if (parse_uint("--repeat", optarg, 1, 100000, &v))
                return -1;
            c->repeat = (unsigned)v;
            break;
        case OPT_TOKENS:
            if (parse_uint("--tokens", optarg, 1, 100000, &v))
                return -1;
            c->tokens = (unsigned)v;
            break;
        case OPT_ROWS:
            if (parse_uint("--rows", optarg, 1, 65536, &v))
                return -1;
            c->rows = (unsigned)v;
            break;
        case OPT_SEED:
            if (parse_uint("--seed", optarg, 0, UINT64_MAX, &v))
                return -1;
            c->seed = v;
            break;
        case ':':
            tfprintf(stderr, "edgert %s: option '%s' needs a value\n", c->cmd, argv[optind - 1]);
            return -1;
        default:
            tfprintf(stderr, "edgert %s: unknown option '%s' (see 'edgert %s --help')\n", c->cmd,
                     argv[optind - 1], c->cmd);
            return -1;
        }
    }
    if (optind < argc && (strcmp(c->cmd, "pack") == 0 || strcmp(c->cmd, "run") == 0))
        c->input = argv[optind++];
    if (optind < argc && c->compare) /* run MODEL --compare LIST */
        c->compare_list = argv[optind++];
    if (optind < argc) {
        tfprintf(stderr, "edgert %s: unexpected argument '%s'\n", c->cmd, argv[optind]);
        return -1;
    }
    int takes_priority = allowed(c->cmd, OPT_PRIORITY);
    const char *env_p = takes_priority ? secure_getenv("EDGERT_PRIORITY") : NULL;
    if (!c->priority_s)
        c->priority_s = env_p;
    if (c->priority_s && *c->priority_s &&
        edgert_priority_parse(c->priority_s, &c->priority) != 0) {
        tfprintf(stderr, "edgert: priority must be 'speed' or 'fidelity', not '%s'%s\n",
                 c->priority_s, c->priority_s == env_p ? " (from EDGERT_PRIORITY)" : "");
        return -1;
    }
    /* verify checks every eligible backend unless --backend names one: a
     * default meant for select must not narrow it */
    if (!c->backend && allowed(c->cmd, OPT_BACKEND) && strcmp(c->cmd, "verify") != 0) {
        const char *b = secure_getenv("EDGERT_BACKEND");
        if (b && *b) {
            c->backend = b;
            c->backend_from_env = 1;
        }
    }
    return 0;
}

/* ---- commands ----------------------------------------------------------------------- */

/* probe --profile: the profile on stdout, then read back as --device will;
 * exit 1, with the reason on stderr, when it needs editing first. */
static int probe_profile(const edgert_device *d)
{
    char *text = NULL, why[2048] = "";
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    int missing = m ? print_profile(m, d) : 0;
    if (!m || fclose(m) != 0 || !text) {
        free(text);
        tfprintf(stderr, "edgert probe: out of memory\n");
        return EXIT_FAIL;
    }
    fputs(text, stdout);
    int checked = missing == 0 ? profile_check(text, why, sizeof why) : 0;
    int bad = checked == -1;
    free(text);
    if (missing)
        tfprintf(stderr, "edgert probe: the probe could not tell this device's logical core "
                 "count: write logical_cores into the profile before using it\n");
    else if (bad)
        tfprintf(stderr, "edgert probe: --device would refuse this profile: %s\n", why);
    else if (checked == -2) /* the environment's fault, not the profile's */
        tfprintf(stderr, "edgert probe: warning: the profile was not checked: %s\n", why);
    return missing || bad ? EXIT_FAIL : EXIT_OK;
}

static int cmd_probe(const cli *c)
{
    if (c->profile && c->json) {
        tfprintf(stderr, "edgert probe: --profile and --json exclude each other (a profile is "
                 "YAML)\n");
        return EXIT_USAGE;
    }
    edgert_ctx *ctx = NULL;
    int rc = open_ctx(c, &ctx);
    if (rc)
        return rc;
    const edgert_device *d = edgert_device_facts(ctx);
    if (c->profile) {
        warn_diags(c, ctx);
        rc = probe_profile(d);
    } else if (c->json) {
        json_w w;
        json_init(&w, json_out());
        json_obj(&w);
        json_device(&w, d);
        json_diags(&w, ctx); /* a profile's unknown key, a bad EDGERT_LOG: as list says them */
        json_end_obj(&w);
        json_finish(&w);
    } else {
        warn_diags(c, ctx);
        print_device(d);
    }
    edgert_close(ctx);
    return rc;
}

static int cmd_list(const cli *c)
{
    edgert_ctx *ctx = NULL;
    int rc = open_ctx(c, &ctx);
    if (rc)
        return rc;
    size_t n = edgert_candidate_count(ctx);
    if (c->json) {
        json_w w;
        json_init(&w, json_out());
        json_obj(&w);
        json_device(&w, edgert_device_facts(ctx));
        json_search_paths(&w, ctx);
        json_key(&w, "manifests");
        json_arr(&w);
        for (size_t i = 0; i < n; i++)
            json_candidate(&w, edgert_candidate_at(ctx, i), NULL, -1);
        json_end_arr(&w);
        json_diags(&w, ctx);
        json_end_obj(&w);
        json_finish(&w);
    } else {
        warn_diags(c, ctx);
        if (n == 0) {
            size_t np = edgert_search_path_count(ctx);
            /* whether none was found or every one found was skipped (and
             * why) is the warnings' to say, above */
            tprintf("no usable backend manifest in the %zu folder%s searched%s\n", np,
                    np == 1 ? "" : "s", np ? ":" : "");
            for (size_t i = 0; i < np; i++) {
                const char *origin = NULL, *dir = edgert_search_path_at(ctx, i, &origin);
                tprintf("  %s  [%s]\n", dir, origin);
            }
        }
        int unmet = 0;
        for (size_t i = 0; i < n; i++) {
            const edgert_candidate *k = edgert_candidate_at(ctx, i);
            char reasons[512], lay[256];
            reasons_text(k, reasons, sizeof reasons);
            int star = k->eligible && k->library_path && !k->loaded;
            unmet |= star;
            tprintf("%-16s %-8s %-12s %s\n", k->name, k->version,
                    k->eligible ? (star ? "eligible*" : "eligible") : "not eligible",
                    k->eligible ? layout_text(k, lay, sizeof lay) : reasons);
            /* a verdict on the library's own bytes or arithmetic comes with
             * what to do about it, as in select --explain */
            if (!k->eligible && k->detail && k->detail[0] &&
                (strstr(reasons, "CHECKSUM_MISMATCH") || strstr(reasons, "WRONG_RESULTS")))
                tprintf("%-16s %s\n", "", k->detail);
        }
        if (unmet)
            tprintf("* gates that run no plugin code, and any first contact cached here; "
                    "'edgert select' (on\n  the device, without --device) loads and self-tests "
                    "the plugin (list never runs its code)\n");
    }
    edgert_close(ctx);
    return EXIT_OK;
}

static int cmd_select(const cli *c)
{
    edgert_ctx *ctx = NULL;
    int rc = open_ctx(c, &ctx);
    if (rc)
        return rc;
    size_t said = warn_diags_since(c, ctx, 0);
    edgert_selection *sel = NULL;
    char err[1024] = "";
    edgert_status st = edgert_select(ctx, c->priority, c->backend, &sel, err, sizeof err);
    warn_diags_since(c, ctx, said); /* what first contact found while select loaded */
    const edgert_candidate *s = edgert_selection_selected(sel);
    const edgert_device *d = edgert_device_facts(ctx);
    if (c->json) {
        json_w w;
        json_init(&w, json_out());
        json_obj(&w);
        json_kstr(&w, "mode", d->planned ? "plan" : "live");
        json_kstr(&w, "priority", edgert_priority_name(c->priority));
        json_kstr(&w, "forced", c->backend);
        json_kstr(&w, "forced_by", !c->backend           ? NULL
                                   : c->backend_from_env ? "EDGERT_BACKEND"
                                                         : "--backend");
        json_device(&w, d);
        json_key(&w, "selected");
        if (s) {
            json_obj(&w);
            json_kstr(&w, "name", s->name);
            json_layout(&w, s);
            json_kbool(&w, "runs_in_process", s->runs_in_process);
            json_kstr(&w, "evidence", edgert_selection_evidence(sel));
            json_kstr(&w, "path_chosen", s->path_chosen);
            json_kstr(&w, "rationale", s->rationale);
            json_end_obj(&w);
        } else {
            json_null(&w);
        }
        json_kstr(&w, "error", st == EDGERT_OK ? NULL : err);
        json_kstr(&w, "status", edgert_status_name(st)); /* as every failure's object */
        json_key(&w, "candidates");
        json_arr(&w);
        for (size_t i = 0; i < edgert_candidate_count(ctx); i++) {
            json_candidate(&w, edgert_candidate_at(ctx, i), sel, edgert_selection_rank(sel, i));
        }
        json_end_arr(&w);
        json_search_paths(&w, ctx);
        json_diags(&w, ctx);
        json_end_obj(&w);
        json_finish(&w);
    } else {
        wrap_capture wrap; /* on a terminal, every line at most 100 columns */
        wrap_begin(&wrap);
        if (c->explain && sel)
            explain(c, ctx, sel);
        if (s) {
            char lay[256];
            tprintf("selected: %s (priority %s%s; %s)\n", s->name,
                    edgert_priority_name(c->priority),
                    c->backend ? ", forced by --backend/EDGERT_BACKEND" : "",
                    d->planned ? "PLAN for the profiled device, nothing loaded"
                               : "live on this device");
            tprintf("  layout: %s\n", layout_text(s, lay, sizeof lay));
            if (s->path_chosen)
                tprintf("  path:   %s\n", s->path_chosen);
            tprintf("  decided by %s figures\n", edgert_selection_evidence(sel));
            /* the manifest's account of the backend, not what decided (the
             * headline of --explain says that): left out of the short form */
            if (s->rationale && *s->rationale && c->explain != 1)
                tprintf("  about:  %s\n", s->rationale);
            if (!c->explain)
                tprintf("('edgert select --explain' shows every backend and why it was or was not "
                        "chosen)\n");
        }
        wrap_end(&wrap);
    }
    if (st != EDGERT_OK && !c->json)
        tfprintf(stderr, "edgert: %s\n", err);
    edgert_selection_free(sel);
    edgert_close(ctx);
    if (st == EDGERT_OK)
        return EXIT_OK;
    if (st == EDGERT_E_NOT_ELIGIBLE || st == EDGERT_E_NOT_FOUND)
        return EXIT_NONE;
    return EXIT_FAIL;
}

int main(int argc, char **argv)
{
    static int once;
    if (!once++)
        cli_check_output_at_exit();
    if (argc < 2) {
        usage_main(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 && argc > 2 && argv[2][0] != '-') { /* help COMMAND */
        char help[] = "--help", *again[] = {argv[0], argv[2], help, NULL};
        return main(3, again);
    }
    if (strcmp(cmd, "--json") == 0 && argc > 2 &&
        (argv[2][0] != '-' || strcmp(argv[2], "--version") == 0)) {
        /* edgert --json COMMAND ...: as COMMAND --json ... (every command takes
         * it); help is text, --json or not */
        int help = strcmp(argv[2], "help") == 0, n = 0;
        char **again = calloc((size_t)argc + 1u, sizeof *again);
        if (!again)
            return EXIT_FAIL;
        again[n++] = argv[0];
        again[n++] = argv[2];
        if (!help)
            again[n++] = argv[1];
        for (int i = 3; i < argc; i++)
            again[n++] = argv[i];
        int rc = main(n, again);
        free(again);
        return rc;
    }
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage_main(stdout);
        return EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        if (json_asked(argc - 1, argv + 1)) { /* a script reads the ABI range */
            json_w w;
            json_init(&w, json_out());
            json_obj(&w);
            json_kstr(&w, "version", EDGERT_VERSION_STRING);
            json_kint(&w, "plugin_abi_min", EDGERT_PLUGIN_ABI_MIN);
            json_kint(&w, "plugin_abi_max", EDGERT_PLUGIN_ABI_MAX);
            json_end_obj(&w);
            json_finish(&w);
            return EXIT_OK;
        }
        tprintf("edgert %s (plugin ABI %u..%u)\n", EDGERT_VERSION_STRING, EDGERT_PLUGIN_ABI_MIN,
                EDGERT_PLUGIN_ABI_MAX);
        return EXIT_OK;
    }
    json_command(cmd);
    if (strcmp(cmd, "checksum") == 0) /* its own arguments: files, not options */
        return cmd_checksum(argc - 1, argv + 1);
    if (strcmp(cmd, "quantize") == 0) /* its own arguments: files, no device */
        return cmd_quantize(argc - 1, argv + 1);
    static const struct {
        const char *name;
        int (*run)(const cli *);
    } cmds[] = {{"probe", cmd_probe},   {"list", cmd_list},         {"select", cmd_select},
                {"bench", cmd_bench},   {"verify", cmd_verify},     {"calibrate", cmd_calibrate},
                {"export", cmd_export}, {"pack", cmd_pack},         {"run", cmd_run}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(cmd, cmds[i].name) != 0)
            continue;
        cli c = {.cmd = cmd};
        if (parse_args(&c, argc - 1, argv + 1) != 0) /* --json after the bad option too */
            return c.json || json_asked(argc - 1, argv + 1) ? json_failed(EXIT_USAGE)
                                                            : EXIT_USAGE;
        if (c.json && json_keep_stdout() != 0)
            tfprintf(stderr,
                     "edgert: warning: cannot set stdout aside for the JSON document "
                     "(%s); anything a plugin prints will be mixed into it\n",
                     strerror(errno));
        int rc = cmds[i].run(&c);
        if (rc == EXIT_NONE && c.backend_from_env)
            tfprintf(stderr, "edgert: (the backend '%s' was named by EDGERT_BACKEND, the default "
                     "of --backend)\n", c.backend);
        return c.json ? json_failed(rc) : rc;
    }
    tfprintf(stderr,
             "edgert: unknown command '%s' (commands: probe, list, select, bench, verify, "
             "calibrate, export, checksum, quantize, pack, run; see 'edgert --help')\n",
             cmd);
    return strcmp(cmd, "--json") == 0 || json_asked(argc - 1, argv + 1) ? json_failed(EXIT_USAGE)
                                                                         : EXIT_USAGE;
}
