/*
 * core/run/backend.h — the runtime: an open backend instance (backend.c). Not installed.
 */
#ifndef EDGERT_CORE_BACKEND_H
#define EDGERT_CORE_BACKEND_H

#include "context/context.h"

/* backend.c: the candidate behind an instance (packfile.c keys files by its
 * plugin file's XXH3). */
er_cand *er_backend_cand(const edgert_backend *b);

#endif /* EDGERT_CORE_BACKEND_H */
