/* profile_internal.h - the profile model's storage (profile_model.c), shared
 * with its writers (profile_report.c, profile_folded.c) and the file format
 * (profile_file.c). Internal to profile/. */
#ifndef CUCAP_PROFILE_INTERNAL_H
#define CUCAP_PROFILE_INTERNAL_H

#include <pthread.h>

#include "cucap_analyze.h"
#include "cucap_map.h"
#include "cucap_strs.h"
#include "cucap_vec.h"
#include "cucap_profile.h"

typedef struct pf_pc {
  cucap_profile_pc view;              /* strings point into the string table */
  uint32_t function, sass, file, inlined; /* string ids */
} pf_pc;

/* one aggregated PC sample (what = stall id, count) or SASS metric (what =
 * metric id, value) of a launch at an instruction */
typedef struct pf_row {
  uint64_t key;
  uint32_t pc, what;
  uint64_t count;
  double value;
} pf_row;

typedef struct pf_rows {
  pf_row *r;
  size_t n, cap;
  cucap_map idx;          /* hash(key, pc, what), re-hashed on collision -> row */
} pf_rows;

typedef struct pf_launch {
  cucap_profile_launch pub;
  uint32_t kernel_id;
  cucap_profile_timing *t;
  size_t capt;
  uint32_t *mid;
  double *mval;
  size_t capm;
  size_t row0, row1;   /* its sample rows after finalize (rows sorted by key) */
} pf_launch;

typedef struct pf_stack {
  uint32_t id, first_app;
  size_t n;
  char **frames;
} pf_stack;

typedef struct pf_kernel {
  cucap_profile_kernel pub;
  uint32_t kernel_id;
} pf_kernel;

typedef struct pf_section {
  cucap_profile_state state;
  char source[48];
  char message[640];
} pf_section;

struct cucap_profile {
  pthread_mutex_t mu;
  cucap_profile_info info;
  pf_section sec[CUCAP_PROFILE_NSECTIONS];
  cucap_strs strs;        /* every string; id 0 = "" */
  pf_launch *L;
  size_t nl, capl;
  cucap_map key_idx;      /* launch key -> index + 1 */
  cucap_profile_activity *act;
  size_t nact, capact;
  pf_pc *pcs;
  size_t npc, cappc;
  cucap_map pc_idx;       /* hash(function, module, offset), re-hashed -> index */
  pf_rows samples, sass;
  cucap_finding *F;
  size_t nf, capf;
  pf_stack *stk;
  size_t nstk, capstk;
  cucap_map stk_idx;      /* stack id -> index + 1 */
  pf_kernel *K;
  size_t nk;
  cucap_map dem;          /* kernel name id -> (demangled id << 32 | short id) */
  int dirty;           /* something was added since the last finalize */
};

/* profile_model.c */
uint64_t pf_mix3(uint64_t a, uint64_t b, uint64_t c);
uint32_t pf_str(cucap_profile *p, const char *s);          /* intern; caller holds mu */
const char *pf_s(const cucap_profile *p, uint32_t id);
pf_pc *pf_pc_get(cucap_profile *p, const cucap_profile_pc *pc); /* find or add; mu held */
cucap_status pf_stack_set(cucap_profile *p, uint32_t id, const char *const *frames, size_t n,
                          size_t first_app);                   /* mu held */
cucap_status pf_launch_add(cucap_profile *p, const cucap_profile_launch_desc *d); /* mu held */
pf_launch *pf_launch_get(cucap_profile *p, uint64_t key);
cucap_status pf_row_add(pf_rows *t, uint64_t key, uint32_t pc, uint32_t what, uint64_t count,
                        double value);

#endif
