/* profile_folded.c - the profile as folded stacks (Brendan Gregg's format,
 * read by flamegraph.pl, inferno and speedscope): one line per distinct
 * stack, frames root first separated by ';', then a space and the count.
 *   with PC samples:  host frames;kernel[;function];file:line;0xPC SASS N
 *   else with times:  host frames;kernel GPU_NS (sum of the launches' medians)
 *   else:             host frames;kernel LAUNCHES
 * Host frames are the recorded callstack of the launch, outermost first,
 * without the CUDA driver/runtime frames at the top. Lines are sorted. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "cucap_demangle.h"
#include "cucap_vec.h"
#include "profile_internal.h"

typedef struct fline {
  char *s;
  uint64_t n;
} fline;

typedef struct sbuf {
  char *b;
  size_t n, cap;
  int oom;
} sbuf;

static void put(sbuf *s, const char *t, int clean) {
  size_t k = strlen(t);
  if (!CUCAP_VEC_RESERVE(s->b, s->cap, s->n + k + 2, 256)) {
    s->oom = 1;
    return;
  }
  for (size_t i = 0; i < k; i++) {
    char c = t[i];
    if (clean && (c == ';' || (unsigned char)c < 0x20))
      c = c == ';' ? ',' : ' ';
    s->b[s->n++] = c;
  }
  s->b[s->n] = 0;
}

static void host_frames(cucap_profile *p, sbuf *s, uint32_t stack) {
  size_t n = 0, first = 0;
  const char *const *fr = stack ? cucap_profile_stack(p, stack, &n, &first) : NULL;
  if (!fr || !n) {
    put(s, stack ? "[callstack not recorded]" : "[no callstack]", 0);
    return;
  }
  for (size_t i = n; i-- > first;) {
    put(s, fr[i], 1);
    if (i > first)
      put(s, ";", 0);
  }
}

static int cmp_line(const void *x, const void *y) {
  return strcmp(((const fline *)x)->s, ((const fline *)y)->s);
}

static int add_line(fline **v, size_t *n, size_t *cap, sbuf *s, uint64_t count) {
  if (s->oom)
    return 0;
  if (!CUCAP_VEC_RESERVE(*v, *cap, *n + 1, 256))
    return 0;
  (*v)[(*n)++] = (fline){s->b, count};
  memset(s, 0, sizeof *s);
  return 1;
}

cucap_status cucap_profile_write_folded(cucap_profile *p, FILE *out, size_t *lines) {
  if (lines)
    *lines = 0;
  CUCAP_FORWARD(cucap_profile_finalize(p));
  fline *v = NULL;
  size_t n = 0, cap = 0;
  cucap_status st = CUCAP_OK;
  int timed = 0;
  for (size_t i = 0; i < p->nl && !timed; i++)
    timed = p->L[i].pub.ntimings > 0;
  if (p->samples.n) {
    for (size_t i = 0; i < p->nl && st == CUCAP_OK; i++) {
      const pf_launch *L = &p->L[i];
      for (size_t r = L->row0; r < L->row1 && st == CUCAP_OK; r++) {
        const pf_row *row = &p->samples.r[r];
        uint64_t count = row->count;
        /* rows are sorted by (key, pc, stall): sum the stalls of one pc */
        while (r + 1 < L->row1 && p->samples.r[r + 1].pc == row->pc)
          count += p->samples.r[++r].count;
        if (!count)
          continue;
        const pf_pc *pc = &p->pcs[row->pc];
        sbuf s = {0};
        host_frames(p, &s, L->pub.callstack);
        put(&s, ";", 0);
        put(&s, L->pub.short_name[0] ? L->pub.short_name : "[unknown kernel]", 1);
        if (pc->function && pc->function != L->kernel_id) {
          char d[4096], shb[256];
          cucap_demangle(pc->view.function, d, sizeof d);
          cucap_demangle_short(d, shb, sizeof shb, 80);
          put(&s, ";", 0);
          put(&s, shb, 1);
        }
        char buf[512];
        if (pc->file)
          snprintf(buf, sizeof buf, ";%s:%u;", pc->view.file, (unsigned)pc->view.line);
        else
          snprintf(buf, sizeof buf, ";[no line info];");
        put(&s, buf, 0);
        snprintf(buf, sizeof buf, "0x%04" PRIx64 "%s%s", pc->view.pc_offset,
                 pc->sass ? " " : "", pc->sass ? pc->view.sass : "");
        put(&s, buf, 1);
        if (!add_line(&v, &n, &cap, &s, count)) {
          free(s.b);
          st = CUCAP_ERR_NOMEM;
        }
      }
    }
  } else {
    for (size_t i = 0; i < p->nl && st == CUCAP_OK; i++) {
      const pf_launch *L = &p->L[i];
      uint64_t c = timed ? L->pub.median_ns : 1;
      if (!c)
        continue;
      sbuf s = {0};
      host_frames(p, &s, L->pub.callstack);
      put(&s, ";", 0);
      put(&s, L->pub.short_name[0] ? L->pub.short_name : "[unknown kernel]", 1);
      if (!add_line(&v, &n, &cap, &s, c)) {
        free(s.b);
        st = CUCAP_ERR_NOMEM;
      }
    }
  }
  if (n)
    cucap_sort(v, n, sizeof *v, cmp_line);
  size_t written = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t c = v[i].n;
    while (i + 1 < n && !strcmp(v[i].s, v[i + 1].s)) {
      free(v[i].s);
      c += v[++i].n;
    }
    if (st == CUCAP_OK && fprintf(out, "%s %" PRIu64 "\n", v[i].s, c) < 0)
      st = CUCAP_ERR_IO;
    written++;
    free(v[i].s);
  }
  free(v);
  if (lines)
    *lines = written;
  return st;
}
