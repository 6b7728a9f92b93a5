/* profile_classify.c - bottleneck class of a kernel from its Speed Of Light
 * metrics, after Nsight Compute's "GPU Speed Of Light" guidance (a unit at
 * 60% or more of its peak bounds the kernel, one at 80% or more is saturated;
 * when neither compute nor memory reaches 60% the kernel cannot keep the GPU
 * busy: latency). The rule and its
 * thresholds (cucap_profile.h) are documented in docs/design.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cucap_profile.h"

const char *cucap_bottleneck_name(cucap_bottleneck b) {
  switch (b) {
  case CUCAP_BOTTLENECK_COMPUTE: return "compute";
  case CUCAP_BOTTLENECK_MEMORY: return "memory";
  case CUCAP_BOTTLENECK_LATENCY: return "latency";
  case CUCAP_BOTTLENECK_MIXED: return "mixed";
  default: return "unknown";
  }
}

void cucap_sol_init(cucap_sol *s) {
  s->sm_pct = s->memory_pct = s->dram_pct = s->l2_pct = s->l1_pct = -1;
  s->occupancy_pct = s->tensor_pct = -1;
  s->blocks = 0;
  s->sm_count = 0;
}

static int have(double v) { return v >= 0 && !isnan(v); }

void cucap_classify(const cucap_sol *in, cucap_classification *out) {
  memset(out, 0, sizeof *out);
  double c = in->sm_pct, m = in->memory_pct;
  if (!have(m)) { /* the memory SOL is the max of its units: rebuild it */
    double u[3] = {in->dram_pct, in->l2_pct, in->l1_pct};
    for (int i = 0; i < 3; i++)
      if (have(u[i]) && u[i] > m)
        m = u[i];
  }
  if (!have(c) || !have(m)) {
    out->cls = CUCAP_BOTTLENECK_UNKNOWN;
    snprintf(out->reason, sizeof out->reason,
             "SOL metrics not measured (need %s and %s)", have(c) ? "" : "SM throughput",
             have(m) ? "" : "memory throughput");
    return;
  }
  const double hi = CUCAP_CLASSIFY_BOUND_PCT;
  if (c < hi && m < hi) {
    out->cls = CUCAP_BOTTLENECK_LATENCY;
    int k = snprintf(out->reason, sizeof out->reason,
                     "neither compute (SM %.1f%%) nor memory (%.1f%%) reaches %.0f%% of peak",
                     c, m, hi);
    if (k > 0 && (size_t)k < sizeof out->reason && have(in->occupancy_pct) &&
        in->occupancy_pct < CUCAP_CLASSIFY_LOW_OCCUPANCY_PCT)
      k += snprintf(out->reason + k, sizeof out->reason - (size_t)k,
                    "; achieved occupancy %.1f%%", in->occupancy_pct);
    if (k > 0 && (size_t)k < sizeof out->reason && in->blocks && in->sm_count > 0 &&
        in->blocks < (uint64_t)in->sm_count)
      snprintf(out->reason + k, sizeof out->reason - (size_t)k,
               "; grid of %llu blocks < %d SMs", (unsigned long long)in->blocks,
               in->sm_count);
    return;
  }
  /* Only one side saturated: it is the limit, even with the other bound
   * and close (a wgmma GEMM: SM 86 %, tensor pipes 91 %, memory 68 % from
   * the shared-memory traffic that feeds them). */
  const double sat = CUCAP_CLASSIFY_SATURATED_PCT;
  int one_saturated = (c >= sat) != (m >= sat);
  if (c >= hi && m >= hi && fabs(c - m) < CUCAP_CLASSIFY_BALANCE_PTS && !one_saturated) {
    out->cls = CUCAP_BOTTLENECK_MIXED;
    snprintf(out->reason, sizeof out->reason,
             "compute (SM %.1f%%) and memory (%.1f%%) both at %.0f%%+ of peak, within "
             "%.0f points", c, m, hi, CUCAP_CLASSIFY_BALANCE_PTS);
    return;
  }
  if (c >= m) {
    out->cls = CUCAP_BOTTLENECK_COMPUTE;
    int tensor = have(in->tensor_pct) && in->tensor_pct >= CUCAP_CLASSIFY_TENSOR_PCT;
    snprintf(out->unit, sizeof out->unit, "%s", tensor ? "tensor" : "sm");
    if (tensor)
      snprintf(out->reason, sizeof out->reason,
               "SM %.1f%% >= %.0f%% of peak and above memory %.1f%%; tensor pipes %.1f%%",
               c, hi, m, in->tensor_pct);
    else
      snprintf(out->reason, sizeof out->reason,
               "SM %.1f%% >= %.0f%% of peak and above memory %.1f%%", c, hi, m);
    return;
  }
  out->cls = CUCAP_BOTTLENECK_MEMORY;
  const char *unit = "memory";
  double best = -1;
  const struct { double v; const char *n; } u[3] = {
      {in->dram_pct, "dram"}, {in->l2_pct, "l2"}, {in->l1_pct, "l1"}};
  for (int i = 0; i < 3; i++)
    if (have(u[i].v) && u[i].v > best) {
      best = u[i].v;
      unit = u[i].n;
    }
  snprintf(out->unit, sizeof out->unit, "%s", unit);
  if (best >= 0)
    snprintf(out->reason, sizeof out->reason,
             "memory %.1f%% >= %.0f%% of peak and above SM %.1f%%; busiest unit %s %.1f%%",
             m, hi, c, unit, best);
  else
    snprintf(out->reason, sizeof out->reason,
             "memory %.1f%% >= %.0f%% of peak and above SM %.1f%%", m, hi, c);
}
