/*
 * tests/fuzz/fuzz_probe.c — fuzz target: the probe's sysroot files
 * (core/probe/probe_host.c, probe_class.c, probe_read.c): cpuinfo, meminfo, the
 * online CPU list, the device-tree model and compatible properties, the L4T
 * release file and the NVIDIA driver's GPU information.
 *
 * The input is those files one after another, separated by FZ_SEP (a line
 * of its own: "\n@@edgert-file@@\n"), in the order of fz_files; a file the
 * input does not reach is absent. They are written into a scratch sysroot
 * and the probe's file steps run on it for both architectures
 * (er_probe_host_facts, er_probe_device_class); the pure decoders also get
 * the whole input as one string. A sysroot's files are outside input: a
 * container image, a device under test, a hostile mount.
 * tests/fuzz/make_seeds.py builds the seeds from tests/fixtures/sysroots.
 */
#define _GNU_SOURCE /* memmem */
#include "probe/probe_internal.h"

#include "fuzz_util.h"

#define FZ_SEP "\n@@edgert-file@@\n"

static const char *const fz_files[] = {
    "proc/cpuinfo",
    "proc/meminfo",
    "sys/devices/system/cpu/online",
    "proc/device-tree/model",
    "proc/device-tree/compatible",
    "etc/nv_tegra_release",
    "proc/driver/nvidia/gpus/0000:01:00.0/information",
};
#define FZ_NFILES (sizeof fz_files / sizeof fz_files[0])
#define FZ_GPU_DIR "root/proc/driver/nvidia/gpus/0000:01:00.0"

static void make_tree(void)
{
    static int made;
    if (made)
        return;
    fz_mkdirs("root/proc/device-tree");
    fz_mkdirs("root/sys/devices/system/cpu");
    fz_mkdirs("root/etc");
    fz_mkdirs("root/proc/driver/nvidia/gpus");
    made = 1;
}

/* File i of the sysroot: written with data, or removed (data NULL). */
static void put_file(size_t i, const uint8_t *data, size_t size)
{
    char rel[256], path[4400];
    snprintf(rel, sizeof rel, "root/%s", fz_files[i]);
    fz_path(path, sizeof path, rel);
    if (i == FZ_NFILES - 1) {
        char gpu[4400];
        fz_path(gpu, sizeof gpu, FZ_GPU_DIR);
        if (!data) {
            unlink(path);
            rmdir(gpu); /* no GPU folder either: otherwise it alone says "CUDA" */
            return;
        }
        fz_mkdirs(FZ_GPU_DIR);
    }
    if (data)
        fz_write(path, data, size);
    else
        unlink(path);
}

static void decode_whole(const uint8_t *data, size_t size)
{
    char *s = fz_cstr(data, size), out[160];
    unsigned cpus;
    uint64_t total, avail;
    er_parse_cpu_list(s, &cpus);
    er_parse_meminfo(s, &total, &avail);
    er_probe_line_value(s, "model name", out, sizeof out);
    er_parse_cpu_id(s, EDGERT_ARCH_X86_64, out, sizeof out);
    er_parse_cpu_id(s, EDGERT_ARCH_ARM64, out, 20);
    er_gpu_model_has_bf16(s);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    make_tree();
    const uint8_t *p = data, *end = data + size;
    size_t seplen = strlen(FZ_SEP);
    for (size_t i = 0; i < FZ_NFILES; i++) {
        if (!p) {
            put_file(i, NULL, 0);
            continue;
        }
        const uint8_t *sep = memmem(p, (size_t)(end - p), FZ_SEP, seplen);
        put_file(i, p, sep ? (size_t)(sep - p) : (size_t)(end - p));
        p = sep ? sep + seplen : NULL;
    }
    char root[4200];
    fz_path(root, sizeof root, "root");
    const edgert_arch arches[] = {EDGERT_ARCH_X86_64, EDGERT_ARCH_ARM64};
    for (size_t a = 0; a < 2; a++) {
        er_diags d = {0};
        edgert_device dev;
        memset(&dev, 0, sizeof dev);
        er_probe_host_facts(root, arches[a], &dev, &d);
        er_probe_device_class(root, arches[a], &dev);
        char msg[1024];
        er_diag_last_error(&d, 0, msg, sizeof msg);
        er_diags_free(&d);
    }
    decode_whole(data, size);
    return 0;
}
