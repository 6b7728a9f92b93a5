/* profiler_common.c - what every profiling backend shares (cucap_profiler.h):
 * the metric sets, --range parsing and matching, finding libcupti. */
#include <errno.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_demangle.h"
#include "cucap_knobs.h"
#include "cucap_profiler.h"
#include "cucap_vec.h"

/* ------------------------------------------------------------ metric sets */

/* The one definition of `--metrics=sol` and `full`, for `cucap replay
 * --profile` and `cucap cupti profile` alike (cupti_sets.c hands these
 * arrays to the CUPTI engine by set name, which leaves out, with a note,
 * any name the chip lacks). Both arrays end in NULL; the count returned
 * leaves the NULL out. Pass counts are the Profiler Host API's for GH100. */

/* Speed Of Light: what cucap_classify needs (Nsight Compute's SOL section)
 * plus the SM clock and total DRAM bytes: 11 metrics, 9 counter passes. */
#define SOL_METRICS \
  CUCAP_METRICS_SOL_INPUTS, "sm__cycles_elapsed.avg.per_second", "dram__bytes.sum"

static const char *const sol_metrics[] = {SOL_METRICS, NULL};

/* SOL + cache hit rates and traffic, warp stall breakdown (per issued
 * instruction), issue and pipe mix, shared-memory bank conflicts: 46
 * metrics, 14 passes. Per-opcode instruction counts are not here: the
 * SASS-metrics pass (`replay --profile --sass-metrics`, `cupti profile
 * --sass`) counts executed instructions per SASS instruction, whose opcode
 * says the mix exactly, and the eight smsp__sass_* op counters would add a
 * fifteenth pass to every kernel. */
static const char *const full_metrics[] = {
    SOL_METRICS,
    /* cache hit rates and traffic */
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sector_hit_rate.pct",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "l1tex__t_bytes.sum",
    /* warp states: stalls per issued instruction */
    CUCAP_METRICS_WARP_STALLS,
    /* instruction issue and pipe mix */
    "smsp__inst_executed.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_eligible.avg.per_cycle_active",
    "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    /* shared memory bank conflicts */
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    NULL};

const char *const *cucap_metric_set_names(cucap_metric_set s, size_t *n) {
  switch (s) {
  case CUCAP_METRICS_SOL:
    *n = sizeof sol_metrics / sizeof sol_metrics[0] - 1;
    return sol_metrics;
  case CUCAP_METRICS_FULL:
    *n = sizeof full_metrics / sizeof full_metrics[0] - 1;
    return full_metrics;
  default:
    *n = 0;
    return NULL;
  }
}

cucap_metric_set cucap_metric_set_from_name(const char *name) {
  static const cucap_metric_set named[] = {CUCAP_METRICS_SOL, CUCAP_METRICS_FULL,
                                           CUCAP_METRICS_NONE};
  for (size_t i = 0; name && i < sizeof named / sizeof named[0]; i++)
    if (!strcmp(name, cucap_metric_set_name(named[i])))
      return named[i];
  return CUCAP_METRICS_LIST;
}

const char *cucap_metric_set_name(cucap_metric_set s) {
  switch (s) {
  case CUCAP_METRICS_SOL: return "sol";
  case CUCAP_METRICS_FULL: return "full";
  case CUCAP_METRICS_NONE: return "none";
  default: return NULL;
  }
}

void cucap_profiler_options_init(cucap_profiler_options *o) {
  memset(o, 0, sizeof *o);
  o->metric_set = CUCAP_METRICS_SOL;
  o->metrics = cucap_metric_set_names(CUCAP_METRICS_SOL, &o->nmetrics);
  o->cache_flush = 1;
  o->loops = 1;
  o->timeline = 1;
}

const char *cucap_probe_state_name(cucap_probe_state s) {
  switch (s) {
  case CUCAP_PROBE_OK: return "ok";
  case CUCAP_PROBE_DENIED: return "denied";
  case CUCAP_PROBE_UNAVAILABLE: return "unavailable";
  default: return "unknown";
  }
}

/* ------------------------------------------------------------ ranges */

typedef struct range_cache {
  char **name;
  uint8_t *match;
  size_t n, cap;
} range_cache;

static int parse_u64(const char *s, const char *end, uint64_t *v) {
  if (s == end || *s == '-' || *s == '+')
    return 0;
  char buf[32];
  size_t k = (size_t)(end - s);
  if (k >= sizeof buf)
    return 0;
  memcpy(buf, s, k);
  buf[k] = 0;
  char *e = NULL;
  errno = 0;
  unsigned long long x = strtoull(buf, &e, 10);
  if (errno || !e || *e)
    return 0;
  *v = x;
  return 1;
}

cucap_status cucap_profile_range_parse(const char *spec, cucap_profile_range *out, char *msg,
                                       size_t msg_size) {
  memset(out, 0, sizeof *out);
  out->kind = CUCAP_RANGE_ALL;
  if (!spec || !*spec)
    return CUCAP_OK;
  snprintf(out->spec, sizeof out->spec, "%s", spec);
  if (!strncmp(spec, "launch:", 7)) {
    const char *a = spec + 7, *dash = strchr(a, '-');
    const char *end = a + strlen(a);
    out->kind = CUCAP_RANGE_LAUNCHES;
    int ok = dash ? parse_u64(a, dash, &out->first) &&
                        (dash + 1 == end ? (out->last = UINT64_MAX, 1)
                                         : parse_u64(dash + 1, end, &out->last))
                  : parse_u64(a, end, &out->first) && ((out->last = out->first), 1);
    if (!ok || out->last < out->first) {
      if (msg && msg_size)
        snprintf(msg, msg_size, "--range %s: expected launch:A-B with A <= B", spec);
      out->kind = CUCAP_RANGE_ALL;
      return CUCAP_ERR_INVALID_ARG;
    }
    return CUCAP_OK;
  }
  if (!strncmp(spec, "kernel:", 7)) {
    char e[128] = "empty expression";
    int rc = spec[7] ? regcomp(&out->re, spec + 7, REG_EXTENDED | REG_NOSUB) : -1;
    if (rc != 0) {
      if (rc > 0) /* regcomp failed: nothing to free */
        regerror(rc, &out->re, e, sizeof e);
      if (msg && msg_size)
        snprintf(msg, msg_size, "--range %s: bad regular expression: %s", spec, e);
      out->kind = CUCAP_RANGE_ALL;
      return CUCAP_ERR_INVALID_ARG;
    }
    out->kind = CUCAP_RANGE_KERNEL;
    return CUCAP_OK;
  }
  if (msg && msg_size)
    snprintf(msg, msg_size, "--range %s: expected launch:A-B or kernel:REGEX", spec);
  return CUCAP_ERR_INVALID_ARG;
}

int cucap_profile_range_match(cucap_profile_range *r, uint64_t key, const char *kernel) {
  switch (r->kind) {
  case CUCAP_RANGE_LAUNCHES:
    return !CUCAP_PROFILE_KEY_IS_GRAPH(key) && key >= r->first && key <= r->last;
  case CUCAP_RANGE_KERNEL: {
    if (!kernel)
      kernel = "";
    range_cache *c = r->cache;
    if (!c && (c = r->cache = calloc(1, sizeof *c)) == NULL)
      return 0;
    for (size_t i = c->n; i-- > 0;)
      if (!strcmp(c->name[i], kernel))
        return c->match[i];
    char d[4096];
    int m = regexec(&r->re, kernel, 0, NULL, 0) == 0;
    if (!m && cucap_demangle(kernel, d, sizeof d))
      m = regexec(&r->re, d, 0, NULL, 0) == 0;
    if (c->n == c->cap) { /* two arrays, one capacity: it grows once both did */
      size_t cn = c->cap, cm = c->cap;
      if (!CUCAP_VEC_RESERVE(c->name, cn, c->n + 1, 16) ||
          !CUCAP_VEC_RESERVE(c->match, cm, c->n + 1, 16))
        return m;
      c->cap = cn; /* both grew alike */
    }
    char *copy = strdup(kernel);
    if (copy) {
      c->name[c->n] = copy;
      c->match[c->n++] = (uint8_t)m;
    }
    return m;
  }
  default:
    return 1;
  }
}

void cucap_profile_range_free(cucap_profile_range *r) {
  if (!r)
    return;
  if (r->kind == CUCAP_RANGE_KERNEL)
    regfree(&r->re);
  range_cache *c = r->cache;
  if (c) {
    for (size_t i = 0; i < c->n; i++)
      free(c->name[i]);
    free(c->name);
    free(c->match);
    free(c);
  }
  r->cache = NULL;
  r->kind = CUCAP_RANGE_ALL;
}

/* ------------------------------------------------------------ libcupti */

static void tried_add(char *tried, size_t n, const char *what) {
  if (!tried || !n)
    return;
  size_t k = strlen(tried);
  if (k + 3 < n)
    snprintf(tried + k, n - k, "%s%s", k ? ", " : "", what);
}

static int try_dir(const char *dir, const char *sub, char *path, size_t n, char *tried,
                   size_t tn) {
  static const char *const names[] = {"libcupti.so.13", "libcupti.so"};
  char d[PATH_MAX];
  snprintf(d, sizeof d, "%s%s%s", dir, sub[0] ? "/" : "", sub);
  tried_add(tried, tn, d);
  for (size_t i = 0; i < 2; i++) {
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/%s", d, names[i]);
    if (access(p, R_OK) == 0) {
      snprintf(path, n, "%s", p);
      return 1;
    }
  }
  return 0;
}

cucap_status cucap_profiler_find_cupti(const char *explicit_path, char *path, size_t path_size,
                                       char *tried, size_t tried_size) {
  char pbuf[PATH_MAX];
  if (!path) {
    path = pbuf;
    path_size = sizeof pbuf;
  }
  path[0] = 0;
  if (tried && tried_size)
    tried[0] = 0;
  if (explicit_path && *explicit_path) {
    tried_add(tried, tried_size, explicit_path);
    if (access(explicit_path, R_OK) == 0) {
      snprintf(path, path_size, "%s", explicit_path);
      return CUCAP_OK;
    }
    return CUCAP_ERR_NOT_FOUND;
  }
  const char *env = cucap_knob_str(CUCAP_KNOB(CUCAP_CUPTI));
  if (env && *env) {
    tried_add(tried, tried_size, env);
    if (access(env, R_OK) == 0) {
      snprintf(path, path_size, "%s", env);
      return CUCAP_OK;
    }
  }
#if defined(__aarch64__)
  const char *tgt = "targets/sbsa-linux/lib";
#else
  const char *tgt = "targets/x86_64-linux/lib";
#endif
  const char *roots[3] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (int i = 0; i < 3; i++) {
    if (!roots[i] || !*roots[i])
      continue;
    if (try_dir(roots[i], "lib64", path, path_size, tried, tried_size) ||
        try_dir(roots[i], tgt, path, path_size, tried, tried_size) ||
        try_dir(roots[i], "extras/CUPTI/lib64", path, path_size, tried, tried_size))
      return CUCAP_OK;
  }
  const char *ld = getenv("LD_LIBRARY_PATH");
  if (ld && *ld) {
    char *copy = strdup(ld), *save = NULL;
    for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save))
      if (*d && try_dir(d, "", path, path_size, tried, tried_size)) {
        free(copy);
        return CUCAP_OK;
      }
    free(copy);
  }
  /* the loader's own search (ldconfig cache, RUNPATH) */
  static const char *const sonames[] = {"libcupti.so.13", "libcupti.so"};
  for (int i = 0; i < 2; i++) {
    void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h)
      h = dlopen(sonames[i], RTLD_LAZY | RTLD_LOCAL);
    tried_add(tried, tried_size, sonames[i]);
    if (h) {
      dlclose(h);
      snprintf(path, path_size, "%s", sonames[i]);
      return CUCAP_OK;
    }
  }
  return CUCAP_ERR_NOT_FOUND;
}
