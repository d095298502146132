/* core/common/workload.c — see workload.h. */
#include "common/workload.h"

/* Hidden 2048, intermediate 6656, 28 layers, attention q 2048 + k/v 2 x 512,
 * vocabulary 131072 with the embedding tied to the output head. */
static const er_ref_shape spark[] = {
    {"qkv", 2048, 3072, 28, 0},
    {"o", 2048, 2048, 28, 0},
    {"gate_up", 2048, 13312, 28, 0},
    {"down", 6656, 2048, 28, 0},
    {"lm_head", 2048, 131072, 1, 1},
};

const er_ref_shape *er_reference_shapes(size_t *count)
{
    *count = sizeof spark / sizeof spark[0];
    return spark;
}

uint64_t er_reference_weights(void)
{
    uint64_t s = 0;
    for (size_t i = 0; i < sizeof spark / sizeof spark[0]; i++)
        s += (uint64_t)spark[i].n * spark[i].k * spark[i].count;
    return s;
}
