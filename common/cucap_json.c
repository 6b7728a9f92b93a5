/* cucap_json.c - JSON writer and descriptor-driven FlatBuffers printer
 * (see cucap_json.h). */
#include "cucap_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 256
#define JSON_FILE_BUF (64u << 10)

struct cucap_json {
  FILE *f;            /* NULL: memory mode */
  char *buf;
  size_t len, cap;
  unsigned flags;
  cucap_status st;
  int depth;
  int after_key;      /* a key was written; the value follows */
  int top_done;       /* a complete top-level value was written */
  uint8_t count[JSON_MAX_DEPTH + 1]; /* values written at each level (0/1) */
  uint8_t is_obj[JSON_MAX_DEPTH + 1];
};

static int jw_reserve(cucap_json *w, size_t n) {
  if (w->st != CUCAP_OK)
    return 0;
  if (w->cap - w->len >= n + 1)
    return 1;
  if (w->f && w->len) {
    if (fwrite(w->buf, 1, w->len, w->f) != w->len) {
      w->st = CUCAP_ERR_IO;
      return 0;
    }
    w->len = 0;
    if (w->cap >= n + 1)
      return 1;
  }
  size_t ncap = w->cap ? w->cap : 256;
  while (ncap - w->len < n + 1) {
    if (ncap > ((size_t)1 << 40)) {
      w->st = CUCAP_ERR_NOMEM;
      return 0;
    }
    ncap *= 2;
  }
  char *nb = realloc(w->buf, ncap);
  if (!nb) {
    w->st = CUCAP_ERR_NOMEM;
    return 0;
  }
  w->buf = nb;
  w->cap = ncap;
  return 1;
}

static void jw_put(cucap_json *w, const char *s, size_t n) {
  if (!jw_reserve(w, n))
    return;
  memcpy(w->buf + w->len, s, n);
  w->len += n;
  w->buf[w->len] = 0;
}


static cucap_json *jw_new(FILE *f, unsigned flags) {
  cucap_json *w = calloc(1, sizeof(*w));
  if (!w)
    return NULL;
  w->f = f;
  w->flags = flags;
  w->cap = f ? JSON_FILE_BUF : 256;
  w->buf = malloc(w->cap);
  if (!w->buf) {
    free(w);
    return NULL;
  }
  w->buf[0] = 0;
  return w;
}

cucap_json *cucap_json_create_file(FILE *f, unsigned flags) {
  return f ? jw_new(f, flags) : NULL;
}
cucap_json *cucap_json_create_mem(unsigned flags) { return jw_new(NULL, flags); }

cucap_status cucap_json_flush(cucap_json *w) {
  if (!w)
    return CUCAP_ERR_INVALID_ARG;
  if (w->f && w->st == CUCAP_OK && w->len) {
    if (fwrite(w->buf, 1, w->len, w->f) != w->len)
      w->st = CUCAP_ERR_IO;
    w->len = 0;
  }
  if (w->f && w->st == CUCAP_OK && fflush(w->f) != 0)
    w->st = CUCAP_ERR_IO;
  return w->st;
}

void cucap_json_destroy(cucap_json *w) {
  if (!w)
    return;
  if (w->f)
    (void)cucap_json_flush(w);
  free(w->buf);
  free(w);
}

cucap_status cucap_json_status(const cucap_json *w) {
  return w ? w->st : CUCAP_ERR_INVALID_ARG;
}

const char *cucap_json_mem_data(const cucap_json *w, size_t *len) {
  if (!w || w->f) {
    if (len)
      *len = 0;
    return NULL;
  }
  if (len)
    *len = w->len;
  return w->buf;
}

void cucap_json_mem_clear(cucap_json *w) {
  if (!w || w->f)
    return;
  w->len = 0;
  w->buf[0] = 0;
  w->st = CUCAP_OK;
  w->depth = 0;
  w->after_key = 0;
  w->top_done = 0;
}

static void jw_indent(cucap_json *w) {
  if (!(w->flags & CUCAP_JSON_PRETTY))
    return;
  if (!jw_reserve(w, 1 + 2 * (size_t)w->depth))
    return;
  w->buf[w->len++] = '\n';
  memset(w->buf + w->len, ' ', 2 * (size_t)w->depth);
  w->len += 2 * (size_t)w->depth;
  w->buf[w->len] = 0;
}

/* Emits the separator before a value (or key) at the current level. */
static void jw_pre_value(cucap_json *w) {
  if (w->after_key) {
    w->after_key = 0;
    return;
  }
  if (w->depth == 0) {
    if (w->top_done)
      jw_put(w, "\n", 1);
    return;
  }
  if (w->is_obj[w->depth]) { /* value without key inside an object */
    if (w->st == CUCAP_OK)
      w->st = CUCAP_ERR_STATE;
    return;
  }
  if (w->count[w->depth])
    jw_put(w, ",", 1);
  w->count[w->depth] = 1;
  jw_indent(w);
}

static void jw_post_value(cucap_json *w) {
  if (w->depth == 0)
    w->top_done = 1;
}

static void jw_open(cucap_json *w, int obj) {
  if (!w || w->st != CUCAP_OK)
    return;
  jw_pre_value(w);
  if (w->depth >= JSON_MAX_DEPTH) {
    w->st = CUCAP_ERR_TOO_LARGE;
    return;
  }
  jw_put(w, obj ? "{" : "[", 1);
  w->depth++;
  w->count[w->depth] = 0;
  w->is_obj[w->depth] = (uint8_t)obj;
}

static void jw_close(cucap_json *w, int obj) {
  if (!w || w->st != CUCAP_OK)
    return;
  if (w->depth == 0 || w->is_obj[w->depth] != obj || w->after_key) {
    w->st = CUCAP_ERR_STATE;
    return;
  }
  int had = w->count[w->depth];
  w->depth--;
  if (had)
    jw_indent(w);
  jw_put(w, obj ? "}" : "]", 1);
  jw_post_value(w);
}

void cucap_json_object_begin(cucap_json *w) { jw_open(w, 1); }
void cucap_json_object_end(cucap_json *w) { jw_close(w, 1); }
void cucap_json_array_begin(cucap_json *w) { jw_open(w, 0); }
void cucap_json_array_end(cucap_json *w) { jw_close(w, 0); }

static void jw_escaped(cucap_json *w, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s;
  jw_put(w, "\"", 1);
  size_t i = 0;
  while (i < n && w->st == CUCAP_OK) {
    size_t run = i;
    while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' &&
           p[run] != '\\')
      run++;
    if (run > i) {
      jw_put(w, s + i, run - i);
      i = run;
      continue;
    }
    unsigned c = p[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      jw_put(w, esc, 2);
      i++;
    } else if (c < 0x20) {
      const char *e = NULL;
      switch (c) {
      case '\n': e = "\\n"; break;
      case '\r': e = "\\r"; break;
      case '\t': e = "\\t"; break;
      case '\b': e = "\\b"; break;
      case '\f': e = "\\f"; break;
      default: break;
      }
      if (e) {
        jw_put(w, e, 2);
      } else {
        memcpy(esc, "\\u00", 4);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        jw_put(w, esc, 6);
      }
      i++;
    } else {
      /* Multi-byte UTF-8: copy a well-formed sequence, else \u00XX. */
      size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
      int ok = need && i + need <= n;
      for (size_t k = 1; ok && k < need; k++)
        ok = (p[i + k] & 0xC0) == 0x80;
      if (ok && need == 3) {
        unsigned cp = ((c & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6);
        ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
      } else if (ok && need == 4) {
        unsigned cp = ((c & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12);
        ok = cp >= 0x10000 && cp <= 0x10FFFF;
      }
      if (ok) {
        jw_put(w, s + i, need);
        i += need;
      } else {
        memcpy(esc, "\\u00", 4);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        jw_put(w, esc, 6);
        i++;
      }
    }
  }
  jw_put(w, "\"", 1);
}

void cucap_json_key(cucap_json *w, const char *key) {
  if (!w || w->st != CUCAP_OK)
    return;
  if (w->depth == 0 || !w->is_obj[w->depth] || w->after_key || !key) {
    w->st = CUCAP_ERR_STATE;
    return;
  }
  if (w->count[w->depth])
    jw_put(w, ",", 1);
  w->count[w->depth] = 1;
  jw_indent(w);
  jw_escaped(w, key, strlen(key));
  jw_put(w, (w->flags & CUCAP_JSON_PRETTY) ? ": " : ":",
         (w->flags & CUCAP_JSON_PRETTY) ? 2 : 1);
  w->after_key = 1;
}

static void jw_scalar_text(cucap_json *w, const char *text, size_t n) {
  if (!w || w->st != CUCAP_OK)
    return;
  jw_pre_value(w);
  jw_put(w, text, n);
  jw_post_value(w);
}

void cucap_json_string_n(cucap_json *w, const char *s, size_t len) {
  if (!w || w->st != CUCAP_OK)
    return;
  if (!s) {
    cucap_json_null(w);
    return;
  }
  jw_pre_value(w);
  jw_escaped(w, s, len);
  jw_post_value(w);
}

void cucap_json_string(cucap_json *w, const char *s) {
  cucap_json_string_n(w, s, s ? strlen(s) : 0);
}

void cucap_json_int(cucap_json *w, int64_t v) {
  char t[32];
  int n = snprintf(t, sizeof t, "%lld", (long long)v);
  jw_scalar_text(w, t, (size_t)n);
}

void cucap_json_uint(cucap_json *w, uint64_t v) {
  char t[32];
  int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
  jw_scalar_text(w, t, (size_t)n);
}

static void jw_real(cucap_json *w, double v, int is_float) {
  char t[48];
  if (isnan(v)) {
    cucap_json_string(w, "nan");
    return;
  }
  if (isinf(v)) {
    cucap_json_string(w, v > 0 ? "inf" : "-inf");
    return;
  }
  int n = 0;
  /* Shortest %g precision that reads back to the same value. */
  for (int prec = is_float ? 6 : 15; prec <= 17; prec++) {
    n = snprintf(t, sizeof t, "%.*g", prec, v);
    if (is_float ? strtof(t, NULL) == (float)v : strtod(t, NULL) == v)
      break;
  }
  if (!strpbrk(t, ".eE") && n + 2 < (int)sizeof t) {
    memcpy(t + n, ".0", 3);
    n += 2;
  }
  jw_scalar_text(w, t, (size_t)n);
}

void cucap_json_double(cucap_json *w, double v) { jw_real(w, v, 0); }
void cucap_json_float(cucap_json *w, float v) { jw_real(w, v, 1); }
void cucap_json_bool(cucap_json *w, int v) {
  jw_scalar_text(w, v ? "true" : "false", v ? 4 : 5);
}
void cucap_json_null(cucap_json *w) { jw_scalar_text(w, "null", 4); }

void cucap_json_hex(cucap_json *w, const void *data, size_t len) {
  static const char hex[] = "0123456789abcdef";
  if (!w || w->st != CUCAP_OK)
    return;
  jw_pre_value(w);
  if (len > ((size_t)1 << 40) || !jw_reserve(w, 2 * len + 2))
    return;
  const uint8_t *p = data;
  char *o = w->buf + w->len;
  *o++ = '"';
  for (size_t i = 0; i < len; i++) {
    *o++ = hex[p[i] >> 4];
    *o++ = hex[p[i] & 15];
  }
  *o++ = '"';
  w->len = (size_t)(o - w->buf);
  w->buf[w->len] = 0;
  jw_post_value(w);
}

void cucap_json_newline(cucap_json *w) {
  if (!w || w->st != CUCAP_OK)
    return;
  jw_put(w, "\n", 1);
  if (w->depth == 0)
    w->top_done = 0;
}

void cucap_json_fputs_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}
