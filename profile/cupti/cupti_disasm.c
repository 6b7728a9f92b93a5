/* cupti_disasm.c - reads `nvdisasm -c [-g|-gi]` listings for the CUPTI
 * engine (cupti_sass.c): per instruction its function (from the .section
 * .text.<name> lines), offset (the hex number in the comment that starts
 * each instruction line), text (up to the ';') and the line info in force
 * (//## File "a.cu", line N [inlined at "b.cu", line M ...]).
 * Plain text parsing with no other dependency (tests/fuzz/fuzz_nvdisasm.c);
 * the listing is treated as untrusted: every access is bounded by len. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cupti_disasm.h"

static const char *ck_skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  return p;
}

/* `//## File "a.cu", line 10 inlined at "b.cu", line 20 ...` */
static void ck_parse_file_line(const char *p, const char *end, char *file,
                               size_t fsz, uint32_t *line, char *chain,
                               size_t csz) {
  file[0] = 0;
  chain[0] = 0;
  *line = 0;
  size_t cl = 0;
  int first = 1;
  while (p < end) {
    const char *q = memchr(p, '"', (size_t)(end - p));
    if (!q)
      break;
    const char *q2 = memchr(q + 1, '"', (size_t)(end - q - 1));
    if (!q2)
      break;
    const char *ln = q2 + 1;
    const char *kw = NULL;
    for (const char *t = ln; t + 4 < end; t++)
      if (!memcmp(t, "line", 4)) {
        kw = t + 4;
        break;
      }
    uint32_t v = 0;
    if (kw)
      for (kw = ck_skip_ws(kw, end); kw < end && *kw >= '0' && *kw <= '9'; kw++)
        v = v * 10 + (uint32_t)(*kw - '0');
    if (first) {
      snprintf(file, fsz, "%.*s", (int)(q2 - q - 1), q + 1);
      *line = v;
      first = 0;
    }
    if (cl < csz)
      cl += (size_t)snprintf(chain + cl, csz - cl, "%s%.*s:%u",
                             cl ? " <- " : "", (int)(q2 - q - 1), q + 1, v);
    p = kw ? kw : q2 + 1;
  }
  if (!strstr(chain, " <- "))
    chain[0] = 0; /* not inlined: the chain says nothing the line does not */
}

void ck_disasm_parse(const char *text, size_t len, ck_disasm_fn fn, void *user) {
  const char *p = text, *end = text + len;
  char func[1024] = "", file[1024] = "", chain[2048] = "";
  uint32_t line = 0;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    const char *s = ck_skip_ws(p, le);
    size_t n = (size_t)(le - s);
    if (n > 8 && !memcmp(s, ".section", 8)) {
      const char *t = memchr(s, '.', n);
      t = t ? memchr(t + 1, '.', (size_t)(le - t - 1)) : NULL; /* .text. */
      if (t && le - t > 6 && !memcmp(t, ".text.", 6)) {
        const char *b = t + 6, *e = b;
        while (e < le && *e != ',' && *e != ' ' && *e != '\t')
          e++;
        snprintf(func, sizeof func, "%.*s", (int)(e - b), b);
        file[0] = chain[0] = 0;
        line = 0;
      }
    } else if (n > 7 && !memcmp(s, "//## File", 9 <= n ? 9 : n)) {
      ck_parse_file_line(s + 9, le, file, sizeof file, &line, chain,
                         sizeof chain);
    } else if (n > 4 && s[0] == '/' && s[1] == '*') {
      const char *c = s + 2;
      uint64_t pc = 0;
      int digits = 0;
      for (; c < le && ((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') ||
                        (*c >= 'A' && *c <= 'F'));
           c++, digits++)
        pc = pc * 16 + (uint64_t)(*c <= '9' ? *c - '0' : (*c | 0x20) - 'a' + 10);
      if (digits && c + 1 < le && c[0] == '*' && c[1] == '/' && func[0]) {
        const char *b = ck_skip_ws(c + 2, le), *e = le;
        const char *semi = NULL;
        for (const char *t = b; t < le; t++) {
          if (*t == ';') {
            semi = t;
            break;
          }
        }
        if (semi)
          e = semi;
        while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
          e--;
        char ins[512];
        snprintf(ins, sizeof ins, "%.*s", (int)(e - b), b);
        fn(user, func, pc, ins, file, line, chain);
      }
    }
    p = nl ? nl + 1 : end;
  }
}

