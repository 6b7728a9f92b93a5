/* cupti_engine.c - the CUPTI engine as a replay observer: attaches CUPTI
 * before cuInit, plans the passes (timeline x N, metrics windows x counter
 * passes, PC sampling, SASS metrics), asks the replayer for each one from
 * pass_end, and keeps the current op for the callback that maps CUPTI
 * correlation ids to the capture's ops (cupti_correlate.c). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cucap_schema.h"
#include "cucap_replay.h"
#include "cupti_internal.h"

/* ---------------------------------------------------------------- helpers */

void ck_section(ck_engine *E, cucap_cupti_section_id id, int state,
                const char *fmt, ...) {
  cucap_cupti_section *sc = &E->sec[id];
  sc->state = state;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sc->note, sizeof sc->note, fmt, ap);
    va_end(ap);
  }
  if (state == CUCAP_CUPTI_UNAVAILABLE || state == CUCAP_CUPTI_FAILED ||
      state == CUCAP_CUPTI_PARTIAL)
    CUCAP_WARN("profile: %s: %s", cucap_cupti_section_name(id), sc->note);
}

const char *cucap_cupti_section_name(cucap_cupti_section_id id) {
  static const char *const n[] = {"timeline", "metrics", "pc-sampling",
                                  "sass-metrics"};
  return (unsigned)id < CUCAP_CUPTI_NSECTIONS ? n[id] : "?";
}

const cucap_cupti_section *cucap_cupti_section_get(const cucap_cupti *e,
                                                   cucap_cupti_section_id id) {
  return (unsigned)id < CUCAP_CUPTI_NSECTIONS ? &e->sec[id] : NULL;
}

const cucap_cupti_env *cucap_cupti_env_get(const cucap_cupti *e) {
  return &e->env;
}

/* ------------------------------------------------------------- observer */

/* Whether the options ask for section i (the timeline always). */
static int ck_requested(const ck_engine *E, int i) {
  return i == CUCAP_CUPTI_TIMELINE ||
         (i == CUCAP_CUPTI_METRICS && E->o.metrics && *E->o.metrics) ||
         (i == CUCAP_CUPTI_PCSAMPLING && E->o.pc_sampling) ||
         (i == CUCAP_CUPTI_SASS && E->o.sass_metrics);
}

static cucap_status ck_fail_env(ck_engine *E, cucap_replay_session *s,
                                const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cucap_status ck_fail_env(ck_engine *E, cucap_replay_session *s,
                                const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (int i = 0; i < CUCAP_CUPTI_NSECTIONS; i++)
    if (ck_requested(E, i)) { /* set quietly: the one message below says it */
      E->sec[i].state = CUCAP_CUPTI_UNAVAILABLE;
      snprintf(E->sec[i].note, sizeof E->sec[i].note, "%.1000s", msg);
    }
  E->quiet = 1;
  ck_timeline_disable(E); /* if activity was half set up */
  if (E->sub) {
    CK_CALL(E, cuptiUnsubscribe, E->sub);
    E->sub = NULL;
  }
  E->quiet = 0;
  E->phase = CK_PH_DONE;
  if (E->o.soft_attach) { /* the replay goes on without the engine */
    CUCAP_WARN("profile: %s", msg);
    return CUCAP_OK;
  }
  cucap_replay_session_fail(s, CUCAP_ERR_ENV, "profile: %s", msg);
  return CUCAP_ERR_ENV;
}

static cucap_status ck_attach(void *u, cucap_replay_session *s) {
  ck_engine *E = u;
  double t0 = cucap_clock_now_s();
  E->s = s;
  char msg[512];
  if (!E->api.lib && !ck_api_load(&E->api, E->o.library, msg, sizeof msg))
    return ck_fail_env(E, s, "%s", msg);
  snprintf(E->env.library, sizeof E->env.library, "%s", E->api.path);
  CUCAP_DEBUG("profile: setup: CUPTI loaded");
  uint32_t v = 0;
  if (CK_CALL(E, cuptiGetVersion, &v))
    E->env.version = v;
  CUCAP_INFO("profile: CUPTI %s, API version %u (cucap built against %u)",
             E->api.path, E->env.version, (unsigned)CUPTI_API_VERSION);
  if (E->env.version && E->env.version < 120600)
    CUCAP_WARN("profile: CUPTI API version %u predates the Range Profiler "
               "API (12.6); metrics will be unavailable", E->env.version);
  if (!CK_CALL(E, cuptiSubscribe, &E->sub, (CUpti_CallbackFunc)ck_callback, E)) {
    E->sub = NULL;
    if (E->last == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      return ck_fail_env(E, s, "another CUPTI client is already subscribed in "
                         "this process (CUDA_INJECTION64_PATH, a profiler "
                         "such as nsys/ncu): %s", E->last_msg);
    return ck_fail_env(E, s, "CUPTI cannot attach to the CUDA driver (%s); "
                       "check that libcupti (%s) matches the driver "
                       "(`cucap doctor`)", E->last_msg, E->api.path);
  }
  CUCAP_DEBUG("profile: setup: subscribed");
  /* callbacks only for the calls that queue GPU work (and the probe's):
   * the replayer's own queries need none (see ck_work_cbids_init) */
  int scoped = ck_work_cbids_init(E);
  for (size_t i = 0; scoped && i < E->tl.nwork_cbid; i++)
    if (!CK_CALL(E, cuptiEnableCallback, 1, E->sub, CUPTI_CB_DOMAIN_DRIVER_API,
                 (CUpti_CallbackId)E->tl.work_cbid[i]))
      scoped = 0;
  if (!scoped) {
    E->tl.nwork_cbid = 0;
    if (!CK_CALL(E, cuptiEnableDomain, 1, E->sub, CUPTI_CB_DOMAIN_DRIVER_API))
      return ck_fail_env(E, s, "CUPTI callbacks cannot be enabled: %s",
                         E->last_msg);
  }
  /* module loads only matter to PC sampling and SASS metrics (the cubins);
   * asked for only then, CUPTI keeps no copy of every module loaded */
  if ((E->o.pc_sampling || E->o.sass_metrics) &&
      !(E->api.cuptiEnableCallback
            ? CK_CALL(E, cuptiEnableCallback, 1, E->sub, CUPTI_CB_DOMAIN_RESOURCE,
                      CUPTI_CBID_RESOURCE_MODULE_LOADED)
            : CK_CALL(E, cuptiEnableDomain, 1, E->sub, CUPTI_CB_DOMAIN_RESOURCE)))
    return ck_fail_env(E, s, "CUPTI callbacks cannot be enabled: %s",
                       E->last_msg);
  if (!ck_timeline_attach(E))
    return ck_fail_env(E, s, "CUPTI activity tracing cannot be enabled: %s",
                       E->last_msg);
  /* the Profiler (Host) API's libraries load while the replay runs cuInit
   * (cupti_load.c says why not earlier) */
  if (ck_requested(E, CUCAP_CUPTI_METRICS) ||
      ck_requested(E, CUCAP_CUPTI_SASS))
    ck_api_nvperf_start(&E->api);
  E->attached = 1;
  E->tm.attach_s = cucap_clock_now_s() - t0;
  return CUCAP_OK;
}

#define CK_PROC(E, s, field, name, ver)                                        \
  ((E)->cu.field = (__typeof__((E)->cu.field))cucap_replay_session_proc(       \
       (s), (name), (ver)))

static cucap_status ck_begin(void *u, cucap_replay_session *s) {
  ck_engine *E = u;
  if (!E->attached)
    return CUCAP_OK;
  double t0 = cucap_clock_now_s();
  E->ctx = (CUcontext)cucap_replay_session_context(s);
  E->device = cucap_replay_session_device(s);
  CK_PROC(E, s, CtxSynchronize, "cuCtxSynchronize", 2000);
  CK_PROC(E, s, StreamSynchronize, "cuStreamSynchronize", 2000);
  CK_PROC(E, s, MemAlloc, "cuMemAlloc", 3020);
  CK_PROC(E, s, MemFree, "cuMemFree", 3020);
  CK_PROC(E, s, MemsetD8Async, "cuMemsetD8Async", 3020);
  CK_PROC(E, s, DeviceGetAttribute, "cuDeviceGetAttribute", 2000);
  CK_PROC(E, s, CtxGetCurrent, "cuCtxGetCurrent", 4000);
  CK_PROC(E, s, CtxSetCurrent, "cuCtxSetCurrent", 4000);
  CK_PROC(E, s, CtxCreate, "cuCtxCreate", 3020);
  CK_PROC(E, s, CtxDestroy, "cuCtxDestroy", 4000);
  CK_PROC(E, s, CtxPushCurrent, "cuCtxPushCurrent", 4000);
  CK_PROC(E, s, CtxPopCurrent, "cuCtxPopCurrent", 4000);
  CK_PROC(E, s, DriverGetVersion, "cuDriverGetVersion", 2020);
  CK_PROC(E, s, ModuleLoadData, "cuModuleLoadData", 2000);
  CK_PROC(E, s, ModuleGetFunction, "cuModuleGetFunction", 2000);
  CK_PROC(E, s, ModuleUnload, "cuModuleUnload", 2000);
  CK_PROC(E, s, LaunchKernel, "cuLaunchKernel", 4000);
  CK_PROC(E, s, DeviceGetDevResource, "cuDeviceGetDevResource", 12040);
  CK_PROC(E, s, DevResourceGenerateDesc, "cuDevResourceGenerateDesc", 12040);
  CK_PROC(E, s, GreenCtxCreate, "cuGreenCtxCreate", 12040);
  CK_PROC(E, s, GreenCtxDestroy, "cuGreenCtxDestroy", 12040);
  CK_PROC(E, s, CtxFromGreenCtx, "cuCtxFromGreenCtx", 12040);
  E->primary = E->ctx;
  /* the range profiler and PC sampling collect in one context over several
   * passes: a context the program creates must outlive the pass */
  cucap_replay_session_keep_contexts(s);
  /* With SASS metrics asked for, the replay unloads no module before the
   * end of the run, so that the SASS pass's loads get handles no earlier
   * load had (cucap_replay_session_hold_unloads says why). Without it the
   * kernels of modules the program loaded through the driver API get no
   * SASS record (a reused handle is not patched again).
   * CUCAP_PROFILE_SASS_HOLD=0 turns it off (a diagnostic: the SASS record
   * count in `cucap cupti profile --sass` output shows the difference;
   * docs/bench-log.md, "SASS hold"). */
  if (E->o.sass_metrics && cucap_knob_flag(CUCAP_KNOB(CUCAP_PROFILE_SASS_HOLD))) {
    cucap_replay_session_hold_unloads(s);
    CUCAP_INFO("profile: SASS metrics: modules stay loaded until the end of the run");
  }
  uint32_t cid = 0;
  if (E->ctx && E->api.cuptiGetContextId &&
      CK_CALL(E, cuptiGetContextId, E->ctx, &cid))
    E->ctx_id = cid;
  int ma = 0, mi = 0;
  if (E->cu.DeviceGetAttribute &&
      E->cu.DeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                               (CUdevice)E->device) == CUDA_SUCCESS &&
      E->cu.DeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                               (CUdevice)E->device) == CUDA_SUCCESS)
    E->cc = ma * 10 + mi;
  E->env.cc_major = ma;
  E->env.cc_minor = mi;
  int sms = 0;
  if (E->cu.DeviceGetAttribute &&
      E->cu.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                               (CUdevice)E->device) == CUDA_SUCCESS)
    E->env.sm_count = sms;
  CUresult (*get_name)(char *, int, CUdevice) = (CUresult(*)(char *, int, CUdevice))
      cucap_replay_session_proc(s, "cuDeviceGetName", 2000);
  if (get_name && get_name(E->env.device, (int)sizeof E->env.device,
                           (CUdevice)E->device) != CUDA_SUCCESS)
    E->env.device[0] = 0;
  CUresult (*drv_ver)(int *) =
      (CUresult(*)(int *))cucap_replay_session_proc(s, "cuDriverGetVersion", 2020);
  if (drv_ver)
    drv_ver(&E->env.driver_version);
  int l2 = 0;
  if (E->cu.DeviceGetAttribute &&
      E->cu.DeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
                               (CUdevice)E->device) == CUDA_SUCCESS && l2 > 0)
    E->env.l2_bytes = (uint64_t)l2;
  snprintf(E->env.clocks, sizeof E->env.clocks, "%s",
           E->o.clock_control == CUCAP_CUPTI_CLOCK_NONE
               ? "not controlled (--clock-control=none)"
               : "default (no measurement pass after the timeline)");
  CUCAP_DEBUG("profile: setup: device queried");
  if (ck_requested(E, CUCAP_CUPTI_METRICS)) {
    char msg[512] = "";
    if (ck_metrics_begin(E, msg, sizeof msg) < 0) {
      cucap_replay_session_fail(s, CUCAP_ERR_UNSUPPORTED, "profile: %s", msg);
      return CUCAP_ERR_UNSUPPORTED;
    }
  }
  E->phase = CK_PH_TIMELINE;
  E->phase_pass = 0;
  E->tm.begin_s = cucap_clock_now_s() - t0;
  return CUCAP_OK;
}

static void ck_pass_begin(void *u, cucap_replay_session *s, unsigned pass) {
  ck_engine *E = u;
  if (!E->attached)
    return;
  E->pass = pass;
  E->pass_t0 = cucap_clock_now_s();
  if (E->tm.t_last_pass_end > 0 && E->phase < CK_PH_DONE)
    E->tm.between_s[E->phase] += E->pass_t0 - E->tm.t_last_pass_end;
  E->op.nops = 0;
  E->op.ncorr = 0;
  E->op.corr_unsorted = 0;
  /* counter, PC-sampling and SASS passes measure kernels: copies back to
   * the host are only part of the timeline, and large uploads may come
   * from device copies of their payloads */
  if (E->phase != CK_PH_TIMELINE && E->phase != CK_PH_DONE) {
    cucap_replay_session_skip_host_reads(s);
    cucap_replay_session_device_uploads(s);
  }
  if (E->phase != CK_PH_DONE)
    CUCAP_DEBUG("profile: pass %u: %s pass %u", pass,
                cucap_cupti_section_name((cucap_cupti_section_id)E->phase),
                E->phase_pass + 1);
}

/* The first pass notes every context that ran a launch (kernel or graph),
 * with its CUPTI context id. */
static void ck_note_ctx(ck_engine *E, const cucap_replay_op *op) {
  CUcontext c = (CUcontext)(uintptr_t)op->context;
  if (!c && E->cu.CtxGetCurrent && E->cu.CtxGetCurrent(&c) != CUDA_SUCCESS)
    c = NULL;
  if (!c || E->nctxs == CK_MAX_CTXS)
    return;
  for (size_t i = 0; i < E->nctxs; i++)
    if (E->ctxs[i].ctx == c)
      return;
  uint32_t id = 0;
  int q = E->quiet;
  E->quiet = 1;
  if (!E->api.cuptiGetContextId || !CK_CALL(E, cuptiGetContextId, c, &id))
    id = 0;
  E->quiet = q;
  E->ctxs[E->nctxs].ctx = c;
  E->ctxs[E->nctxs].id = id;
  E->nctxs++;
}

/* After the first timeline pass: CUPTI is bound to the context where most
 * kernels of the window ran (the primary one on a tie), so programs that
 * create their own context (cuCtxCreate) are profiled too; the replay keeps
 * that context alive across passes (cucap_replay_session_keep_contexts).
 * Kernels of other contexts get timeline entries only, and say so. */
static void ck_pick_ctx(ck_engine *E) {
  size_t best = 0, bestn = 0;
  int found = 0;
  for (size_t i = 0; i < E->nctxs; i++) {
    size_t n = 0;
    for (size_t k = 0; k < E->tl.nkern; k++)
      n += E->ctxs[i].id && E->tl.kx[k].context_id == E->ctxs[i].id &&
           ck_in_window(E, E->tl.kern[k].rec_index);
    if (n && (!found || n > bestn ||
              (n == bestn && E->ctxs[i].ctx == E->primary))) {
      best = i;
      bestn = n;
      found = 1;
    }
  }
  if (!found || E->ctxs[best].ctx == E->ctx)
    return;
  E->ctx = E->ctxs[best].ctx;
  E->ctx_id = E->ctxs[best].id;
  CUCAP_INFO("profile: %zu kernel execution(s) of the window ran in a context "
             "the program created (cuCtxCreate, CUPTI context %u): metrics, "
             "PC sampling and SASS metrics are collected there", bestn,
             E->ctx_id);
}

static void ck_op_before(void *u, cucap_replay_session *s,
                         const cucap_replay_op *op) {
  ck_engine *E = u;
  (void)s;
  if (!E->attached)
    return;
  E->op.cur = op;
  E->op.cur_op = -1;
  E->op.in_op = 1;
  if (op->pass == 0) {
    if (op->body_type == CUCAP_FB_BODY_LAUNCH || op->body_type == CUCAP_FB_BODY_GRAPH)
      ck_note_ctx(E, op);
    if (op->body_type == CUCAP_FB_BODY_CALLSTACK ||
        op->body_type == CUCAP_FB_BODY_MODULEMAP)
      ck_stack_feed(E, op->record);
    if (op->body_type == CUCAP_FB_BODY_MODULE &&
        (E->o.pc_sampling || E->o.sass_metrics)) {
      const cucap_fb_module *m =
          cucap_fb_record_body_as_module((const cucap_fb_record *)op->record);
      const cucap_fb_hash128 *h = m ? cucap_fb_module_image(m) : NULL;
      if (h && cucap_fb_module_op(m) == CUCAP_FB_MODULEOP_LOAD &&
          cucap_vec_reserve(&E->cb.images, &E->cb.capimages, E->cb.nimages + 1, sizeof *E->cb.images, 16)) {
        E->cb.images[E->cb.nimages].lo = h->lo;
        E->cb.images[E->cb.nimages].hi = h->hi;
        E->cb.nimages++;
      }
    }
    /* a launch range: the window runs from the first to the last launch
     * in it (graph launches and copies in between included) */
    if (E->o.launch_count != CUCAP_CUPTI_ALL_LAUNCHES || E->o.first_launch) {
      uint64_t first = E->o.first_launch, cnt = E->o.launch_count;
      if (op->launch_index != CUCAP_REPLAY_NO_LAUNCH &&
          op->launch_index >= first &&
          (cnt == CUCAP_CUPTI_ALL_LAUNCHES || op->launch_index - first < cnt)) {
        if (E->win_lo == UINT64_MAX)
          E->win_lo = op->rec_index;
        E->win_hi = op->rec_index;
        E->launches_in_window++;
      }
    } else if (op->launch_index != CUCAP_REPLAY_NO_LAUNCH) {
      E->launches_in_window++;
    }
  }
  switch (E->phase) {
  case CK_PH_METRICS: ck_metrics_op_before(E, op); break;
  case CK_PH_PCSAMP: ck_pcs_op_before(E, op); break;
  case CK_PH_SASS: ck_sass_op_before(E, op); break;
  default: break;
  }
}

/* Nothing after this op matters to the current pass: end it (the replayer
 * does not cut a stream capture). With a launch range this saves replaying
 * the rest of the capture in every pass. */
static int ck_pass_done_after(ck_engine *E, const cucap_replay_op *op) {
  if (op->capturing || E->win_lo == UINT64_MAX)
    return 0;
  int ranged = E->o.launch_count != CUCAP_CUPTI_ALL_LAUNCHES || E->o.first_launch;
  switch (E->phase) {
  case CK_PH_TIMELINE:
    if (!ranged || E->o.timeline_all)
      return 0;
    if (op->pass == 0) /* the window's end is known once its last launch ran */
      return E->o.launch_count != CUCAP_CUPTI_ALL_LAUNCHES &&
             E->launches_in_window == E->o.launch_count &&
             op->rec_index == E->win_hi;
    return op->rec_index == E->win_hi;
  case CK_PH_METRICS:
    return ck_metrics_window_stopped(E);
  case CK_PH_PCSAMP:
  case CK_PH_SASS:
    return ranged && op->rec_index == E->win_hi;
  default:
    return 0;
  }
}

static void ck_op_after(void *u, cucap_replay_session *s,
                        const cucap_replay_op *op) {
  ck_engine *E = u;
  if (!E->attached)
    return;
  switch (E->phase) {
  case CK_PH_METRICS: ck_metrics_op_after(E, op); break;
  case CK_PH_PCSAMP: ck_pcs_op_after(E, op); break;
  case CK_PH_SASS: ck_sass_op_after(E, op); break;
  default: break;
  }
  if (ck_pass_done_after(E, op))
    cucap_replay_session_end_pass(s);
  E->op.in_op = 0;
  E->op.cur = NULL;
  E->op.cur_op = -1;
}

/* CUPTI died: every requested section from `from` on that has no state yet
 * says so; no more passes. */
static void ck_sections_dead(ck_engine *E, int from) {
  for (int i = from; i < CUCAP_CUPTI_NSECTIONS; i++)
    if (ck_requested(E, i) && E->sec[i].state == CUCAP_CUPTI_NOT_REQUESTED)
      ck_section(E, (cucap_cupti_section_id)i, CUCAP_CUPTI_FAILED,
                 "not collected: %s", E->dead_why);
  E->phase = CK_PH_DONE;
}

/* Picks the phase after `from`; 1 if one needs a pass. */
static int ck_next_phase(ck_engine *E, ck_phase from) {
  if (E->dead) {
    ck_metrics_done(E); /* no CUPTI call: frees what the engine holds */
    ck_sections_dead(E, (int)from + 1);
    return 0;
  }
  for (int ph = (int)from + 1; ph < CK_PH_DONE; ph++) {
    E->phase = (ck_phase)ph;
    E->phase_pass = 0;
    if (ph == CK_PH_METRICS && ck_requested(E, CUCAP_CUPTI_METRICS)) {
      if (E->sec[CUCAP_CUPTI_METRICS].state == CUCAP_CUPTI_NOT_REQUESTED &&
          ck_metrics_plan(E))
        return 1;
      ck_metrics_done(E); /* whatever was set up goes before PC sampling */
    }
    if (ph == CK_PH_PCSAMP && E->o.pc_sampling &&
        E->sec[CUCAP_CUPTI_PCSAMPLING].state == CUCAP_CUPTI_NOT_REQUESTED &&
        ck_pcs_setup(E))
      return 1;
    if (ph == CK_PH_SASS && E->o.sass_metrics &&
        E->sec[CUCAP_CUPTI_SASS].state == CUCAP_CUPTI_NOT_REQUESTED &&
        ck_sass_setup(E))
      return 1;
  }
  E->phase = CK_PH_DONE;
  return 0;
}

static int ck_pass_end(void *u, cucap_replay_session *s, unsigned pass) {
  ck_engine *E = u;
  (void)pass;
  if (!E->attached || E->phase == CK_PH_DONE)
    return 0;
  cucap_cupti_section *sc = &E->sec[E->phase];
  double now = cucap_clock_now_s();
  sc->passes++;
  sc->wall_s += now - E->pass_t0;
  E->tm.pass_s[E->phase] += now - E->pass_t0;
  ck_phase ph = E->phase;
  E->phase_pass++;
  switch (ph) {
  case CK_PH_TIMELINE:
    ck_timeline_pass_end(E, E->phase_pass - 1);
    if (E->phase_pass < E->o.timeline_passes && !E->dead) {
      E->tm.t_last_pass_end = cucap_clock_now_s();
      return 1;
    }
    ck_timeline_finish(E);
    CUCAP_DEBUG("profile: setup: timeline records taken");
    ck_timeline_disable(E);
    ck_pick_ctx(E);
    ck_stacks_warm_start(E); /* every stack was fed in pass 0 */
    if (ck_requested(E, CUCAP_CUPTI_PCSAMPLING))
      ck_disasm_early_start(E); /* the kernels that can be sampled are known */
    CUCAP_DEBUG("profile: setup: timeline phase closed");
    break;
  case CK_PH_METRICS:
    if (ck_metrics_pass_end(E)) {
      E->tm.t_last_pass_end = cucap_clock_now_s();
      return 1;
    }
    break;
  case CK_PH_PCSAMP:
    ck_pcs_pass_end(E);
    break;
  case CK_PH_SASS:
    ck_sass_pass_end(E);
    break;
  default:
    break;
  }
  int more = ck_next_phase(E, ph);
  /* every pass after the timeline measures: clocks locked first
   * (--clock-control=base; once, cupti_clock.c) */
  if (more)
    ck_clock_lock(E);
  /* PC sampling and SASS metrics see only functions loaded after they were
   * set up (with modules kept loaded since the timeline pass, PC sampling
   * counts no samples in most programs; SASS metrics patch functions as
   * they load; docs/bench-log.md, "Fresh modules"): their passes load
   * every module again, as a single pass would. The metrics passes, the
   * bulk of a profile, keep them. */
  if (more && E->phase != ph &&
      (E->phase == CK_PH_PCSAMP || E->phase == CK_PH_SASS))
    cucap_replay_session_fresh_modules(s);
  E->tm.t_last_pass_end = cucap_clock_now_s();
  return more;
}

static void ck_end(void *u, cucap_replay_session *s, cucap_replay_report *rep) {
  ck_engine *E = u;
  (void)s;
  ck_clock_restore(); /* first: nothing below needs the lock */
  /* the replay may have stopped early: say what is missing */
  if (E->phase != CK_PH_DONE && E->attached) {
    const char *why = E->dead ? E->dead_why
                      : rep && rep->error[0] ? rep->error : "the replay stopped";
    for (int i = (int)E->phase; i < CUCAP_CUPTI_NSECTIONS; i++) {
      if (!ck_requested(E, i))
        continue;
      if (E->sec[i].state == CUCAP_CUPTI_NOT_REQUESTED ||
          (i == (int)E->phase && E->sec[i].state == CUCAP_CUPTI_COLLECTED))
        ck_section(E, (cucap_cupti_section_id)i,
                   i == (int)E->phase && E->tl.nkern ? CUCAP_CUPTI_PARTIAL
                                                  : CUCAP_CUPTI_FAILED,
                   "not completed: %s", why);
    }
    if (E->phase == CK_PH_TIMELINE && E->phase_pass > 0)
      ck_timeline_finish(E);
    E->phase = CK_PH_DONE;
  }
  if (E->attached) {
    ck_metrics_free(E); /* range profiler object, host object */
    ck_pcs_free(E);
    if (ck_sass_state_of(E) >= 2) {
      E->quiet = 1;
      ck_sass_pass_end(E);
      E->quiet = 0;
    }
    ck_prof_deinit(E);
    ck_flush_free(E);
    ck_timeline_disable(E);
    if (E->sub && !E->dead) {
      int q = E->quiet;
      E->quiet = 1;
      CK_CALL(E, cuptiEnableDomain, 0, E->sub, CUPTI_CB_DOMAIN_DRIVER_API);
      if (E->o.pc_sampling || E->o.sass_metrics)
        CK_CALL(E, cuptiEnableDomain, 0, E->sub, CUPTI_CB_DOMAIN_RESOURCE);
      CK_CALL(E, cuptiUnsubscribe, E->sub);
      E->quiet = q;
    }
    E->sub = NULL;
    E->attached = 0;
  }
  ck_timing_log(E);
}

/* ------------------------------------------------------------ lifecycle */

void cucap_cupti_options_init(cucap_cupti_options *o) {
  memset(o, 0, sizeof *o);
  o->timeline_passes = 1;
  o->launch_count = CUCAP_CUPTI_ALL_LAUNCHES;
}

static char *ck_strdup(const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

cucap_status cucap_cupti_create(const cucap_cupti_options *o, cucap_cupti **out,
                                char *msg, size_t msg_size) {
  *out = NULL;
  if (msg && msg_size)
    msg[0] = 0;
  cucap_cupti_options d;
  if (!o) {
    cucap_cupti_options_init(&d);
    o = &d;
  }
  if (o->pc_period && (o->pc_period < 5 || o->pc_period > 31)) {
    snprintf(msg, msg_size, "PC sampling period %u: expected 5..31 (2^N cycles)",
             o->pc_period);
    return CUCAP_ERR_INVALID_ARG;
  }
  if (o->metrics && *o->metrics) {
    /* names: [A-Za-z0-9_.] separated by commas, none empty */
    const char *p = o->metrics;
    size_t len = 0;
    for (;; p++) {
      if (*p == ',' || !*p) {
        if (!len) {
          snprintf(msg, msg_size, "--metrics=%s: empty metric name",
                   o->metrics);
          return CUCAP_ERR_INVALID_ARG;
        }
        len = 0;
        if (!*p)
          break;
        continue;
      }
      if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '_' || *p == '.')) {
        snprintf(msg, msg_size, "--metrics=%s: unexpected character '%c' "
                 "(expected sol, full or metric names separated by commas)",
                 o->metrics, *p);
        return CUCAP_ERR_INVALID_ARG;
      }
      len++;
    }
  }
  ck_engine *E = calloc(1, sizeof *E);
  if (!E)
    return CUCAP_ERR_NOMEM;
  E->o = *o;
  if (!E->o.timeline_passes)
    E->o.timeline_passes = 1;
  if (E->o.timeline_passes > CUCAP_REPLAY_MAX_PASSES / 2)
    E->o.timeline_passes = CUCAP_REPLAY_MAX_PASSES / 2;
  if (!E->o.launch_count)
    E->o.launch_count = CUCAP_CUPTI_ALL_LAUNCHES;
  if (!E->o.max_ranges)
    E->o.max_ranges = 4096;
  if (!E->o.pc_period)
    E->o.pc_period = CUCAP_CUPTI_PC_PERIOD_DEFAULT;
  E->metrics_opt = ck_strdup(o->metrics);
  E->nvdisasm_opt = ck_strdup(o->nvdisasm);
  E->o.metrics = E->metrics_opt;
  E->o.nvdisasm = E->nvdisasm_opt;
  E->o.library = NULL; /* the caller's string is used during attach only */
  if (o->library && *o->library) {
    E->o.library = ck_strdup(o->library);
    if (!E->o.library) {
      cucap_cupti_destroy(E);
      return CUCAP_ERR_NOMEM;
    }
  }
  if ((o->metrics && !E->metrics_opt) || (o->nvdisasm && !E->nvdisasm_opt)) {
    cucap_cupti_destroy(E);
    return CUCAP_ERR_NOMEM;
  }
  pthread_mutex_init(&E->tl.mu, NULL);
  pthread_mutex_init(&E->cb.cubin_mu, NULL);
  /* the whole capture unless a launch range was given */
  if (E->o.launch_count == CUCAP_CUPTI_ALL_LAUNCHES && !E->o.first_launch) {
    E->win_lo = 0;
    E->win_hi = UINT64_MAX - 1;
  } else {
    E->win_lo = E->win_hi = UINT64_MAX;
  }
  E->op.cur_op = -1;
  E->env.counters_allowed = -1;
  E->obs.name = "profile";
  E->obs.user = E;
  E->obs.attach = ck_attach;
  E->obs.begin = ck_begin;
  E->obs.pass_begin = ck_pass_begin;
  E->obs.op_before = ck_op_before;
  E->obs.op_after = ck_op_after;
  E->obs.pass_end = ck_pass_end;
  E->obs.end = ck_end;
  *out = E;
  return CUCAP_OK;
}

const cucap_replay_observer *cucap_cupti_observer(cucap_cupti *e) {
  return e ? &e->obs : NULL;
}

cucap_status cucap_cupti_load(cucap_cupti *e, char *msg, size_t msg_size) {
  if (e->api.lib)
    return CUCAP_OK;
  char m[512];
  if (!ck_api_load(&e->api, e->o.library, m, sizeof m)) {
    if (msg && msg_size)
      snprintf(msg, msg_size, "%s", m);
    return CUCAP_ERR_ENV;
  }
  snprintf(e->env.library, sizeof e->env.library, "%s", e->api.path);
  uint32_t v = 0;
  if (e->api.cuptiGetVersion && e->api.cuptiGetVersion(&v) == CUPTI_SUCCESS)
    e->env.version = v;
  return CUCAP_OK;
}

int cucap_cupti_attached(const cucap_cupti *e) { return e && e->attached; }

void cucap_cupti_destroy(cucap_cupti *E) {
  if (!E)
    return;
  ck_clock_restore(); /* a replay that never reached ck_end */
  ck_timeline_forget(E); /* CUPTI's buffer callbacks must not find it */
  ck_metrics_free(E);
  ck_pcs_free(E);
  ck_act_free(E);
  ck_timeline_free(E);
  ck_ops_free(E);
  ck_metric_tab_free(E);
  ck_pcs_results_free(E);
  ck_sass_free(E);
  ck_disasm_early_free(E); /* its thread reads the cubins */
  ck_cubin_free(E);
  ck_report_free(E);
  ck_strtab_free(&E->str);
  ck_api_unload(&E->api);
  pthread_mutex_destroy(&E->tl.mu);
  pthread_mutex_destroy(&E->cb.cubin_mu);
  free(E->metrics_opt);
  free(E->nvdisasm_opt);
  free((char *)E->o.library);
  free(E);
}
