/*
 * tools/prompts.h — prompt files of token ids, as `edgert run` and
 * `edgert quantize --calibrate` read them: one prompt per line, ids
 * separated by spaces or commas, '#' starting a comment; or, for a name
 * that is no file and holds only ids and commas, one prompt written on the
 * command line ("1,2,3").
 */
#ifndef EDGERT_TOOLS_PROMPTS_H
#define EDGERT_TOOLS_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct prompts {
    int32_t **ids;
    uint32_t *len;
    size_t count;
} prompts;

/** Read `arg` (named by option `opt` in messages) into p: EXIT_OK, or
 *  EXIT_BADFILE (a missing file, a bad id at file:line:col, no prompt) or
 *  EXIT_FAIL (out of memory) with msg saying why, p empty. */
int read_prompts(const char *opt, const char *arg, prompts *p, char *msg, size_t len);
void prompts_free(prompts *p);

#endif
