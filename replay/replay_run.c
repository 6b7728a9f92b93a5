/* replay_run.c - cucap_replay_run: scan, place memory, execute records in
 * file order, N times; owns rp_state's run and pass control part
 * (rp_run_ctl, replay_state.h).
 *
 * Flow: open the capture; load the driver (replay_driver.c); scan every
 * record once (device ranges for fixed placement, module images checked
 * against this GPU, --strict refusal, first BeforeLaunch snapshot, damage);
 * compare the environment with the FileHeader; retain the primary context;
 * place memory (replay_memory.c) and the recorded pinned host allocations
 * (replay_host.c); then execute all records on this thread
 * (replay_exec.c), N times for --loop, timing the whole with events.
 * Every pass starts from the same state: the recorded device ranges and the
 * pinned host ranges zero-filled, then (passes after the first) the
 * BeforeLaunch snapshot restored, then the capture's own uploads. The
 * steps are the phases below (rp_phase_*), with one teardown whichever of
 * them stopped the run. Verify,
 * profile and the exporters are observers the caller passes in
 * (cucap_replay_observer.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucap_clock.h"
#include "cucap_fatbin.h"
#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_graph.h"
#include "replay_host.h"
#include "replay_state.h"

/* ---------------------------------------------------------------- scan */

/* What the scan takes from one record: recorded device ranges and pinned
 * host allocations, module images, the first BeforeLaunch snapshot, the
 * recorded driver version. CUCAP_ERR_NOMEM is the only failure. */
static cucap_status rp_scan_record(rp_state *R, rp_host_pins *pins, const cucap_fb_record *rec,
                                   uint64_t rec_index) {
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_ALLOC: {
    const cucap_fb_alloc *a = cucap_fb_record_body_as_alloc(rec);
    if (rp_alloc_is_device(cucap_fb_alloc_kind(a)) &&
        !rp_mem_add_recorded(&R->mem, cucap_fb_alloc_address(a),
                             rp_alloc_size(a)))
      return CUCAP_ERR_NOMEM;
    /* pinned host memory a kernel may use through its recorded pointer */
    if (!rp_host_pins_add(pins, cucap_fb_alloc_kind(a),
                          cucap_fb_alloc_host_address(a),
                          cucap_fb_alloc_address(a), cucap_fb_alloc_size(a)))
      return CUCAP_ERR_NOMEM;
    break;
  }
  case CUCAP_FB_BODY_MODULE: {
    const cucap_fb_module *m = cucap_fb_record_body_as_module(rec);
    if (cucap_fb_module_op(m) != CUCAP_FB_MODULEOP_LOAD ||
        !cucap_fb_module_image(m))
      break;
    /* checked against this GPU once the driver is loaded (rp_check_images):
     * the scan runs before libcuda is loaded so that the recorded ranges
     * can be guarded in the host address space first (CUCAP_REPLAY_HOST_GUARD=1) */
    if (!CUCAP_VEC_RESERVE(R->code.images, R->code.capimages, R->code.nimages + 1, 16))
      return CUCAP_ERR_NOMEM;
    R->code.images[R->code.nimages].rec_index = rec_index;
    R->code.images[R->code.nimages].seq = cucap_fb_record_seq(rec);
    R->code.images[R->code.nimages].image = rp_h(cucap_fb_module_image(m));
    R->code.nimages++;
    break;
  }
  case CUCAP_FB_BODY_SNAPSHOT: {
    const cucap_fb_snapshot *s = cucap_fb_record_body_as_snapshot(rec);
    if (rp_deferred_scan(R, s) != CUCAP_OK) /* CopyResult: found at its copy */
      return CUCAP_ERR_NOMEM;
    if (cucap_fb_snapshot_reason(s) == CUCAP_FB_SNAPSHOTREASON_BEFORELAUNCH &&
        !R->run.restore) {
      size_t k = cucap_fb_snapshot_regions_len(s);
      R->run.restore = calloc(k ? k : 1, sizeof *R->run.restore);
      if (!R->run.restore)
        return CUCAP_ERR_NOMEM;
      for (size_t i = 0; i < k; i++) {
        const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, i);
        R->run.restore[i].addr = cucap_fb_mem_region_address(g);
        R->run.restore[i].size = cucap_fb_mem_region_size(g);
        R->run.restore[i].data = rp_h(cucap_fb_mem_region_data(g));
      }
      R->run.nrestore = k;
    }
    break;
  }
  case CUCAP_FB_BODY_DEVICES: { /* format 1.1: driver seen at cuInit */
    const cucap_fb_devices *dv = cucap_fb_record_body_as_devices(rec);
    if (!R->rec_driver)
      R->rec_driver = cucap_fb_devices_driver_version(dv);
    break;
  }
  case CUCAP_FB_BODY_NOTE: { /* the recorder notes cuDriverGetVersion */
    const cucap_fb_note *nt = cucap_fb_record_body_as_note(rec);
    const char *k = cucap_fb_note_kind(nt);
    if (k && !strcmp(k, "driver_version") && !R->rec_driver)
      R->rec_driver = (int)cucap_fb_note_value(nt);
    break;
  }
  default:
    break;
  }
  return CUCAP_OK;
}

static cucap_status rp_scan(rp_state *R, rp_host_pins *pins) {
  cucap_replay_report *rep = R->rep;
  const void *recp, *buf;
  size_t sz;
  cucap_status st;
  uint64_t n = 0;
  int refused = 0;
  /* a capture made by trim/extract: its recorded duration is that of the
   * records after the state prefix */
  const cucap_fb_file_header *fh0 = cucap_reader_header(R->r);
  const cucap_fb_origin *org = fh0 ? cucap_fb_file_header_origin(fh0) : NULL;
  uint64_t prefix = org ? cucap_fb_origin_state_records(org) : 0;
  uint64_t kept_t0 = UINT64_MAX, kept_t1 = 0;
  while ((st = cucap_reader_next(R->r, &recp, &buf, &sz)) == CUCAP_OK) {
    const cucap_fb_record *rec = recp;
    n++;
    if (org && n > prefix) {
      if (cucap_fb_record_t_enter(rec) < kept_t0)
        kept_t0 = cucap_fb_record_t_enter(rec);
      if (cucap_fb_record_t_exit(rec) > kept_t1)
        kept_t1 = cucap_fb_record_t_exit(rec);
    }
    if (cucap_fb_record_result(rec) != 0)
      continue; /* failed in the program: not replayed */
    rp_capture_scan(R, rec, n - 1); /* captures that cannot be re-captured */
    const char *bad = rp_unreplayable(rec);
    if (bad && R->o->strict) {
      rp_set_error(R, CUCAP_ERR_UNSUPPORTED,
                   "--strict: record %" PRIu64 " (seq %" PRIu64
                   ") cannot be replayed: %s",
                   n - 1, cucap_fb_record_seq(rec), bad);
      refused = 1;
      break;
    }
    CUCAP_FORWARD(rp_scan_record(R, pins, rec, n - 1));
    if (refused)
      break;
    uint64_t te = cucap_fb_record_t_exit(rec);
    double tw = (double)te * 1e-9;
    if (tw > rep->recorded_wall_s)
      rep->recorded_wall_s = tw; /* fallback: last t_exit */
  }
  rep->records = n;
  if (refused)
    return R->rep->status;
  cucap_reader_recovery rv;
  cucap_reader_recovery_get(R->r, &rv);
  if (st != CUCAP_END || !rv.complete) {
    rep->partial = 1;
    snprintf(rep->partial_problem, sizeof rep->partial_problem, "%s",
             rv.problem[0] ? rv.problem
                           : (st != CUCAP_END ? cucap_status_str(st)
                                              : "capture incomplete"));
    if (!R->o->allow_partial) {
      rp_set_error(R, st != CUCAP_END ? st : CUCAP_ERR_TRUNCATED,
                   "capture is damaged: %s; use --allow-partial to replay "
                   "the %" PRIu64 " records recovered",
                   rep->partial_problem, n);
      return R->rep->status;
    }
    CUCAP_WARN("replay: capture is damaged (%s); replaying the %" PRIu64
               " records recovered", rep->partial_problem, n);
  }
  if (org) {
    rep->recorded_wall_s = kept_t1 > kept_t0 && kept_t0 != UINT64_MAX
                               ? (double)(kept_t1 - kept_t0) * 1e-9 : 0;
  } else if (rv.end_mono_ns) {
    const cucap_fb_file_header *fh = cucap_reader_header(R->r);
    uint64_t s0 = fh ? cucap_fb_file_header_start_mono_ns(fh) : 0;
    if (rv.end_mono_ns > s0 && s0)
      rep->recorded_wall_s = (double)(rv.end_mono_ns - s0) * 1e-9;
  }
  return CUCAP_OK;
}

/* Module images of the scan against this GPU's compute capability. */
static cucap_status rp_check_images(rp_state *R) {
  for (size_t i = 0; i < R->code.nimages; i++) {
    rp_image_ref *ir = &R->code.images[i];
    const void *img = NULL;
    uint64_t isz = 0;
    ir->data = NULL;
    ir->format = CUCAP_IMAGE_UNKNOWN;
    if (cucap_reader_blob_map(R->r, ir->image, &img, &isz) != CUCAP_OK) {
      CUCAP_WARN("replay: module image of record %" PRIu64 " is missing",
                 ir->rec_index);
      continue;
    }
    ir->data = img;
    ir->size = isz;
    cucap_image_info info;
    if (cucap_image_detect(img, isz, &info) != CUCAP_OK) {
      CUCAP_INFO("replay: module image of record %" PRIu64
                 " has an unknown format; not checked for sm_%d",
                 ir->rec_index, R->cc);
      continue;
    }
    ir->format = (int)info.format;
    if (!cucap_image_has_code_for(img, isz, (unsigned)R->cc)) {
      rp_set_error(R, CUCAP_ERR_ENV,
                   "module image of record %" PRIu64 " (seq %" PRIu64
                   ") has no code for this GPU (sm_%d): neither SASS "
                   "nor PTX it could JIT",
                   ir->rec_index, ir->seq, R->cc);
      return R->rep->status;
    }
  }
  return CUCAP_OK;
}

/* ---------------------------------------------------------------- env */

static void rp_env_check(rp_state *R) {
  const cucap_fb_file_header *fh = cucap_reader_header(R->r);
  if (!fh)
    return;
  int drv = 0;
  if (R->d.df.DriverGetVersion)
    R->d.df.DriverGetVersion(&drv);
  int rdrv = cucap_fb_file_header_driver_version(fh);
  if (!rdrv)
    rdrv = R->rec_driver;
  if (rdrv && drv && rdrv != drv) {
    CUCAP_WARN("replay: driver version differs: recorded %d, here %d", rdrv,
               drv);
    R->rep->env_warnings++;
  }
  int tk = cucap_fb_file_header_toolkit_version(fh);
  if (tk && tk != CUDA_VERSION) {
    CUCAP_INFO("replay: capture recorded by a cucap built with CUDA %d, this "
               "one with %d", tk, CUDA_VERSION);
  }
  char name[256] = "";
  if (R->d.df.DeviceGetName)
    R->d.df.DeviceGetName(name, sizeof name, R->dev);
  size_t total = 0;
  if (R->d.df.DeviceTotalMem)
    R->d.df.DeviceTotalMem(&total, R->dev);
  R->dev_mem = total;
  size_t nd = cucap_fb_file_header_devices_len(fh);
  if (nd > 1) {
    CUCAP_WARN("replay: capture used %zu devices; everything replays on "
               "device %d", nd, R->o->device);
    R->rep->env_warnings++;
  }
  for (size_t i = 0; i < nd && i < 1; i++) {
    const cucap_fb_device_props *p = cucap_fb_file_header_devices_at(fh, i);
    const char *rn = cucap_fb_device_props_name(p);
    int rcc = cucap_fb_device_props_cc_major(p) * 10 +
              cucap_fb_device_props_cc_minor(p);
    if (rn && strcmp(rn, name)) {
      CUCAP_WARN("replay: GPU differs: recorded on \"%s\", replaying on "
                 "\"%s\"", rn, name);
      R->rep->env_warnings++;
    }
    if (rcc && rcc != R->cc) {
      CUCAP_WARN("replay: compute capability differs: recorded sm_%d, here "
                 "sm_%d", rcc, R->cc);
      R->rep->env_warnings++;
    }
    uint64_t rt = cucap_fb_device_props_total_mem(p);
    if (rt && total && rt > total) {
      CUCAP_WARN("replay: this GPU has less memory (%zu MiB) than the "
                 "recorded one (%" PRIu64 " MiB)", total >> 20, rt >> 20);
      R->rep->env_warnings++;
    }
  }
}

/* Restores the first Snapshot(BeforeLaunch) before loops 2..N. */
static void rp_restore(rp_state *R) {
  for (size_t i = 0; i < R->run.nrestore && !R->failed; i++) {
    rp_region *g = &R->run.restore[i];
    uint64_t bsz = 0;
    if (cucap_reader_blob_size(R->r, g->data, &bsz) != CUCAP_OK || bsz != g->size)
      continue; /* no (matching) contents: nothing to restore */
    if (rp_grow(&R->buf.expect, &R->buf.expect_cap, g->size, &R->buf.expect_pinned,
                R) != CUCAP_OK ||
        cucap_reader_blob_read(R->r, g->data, R->buf.expect, g->size) != CUCAP_OK)
      continue;
    rp_patch_payload(R, R->buf.expect, g->size, g->addr, NULL);
    rp_cu(R, R->d.df.MemcpyHtoDAsync(rp_tr(R, g->addr), R->buf.expect, g->size, NULL),
          "cuMemcpyHtoD (restore)");
    R->d.df.StreamSynchronize(NULL);
  }
}

void rp_live_destroy(rp_state *R, const cucap_map *mp, uint64_t live) {
  void *v = (void *)(uintptr_t)live;
  if (mp == &R->cx.gexec && R->d.df.GraphExecDestroy)
    R->d.df.GraphExecDestroy(v);
  else if (mp == &R->cx.graph && R->d.df.GraphDestroy)
    R->d.df.GraphDestroy(v);
  else if (mp == &R->cx.event)
    R->d.df.EventDestroy(v);
  else if (mp == &R->cx.stream) {
    /* a stream still capturing (its EndCapture was not recorded) ends the
     * capture first, or the graph being built would be lost */
    if (R->capturing && rp_capture_end_drop(R, v))
      R->capturing--;
    R->d.df.StreamDestroy(v);
  }
  else if (rp_modkeep_has(R, (uint64_t)(uintptr_t)v))
    ; /* kept for the next pass: unloaded by rp_modkeep_release */
  else if (mp == &R->code.library || mp == &R->code.module)
    rp_unload(R, (uint64_t)(uintptr_t)v, mp == &R->code.library);
}

cucap_status rp_live_put(rp_state *R, cucap_map *mp, uint64_t h, uint64_t live) {
  uint64_t old;
  if (cucap_map_get(mp, h, &old) && old != live)
    rp_live_destroy(R, mp, old);
  if (!cucap_map_put(mp, h, live)) {
    rp_live_destroy(R, mp, live);
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return CUCAP_ERR_NOMEM;
  }
  return CUCAP_OK;
}

/* Stream captures the capture never ended (a truncated file, a program
 * killed mid-capture): end them, so the cleanup's own calls are legal and
 * the graphs being built are freed. */
static void rp_end_captures(rp_state *R) {
  if (!R->capturing || !R->d.df.StreamEndCapture || !R->cx.stream.cap) {
    R->capturing = 0;
    return;
  }
  const cucap_map *m = &R->cx.stream;
  for (size_t i = 0; i < m->cap + 2; i++) {
    /* slots cap and cap+1 hold recorded handles 0 and 1 (flag bits) */
    if (i < m->cap ? m->keys[i] <= 1 : !(m->keys[m->cap] & (1u << (i - m->cap))))
      continue;
    rp_capture_end_drop(R, (CUstream)(uintptr_t)m->vals[i]);
  }
  R->capturing = 0;
}

static void rp_destroy_live(rp_state *R) {
  /* objects the program left alive: destroy between loops and at the end */
  rp_end_captures(R);
  rp_object_destroy_live(R); /* texture/surface objects, arrays */
  rp_attr_reset(R);
  cucap_map_free(&R->code.libmod); /* the libraries' own: dropped with them below */
  cucap_map *maps[] = {&R->cx.gexec, &R->cx.graph, &R->cx.event, &R->cx.stream, &R->code.library,
                    &R->code.module};
  for (size_t m = 0; m < sizeof maps / sizeof *maps; m++) {
    cucap_map *mp = maps[m];
    size_t pos = 0;
    uint64_t lv = 0;
    while (cucap_map_next(mp, &pos, NULL, &lv)) { /* recorded handles 0 and 1 too */
      /* a module is unloaded from the context it was loaded in */
      CUcontext own = rp_owner_of(R, lv);
      if (own && own != R->cx.cur && R->d.df.CtxSetCurrent(own) == CUDA_SUCCESS)
        R->cx.cur = own;
      rp_live_destroy(R, mp, lv);
    }
    cucap_map_free(mp);
  }
  rp_graphs_reset(R, 0); /* graphs rebuilt for the execs just destroyed */
  for (size_t i = 0; i < R->code.nfuncs; i++) {
    free(R->code.funcs[i].params);
    free(R->code.funcs[i].name);
  }
  R->code.nfuncs = 0;
  cucap_map_free(&R->code.func);
  R->code.last_fn_idx = R->cx.last_stream_rec = R->cx.last_ctx_rec = 0;
  rp_ctx_destroy_all(R, &R->cx.ctx_created); /* created contexts */
  cucap_map_free(&R->cx.ctx);
  cucap_map_free(&R->cx.tid_ctx);
  cucap_map_free(&R->cx.owner);
  R->cx.nctx_stack = 0;
  if (R->cx.primary) {
    R->d.df.CtxSetCurrent(R->cx.primary);
    R->cx.cur = R->cx.primary;
  }
  /* relocated allocations the program never freed */
  for (size_t i = 0; i < R->mem.nreloc; i++)
    if (R->mem.reloc[i].owned)
      R->d.df.MemFree(R->mem.reloc[i].live);
  R->mem.nreloc = 0;
  rp_keep_free(R); /* pinned ones live in the primary context */
  R->capturing = 0;
}

static void rp_free_host(rp_state *R, void **p, int pinned) {
  if (!*p)
    return;
  if (pinned)
    rp_host_buf_free(R, *p);
  else
    free(*p);
  *p = NULL;
}

void cucap_replay_options_init(cucap_replay_options *o) {
  memset(o, 0, sizeof *o);
  o->loops = 1;
}

/* ---------------------------------------------------------------- phases
 * cucap_replay_run in the order it runs them; each returns the status of
 * the error it set (rp_set_error) or CUCAP_OK, and the teardown undoes
 * whatever the ones that ran left. */

/* Opens the capture, scans it and plans the address map, all before
 * libcuda is loaded. */
static cucap_status rp_phase_open(rp_state *R, const char *path, rp_host_pins *pins) {
  char msg[256] = "";
  /* Two read-ahead workers decode the next blob chunks while this thread
   * uploads the current one (blobs are mostly read in file order). */
  cucap_reader_options ro = {.strict = 0, .decode_threads = 2};
  cucap_status st = cucap_reader_open(path, &ro, &R->r, msg, sizeof msg);
  if (st != CUCAP_OK) {
    rp_set_error(R, st, "%s", msg[0] ? msg : cucap_status_str(st));
    return R->rep->status;
  }
  /* scan first, before libcuda is loaded: the recorded device ranges are
   * then held in the host address space (PROT_NONE) so that neither the
   * driver's libraries nor its own mappings land on them */
  st = rp_scan(R, pins);
  if (st != CUCAP_OK) {
    if (!R->rep->error[0])
      rp_set_error(R, st, "scanning the capture: %s", cucap_status_str(st));
    return R->rep->status;
  }
  CUCAP_DEBUG("replay: setup: capture opened and scanned");
  /* The address map is planned before libcuda is loaded: device
   * super-ranges (replay_memory.c) and the page-locked host ranges, whose
   * parts inside a super-range are backed with device memory there. */
  if (!rp_host_pins_plan(pins, &R->mem) || !rp_mem_plan(&R->mem)) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return R->rep->status;
  }
  return CUCAP_OK;
}

/* Loads the driver (host guards and pinned ranges mapped around it, as the
 * environment asks), attaches the observers, initialises the device,
 * compares the environment with the capture's and makes the primary
 * context current. */
static cucap_status rp_phase_driver(rp_state *R, rp_host_pins *pins) {
  char msg[256] = "";
  cucap_status st;
  /* Host guards are opt-in: measured on an H100 with driver 580, a PROT_NONE
   * guard over a super-range held across cuInit and released just before
   * cuMemAddressReserve made the driver ignore the (free, 32 MiB-aligned)
   * hint and return the next 32 MiB, while the same hint without a guard was
   * honoured exactly. The driver appears to plan its own VA around mappings it
   * saw at initialisation. CUCAP_REPLAY_HOST_GUARD=1 (or "init") holds the
   * guards across cuInit; "dlopen" holds them only while libcuda and its
   * libraries are loaded and releases them before cuInit (whether the
   * driver then honours the hints is what tests/gpu/va_probe measures). */
  const char *guard_env = cucap_knob_str(CUCAP_KNOB(CUCAP_REPLAY_HOST_GUARD));
  int guard = !R->o->relocate && guard_env
                  ? (!strcmp(guard_env, "1") || !strcmp(guard_env, "init")) ? 2
                    : !strcmp(guard_env, "dlopen")                          ? 1
                                                                            : 0
                  : 0;
  if (guard) {
    size_t ng = rp_mem_host_guard(&R->mem);
    CUCAP_DEBUG("replay: %zu of %zu super-range(s) guarded in the host "
                "address space", ng, R->mem.nfixed);
  }
  /* Page-locked host ranges away from the device ranges are mapped now, so
   * that libcuda's libraries and the driver's own mappings cannot take them
   * (the "address already in use" of pinned host memory). */
  if (pins->n && cucap_knob_flag(CUCAP_KNOB(CUCAP_REPLAY_PIN_PREMAP))) {
    size_t np = rp_host_pins_premap(pins, &R->mem);
    CUCAP_DEBUG("replay: %zu pinned host range(s) mapped before the driver "
                "was loaded", np);
  }
  st = rp_driver_load(&R->d, R->o->libcuda, msg, sizeof msg);
  if (guard == 1)
    rp_mem_host_unguard(&R->mem);
  if (st != CUCAP_OK) {
    rp_set_error(R, st, "%s", msg);
    return R->rep->status;
  }
  CUCAP_FORWARD(rp_obs_attach(R));
  CUCAP_DEBUG("replay: setup: driver loaded, observers attached");
  CUresult cr = R->d.df.Init(0);
  if (cr != CUDA_SUCCESS) {
    rp_set_error(R, CUCAP_ERR_ENV, "cuInit failed: %s",
                 rp_cu_err(&R->d, cr));
    return R->rep->status;
  }
  if ((cr = R->d.df.DeviceGet(&R->dev, R->o->device)) != CUDA_SUCCESS) {
    rp_set_error(R, CUCAP_ERR_ENV,
                 "no CUDA device %d: %s", R->o->device, rp_cu_err(&R->d, cr));
    return R->rep->status;
  }
  {
    int ma = 0, mi = 0;
    if (R->d.df.DeviceGetAttribute) {
      R->d.df.DeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, R->dev);
      R->d.df.DeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, R->dev);
    }
    R->cc = ma * 10 + mi;
  }
  rp_env_check(R);
  /* primary context first: VMM calls need a current context */
  CUCAP_RETURN_IF(!rp_cu(R, R->d.df.DevicePrimaryCtxRetain(&R->cx.primary, R->dev),
                         "cuDevicePrimaryCtxRetain"),
                  R->rep->status);
  R->cx.primary_retained = 1;
  CUCAP_RETURN_IF(!rp_cu(R, R->d.df.CtxSetCurrent(R->cx.primary), "cuCtxSetCurrent"),
                  R->rep->status);
  R->cx.cur = R->cx.primary;
  CUCAP_DEBUG("replay: setup: cuInit, primary context");
  return CUCAP_OK;
}

/* Places the recorded memory (device ranges at their addresses, pinned
 * host allocations), checks the module images against this GPU, allocates
 * the per-op buffers and begins the observers. */
static cucap_status rp_phase_place(rp_state *R, rp_host_pins *pins) {
  /* fixed placement right after the context exists, before anything of
   * ours (events, pinned buffers, modules) allocates device memory */
  if (!R->o->relocate) {
    uint64_t bytes = 0, ranges = 0;
    size_t failed = rp_mem_place_fixed(&R->mem, &R->d, R->dev, &ranges, &bytes);
    R->rep->fixed_ranges = ranges;
    R->rep->fixed_bytes = bytes;
    R->rep->fixed_address = R->mem.nchunks > 0 && failed == 0;
    if (failed)
      CUCAP_WARN("replay: %zu recorded range(s) could not be placed at their "
                 "recorded addresses; those allocations are relocated", failed);
  } else {
    rp_mem_sort_recorded(&R->mem); /* for rp_mem_is_recorded */
  }
  /* pinned host allocations next (also with --relocate: a host pointer a
   * kernel uses cannot be patched), still before any allocation of ours
   * (staging/scratch buffers below) can take their addresses. */
  if (pins->n) {
    size_t np = rp_host_pins_place(pins, &R->d, &R->mem);
    CUCAP_INFO("replay: memory: %zu pinned host range(s) at recorded "
               "addresses, %zu not placed, %zu backed by device memory "
               "inside reserved ranges", np, pins->failed, pins->device_backed);
    R->rep->pinned_host_ranges = np;
    R->rep->pinned_host_failed = pins->failed;
    R->rep->pinned_host_device_backed = pins->device_backed;
  }
  /* module images against this GPU only now: mapping them (the reader keeps
   * them) before the placement could have taken recorded addresses */
  CUCAP_FORWARD(rp_check_images(R));
  rp_plainelf_start(R); /* decompresses ahead of the module loads */
  CUCAP_DEBUG("replay: setup: memory placed, module images checked");
  /* buffers used per op, allocated now: a cuMemAllocHost during a stream
   * capture would invalidate it (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) */
  if (rp_grow(&R->buf.expect, &R->buf.expect_cap, (size_t)1 << 20, &R->buf.expect_pinned,
              R) != CUCAP_OK ||
      rp_grow(&R->buf.scratch, &R->buf.scratch_cap, (size_t)1 << 20,
              &R->buf.scratch_pinned, R) != CUCAP_OK) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return R->rep->status;
  }
  CUCAP_FORWARD(rp_obs_begin(R)); /* before the events: nothing to undo */
  CUCAP_DEBUG("replay: setup: observers begun");
  return CUCAP_OK;
}

/* What the passes share: the events timing the GPU work, switches read
 * from the environment once, and what CUCAP_REPLAY_OPTIME counts. */
typedef struct rp_passes {
  int optime;          /* CUCAP_REPLAY_OPTIME level (0: off) */
  int serialize;       /* CUCAP_REPLAY_SERIALIZE=1 */
  int force_du;        /* CUCAP_REPLAY_DEVICE_UPLOADS=1 */
  CUevent ev0, ev1;
  int gpu_ok;          /* both events exist and every pass was timed */
  double gpu_ms_total;
  double body_s[64], reset_s;
  uint64_t body_n[64];
} rp_passes;

/* The records of one pass, in file order, up to the end of the capture,
 * an error, a stop or an observer's end of the pass. */
static void rp_pass_records(rp_state *R, rp_passes *X, unsigned loop) {
  const void *recp, *buf;
  size_t sz;
  R->rec_index = 0;
  R->run.end_pass = 0;
  while (!R->failed && !R->run.stop && R->rec_index < R->rep->records &&
         cucap_reader_next(R->r, &recp, &buf, &sz) == CUCAP_OK) {
    if (X->optime) {
      double te = cucap_clock_now_s();
      rp_execute(R, recp);
      int bt = cucap_fb_record_body_type((const cucap_fb_record *)recp) & 63;
      double dt = cucap_clock_now_s() - te;
      X->body_s[bt] += dt;
      X->body_n[bt]++;
      if (X->optime == 2 && dt > 2e-3)
        CUCAP_INFO("replay: optime: pass %u record %" PRIu64 " %s %.3f ms",
                   loop, R->rec_index, cucap_fb_body_name(bt), dt * 1e3);
    } else {
      rp_execute(R, recp);
    }
    if (X->serialize && !R->failed && !rp_capture_any(R) && R->d.df.CtxSynchronize)
      R->d.df.CtxSynchronize();
    R->rec_index++;
    if (R->run.end_pass && !rp_capture_any(R))
      break; /* cucap_replay_session_end_pass (captures, dry ones too, end first) */
  }
}

/* One pass: back to the initial state, the records, then all of its work
 * waited for. Returns 0 when it failed (no further pass runs). */
static int rp_pass(rp_state *R, rp_host_pins *pins, rp_passes *X, unsigned loop) {
  R->run.pass = loop;
  double tr = X->optime ? cucap_clock_now_s() : 0;
  if (loop > 0) {
    rp_destroy_live(R);
    rp_host_pins_zero(pins);
  }
  /* zeroed in every pass, the first included: whatever the driver hands
   * out, a byte no recorded operation wrote reads 0 in every pass (a
   * replay that missed a write differs from the recording the same way
   * each time, never "nondeterministically") */
  rp_cu(R, rp_mem_zero(&R->mem, &R->d), "cuMemsetD8 (pass start)");
  if (loop > 0) {
    rp_restore(R);
    if (R->code.mk_fresh)
      rp_modkeep_drop(R);
    else
      rp_modkeep_restore(R);
    R->code.mk_fresh = 0;
  }
  if (X->optime)
    X->reset_s += cucap_clock_now_s() - tr;
  R->buf.skip_host_reads = 0; /* an observer asks again in each pass */
  R->buf.device_uploads = X->force_du && loop > 0;
  rp_obs_pass_begin(R);
  if (cucap_reader_rewind(R->r) != CUCAP_OK) {
    rp_set_error(R, CUCAP_ERR_IO, "cannot rewind the capture");
    return 0;
  }
  if (X->gpu_ok)
    R->d.df.EventRecord(X->ev0, NULL);
  rp_pass_records(R, X, loop);
  if (R->failed)
    return 0;
  /* captures the program never ended (a file cut short while capturing)
   * would make the synchronisation below illegal */
  rp_captures_close(R);
  if (R->cx.keep_ctx)
    rp_ctx_kept_sync(R);
  if (R->cx.primary && R->cx.cur != R->cx.primary) {
    R->d.df.CtxSetCurrent(R->cx.primary);
    R->cx.cur = R->cx.primary;
  }
  rp_cu(R, R->d.df.CtxSynchronize(), "cuCtxSynchronize (end of replay)");
  if (X->gpu_ok) {
    float ms = 0;
    if (R->d.df.EventRecord(X->ev1, NULL) == CUDA_SUCCESS &&
        R->d.df.EventSynchronize(X->ev1) == CUDA_SUCCESS &&
        R->d.df.EventElapsedTime &&
        R->d.df.EventElapsedTime(&ms, X->ev0, X->ev1) == CUDA_SUCCESS)
      X->gpu_ms_total += ms;
    else
      X->gpu_ok = 0;
  }
  return 1;
}

/* The passes: as many as --loop and the observers ask for, timed. */
static cucap_status rp_phase_passes(rp_state *R, rp_host_pins *pins, unsigned loops,
                                    int optime) {
  cucap_replay_report *rep = R->rep;
  rp_passes X;
  memset(&X, 0, sizeof X);
  X.optime = optime;
  if (R->d.df.EventCreate) {
    R->d.df.EventCreate(&X.ev0, CU_EVENT_DEFAULT);
    R->d.df.EventCreate(&X.ev1, CU_EVENT_DEFAULT);
  }
  X.gpu_ok = X.ev0 && X.ev1;
  double t0 = cucap_clock_now_s();
  /* CUCAP_REPLAY_SERIALIZE=1 (diagnostic): the context is synchronised
   * after every record (not while a stream captures), so no two GPU
   * operations of the replay overlap. A capture that replays right only so
   * lacks an ordering the replay does not reproduce (an event, a host
   * function, a stream-ordered free); one that still differs lacks data. */
  X.serialize = cucap_knob_flag(CUCAP_KNOB(CUCAP_REPLAY_SERIALIZE));
  /* CUCAP_REPLAY_DEVICE_UPLOADS=1 (tests): every pass after the first
   * uploads cached payloads from their device copies, as profiler passes
   * do, so that --verify --loop N checks that path */
  X.force_du = cucap_knob_flag(CUCAP_KNOB(CUCAP_REPLAY_DEVICE_UPLOADS));
  int more = 0; /* an observer asked for another pass */
  for (unsigned loop = 0; (loop < loops || more) && !R->failed && !R->run.stop &&
                          loop < CUCAP_REPLAY_MAX_PASSES;
       loop++) {
    if (!rp_pass(R, pins, &X, loop))
      break;
    rep->loops++;
    more = rp_obs_pass_end(R);
  }
  rep->replay_wall_s = cucap_clock_now_s() - t0;
  if (optime) {
    CUCAP_INFO("replay: optime: %.3f s in %u pass(es), %.3f s resetting between "
               "passes", rep->replay_wall_s, rep->loops, X.reset_s);
    for (int b = 0; b < 64; b++)
      if (X.body_n[b])
        CUCAP_INFO("replay: optime: %-16s %8" PRIu64 " records %.3f s",
                   cucap_fb_body_name(b), X.body_n[b], X.body_s[b]);
  }
  if (R->buf.host_reads_skipped)
    CUCAP_INFO("replay: %" PRIu64 " copies to the host left out in passes that read "
               "results on the device only", R->buf.host_reads_skipped);
  if (X.gpu_ok && rep->loops)
    rep->gpu_time_s = X.gpu_ms_total * 1e-3;
  if (rep->loops && rep->replay_wall_s > 0)
    rep->ratio = rep->recorded_wall_s / (rep->replay_wall_s / rep->loops);
  if (X.ev0)
    R->d.df.EventDestroy(X.ev0);
  if (X.ev1)
    R->d.df.EventDestroy(X.ev1);
  return rep->status;
}

/* The teardown's driver part: the objects, buffers and memory of the run,
 * released while the primary context lives. */
static void rp_teardown_driver(rp_state *R, rp_host_pins *pins, int optime) {
  double tt[6] = {optime ? cucap_clock_now_s() : 0};
  if (R->cx.primary)
    R->d.df.CtxSetCurrent(R->cx.primary);
  rp_destroy_live(R);
  rp_modkeep_release(R); /* in their contexts: before those go */
  rp_held_release(R);
  tt[1] = optime ? cucap_clock_now_s() : 0;
  rp_paycache_free_device(R);
  rp_ctx_destroy_all(R, &R->cx.ctx_kept);
  rp_stage_free(R);
  rp_free_host(R, &R->buf.scratch, R->buf.scratch_pinned);
  tt[2] = optime ? cucap_clock_now_s() : 0;
  rp_paycache_free(R); /* page-locked: while the primary context lives */
  rp_free_host(R, &R->buf.expect, R->buf.expect_pinned);
  rp_graphs_reset(R, 1);
  tt[3] = optime ? cucap_clock_now_s() : 0;
  rp_mem_release(&R->mem, &R->d);
  rp_host_pins_release(pins, &R->d); /* needs the context: before release */
  tt[4] = optime ? cucap_clock_now_s() : 0;
  if (R->cx.primary_retained && R->d.df.DevicePrimaryCtxRelease && !R->run.leave_to_exit)
    R->d.df.DevicePrimaryCtxRelease(R->dev);
  tt[5] = optime ? cucap_clock_now_s() : 0;
  if (optime)
    CUCAP_INFO("replay: optime: teardown %.3f s: objects and modules %.3f, "
               "device payload copies and contexts %.3f, page-locked payload "
               "cache %.3f, memory at recorded addresses %.3f, primary "
               "context %.3f", tt[5] - tt[0], tt[1] - tt[0], tt[2] - tt[1],
               tt[3] - tt[2], tt[4] - tt[3], tt[5] - tt[4]);
  CUCAP_DEBUG("replay: teardown: objects, buffers and memory released");
}

/* The one cleanup path: whatever phase stopped the run, the observers end
 * and everything the phases that ran created is released. */
static void rp_phase_teardown(rp_state *R, rp_host_pins *pins, int optime) {
  if (R->o->nobservers)
    rp_obs_end(R);
  CUCAP_DEBUG("replay: teardown: observers ended");
  R->code.hold_unloads = 0; /* the teardown unloads; what was held goes too */
  /* exit_after: the driver's costly releases - module unloads (most of a
   * teardown), page-locked frees and the primary context - are left to the
   * process exit. CUCAP_REPLAY_OPTIME=1 logs the teardown's parts;
   * docs/bench-log.md ("Teardown") has the figures. */
  R->run.leave_to_exit = R->o->exit_after;
  if (R->d.lib) {
    rp_teardown_driver(R, pins, optime);
  } else {
    rp_modkeep_release(R);
    rp_held_release(R);
    rp_paycache_free(R);
    rp_graphs_reset(R, 1);
    rp_mem_release(&R->mem, &R->d);
    rp_host_pins_release(pins, NULL);
  }
  rp_plainelf_free(R); /* every module is unloaded by now */
  if (!R->buf.expect_pinned)
    free(R->buf.expect);
  free(R->cx.keep);
  free(R->cx.keep_pinned);
  free(R->code.images);
  free(R->run.restore);
  free(R->code.funcs);
  rp_deferred_free(R);
  cucap_map_free(&R->cx.ctx);
  cucap_map_free(&R->cx.ctx_kept); /* no driver: nothing was created */
  cucap_map_free(&R->cx.tid_ctx);
  cucap_reader_destroy(R->r);
  rp_driver_unload(&R->d);
}

/* Runs the phases in order; the first that fails ends the run. */
static cucap_status rp_phases(rp_state *R, const char *path, rp_host_pins *pins,
                              unsigned loops, int optime) {
  CUCAP_FORWARD(rp_phase_open(R, path, pins));
  CUCAP_FORWARD(rp_phase_driver(R, pins));
  CUCAP_FORWARD(rp_phase_place(R, pins));
  return rp_phase_passes(R, pins, loops, optime);
}

cucap_status cucap_replay_run(const char *path, const cucap_replay_options *opts,
                              cucap_replay_report *rep) {
  cucap_replay_options defo;
  if (!opts) {
    cucap_replay_options_init(&defo);
    opts = &defo;
  }
  memset(rep, 0, sizeof *rep);
  rep->gpu_time_s = -1;
  if (!path) {
    snprintf(rep->error, sizeof rep->error, "no capture given");
    rep->status = CUCAP_ERR_INVALID_ARG;
    return rep->status;
  }
  rp_state *R = calloc(1, sizeof *R);
  if (!R) {
    rep->status = CUCAP_ERR_NOMEM;
    snprintf(rep->error, sizeof rep->error, "out of memory");
    return rep->status;
  }
  R->o = opts;
  R->rep = rep;
  rp_host_pins pins; /* owned here; released before the driver goes */
  memset(&pins, 0, sizeof pins);
  unsigned loops = opts->loops ? opts->loops : 1;
  /* CUCAP_REPLAY_OPTIME=1: where a replay's wall time goes, per record
   * body type, between passes and in the teardown, logged at info level
   * (for tuning multi-pass profiling; costs two clock reads per record);
   * =2 also logs each record that took more than 2 ms, with its pass.
   * Read here: the passes and the teardown time themselves */
  const char *ot = cucap_knob_str(CUCAP_KNOB(CUCAP_REPLAY_OPTIME));
  int optime = ot && (*ot == '1' || *ot == '2') ? *ot - '0' : 0;
  rp_phases(R, path, &pins, loops, optime);
  rp_phase_teardown(R, &pins, optime);
  free(R);
  return rep->status;
}
