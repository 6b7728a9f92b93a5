/* knobs.c - the CUCAP_* knob registry of cucap_knobs.h: the static entries
 * built from CUCAP_KNOBS and the process-wide table of values, filled once
 * with getenv. The only place in the libraries and tools that calls getenv
 * for a CUCAP_ variable. */
#include "cucap_knobs.h"

#include <stdlib.h>
#include <string.h>

#define KNOB_INFO_(name, type, def, doc) {#name, CUCAP_KNOB_T_##type, def, doc},
static const cucap_knob_info k_info[CUCAP_KNOB_COUNT] = {CUCAP_KNOBS(KNOB_INFO_)};
#undef KNOB_INFO_

typedef struct knob_val {
  const char *raw; /* getenv's answer */
  const char *str; /* raw when not empty, else the default */
  uint64_t u64;
  long l;
  int flag;
} knob_val;

static knob_val g_val[CUCAP_KNOB_COUNT];
/* 0 not read, 1 being filled, 2 filled (g_val complete, published by the
 * release store) */
static int g_state;

/* getenv and the parse only: runs inside the app, possibly in a signal
 * handler that interrupted the filler (cucap_knobs.h) */
static void knob_read(cucap_knob k, knob_val *v) {
  const cucap_knob_info *in = &k_info[k];
  v->raw = getenv(in->name);
  v->str = v->raw && *v->raw ? v->raw : in->def;
  const char *s = v->str;
  v->u64 = s ? strtoull(s, NULL, 10) : 0;
  v->l = s ? strtol(s, NULL, 10) : 0;
  /* FLAG: a value that is neither 0... nor 1... keeps the default */
  v->flag = s && s[0] == '1'   ? 1
            : s && s[0] == '0' ? 0
                               : (in->def && in->def[0] == '1');
}

static void knobs_fill(void) {
  for (int k = 0; k < CUCAP_KNOB_COUNT; k++)
    knob_read((cucap_knob)k, &g_val[k]);
}

static knob_val knob_get(cucap_knob k) {
  knob_val v;
  if ((unsigned)k >= CUCAP_KNOB_COUNT) {
    memset(&v, 0, sizeof v);
    return v;
  }
  int st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
  if (st != 2) {
    int expect = 0;
    if (st == 0 && __atomic_compare_exchange_n(&g_state, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                               __ATOMIC_ACQUIRE)) {
      knobs_fill();
      __atomic_store_n(&g_state, 2, __ATOMIC_RELEASE);
    } else if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) != 2) {
      /* another thread (or the code this signal handler interrupted) is
       * filling the table: never wait for it */
      knob_read(k, &v);
      return v;
    }
  }
  return g_val[k];
}

void cucap_knobs_reload(void) {
  __atomic_store_n(&g_state, 1, __ATOMIC_RELEASE);
  knobs_fill();
  __atomic_store_n(&g_state, 2, __ATOMIC_RELEASE);
}

const cucap_knob_info *cucap_knob_info_of(cucap_knob k) {
  return (unsigned)k < CUCAP_KNOB_COUNT ? &k_info[k] : NULL;
}

const cucap_knob_info *cucap_knob_find(const char *name, size_t len) {
  if (!name)
    return NULL;
  for (int k = 0; k < CUCAP_KNOB_COUNT; k++)
    if (strlen(k_info[k].name) == len && !memcmp(k_info[k].name, name, len))
      return &k_info[k];
  return NULL;
}

const char *cucap_knob_type_name(cucap_knob_type t) {
  switch (t) {
  case CUCAP_KNOB_T_STR: return "str";
  case CUCAP_KNOB_T_FLAG: return "flag";
  case CUCAP_KNOB_T_U64: return "u64";
  case CUCAP_KNOB_T_INT: return "int";
  }
  return "?";
}

const char *cucap_knob_raw(cucap_knob k) { return knob_get(k).raw; }
int cucap_knob_given(cucap_knob k) {
  const char *r = knob_get(k).raw;
  return r && *r;
}
const char *cucap_knob_str(cucap_knob k) { return knob_get(k).str; }
int cucap_knob_flag(cucap_knob k) { return knob_get(k).flag; }
uint64_t cucap_knob_u64(cucap_knob k) { return knob_get(k).u64; }
long cucap_knob_long(cucap_knob k) { return knob_get(k).l; }
