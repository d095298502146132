/*
 * core/load/load.h — step 4: loading a candidate that passed its gates
 * (load.c) and the table the plugin gets (host.c). Not installed.
 */
#ifndef EDGERT_CORE_LOAD_H
#define EDGERT_CORE_LOAD_H

#include "context/context.h"
#include "sandbox/sandbox.h"

/* load.c: dlopen, entry, ABI, descriptor, init, self-test. */
/** Live mode: er_ensure_loaded. Plan mode: nothing. */
void er_load(struct edgert_ctx *ctx, er_cand *c);
/** Load a candidate that passed every gate and is not loaded yet: the file
 *  gate if its library is not open yet, first contact in the sandbox, then
 *  in-process (er_load_now). Anything that fails adds its reason. */
void er_ensure_loaded(struct edgert_ctx *ctx, er_cand *c);
/** In-process: dlopen, entry, ABI, descriptor, init, self-test. */
void er_load_now(struct edgert_ctx *ctx, er_cand *c);
void er_unload(er_cand *c);

/* host.c: the table a plugin gets, and the core's log. */
void er_host_fill(er_cand *c, uint32_t abi);

#endif /* EDGERT_CORE_LOAD_H */
