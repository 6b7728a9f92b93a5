/* cupti_pcsamp.c - the PC sampling pass (cupti_pcsampling.h).
 *
 * KERNEL_SERIALIZED collection with start/stop control: sampling starts at
 * the window's first op and stops after its last; CUPTI runs one kernel at a
 * time and every PC record carries the correlation id of its launch, which
 * the correlation map turns into the op, and (op, function name) into the
 * kernel execution. After each profiled op the context is synchronized and
 * the data drained (the PC sampling API wants a flush after every kernel in
 * this mode to keep PCs of different launches apart). cuptiPCSamplingGetData
 * gets a buffer of its own, never the one given as SAMPLING_DATA_BUFFER
 * (CUPTI fills that one at disable time; sharing them corrupts records).
 * Function names in the records are malloc'ed by CUPTI and freed here. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cucap_schema.h"
#include "cupti_internal.h"

#define CK_PCS_NPCS 4096 /* PC records per cuptiPCSamplingGetData */

struct ck_pcs {
  int enabled, started, stopped;
  CUpti_PCSamplingData cfg, user; /* cfg: SAMPLING_DATA_BUFFER */
  uint32_t *cupti_index;          /* stall slot -> CUPTI index */
  char **names;                   /* CUPTI's strings, ours to free */
  size_t n;
  cucap_map fnptr;                   /* CUPTI function-name pointers to free */
  uint64_t total, dropped, nonuser, records, unattributed, hw_full;
  uint64_t samples;               /* attributed samples */
  char why[1024];                 /* why sampling did not start */
};

static void ck_pcbuf_free(CUpti_PCSamplingData *d) {
  if (d->pPcData)
    for (size_t i = 0; i < d->collectNumPcs; i++)
      free(d->pPcData[i].stallReason);
  free(d->pPcData);
  memset(d, 0, sizeof *d);
}

static int ck_pcbuf_alloc(CUpti_PCSamplingData *d, size_t npcs, size_t nstall) {
  memset(d, 0, sizeof *d);
  d->size = sizeof *d;
  d->collectNumPcs = npcs;
  d->pPcData = calloc(npcs, sizeof *d->pPcData);
  if (!d->pPcData)
    return 0;
  for (size_t i = 0; i < npcs; i++) {
    d->pPcData[i].size = sizeof d->pPcData[i];
    d->pPcData[i].stallReason = calloc(nstall ? nstall : 1,
                                       sizeof *d->pPcData[i].stallReason);
    if (!d->pPcData[i].stallReason)
      return 0;
  }
  return 1;
}

int ck_stall_slot(ck_engine *E, uint32_t cupti_index) {
  ck_pcs *p = E->pc.pcs;
  if (p)
    for (size_t i = 0; i < p->n; i++)
      if (p->cupti_index[i] == cupti_index)
        return (int)i;
  return -1;
}

size_t cucap_cupti_stall_names(const cucap_cupti *e, const char *const **out) {
  *out = (const char *const *)e->pc.stall;
  return e->pc.nstall;
}

static uint64_t ck_site_hash(uint64_t crc, const char *fn, uint64_t pc) {
  uint64_t h = crc * 0x9e3779b97f4a7c15ull;
  h ^= (uint64_t)(uintptr_t)fn + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
  h ^= pc * 0xff51afd7ed558ccdull;
  return h;
}

void ck_pcs_add(ck_engine *E, int64_t kernel, uint64_t crc,
                const char *function, uint64_t pc, uint32_t stall_slot,
                uint32_t count) {
  const char *fn = ck_intern(&E->str, function ? function : "?");
  if (!fn || kernel < 0)
    return;
  uint64_t h = ck_site_hash(crc, fn, pc), v = 0;
  size_t site = SIZE_MAX;
  for (uint64_t probe = 0; cucap_map_get(&E->pc.site_idx, h + probe, &v); probe++) {
    const cucap_cupti_pc_site *s = &E->pc.site[v - 1];
    if (s->cubin_crc == crc && s->function == fn && s->pc_offset == pc) {
      site = v - 1;
      break;
    }
  }
  if (site == SIZE_MAX) {
    if (!cucap_vec_reserve(&E->pc.site, &E->pc.capsite, E->pc.nsite + 1, sizeof *E->pc.site, 16))
      return;
    uint64_t probe = 0;
    while (cucap_map_get(&E->pc.site_idx, h + probe, NULL))
      probe++;
    if (!cucap_map_put(&E->pc.site_idx, h + probe, E->pc.nsite + 1))
      return;
    cucap_cupti_pc_site *s = &E->pc.site[E->pc.nsite];
    memset(s, 0, sizeof *s);
    s->cubin_crc = crc;
    s->function = fn;
    s->pc_offset = pc;
    s->inst_executed = s->thread_inst_executed = s->mem_sectors = UINT64_MAX;
    site = E->pc.nsite++;
  }
  if (!cucap_vec_reserve(&E->pc.samp, &E->pc.capsamp, E->pc.nsamp + 1, sizeof *E->pc.samp, 16))
    return;
  E->pc.samp[E->pc.nsamp++] = (cucap_cupti_pc_sample){(uint32_t)kernel,
                                                (uint32_t)site, stall_slot,
                                                count};
}

static int ck_pcs_attr(ck_engine *E, CUpti_PCSamplingConfigurationAttributeType t,
                       CUpti_PCSamplingConfigurationInfo *info,
                       const char *what) {
  CUpti_PCSamplingConfigurationInfoParams cp;
  memset(&cp, 0, sizeof cp);
  cp.size = CUpti_PCSamplingConfigurationInfoParamsSize;
  cp.ctx = E->ctx;
  cp.numAttributes = 1;
  info->attributeType = t;
  cp.pPCSamplingConfigurationInfo = info;
  if (!CK_CALL(E, cuptiPCSamplingSetConfigurationAttribute, &cp) ||
      info->attributeStatus != CUPTI_SUCCESS) {
    char buf[300];
    if (info->attributeStatus != CUPTI_SUCCESS)
      ck_strerror(&E->api, info->attributeStatus, buf, sizeof buf);
    else
      snprintf(buf, sizeof buf, "%.299s", E->last_msg);
    CUCAP_WARN("profile: PC sampling attribute %s refused: %s", what, buf);
    snprintf(E->last_msg, sizeof E->last_msg, "setting %.150s: %s", what, buf);
    return 0;
  }
  return 1;
}

/* The hardware buffer PC sampling writes to, sized to the window's longest
 * kernel. CUPTI's default, 512 MiB, is expensive: the first sampled kernel
 * waits for the buffer to be set up and Disable takes longer, while a
 * smaller buffer gives the same samples. The kernels are serialized and
 * drained one by one, so one kernel's samples must fit, at most: one sample
 * per SM per 2^period cycles, taken as 64 bytes each at 2 GHz, twice
 * over; at least 16 MiB (the smallest size that cost no samples on the
 * programs tried), at most CUPTI's 512 MiB (0: CUPTI's default). A kernel
 * that still overflows it is reported (hardwareBufferFull, in the section
 * note). CUCAP_PROFILE_PC_HWBUF_MB sets it; the PC-sampling pass time in the
 * timing breakdown (CUCAP_LOG_LEVEL=info) and the sample count show the
 * effect of a size. Figures: docs/bench-log.md, "PC sampling buffer". */
static size_t ck_pcs_hwbuf(const ck_engine *E) {
  if (cucap_knob_given(CUCAP_KNOB(CUCAP_PROFILE_PC_HWBUF_MB)))
    return (size_t)cucap_knob_u64(CUCAP_KNOB(CUCAP_PROFILE_PC_HWBUF_MB)) << 20;
  double longest_ns = 0;
  for (size_t k = 0; k < E->tl.nkern; k++)
    if (E->tl.kern[k].dur_max_ns > longest_ns)
      longest_ns = E->tl.kern[k].dur_max_ns;
  double sms = E->env.sm_count > 0 ? E->env.sm_count : 132;
  double period = (double)((uint64_t)1 << E->o.pc_period); /* set at create */
  double bytes = 2.0 * longest_ns * 2.0 /* cycles per ns */ / period * sms * 64.0;
  const double lo = (double)(16u << 20), hi = (double)(512u << 20);
  if (!(bytes < hi))
    return 0;
  bytes = bytes < lo ? lo : bytes;
  return ((size_t)bytes + ((1u << 20) - 1)) & ~(size_t)((1u << 20) - 1);
}

/* ck_pcs_setup: the stall reasons of the profiled context, into p and
 * E->pc.stall; 0 when CUPTI gives none (section off) or memory ran out. */
static int ck_pcs_stall_reasons(ck_engine *E, ck_pcs *p) {
  size_t n = 0;
  CUpti_PCSamplingGetNumStallReasonsParams np;
  memset(&np, 0, sizeof np);
  np.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
  np.ctx = E->ctx;
  np.numStallReasons = &n;
  if (!CK_CALL(E, cuptiPCSamplingGetNumStallReasons, &np) || !n) {
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_UNAVAILABLE, "%s",
               n ? E->last_msg : "CUPTI reports no stall reasons");
    return 0;
  }
  p->n = n;
  p->cupti_index = calloc(n, sizeof *p->cupti_index);
  p->names = calloc(n, sizeof *p->names);
  E->pc.stall = calloc(n, sizeof *E->pc.stall);
  if (!p->cupti_index || !p->names || !E->pc.stall)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!(p->names[i] = calloc(1, CUPTI_STALL_REASON_STRING_SIZE)))
      return 0;
  CUpti_PCSamplingGetStallReasonsParams sp;
  memset(&sp, 0, sizeof sp);
  sp.size = CUpti_PCSamplingGetStallReasonsParamsSize;
  sp.ctx = E->ctx;
  sp.numStallReasons = n;
  sp.stallReasonIndex = p->cupti_index;
  sp.stallReasons = p->names;
  if (!CK_CALL(E, cuptiPCSamplingGetStallReasons, &sp)) {
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    p->names[i][CUPTI_STALL_REASON_STRING_SIZE - 1] = 0;
    E->pc.stall[i] = ck_intern(&E->str, p->names[i]);
  }
  E->pc.nstall = n;
  E->env.stall_reasons = n;
  return 1;
}

/* ck_pcs_setup: the sampling buffers and CUPTI's configuration (the
 * hardware buffer size chosen into *hwp, 0: CUPTI's default); 0 when it
 * failed. */
static int ck_pcs_configure(ck_engine *E, ck_pcs *p, size_t *hwp) {
  size_t n = p->n;
  if (!ck_pcbuf_alloc(&p->cfg, CK_PCS_NPCS, n) ||
      !ck_pcbuf_alloc(&p->user, CK_PCS_NPCS, n))
    return 0;
  CUpti_PCSamplingConfigurationInfo ci;
  memset(&ci, 0, sizeof ci);
  ci.attributeData.collectionModeData.collectionMode =
      CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
  int ok = ck_pcs_attr(E, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE,
                       &ci, "collection mode KERNEL_SERIALIZED");
  memset(&ci, 0, sizeof ci);
  ci.attributeData.samplingPeriodData.samplingPeriod = E->o.pc_period;
  ok = ok && ck_pcs_attr(E, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD,
                         &ci, "sampling period");
  memset(&ci, 0, sizeof ci);
  ci.attributeData.scratchBufferSizeData.scratchBufferSize = (size_t)16 << 20;
  ok = ok && ck_pcs_attr(E, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE,
                         &ci, "scratch buffer size (16 MiB)");
  size_t hw = *hwp = ck_pcs_hwbuf(E);
  if (ok && hw) {
    memset(&ci, 0, sizeof ci);
    ci.attributeData.hardwareBufferSizeData.hardwareBufferSize = hw;
    ok = ck_pcs_attr(E, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE,
                     &ci, "hardware buffer size");
  }
  memset(&ci, 0, sizeof ci);
  ci.attributeData.enableStartStopControlData.enableStartStopControl = 1;
  ok = ok && ck_pcs_attr(E, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL,
                         &ci, "start/stop control");
  memset(&ci, 0, sizeof ci);
  ci.attributeData.outputDataFormatData.outputDataFormat =
      CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
  ok = ok && ck_pcs_attr(E, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT,
                         &ci, "output format PARSED");
  memset(&ci, 0, sizeof ci);
  ci.attributeData.samplingDataBufferData.samplingDataBuffer = &p->cfg;
  ok = ok && ck_pcs_attr(E, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER,
                         &ci, "sampling data buffer");
  if (!ok) {
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg);
    return 0;
  }
  return 1;
}

int ck_pcs_setup(ck_engine *E) {
  if (!(E->api.groups & CK_PCS)) {
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_UNAVAILABLE,
               "%s has no PC sampling API (missing: %s)", E->api.path,
               E->api.missing);
    return 0;
  }
  ck_pcs *p = E->pc.pcs = calloc(1, sizeof *E->pc.pcs);
  if (!p)
    return 0;
  CUpti_PCSamplingEnableParams ep;
  memset(&ep, 0, sizeof ep);
  ep.size = CUpti_PCSamplingEnableParamsSize;
  ep.ctx = E->ctx;
  double te = cucap_clock_now_s();
  int eok = CK_CALL(E, cuptiPCSamplingEnable, &ep);
  CUCAP_DEBUG("profile: cuptiPCSamplingEnable %.3f s", cucap_clock_now_s() - te);
  if (!eok) {
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
                   ? "PC sampling is restricted to administrators "
                     "(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES): run as root or "
                     "set NVreg_RestrictProfilingToAdminUsers=0"
                   : E->last_msg);
    return 0;
  }
  p->enabled = 1;
  if (!ck_pcs_stall_reasons(E, p))
    return 0;
  size_t hw = 0;
  if (!ck_pcs_configure(E, p, &hw))
    return 0;
  CUCAP_INFO("profile: PC sampling: KERNEL_SERIALIZED, period 2^%u cycles, "
             "%zu stall reasons, hardware buffer %zu MiB", E->o.pc_period, p->n,
             (hw ? hw : (size_t)512 << 20) >> 20);
  ck_api_records(E, 1); /* correlation ids of the launches */
  return 1;
}

/* Turns the records in d into samples. */
static void ck_pcs_take(ck_engine *E, CUpti_PCSamplingData *d) {
  ck_pcs *p = E->pc.pcs;
  p->total += d->totalSamples;
  p->dropped += d->droppedSamples;
  p->nonuser += d->nonUsrKernelsTotalSamples;
  p->hw_full += d->hardwareBufferFull != 0;
  size_t n = d->totalNumPcs < d->collectNumPcs ? d->totalNumPcs : d->collectNumPcs;
  for (size_t i = 0; i < n; i++) {
    CUpti_PCSamplingPCData *pc = &d->pPcData[i];
    p->records++;
    if (pc->functionName)
      cucap_map_put(&p->fnptr, (uint64_t)(uintptr_t)pc->functionName, 1);
    int64_t op = ck_corr_op(E, pc->correlationId);
    int64_t k = -1;
    if (op >= 0) {
      uint64_t ri = E->op.ops[op].rec_index;
      k = E->op.ops[op].body == CUCAP_FB_BODY_LAUNCH
              ? ck_kernel_find(E, ri, 0)
              : ck_kernel_by_name(E, ri, pc->functionName);
    }
    if (k < 0) {
      p->unattributed++;
      continue;
    }
    size_t ns = pc->stallReasonCount;
    if (ns > p->n)
      ns = p->n;
    for (size_t j = 0; j < ns; j++) {
      int slot = ck_stall_slot(E, pc->stallReason[j].pcSamplingStallReasonIndex);
      if (slot < 0 || !pc->stallReason[j].samples)
        continue;
      ck_pcs_add(E, k, pc->cubinCrc, pc->functionName, pc->pcOffset,
                 (uint32_t)slot, pc->stallReason[j].samples);
      p->samples += pc->stallReason[j].samples;
    }
  }
}

static void ck_pcs_drain(ck_engine *E) {
  ck_pcs *p = E->pc.pcs;
  double t0 = cucap_clock_now_s();
  for (int guard = 0; guard < 100000 && !E->dead; guard++) {
    CUpti_PCSamplingGetDataParams gp;
    memset(&gp, 0, sizeof gp);
    gp.size = CUpti_PCSamplingGetDataParamsSize;
    gp.ctx = E->ctx;
    gp.pcSamplingData = &p->user;
    p->user.totalNumPcs = p->user.remainingNumPcs = 0;
    if (!CK_CALL(E, cuptiPCSamplingGetData, &gp)) {
      if (E->last == CUPTI_ERROR_OUT_OF_MEMORY)
        p->hw_full++;
      else if (!p->why[0])
        snprintf(p->why, sizeof p->why, "%s", E->last_msg);
      break;
    }
    ck_pcs_take(E, &p->user);
    if (!p->user.remainingNumPcs)
      break;
  }
  E->tm.pcs_drain_s += cucap_clock_now_s() - t0;
}

void ck_pcs_op_before(ck_engine *E, const cucap_replay_op *op) {
  ck_pcs *p = E->pc.pcs;
  if (!p || E->dead || !p->enabled || p->started || p->stopped || op->capturing ||
      !ck_in_window(E, op->rec_index))
    return;
  CUpti_PCSamplingStartParams sp;
  memset(&sp, 0, sizeof sp);
  sp.size = CUpti_PCSamplingStartParamsSize;
  sp.ctx = E->ctx;
  double ts = cucap_clock_now_s();
  int ok = CK_CALL(E, cuptiPCSamplingStart, &sp);
  CUCAP_DEBUG("profile: cuptiPCSamplingStart %.3f s", cucap_clock_now_s() - ts);
  if (ok) {
    p->started = 1;
  } else {
    p->stopped = 1; /* noted at pass end */
    snprintf(p->why, sizeof p->why, "%s", E->last_msg);
  }
}

static void ck_pcs_stop(ck_engine *E) {
  ck_pcs *p = E->pc.pcs;
  CUpti_PCSamplingStopParams sp;
  memset(&sp, 0, sizeof sp);
  sp.size = CUpti_PCSamplingStopParamsSize;
  sp.ctx = E->ctx;
  double ts = cucap_clock_now_s();
  CK_CALL(E, cuptiPCSamplingStop, &sp);
  CUCAP_DEBUG("profile: cuptiPCSamplingStop %.3f s", cucap_clock_now_s() - ts);
  p->started = 0;
  p->stopped = 1;
  ck_pcs_drain(E);
}

void ck_pcs_op_after(ck_engine *E, const cucap_replay_op *op) {
  ck_pcs *p = E->pc.pcs;
  if (!p || !p->started || op->capturing)
    return;
  if (E->dead) { /* nothing to stop: CUPTI is gone */
    p->started = 0;
    p->stopped = 1;
    return;
  }
  if (ck_kernel_find(E, op->rec_index, 0) >= 0) {
    /* the kernels of this op are done before their samples are read */
    E->own_call = 1;
    CUresult r = E->cu.CtxSynchronize ? E->cu.CtxSynchronize() : CUDA_SUCCESS;
    E->own_call = 0;
    if (r != CUDA_SUCCESS)
      CUCAP_WARN("profile: cuCtxSynchronize after record %" PRIu64
                 " failed (%d)", op->rec_index, (int)r);
    ck_pcs_drain(E);
  }
  if (op->rec_index == E->win_hi && p->started)
    ck_pcs_stop(E);
}

/* Kernels of the window that ran in the profiled context (the one PC
 * sampling, the range profiler and SASS metrics are bound to: ck_pick_ctx). */
size_t ck_ctx_kernels(const ck_engine *E) {
  size_t n = 0;
  for (size_t k = 0; k < E->tl.nkern; k++)
    n += !E->ctx_id || E->tl.kx[k].context_id == E->ctx_id;
  return n;
}

void ck_pcs_pass_end(ck_engine *E) {
  ck_pcs *p = E->pc.pcs;
  if (!p)
    return;
  int started_ever = p->started || p->stopped;
  if (E->dead) { /* CUPTI detached itself: nothing to stop or disable */
    p->started = 0;
    p->enabled = 0;
  }
  if (p->started)
    ck_pcs_stop(E);
  else if (p->enabled)
    ck_pcs_drain(E);
  if (p->enabled) {
    CUpti_PCSamplingDisableParams dp;
    memset(&dp, 0, sizeof dp);
    dp.size = CUpti_PCSamplingDisableParamsSize;
    dp.ctx = E->ctx;
    p->cfg.totalNumPcs = 0;
    double ts = cucap_clock_now_s();
    if (CK_CALL(E, cuptiPCSamplingDisable, &dp))
      ck_pcs_take(E, &p->cfg); /* what was left at disable time */
    CUCAP_DEBUG("profile: cuptiPCSamplingDisable %.3f s", cucap_clock_now_s() - ts);
    p->enabled = 0;
  }
  ck_api_records(E, 0);
  CK_CALL(E, cuptiActivityFlushAll, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  ck_sites_resolve(E);
  char extra[256] = "";
  size_t l = 0;
  if (p->dropped)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; %" PRIu64 " samples dropped by the hardware",
                          p->dropped);
  if (p->hw_full && l < sizeof extra)
    l += (size_t)snprintf(extra + l, sizeof extra - l,
                          "; hardware buffer full %" PRIu64 " time(s) (raise "
                          "the period)", p->hw_full);
  if (p->unattributed && l < sizeof extra)
    snprintf(extra + l, sizeof extra - l,
             "; %" PRIu64 " PC records matched no launch", p->unattributed);
  if (E->dead)
    ck_section(E, CUCAP_CUPTI_PCSAMPLING,
               E->pc.nsamp ? CUCAP_CUPTI_PARTIAL : CUCAP_CUPTI_FAILED,
               "%s%s", E->pc.nsamp ? "samples before the failure kept; " : "",
               E->dead_why);
  else if (!E->tl.nkern)
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_COLLECTED,
               "no kernel ran in the profiled window: nothing to sample");
  else if (!started_ever)
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_FAILED,
               "sampling never started: %s",
               p->why[0] ? p->why : "no op of the window ran");
  else if (!E->pc.nsamp && ck_ctx_kernels(E) == 0)
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_UNAVAILABLE,
               "none of the %zu kernel execution(s) of the window ran in "
               "the profiled context (CUPTI binds PC sampling to one "
               "context: the one where most of them ran)",
               E->tl.nkern);
  else if (!E->pc.nsamp && p->why[0])
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_FAILED,
               "no samples: %s", p->why);
  else if (!E->pc.nsamp)
    ck_section(E, CUCAP_CUPTI_PCSAMPLING, CUCAP_CUPTI_FAILED,
               "no samples (CUPTI counted %" PRIu64 " in total, %" PRIu64
               " in non-user kernels)%s", p->total, p->nonuser, extra);
  else
    ck_section(E, CUCAP_CUPTI_PCSAMPLING,
               p->dropped || p->hw_full || p->unattributed
                   ? CUCAP_CUPTI_PARTIAL : CUCAP_CUPTI_COLLECTED,
               "%" PRIu64 " samples at %zu instructions (period 2^%u "
               "cycles; CUPTI counted %" PRIu64 ")%s", p->samples, E->pc.nsite,
               E->o.pc_period, p->total, extra);
}

void ck_pcs_free(ck_engine *E) {
  ck_pcs *p = E->pc.pcs;
  if (!p)
    return;
  if (p->enabled) {
    int q = E->quiet;
    E->quiet = 1;
    if (p->started) {
      CUpti_PCSamplingStopParams sp;
      memset(&sp, 0, sizeof sp);
      sp.size = CUpti_PCSamplingStopParamsSize;
      sp.ctx = E->ctx;
      CK_CALL(E, cuptiPCSamplingStop, &sp);
    }
    CUpti_PCSamplingDisableParams dp;
    memset(&dp, 0, sizeof dp);
    dp.size = CUpti_PCSamplingDisableParamsSize;
    dp.ctx = E->ctx;
    CK_CALL(E, cuptiPCSamplingDisable, &dp);
    E->quiet = q;
  }
  size_t fpos = 0;
  uint64_t fk = 0;
  while (cucap_map_next(&p->fnptr, &fpos, &fk, NULL))
    free((void *)(uintptr_t)fk);
  cucap_map_free(&p->fnptr);
  ck_pcbuf_free(&p->cfg);
  ck_pcbuf_free(&p->user);
  if (p->names)
    for (size_t i = 0; i < p->n; i++)
      free(p->names[i]);
  free(p->names);
  free(p->cupti_index);
  free(p);
  E->pc.pcs = NULL;
}

void ck_pcs_results_free(ck_engine *E) {
  free(E->pc.stall);
  free(E->pc.site);
  cucap_map_free(&E->pc.site_idx);
  free(E->pc.samp);
}

size_t cucap_cupti_pc_sites(const cucap_cupti *e, const cucap_cupti_pc_site **out) {
  *out = e->pc.site;
  return e->pc.nsite;
}

size_t cucap_cupti_pc_samples(const cucap_cupti *e,
                              const cucap_cupti_pc_sample **out) {
  *out = e->pc.samp;
  return e->pc.nsamp;
}
