/*
 * core/formats/json_string.h — the one JSON string writer of the tree, and the UTF-8
 * decoder it rests on. Shared as source, like core/formats/safetensors.c: compiled
 * into libedgert (evidence.json), the edgert CLI (--json, the files it
 * writes) and npu-export (report.json, encodings.json), so a plugin still
 * links nothing of the core. Every name is hidden in each of them.
 */
#ifndef EDGERT_CORE_JSON_STRING_H
#define EDGERT_CORE_JSON_STRING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The length of the valid UTF-8 sequence at p (1 to 4 bytes, within the
 * `avail` bytes there) with its code point in *cp, or 0 for a byte that
 * starts none (a stray continuation byte, an overlong form, a surrogate,
 * past U+10FFFF, cut short). */
size_t utf8_seq(const unsigned char *p, size_t avail, uint32_t *cp);

/* s (NULL: "") as a quoted JSON string. JSON requires \u escapes below
 * U+0020; also escaped is what a YAML reader (evidence.json and the tests
 * are read with libyaml) refuses or folds, and what a terminal showing the
 * JSON would act on: DEL, C1 controls, U+2028/9, the BOM and U+FFFE/F.
 * Bytes that are not UTF-8 are written as U+FFFD: the output is always
 * valid UTF-8. */
void json_write_string(FILE *f, const char *s);

#endif /* EDGERT_CORE_JSON_STRING_H */
