/* rec_options.c - the recorder's options (CUCAP_OPTIONS, `cucap record`'s
 * flags) and its output path patterns (%p, %q{VAR}, %%; a child process's
 * pid added before the extension). No recorder state: the CLI parses and
 * expands the same way before the program starts (cucap_recorder.h). */
#include "cucap_recorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"

/* ------------------------------------------------------------ options */

void cucap_rec_options_init(cucap_rec_options *o) {
  memset(o, 0, sizeof *o);
  o->snapshot = CUCAP_REC_SNAPSHOT_NONE;
  o->stack = CUCAP_REC_STACK_FP;
  o->stack_depth = 32;
}

static int parse_num(const char *v, size_t n, uint64_t *out) {
  uint64_t x = 0;
  if (n == 0 || n > 19)
    return -1;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9')
      return -1;
    x = x * 10 + (uint64_t)(v[i] - '0');
  }
  *out = x;
  return 0;
}

static int tok_eq(const char *t, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(t, lit, n) == 0;
}

cucap_status cucap_rec_options_parse(const char *s, cucap_rec_options *o) {
  CUCAP_RETURN_IF(!o, CUCAP_ERR_INVALID_ARG);
  if (!s)
    return CUCAP_OK;
  while (*s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    const char *eq = memchr(s, '=', len);
    size_t klen = eq ? (size_t)(eq - s) : len;
    const char *v = eq ? eq + 1 : NULL;
    size_t vlen = eq ? len - klen - 1 : 0;
    uint64_t num = 0;
    if (klen == 0) {
      /* empty item (",,"): ignore */
    } else if (tok_eq(s, klen, "snapshot")) {
      if (!v)
        return CUCAP_ERR_INVALID_ARG;
      if (tok_eq(v, vlen, "none"))
        o->snapshot = CUCAP_REC_SNAPSHOT_NONE;
      else if (tok_eq(v, vlen, "exit"))
        o->snapshot = CUCAP_REC_SNAPSHOT_EXIT;
      else if (vlen > 7 && memcmp(v, "launch:", 7) == 0 &&
               parse_num(v + 7, vlen - 7, &num) == 0) {
        o->snapshot = CUCAP_REC_SNAPSHOT_LAUNCH;
        o->snapshot_launch = num;
      } else if (vlen > 6 && memcmp(v, "range:", 6) == 0) {
        /* range:NAME[@K]; the last '@' followed by digits only is K */
        const char *nm = v + 6;
        size_t nl = vlen - 6, at = nl;
        for (size_t i = nl; i-- > 0;)
          if (nm[i] == '@') {
            at = i;
            break;
          }
        uint64_t k = 0;
        if (at < nl && parse_num(nm + at + 1, nl - at - 1, &k) == 0)
          nl = at;
        else if (at < nl)
          return CUCAP_ERR_INVALID_ARG;
        if (nl == 0 || nl >= sizeof o->snapshot_range)
          return CUCAP_ERR_INVALID_ARG;
        memcpy(o->snapshot_range, nm, nl);
        o->snapshot_range[nl] = 0;
        o->snapshot_nth = k;
        o->snapshot = CUCAP_REC_SNAPSHOT_RANGE;
      } else
        return CUCAP_ERR_INVALID_ARG;
    } else if (tok_eq(s, klen, "hash_launches")) {
      o->hash_launches = 1;
    } else if (tok_eq(s, klen, "audit")) {
      o->audit = 1;
    } else if (tok_eq(s, klen, "no_dtoh_payload")) {
      o->no_dtoh_payload = 1;
    } else if (tok_eq(s, klen, "sync_writes")) {
      o->sync_writes = 1;
    } else if (tok_eq(s, klen, "stats")) {
      o->stats = 1;
    } else if (tok_eq(s, klen, "stack")) {
      if (v && tok_eq(v, vlen, "off"))
        o->stack = CUCAP_REC_STACK_OFF;
      else if (v && tok_eq(v, vlen, "fp"))
        o->stack = CUCAP_REC_STACK_FP;
      else if (v && tok_eq(v, vlen, "unwind"))
        o->stack = CUCAP_REC_STACK_UNWIND;
      else
        return CUCAP_ERR_INVALID_ARG;
    } else if (tok_eq(s, klen, "stack_depth") || tok_eq(s, klen, "level") ||
               tok_eq(s, klen, "workers") || tok_eq(s, klen, "flush_ms")) {
      if (!v || parse_num(v, vlen, &num) != 0 || num > 100000)
        return CUCAP_ERR_INVALID_ARG;
      if (tok_eq(s, klen, "stack_depth")) {
        if (num < 1 || num > 256)
          return CUCAP_ERR_INVALID_ARG;
        o->stack_depth = (int)num;
      } else if (tok_eq(s, klen, "level")) {
        if (num > 22)
          return CUCAP_ERR_INVALID_ARG;
        o->level = (int)num;
      } else if (tok_eq(s, klen, "workers")) {
        if (num > 64)
          return CUCAP_ERR_INVALID_ARG;
        o->workers = (int)num;
      } else {
        o->flush_ms = (unsigned)num;
      }
    } else {
      CUCAP_WARN("CUCAP_OPTIONS: unknown option '%.*s' ignored", (int)klen, s);
    }
    s += len;
    if (*s == ',')
      s++;
  }
  return CUCAP_OK;
}

cucap_status cucap_rec_expand_path(const char *pattern, long pid, char *out,
                                   size_t out_size) {
  CUCAP_RETURN_IF(!pattern || !out || out_size == 0, CUCAP_ERR_INVALID_ARG);
  size_t n = 0;
#define PUT(str, len)                                                          \
  do {                                                                         \
    size_t l_ = (len);                                                         \
    if (n + l_ >= out_size)                                                    \
      return CUCAP_ERR_TOO_LARGE;                                              \
    memcpy(out + n, (str), l_);                                                \
    n += l_;                                                                   \
  } while (0)
  for (const char *p = pattern; *p; p++) {
    if (*p != '%') {
      PUT(p, 1);
      continue;
    }
    p++;
    if (*p == 'p') {
      char num[32];
      int l = snprintf(num, sizeof num, "%ld", pid);
      PUT(num, (size_t)l);
    } else if (*p == '%') {
      PUT("%", 1);
    } else if (*p == 'q') {
      if (p[1] != '{')
        return CUCAP_ERR_INVALID_ARG;
      const char *close = strchr(p + 2, '}');
      if (!close || close == p + 2 || close - (p + 2) >= 256)
        return CUCAP_ERR_INVALID_ARG;
      char name[256];
      memcpy(name, p + 2, (size_t)(close - (p + 2)));
      name[close - (p + 2)] = 0;
      const char *val = getenv(name);
      if (val)
        PUT(val, strlen(val));
      p = close;
    } else {
      return CUCAP_ERR_INVALID_ARG; /* includes a trailing lone '%' */
    }
  }
#undef PUT
  out[n] = 0;
  return CUCAP_OK;
}

/* ------------------------------------------------------------ paths */

cucap_status cucap_rec_output_path(const char *pattern, long pid, long root_pid,
                                   char *out, size_t out_size) {
  cucap_status st = cucap_rec_expand_path(pattern, pid, out, out_size);
  if (st != CUCAP_OK || root_pid <= 0 || pid == root_pid)
    return st;
  for (const char *p = pattern; *p; p++) { /* "%p" (not "%%p") present? */
    if (*p == '%' && p[1] == '%')
      p++;
    else if (*p == '%' && p[1] == 'p')
      return CUCAP_OK;
  }
  char suffix[32];
  int sl = snprintf(suffix, sizeof suffix, ".%ld", pid);
  size_t n = strlen(out);
  CUCAP_RETURN_IF(n + (size_t)sl >= out_size, CUCAP_ERR_TOO_LARGE);
  const char *base = strrchr(out, '/');
  base = base ? base + 1 : out;
  const char *dot = strrchr(base, '.');
  /* "dir/.hidden" has no extension: the dot must not start the name */
  size_t at = dot && dot != base ? (size_t)(dot - out) : n;
  memmove(out + at + sl, out + at, n - at + 1);
  memcpy(out + at, suffix, (size_t)sl);
  return CUCAP_OK;
}
