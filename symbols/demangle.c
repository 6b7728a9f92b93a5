/* demangle.c - cucap_demangle.h: __cxa_demangle found at run time. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_demangle.h"

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);
static cxa_demangle_fn g_demangle;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The cucap tool links libsupc++ statically (tools/CMakeLists.txt), a copy
 * dlsym does not see (the executable exports nothing): this weak reference
 * binds to it there and stays NULL elsewhere. */
extern char *__cxa_demangle(const char *, char *, size_t *, int *) __attribute__((weak));

static void load(void) {
  /* linked in, already in the process (a C++ program embeds cucap), else
   * libstdc++ */
  void *f = __cxa_demangle ? (void *)__cxa_demangle : dlsym(RTLD_DEFAULT, "__cxa_demangle");
  if (!f) {
    void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
    if (h)
      f = dlsym(h, "__cxa_demangle"); /* the handle stays open for the process */
  }
  g_demangle = (cxa_demangle_fn)f;
}

static void copy_cut(char *out, size_t size, const char *s) {
  if (!size)
    return;
  size_t n = strlen(s);
  if (n >= size)
    n = size - 1;
  memcpy(out, s, n);
  out[n] = 0;
}

int cucap_demangle(const char *mangled, char *out, size_t size) {
  if (!mangled)
    mangled = "";
  pthread_once(&g_once, load);
  if (g_demangle && mangled[0] == '_' && mangled[1] == 'Z') {
    int st = -1;
    char *d = g_demangle(mangled, NULL, NULL, &st);
    if (d && st == 0) {
      copy_cut(out, size, d);
      free(d);
      return 1;
    }
    free(d);
  }
  copy_cut(out, size, mangled);
  return 0;
}

void cucap_demangle_short(const char *d, char *out, size_t size, size_t width) {
  if (!size)
    return;
  if (!strncmp(d, "void ", 5))
    d += 5;
  /* the name ends at the first '(' outside template arguments */
  size_t len = strlen(d), end = len;
  int depth = 0;
  for (size_t i = 0; i < len; i++) {
    if (d[i] == '<')
      depth++;
    else if (d[i] == '>' && depth > 0)
      depth--;
    else if (d[i] == '(' && depth == 0 && i > 0) {
      end = i;
      break;
    }
  }
  size_t o = 0;
  int elide = end > width;
  depth = 0;
  for (size_t i = 0; i < end && o + 1 < size; i++) {
    char c = d[i];
    if (elide && c == '<') {
      if (depth++ == 0 && o + 6 < size) {
        memcpy(out + o, "<...>", 5);
        o += 5;
      }
      continue;
    }
    if (elide && c == '>' && depth > 0) {
      depth--;
      continue;
    }
    if (!elide || depth == 0)
      out[o++] = c;
  }
  out[o] = 0;
  if (width >= 4 && o > width) {
    memcpy(out + width - 3, "...", 4);
  }
}
