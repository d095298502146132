/*
 * tests/fuzz/fuzz_device_profile.c — fuzz target: device profiles
 * (er_device_profile_load, core/probe/device_profile.c), the YAML that stands in
 * for the probe in plan mode (`--device FILE`).
 *
 * The input is written as <scratch>/device.yaml and loaded into a device;
 * the names the profile fills in are then read as the CLI prints them.
 */
#define _GNU_SOURCE
#include "common/internal.h"

#include "fuzz_util.h"
#include "probe/probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200], msg[1024];
    fz_write(fz_path(path, sizeof path, "device.yaml"), data, size);
    er_diags d = {0};
    edgert_device dev;
    memset(&dev, 0, sizeof dev);
    if (er_device_profile_load(path, &dev, &d) == EDGERT_OK) {
        /* Every fixed-size string must come back terminated. */
        size_t n = strlen(dev.source) + strlen(dev.name) + strlen(dev.accelerator) +
                   strlen(dev.class_evidence) + strlen(dev.bf16_source);
        n += strlen(edgert_arch_name(dev.arch)) +
             strlen(edgert_device_class_name(dev.device_class));
        if (n == (size_t)-1)
            abort();
    }
    er_diag_last_error(&d, 0, msg, sizeof msg);
    er_diags_free(&d);
    return 0;
}
