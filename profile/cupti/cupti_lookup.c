/* cupti_lookup.c - the CUPTI engine's lookups: is a record in the profiled
 * window, which op a CUPTI correlation id belongs to, which kernel of the
 * first timeline pass a record (and sub-kernel, or kernel name) is. The
 * tables they search are filled by cupti_engine.c (correlations, during
 * each pass) and cupti_timeline.c (kernels, after the first pass); the
 * lookups are binary searches over them, sorted on first use. */
#include <stdint.h>
#include <string.h>

#include "cucap_sort.h"
#include "cupti_internal.h"

int ck_in_window(const ck_engine *E, uint64_t rec_index) {
  return E->win_lo != UINT64_MAX && rec_index >= E->win_lo &&
         rec_index <= E->win_hi;
}

static int ck_corr_cmp(const void *a, const void *b) {
  const ck_corr *x = a, *y = b;
  return x->corr < y->corr ? -1 : x->corr > y->corr;
}

int64_t ck_corr_op(ck_engine *E, uint32_t corr) {
  if (!corr)
    return -1; /* no id (continuous PC sampling, no API activity) */
  if (E->op.corr_unsorted) {
    cucap_sort(E->op.corr, E->op.ncorr, sizeof *E->op.corr, ck_corr_cmp);
    E->op.corr_unsorted = 0;
  }
  size_t lo = 0, hi = E->op.ncorr;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (E->op.corr[mid].corr < corr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < E->op.ncorr && E->op.corr[lo].corr == corr)
    return E->op.corr[lo].op;
  return -1;
}

int64_t ck_kernel_find(const ck_engine *E, uint64_t rec_index, uint32_t sub) {
  size_t lo = 0, hi = E->tl.nkern;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const cucap_cupti_kernel *k = &E->tl.kern[mid];
    if (k->rec_index < rec_index || (k->rec_index == rec_index && k->sub < sub))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < E->tl.nkern && E->tl.kern[lo].rec_index == rec_index &&
      E->tl.kern[lo].sub == sub)
    return (int64_t)lo;
  return -1;
}

int64_t ck_kernel_by_name(const ck_engine *E, uint64_t rec_index,
                          const char *name) {
  int64_t k = ck_kernel_find(E, rec_index, 0);
  if (k < 0)
    return -1;
  for (size_t i = (size_t)k; i < E->tl.nkern && E->tl.kern[i].rec_index == rec_index;
       i++)
    if (name && E->tl.kern[i].name && !strcmp(E->tl.kern[i].name, name))
      return (int64_t)i;
  return -1;
}
