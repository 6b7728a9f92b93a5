/* range.c - the range spec parser (cucap_range.h). */
#include "cucap_range.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static cucap_status bad(char *msg, size_t n, const char *fmt, ...) {
  if (msg && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
  }
  return CUCAP_ERR_INVALID_ARG;
}

/* Decimal digits [p, end) -> *v; 0 on success (no sign, no overflow). */
static int parse_u64(const char *p, const char *end, uint64_t *v) {
  if (p >= end || end - p > 20)
    return -1;
  uint64_t x = 0;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9')
      return -1;
    uint64_t d = (uint64_t)(*p - '0');
    if (x > (UINT64_MAX - d) / 10)
      return -1;
    x = x * 10 + d;
  }
  *v = x;
  return 0;
}

/* "12.5ms" in [p, end) -> ns. Integer and fraction parts are exact up to
 * nanoseconds; overflow and empty numbers are errors. */
static int parse_time(const char *p, const char *end, uint64_t *ns) {
  const char *q = p;
  while (q < end && ((*q >= '0' && *q <= '9') || *q == '.'))
    q++;
  if (q == p)
    return -1;
  uint64_t unit = 1000000; /* ms */
  size_t ul = (size_t)(end - q);
  if (ul == 0)
    unit = 1000000;
  else if (ul == 2 && !memcmp(q, "ns", 2))
    unit = 1;
  else if (ul == 2 && !memcmp(q, "us", 2))
    unit = 1000;
  else if (ul == 2 && !memcmp(q, "ms", 2))
    unit = 1000000;
  else if (ul == 1 && *q == 's')
    unit = 1000000000;
  else
    return -1;
  const char *dot = memchr(p, '.', (size_t)(q - p));
  uint64_t ip = 0, frac = 0, fscale = 1;
  if (parse_u64(p, dot ? dot : q, &ip) != 0) {
    if (!(dot && dot == p)) /* ".5" is allowed, "5." below */
      return -1;
    ip = 0;
  }
  if (dot) {
    const char *f = dot + 1;
    if (memchr(f, '.', (size_t)(q - f)))
      return -1;
    for (; f < q && fscale < 1000000000; f++) {
      frac = frac * 10 + (uint64_t)(*f - '0');
      fscale *= 10;
    }
    if (dot + 1 == q && dot == p)
      return -1; /* just "." */
  }
  if (ip > UINT64_MAX / unit)
    return -1;
  uint64_t v = ip * unit;
  /* frac/fscale of a unit, truncated to whole ns */
  uint64_t add = unit >= fscale ? frac * (unit / fscale) : frac / (fscale / unit);
  if (v > UINT64_MAX - add)
    return -1;
  *ns = v + add;
  return 0;
}

/* NAME[@K]: the last '@' followed by digits only separates K. */
static int split_nth(const char *s, size_t len, size_t *name_len, uint64_t *nth) {
  *nth = 0;
  *name_len = len;
  const char *at = NULL;
  for (size_t i = len; i-- > 0;)
    if (s[i] == '@') {
      at = s + i;
      break;
    }
  if (!at)
    return 0;
  if (parse_u64(at + 1, s + len, nth) != 0)
    return -1;
  *name_len = (size_t)(at - s);
  return 0;
}

cucap_status cucap_range_parse(const char *s, cucap_range_spec *out, char *msg,
                               size_t msg_size) {
  if (msg && msg_size)
    msg[0] = 0;
  if (!s || !out)
    return bad(msg, msg_size, "no range given");
  memset(out, 0, sizeof *out);
  size_t len = strnlen(s, 4096);
  if (len >= 4096)
    return bad(msg, msg_size, "range spec too long");
  const char *end = s + len;
  if (len > 7 && !memcmp(s, "launch:", 7)) {
    const char *p = s + 7, *dash = memchr(p, '-', (size_t)(end - p));
    out->kind = CUCAP_RANGE_LAUNCH;
    if (parse_u64(p, dash ? dash : end, &out->first) != 0 ||
        (dash && parse_u64(dash + 1, end, &out->last) != 0))
      return bad(msg, msg_size, "'%s': expected launch:N or launch:A-B (launch indices)", s);
    if (!dash)
      out->last = out->first;
    if (out->last < out->first)
      return bad(msg, msg_size, "'%s': the range ends before it starts", s);
    return CUCAP_OK;
  }
  if (len > 5 && !memcmp(s, "nvtx:", 5)) {
    size_t nl;
    out->kind = CUCAP_RANGE_NVTX;
    if (split_nth(s + 5, len - 5, &nl, &out->nth) != 0)
      return bad(msg, msg_size, "'%s': expected nvtx:NAME or nvtx:NAME@K", s);
    if (nl == 0 || nl >= sizeof out->name)
      return bad(msg, msg_size, "'%s': the NVTX range name must have 1 to %d bytes", s,
                 (int)sizeof out->name - 1);
    memcpy(out->name, s + 5, nl);
    out->name[nl] = 0;
    return CUCAP_OK;
  }
  if (len >= 8 && !memcmp(s, "profiler", 8)) {
    out->kind = CUCAP_RANGE_PROFILER;
    if (len == 8)
      return CUCAP_OK;
    if (s[8] != '@' || parse_u64(s + 9, end, &out->nth) != 0)
      return bad(msg, msg_size, "'%s': expected profiler or profiler@K", s);
    return CUCAP_OK;
  }
  if (len > 5 && !memcmp(s, "time:", 5)) {
    const char *p = s + 5, *dash = memchr(p, '-', (size_t)(end - p));
    out->kind = CUCAP_RANGE_TIME;
    if (!dash || parse_time(p, dash, &out->first) != 0 ||
        parse_time(dash + 1, end, &out->last) != 0)
      return bad(msg, msg_size,
                 "'%s': expected time:T0-T1 (e.g. time:1.5s-2s; units ns, us, ms, s)", s);
    if (out->last < out->first)
      return bad(msg, msg_size, "'%s': the window ends before it starts", s);
    return CUCAP_OK;
  }
  return bad(msg, msg_size,
             "'%s': expected launch:A-B, nvtx:NAME[@K], profiler[@K] or time:T0-T1", s);
}

int cucap_range_format(const cucap_range_spec *r, char *buf, size_t size) {
  switch (r->kind) {
  case CUCAP_RANGE_LAUNCH:
    if (r->first == r->last)
      return snprintf(buf, size, "launch:%" PRIu64, r->first);
    return snprintf(buf, size, "launch:%" PRIu64 "-%" PRIu64, r->first, r->last);
  case CUCAP_RANGE_NVTX:
    return snprintf(buf, size, "nvtx:%s@%" PRIu64, r->name, r->nth);
  case CUCAP_RANGE_PROFILER:
    return snprintf(buf, size, "profiler@%" PRIu64, r->nth);
  case CUCAP_RANGE_TIME:
    return snprintf(buf, size, "time:%" PRIu64 "ns-%" PRIu64 "ns", r->first, r->last);
  default:
    return snprintf(buf, size, "?");
  }
}
