/* core/formats/json_string.c — see json_string.h. */
#include "formats/json_string.h"

#include <string.h>

size_t utf8_seq(const unsigned char *p, size_t avail, uint32_t *cp)
{
    static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (avail == 0)
        return 0;
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    size_t n = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 0;
    if (!n || p[0] > 0xF4 || n > avail)
        return 0;
    uint32_t v = p[0] & (0x3Fu >> (n - 1));
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (p[i] & 0x3Fu);
    }
    if (v < least[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n;
}

void json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    const unsigned char *end = p + strlen((const char *)p);
    while (p < end) {
        uint32_t cp = 0xFFFD;
        size_t n = utf8_seq(p, (size_t)(end - p), &cp);
        switch (cp) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (n == 0 || cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 ||
                cp == 0x2029 || cp == 0xFEFF || cp == 0xFFFE || cp == 0xFFFF)
                fprintf(f, "\\u%04x", (unsigned)cp);
            else
                fwrite(p, 1, n, f);
        }
        p += n ? n : 1;
    }
    fputc('"', f);
}
