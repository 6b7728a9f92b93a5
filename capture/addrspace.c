/* addrspace.c - the process's address space as AddressRange tables (see
 * cucap_addrspace.h). One line of /proc/self/maps:
 *   7f0d7f000000-7f0d7f321000 rw-p 00000000 00:00 0          [heap]
 *   start-end perms offset dev inode [path]
 * The kind comes from the path: none -> Anon, [stack] -> Stack, [heap] ->
 * Heap, [anon:...] -> Anon, other [...] -> Other, /dev/nvidia* -> Device,
 * any other path -> File. */
#include "cucap_addrspace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_schema.h"
#include "cucap_vec.h"

typedef struct as_range {
  uint64_t start, end;
  uint8_t kind;
  const char *path; /* into the text; NULL for none */
  size_t path_len;
} as_range;

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Parses hex digits at *p (< end); 0 if none or more than 16. */
static int parse_hex(const char **p, const char *end, uint64_t *out) {
  uint64_t v = 0;
  int n = 0, d;
  while (*p < end && (d = hexval(**p)) >= 0) {
    if (++n > 16)
      return 0;
    v = v << 4 | (uint64_t)d;
    (*p)++;
  }
  *out = v;
  return n > 0;
}

static const char *skip_field(const char *p, const char *end) {
  while (p < end && *p == ' ')
    p++;
  while (p < end && *p != ' ')
    p++;
  return p;
}

static uint8_t kind_of(const char *path, size_t n) {
  if (!n)
    return CUCAP_FB_ADDRESSKIND_ANON;
  if (path[0] == '[') {
    if (n == 7 && !memcmp(path, "[stack]", 7))
      return CUCAP_FB_ADDRESSKIND_STACK;
    if (n == 6 && !memcmp(path, "[heap]", 6))
      return CUCAP_FB_ADDRESSKIND_HEAP;
    if (n >= 6 && !memcmp(path, "[anon:", 6))
      return CUCAP_FB_ADDRESSKIND_ANON;
    return CUCAP_FB_ADDRESSKIND_OTHER;
  }
  if (n >= 11 && !memcmp(path, "/dev/nvidia", 11))
    return CUCAP_FB_ADDRESSKIND_DEVICE;
  return CUCAP_FB_ADDRESSKIND_FILE;
}

static int same_region(const as_range *a, uint8_t kind, const char *path, size_t n) {
  if (a->kind != kind)
    return 0;
  if (kind == CUCAP_FB_ADDRESSKIND_ANON)
    return 1; /* "[anon:name]" labels do not split anonymous memory */
  return a->path_len == n && (!n || !memcmp(a->path, path, n));
}

cucap_fb_ref cucap_addrspace_build_from(cucap_fbb *b, const char *text, size_t len) {
  if (!b || !text)
    return 0;
  size_t cap = 256, n = 0;
  as_range *r = malloc(cap * sizeof *r);
  if (!r)
    return 0;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol)
      eol = end;
    const char *q = p;
    uint64_t s, e;
    if (parse_hex(&q, eol, &s) && q < eol && *q == '-' && (q++, parse_hex(&q, eol, &e)) &&
        e > s) {
      for (int f = 0; f < 4; f++) /* perms, offset, dev, inode */
        q = skip_field(q, eol);
      while (q < eol && *q == ' ')
        q++;
      size_t pl = (size_t)(eol - q);
      while (pl && (q[pl - 1] == ' ' || q[pl - 1] == '\r'))
        pl--;
      uint8_t k = kind_of(q, pl);
      if (n && r[n - 1].end == s && same_region(&r[n - 1], k, q, pl)) {
        r[n - 1].end = e;
      } else if (n < CUCAP_ADDRSPACE_MAX_RANGES && (!n || s >= r[n - 1].end)) {
        if (!CUCAP_VEC_RESERVE(r, cap, n + 1, 1)) {
          free(r);
          return 0;
        }
        r[n++] = (as_range){s, e, k, pl ? q : NULL, pl};
      }
    }
    p = eol + 1;
  }
  cucap_fb_ref *refs = malloc((n ? n : 1) * sizeof *refs);
  if (!refs) {
    free(r);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    int named = r[i].kind == CUCAP_FB_ADDRESSKIND_FILE || r[i].kind == CUCAP_FB_ADDRESSKIND_DEVICE;
    cucap_fb_ref path = named && r[i].path ? cucap_fbb_string(b, r[i].path, r[i].path_len) : 0;
    cucap_fb_address_range_start(b);
    cucap_fb_address_range_add_start(b, r[i].start);
    cucap_fb_address_range_add_end(b, r[i].end);
    cucap_fb_address_range_add_kind(b, r[i].kind);
    if (path)
      cucap_fb_address_range_add_path(b, path);
    refs[i] = cucap_fb_address_range_end(b);
  }
  cucap_fb_ref v = cucap_fbb_vector_refs(b, refs, n);
  free(refs);
  free(r);
  return v;
}

cucap_fb_ref cucap_addrspace_build(cucap_fbb *b) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  while (text) {
    if (len == cap) {
      if (cap >= ((size_t)64 << 20))
        break; /* enough: the first ranges are kept */
      char *nt = realloc(text, cap * 2);
      if (!nt) {
        free(text);
        text = NULL;
        break;
      }
      text = nt;
      cap *= 2;
    }
    ssize_t k = read(fd, text + len, cap - len);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    len += (size_t)k;
  }
  close(fd);
  if (!text)
    return 0;
  /* a line cut by the size limit is dropped by the parser (no '-' range) */
  cucap_fb_ref v = cucap_addrspace_build_from(b, text, len);
  free(text);
  return v;
}
