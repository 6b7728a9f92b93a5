/* cupti_sass.c - the instruction side of the CUPTI engine: the cubins the
 * driver loaded (CUPTI's module-loaded callback, or the ELF entries of the
 * capture's own module images when the callback gave none), their CRCs
 * (cuptiGetCubinCrc, the key of PC-sampling records), the source line of
 * each sampled instruction (cuptiGetSassToSourceCorrelation, once per
 * sampled instruction, only for cubins with line information), its text and
 * inline chain from one `nvdisasm -c -gi -fun <sampled functions>` run per
 * cubin with samples, all cubins at once (cupti_nvdisasm.c), most of them
 * already run beside the counter passes (cupti_disasm_early.c), and the SASS
 * metrics pass (cupti_sass_metrics.h: executed instructions, thread
 * instructions, global-memory sectors per instruction, summed over the
 * window).
 *
 * Locks: the module callback may come from any thread, so the cubin list is
 * under cubin_mu; CUPTI is never called with it held (a CUPTI call may load
 * a module and call back). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cucap_sort.h"
#include "cucap_fatbin.h"
#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_reader.h"
#include "cucap_schema.h"
#include "cupti_internal.h"

/* ------------------------------------------------------------ cubins */

void ck_cubin_add(ck_engine *E, const void *data, size_t size) {
  if (!data || !size || size > CUCAP_IMAGE_MAX_SIZE)
    return;
  uint64_t h = cucap_hash64_of(data, size);
  pthread_mutex_lock(&E->cb.cubin_mu);
  for (size_t i = 0; i < E->cb.ncubin; i++)
    if (E->cb.cubin[i].hash == h && E->cb.cubin[i].size == size) {
      pthread_mutex_unlock(&E->cb.cubin_mu);
      return;
    }
  void *copy = malloc(size);
  if (copy &&
      cucap_vec_reserve(&E->cb.cubin, &E->cb.capcubin, E->cb.ncubin + 1, sizeof *E->cb.cubin, 16)) {
    memcpy(copy, data, size);
    E->cb.cubin[E->cb.ncubin++] = (ck_cubin){copy, size, 0, h, 0};
    copy = NULL;
  }
  pthread_mutex_unlock(&E->cb.cubin_mu);
  free(copy);
}

typedef struct ck_img_ctx {
  ck_engine *E;
  unsigned cc;
} ck_img_ctx;

static int ck_img_entry(const cucap_fatbin_entry *e, void *user) {
  ck_img_ctx *c = user;
  /* the driver runs SASS of the same major at or below the device's */
  if (e->kind != CUCAP_FATBIN_ENTRY_ELF || e->arch / 10 != c->cc / 10 ||
      e->arch > c->cc)
    return 0;
  void *d = NULL;
  size_t n = 0;
  if (cucap_fatbin_entry_data(e, &d, &n) == CUCAP_OK)
    ck_cubin_add(c->E, d, n);
  free(d);
  return 0;
}

void ck_cubins_from_image(ck_engine *E, const void *image, size_t size) {
  cucap_image_info info;
  if (cucap_image_detect(image, size, &info) != CUCAP_OK)
    return;
  ck_img_ctx c = {E, (unsigned)E->cc};
  if (info.data_format == CUCAP_IMAGE_CUBIN)
    ck_cubin_add(E, info.data, info.data_size);
  else if (info.data_format == CUCAP_IMAGE_FATBIN && info.data)
    cucap_fatbin_foreach(info.data, info.data_size, ck_img_entry, &c);
}

void ck_cubin_free(ck_engine *E) {
  for (size_t i = 0; i < E->cb.ncubin; i++)
    free(E->cb.cubin[i].data);
  free(E->cb.cubin);
  E->cb.cubin = NULL;
  E->cb.ncubin = E->cb.capcubin = 0;
  free(E->cb.images);
  E->cb.images = NULL;
  E->cb.nimages = E->cb.capimages = 0;
}

static void ck_cubin_crcs(ck_engine *E) {
  pthread_mutex_lock(&E->cb.cubin_mu);
  size_t n = E->cb.ncubin;
  pthread_mutex_unlock(&E->cb.cubin_mu);
  for (size_t i = 0; i < n; i++) {
    ck_cubin *c = &E->cb.cubin[i]; /* entries below n never move while we run */
    if (c->crc)
      continue;
    CUpti_GetCubinCrcParams p;
    memset(&p, 0, sizeof p);
    p.size = CUpti_GetCubinCrcParamsSize;
    p.cubinSize = c->size;
    p.cubin = c->data;
    if (CK_CALL(E, cuptiGetCubinCrc, &p))
      c->crc = p.cubinCrc;
  }
}

static ck_cubin *ck_cubin_by_crc(ck_engine *E, uint64_t crc) {
  for (size_t i = 0; i < E->cb.ncubin; i++)
    if (E->cb.cubin[i].crc == crc)
      return &E->cb.cubin[i];
  return NULL;
}

/* Module images the capture loaded, when CUPTI's callback did not give the
 * cubin a PC record names. */
static void ck_cubins_from_capture(ck_engine *E) {
  cucap_reader *r = E->s ? cucap_replay_session_reader(E->s) : NULL;
  if (!r)
    return;
  for (size_t i = 0; i < E->cb.nimages; i++) {
    const void *img = NULL;
    uint64_t sz = 0;
    if (cucap_reader_blob_map(r, E->cb.images[i], &img, &sz) == CUCAP_OK)
      ck_cubins_from_image(E, img, (size_t)sz);
  }
}

/* ------------------------------------------------------------ nvdisasm */

const char *ck_nvdisasm_path(ck_engine *E, char *buf, size_t n) {
  if (E->o.nvdisasm)
    return *E->o.nvdisasm ? E->o.nvdisasm : NULL;
  const char *home = getenv("CUDA_HOME");
  const char *homes[] = {home, "/usr/local/cuda"};
  for (int i = 0; i < 2; i++) {
    if (!homes[i] || !*homes[i])
      continue;
    snprintf(buf, n, "%s/bin/nvdisasm", homes[i]);
    if (access(buf, X_OK) == 0)
      return buf;
  }
  const char *path = getenv("PATH");
  while (path && *path) {
    const char *c = strchr(path, ':');
    size_t l = c ? (size_t)(c - path) : strlen(path);
    snprintf(buf, n, "%.*s/nvdisasm", (int)l, path);
    if (l && access(buf, X_OK) == 0)
      return buf;
    path += l + (c ? 1 : 0);
  }
  return NULL;
}

typedef struct ck_dis_ctx {
  ck_engine *E;
  uint64_t crc;
  size_t *idx;   /* sites of this cubin, sorted by (function, pc) */
  size_t n;
  size_t filled;
} ck_dis_ctx;

static ck_engine *g_sort_engine;
static int ck_site_cmp(const void *a, const void *b) {
  const cucap_cupti_pc_site *x = &g_sort_engine->pc.site[*(const size_t *)a];
  const cucap_cupti_pc_site *y = &g_sort_engine->pc.site[*(const size_t *)b];
  if (x->function != y->function)
    return (uintptr_t)x->function < (uintptr_t)y->function ? -1 : 1;
  return x->pc_offset < y->pc_offset ? -1 : x->pc_offset > y->pc_offset;
}

static void ck_dis_cb(void *user, const char *function, uint64_t pc,
                      const char *text, const char *file, uint32_t line,
                      const char *chain) {
  ck_dis_ctx *c = user;
  ck_engine *E = c->E;
  const char *fn = ck_intern(&E->str, function);
  size_t lo = 0, hi = c->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const cucap_cupti_pc_site *s = &E->pc.site[c->idx[mid]];
    if ((uintptr_t)s->function < (uintptr_t)fn ||
        (s->function == fn && s->pc_offset < pc))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo >= c->n)
    return;
  cucap_cupti_pc_site *s = &E->pc.site[c->idx[lo]];
  if (s->function != fn || s->pc_offset != pc)
    return;
  s->sass = ck_intern(&E->str, text);
  if (chain && *chain)
    s->inline_chain = ck_intern(&E->str, chain);
  if (!s->file && file && *file) {
    s->file = ck_intern(&E->str, file);
    s->line = line;
  }
  c->filled++;
}

/* One nvdisasm job per cubin with sampled instructions. */
typedef struct ck_dis_job {
  ck_dis_ctx c;
  ck_cubin *cb;
  char *funs;    /* symbol indices of the sampled functions, "3,17" */
} ck_dis_job;

typedef struct ck_dis_all {
  ck_dis_job *jobs;
} ck_dis_all;

static int ck_dis_take(void *user, size_t job, const char *text, size_t len,
                       int whole) {
  ck_dis_job *j = &((ck_dis_all *)user)->jobs[job];
  size_t before = j->c.filled;
  ck_disasm_parse(text, len, ck_dis_cb, &j->c);
  CUCAP_DEBUG("profile: nvdisasm%s: %zu of %zu sampled instructions of cubin "
              "%016" PRIx64 " found", whole ? " (whole cubin)" : "",
              j->c.filled, j->c.n, j->cb->crc);
  return j->c.filled > before;
}

char *ck_cubin_fun_indices(const ck_cubin *cb, const char *const *names,
                           size_t n, const char **found, size_t *nfound) {
  uint32_t *sym = malloc((n ? n : 1) * sizeof *sym);
  size_t k = sym ? cucap_cubin_function_symbols(cb->data, cb->size, names, n, sym) : 0;
  char *out = k ? malloc(k * 11 + 1) : NULL;
  size_t o = 0, f = 0;
  for (size_t i = 0; out && i < n; i++)
    if (sym[i] != UINT32_MAX) {
      o += (size_t)sprintf(out + o, "%s%u", o ? "," : "", sym[i]);
      if (found)
        found[f] = names[i];
      f++;
    }
  if (out)
    out[o] = 0;
  if (nfound)
    *nfound = out ? f : 0;
  free(sym);
  return out;
}

/* "i,j,k": the symbol indices of the distinct functions of the sites idx
 * (sorted by function); NULL when none is found in the cubin's symbols. */
static char *ck_dis_funs(ck_engine *E, const ck_cubin *cb, const size_t *idx,
                         size_t n) {
  const char **names = malloc((n ? n : 1) * sizeof *names);
  if (!names)
    return NULL;
  size_t nn = 0, found = 0;
  for (size_t i = 0; i < n; i++)
    if (!i || E->pc.site[idx[i]].function != E->pc.site[idx[i - 1]].function)
      names[nn++] = E->pc.site[idx[i]].function;
  char *out = ck_cubin_fun_indices(cb, names, nn, NULL, &found);
  if (found < nn)
    CUCAP_DEBUG("profile: %zu of %zu sampled function(s) not in the symbol "
                "table of cubin %016" PRIx64, nn - found, nn, cb->crc);
  free(names);
  return out;
}

/* ------------------------------------------------------------ resolve */

/* ck_sites_resolve: the source line of each of the n sites idx of cubin
 * cb that has none yet. */
static void ck_sites_lines(ck_engine *E, const ck_cubin *cb, const size_t *idx,
                           size_t n) {
  /* source lines, once per sampled instruction, only from a cubin that
   * has line information (the query parses the cubin's line table: on
   * cubins without one, thousands of failing queries cost seconds) */
  if (E->api.cuptiGetSassToSourceCorrelation &&
      cucap_cubin_has_line_info(cb->data, cb->size)) {
    double ts = cucap_clock_now_s();
    for (size_t k = 0; k < n; k++) {
      cucap_cupti_pc_site *s = &E->pc.site[idx[k]];
      if (s->file)
        continue;
      CUpti_GetSassToSourceCorrelationParams p;
      memset(&p, 0, sizeof p);
      p.size = CUpti_GetSassToSourceCorrelationParamsSize;
      p.cubin = cb->data;
      p.cubinSize = cb->size;
      p.functionName = s->function;
      p.pcOffset = s->pc_offset;
      int q = E->quiet;
      E->quiet = 1; /* an instruction without a line is common */
      E->tm.source_calls++;
      if (CK_CALL(E, cuptiGetSassToSourceCorrelation, &p) && p.fileName &&
          *p.fileName) {
        char path[2048];
        if (p.dirName && *p.dirName && p.fileName[0] != '/')
          snprintf(path, sizeof path, "%s/%s", p.dirName, p.fileName);
        else
          snprintf(path, sizeof path, "%s", p.fileName);
        s->file = ck_intern(&E->str, path);
        s->line = p.lineNumber;
      }
      E->quiet = q;
      free(p.fileName);
      free(p.dirName);
    }
    E->tm.source_s += cucap_clock_now_s() - ts;
  }
}

/* ck_sites_resolve: sorts the n sites idx of cubin ci, takes what the
 * listing made beside the passes has for them and plans nvdisasm on the
 * functions left (j, nj); 0 when nothing is left to disassemble. */
static int ck_sites_job(ck_engine *E, size_t ci, size_t *idx, size_t n,
                        ck_dis_job *j, ck_nvd_job *nj) {
  ck_cubin *cb = &E->cb.cubin[ci];
  g_sort_engine = E;
  cucap_sort(idx, n, sizeof *idx, ck_site_cmp);
  /* the listing made beside the passes, when there is one: only the
   * sampled functions it does not cover need nvdisasm now */
  size_t el = 0, nen = 0;
  const char *const *en = NULL;
  const char *et = ck_disasm_early_listing(E, ci, &el, &en, &nen);
  if (et) {
    ck_dis_ctx ec = {E, cb->crc, idx, n, 0};
    ck_disasm_parse(et, el, ck_dis_cb, &ec);
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
      if (!ck_disasm_early_has(en, nen, E->pc.site[idx[k]].function))
        idx[m++] = idx[k]; /* stays sorted */
    CUCAP_DEBUG("profile: cubin %016" PRIx64 ": %zu of %zu sampled "
                "instructions found in the listing made beside the "
                "passes, %zu in functions it does not cover", cb->crc,
                ec.filled, n, m);
    n = m;
    if (!n) {
      cb->disasm_done = 1;
      return 0;
    }
  }
  j->c = (ck_dis_ctx){E, cb->crc, idx, n, 0};
  j->cb = cb;
  j->funs = ck_dis_funs(E, cb, idx, n);
  nj->cubin = cb->data;
  nj->size = cb->size;
  nj->funs = j->funs;
  /* the whole cubin only when -fun cannot be used or gave nothing */
  nj->whole_fallback = 1;
  cb->disasm_done = 1; /* once per cubin, whatever happens */
  return 1;
}

void ck_sites_resolve(ck_engine *E) {
  if (!E->pc.nsite)
    return;
  double t0 = cucap_clock_now_s();
  ck_cubin_crcs(E);
  int missing = 0;
  for (size_t i = 0; i < E->pc.nsite && !missing; i++)
    missing = !ck_cubin_by_crc(E, E->pc.site[i].cubin_crc);
  if (missing && E->cb.nimages) {
    CUCAP_DEBUG("profile: some sampled cubins were not seen by CUPTI's "
                "module callback; trying the capture's %zu module image(s)",
                E->cb.nimages);
    ck_cubins_from_capture(E);
    ck_cubin_crcs(E);
  }
  /* the sites of each cubin, sorted by (function, pc) */
  size_t *all = malloc(E->pc.nsite * sizeof *all);
  ck_dis_job *jobs = calloc(E->cb.ncubin ? E->cb.ncubin : 1, sizeof *jobs);
  ck_nvd_job *nj = calloc(E->cb.ncubin ? E->cb.ncubin : 1, sizeof *nj);
  if (!all || !jobs || !nj) {
    free(all);
    free(jobs);
    free(nj);
    return;
  }
  char toolbuf[1024];
  const char *tool = ck_nvdisasm_path(E, toolbuf, sizeof toolbuf);
  size_t with_line = 0, with_cubin = 0, njobs = 0, off = 0;
  for (size_t ci = 0; ci < E->cb.ncubin; ci++) {
    ck_cubin *cb = &E->cb.cubin[ci];
    size_t *idx = all + off, n = 0;
    for (size_t i = 0; i < E->pc.nsite; i++)
      if (E->pc.site[i].cubin_crc == cb->crc && cb->crc)
        idx[n++] = i;
    if (!n)
      continue;
    off += n;
    with_cubin += n;
    ck_sites_lines(E, cb, idx, n);
    if (tool && !cb->disasm_done &&
        ck_sites_job(E, ci, idx, n, &jobs[njobs], &nj[njobs]))
      njobs++;
  }
  if (njobs) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned par = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (unsigned)ncpu;
    double td = cucap_clock_now_s();
    ck_dis_all ctx = {jobs};
    E->tm.nvdisasm_runs += ck_nvdisasm_run(tool, nj, njobs, par, ck_dis_take, &ctx);
    E->tm.nvdisasm_s += cucap_clock_now_s() - td;
  }
  for (size_t i = 0; i < njobs; i++)
    free(jobs[i].funs);
  for (size_t i = 0; i < E->pc.nsite; i++)
    with_line += E->pc.site[i].file != NULL;
  free(all);
  free(jobs);
  free(nj);
  E->tm.resolve_s += cucap_clock_now_s() - t0;
  CUCAP_INFO("profile: %zu sampled instruction(s): %zu in a known cubin, %zu "
             "with a source line%s", E->pc.nsite, with_cubin, with_line,
             tool ? "" : "; nvdisasm not found, no SASS text");
}

/* ------------------------------------------------------------ SASS metrics */

/* A SASS metrics record kept until the sites are final. */
typedef struct ck_sassrec {
  uint32_t crc32;
  const char *function;      /* interned */
  uint32_t pc;
  uint64_t v[3];
} ck_sassrec;

/* The engine's SASS metrics part (ck_sass_state in cupti_internal.h). */
struct ck_sass_state {
  ck_sassrec *sass;
  size_t nsass, capsass;
  uint64_t sass_id[3];       /* metric ids (UINT64_MAX: not on this chip) */
  int sass_state;            /* 0 off, 1 configured, 2 enabled, 3 collected,
                                4 enable failed */
  char sass_why[1024];
};

/* E's SASS metrics part, made on first use; NULL when memory ran out. */
static ck_sass_state *ck_sm(ck_engine *E) {
  if (!E->sm)
    E->sm = calloc(1, sizeof *E->sm);
  return E->sm;
}

int ck_sass_state_of(const ck_engine *E) {
  return E->sm ? E->sm->sass_state : 0;
}

void ck_sass_free(ck_engine *E) {
  if (E->sm)
    free(E->sm->sass);
  free(E->sm);
  E->sm = NULL;
}

static const char *const ck_sass_names[3] = {
    "smsp__sass_inst_executed", "smsp__sass_thread_inst_executed",
    "smsp__sass_sectors_mem_global"};

int ck_sass_setup(ck_engine *E) {
  ck_sass_state *S = ck_sm(E);
  if (!S)
    return 0;
  if (!(E->api.groups & CK_SASS)) {
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_UNAVAILABLE,
               "%s has no SASS metrics API (missing: %s)", E->api.path,
               E->api.missing);
    return 0;
  }
  if (!E->env.chip[0] && !ck_prof_init(E)) {
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_UNAVAILABLE,
               "no chip name: %s", E->last_msg);
    return 0;
  }
  CUpti_SassMetrics_Config cfg[3];
  size_t n = 0;
  for (int i = 0; i < 3; i++) {
    CUpti_SassMetrics_GetProperties_Params gp;
    memset(&gp, 0, sizeof gp);
    gp.structSize = CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE;
    gp.pChipName = E->env.chip;
    gp.pMetricName = ck_sass_names[i];
    if (!CK_CALL(E, cuptiSassMetricsGetProperties, &gp)) {
      S->sass_id[i] = UINT64_MAX;
      continue;
    }
    S->sass_id[i] = gp.metric.metricId;
    cfg[n].metricId = gp.metric.metricId;
    cfg[n].outputGranularity = CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU;
    n++;
  }
  if (!n) {
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_UNAVAILABLE,
               "none of the SASS metrics exists on %s: %s", E->env.chip,
               E->last_msg);
    return 0;
  }
  CUpti_SassMetricsSetConfig_Params sp;
  memset(&sp, 0, sizeof sp);
  sp.structSize = CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE;
  sp.numOfMetricConfig = n;
  sp.pConfigs = cfg;
  sp.deviceIndex = (uint32_t)E->device;
  if (!CK_CALL(E, cuptiSassMetricsSetConfig, &sp)) {
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_UNAVAILABLE, "%s",
               E->last_msg);
    return 0;
  }
  S->sass_state = 1; /* configured */
  return 1;
}

void ck_sass_op_before(ck_engine *E, const cucap_replay_op *op) {
  ck_sass_state *S = ck_sm(E);
  if (!S)
    return;
  if (S->sass_state != 1 || op->capturing || !ck_in_window(E, op->rec_index))
    return;
  /* Enabled right before the window's first launch in the profiled
   * context, that context current: an enable made while another context is
   * current gives no record for a module loaded before it, for every way
   * of loading. Enabling here alone does not make driver-API programs work
   * in the replay: their kernels (loaded with cuModuleLoadData) get SASS
   * records only because the replay keeps modules loaded until the end of
   * the run when SASS metrics are asked for (cupti_engine.c,
   * cucap_replay_session_hold_unloads); eager patching, SetConfig with the
   * context current, a NULL context, their own context, or loading the
   * images as libraries did not help. Why a reused module handle gets no
   * record is not understood; the experiments are in docs/bench-log.md
   * ("SASS records"). */
  if (op->body_type != CUCAP_FB_BODY_LAUNCH && op->body_type != CUCAP_FB_BODY_GRAPH)
    return;
  CUcontext cur = NULL;
  if (E->cu.CtxGetCurrent && (E->cu.CtxGetCurrent(&cur) != CUDA_SUCCESS || cur != E->ctx))
    return;
  CUpti_SassMetricsEnable_Params ep;
  memset(&ep, 0, sizeof ep);
  ep.structSize = CUpti_SassMetricsEnable_Params_STRUCT_SIZE;
  ep.ctx = E->ctx;
  ep.enableLazyPatching = 1;
  S->sass_state = CK_CALL(E, cuptiSassMetricsEnable, &ep) ? 2 : 4;
  if (S->sass_state == 4)
    snprintf(S->sass_why, sizeof S->sass_why, "%s", E->last_msg);
  CUCAP_DEBUG("profile: sass-metrics: %s on context %p before record %" PRIu64,
              S->sass_state == 2 ? "enabled" : "not enabled", (void *)E->ctx,
              op->rec_index);
}

static void ck_sass_collect(ck_engine *E) {
  ck_sass_state *S = E->sm;
  double t0 = cucap_clock_now_s();
  E->own_call = 1;
  if (E->cu.CtxSynchronize)
    E->cu.CtxSynchronize();
  E->own_call = 0;
  CUpti_SassMetricsGetDataProperties_Params pp;
  memset(&pp, 0, sizeof pp);
  pp.structSize = CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE;
  pp.ctx = E->ctx;
  int got = CK_CALL(E, cuptiSassMetricsGetDataProperties, &pp);
  CUCAP_DEBUG("profile: sass-metrics: %zu record(s) x %zu instance(s) on "
              "context %p", got ? pp.numOfPatchedInstructionRecords : 0,
              got ? pp.numOfInstances : 0, (void *)E->ctx);
  if (got && pp.numOfPatchedInstructionRecords && pp.numOfInstances) {
    size_t nr = pp.numOfPatchedInstructionRecords, ni = pp.numOfInstances;
    CUpti_SassMetrics_Data *d = calloc(nr, sizeof *d);
    CUpti_SassMetrics_InstanceValue *iv = calloc(nr * ni, sizeof *iv);
    if (d && iv) {
      for (size_t i = 0; i < nr; i++) {
        d[i].structSize = sizeof d[i];
        d[i].pInstanceValues = iv + i * ni;
      }
      CUpti_SassMetricsFlushData_Params fp;
      memset(&fp, 0, sizeof fp);
      fp.structSize = CUpti_SassMetricsFlushData_Params_STRUCT_SIZE;
      fp.ctx = E->ctx;
      fp.numOfPatchedInstructionRecords = nr;
      fp.numOfInstances = ni;
      fp.pMetricsData = d;
      if (CK_CALL(E, cuptiSassMetricsFlushData, &fp)) {
        for (size_t i = 0; i < nr; i++) {
          if (!cucap_vec_reserve(&S->sass, &S->capsass, S->nsass + 1, sizeof *S->sass, 16))
            break;
          ck_sassrec *r = &S->sass[S->nsass++];
          memset(r, 0, sizeof *r);
          r->crc32 = d[i].cubinCrc;
          r->function = ck_intern(&E->str, d[i].functionName ? d[i].functionName : "?");
          r->pc = d[i].pcOffset;
          for (size_t j = 0; j < ni; j++)
            for (int m = 0; m < 3; m++)
              if (d[i].pInstanceValues[j].metricId == S->sass_id[m])
                r->v[m] += d[i].pInstanceValues[j].value;
        }
      }
    }
    free(d);
    free(iv);
  }
  CUpti_SassMetricsDisable_Params dp;
  memset(&dp, 0, sizeof dp);
  dp.structSize = CUpti_SassMetricsDisable_Params_STRUCT_SIZE;
  dp.ctx = E->ctx;
  if (CK_CALL(E, cuptiSassMetricsDisable, &dp) && dp.numOfDroppedRecords)
    CUCAP_WARN("profile: SASS metrics: %zu record(s) dropped",
               dp.numOfDroppedRecords);
  S->sass_state = 3;
  E->tm.sass_collect_s += cucap_clock_now_s() - t0;
}

void ck_sass_op_after(ck_engine *E, const cucap_replay_op *op) {
  ck_sass_state *S = ck_sm(E);
  if (!S)
    return;
  if (S->sass_state == 2 && !op->capturing && op->rec_index == E->win_hi)
    ck_sass_collect(E);
}

static uint64_t ck_sass_key(uint32_t crc, const char *fn, uint64_t pc) {
  uint64_t h = (uint64_t)crc * 0x9e3779b97f4a7c15ull;
  h ^= ((uint64_t)(uintptr_t)fn >> 3) * 0xc2b2ae3d27d4eb4full;
  return h ^ (pc * 0x165667b19e3779f9ull);
}

void ck_sass_pass_end(ck_engine *E) {
  ck_sass_state *S = ck_sm(E);
  if (!S)
    return;
  if (S->sass_state == 2)
    ck_sass_collect(E);
  if (S->sass_state >= 1) {
    CUpti_SassMetricsUnsetConfig_Params up;
    memset(&up, 0, sizeof up);
    up.structSize = CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE;
    up.deviceIndex = (uint32_t)E->device;
    CK_CALL(E, cuptiSassMetricsUnsetConfig, &up);
  }
  /* join to the sampled instructions (PC-sampling CRCs are 64-bit, SASS
   * metrics report the low 32 bits) */
  cucap_map by32;
  memset(&by32, 0, sizeof by32);
  for (size_t k = 0; k < E->pc.nsite; k++) {
    const cucap_cupti_pc_site *s = &E->pc.site[k];
    uint64_t h = ck_sass_key((uint32_t)s->cubin_crc, s->function, s->pc_offset);
    while (cucap_map_get(&by32, h, NULL))
      h++;
    cucap_map_put(&by32, h, k + 1);
  }
  size_t joined = 0;
  for (size_t i = 0; i < S->nsass; i++) {
    const ck_sassrec *r = &S->sass[i];
    uint64_t v = 0;
    for (uint64_t h = ck_sass_key(r->crc32, r->function, r->pc);
         cucap_map_get(&by32, h, &v); h++) {
      cucap_cupti_pc_site *s = &E->pc.site[v - 1];
      if ((uint32_t)s->cubin_crc != r->crc32 || s->function != r->function ||
          s->pc_offset != r->pc)
        continue;
      /* a record may carry one metric or all: sum what comes */
      uint64_t *dst[3] = {&s->inst_executed, &s->thread_inst_executed,
                          &s->mem_sectors};
      for (int m = 0; m < 3; m++) {
        if (S->sass_id[m] == UINT64_MAX)
          continue;
        if (*dst[m] == UINT64_MAX)
          *dst[m] = 0;
        *dst[m] += r->v[m];
      }
      joined++;
    }
  }
  cucap_map_free(&by32);
  if (E->dead && !S->nsass)
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_FAILED, "%s", E->dead_why);
  else if (S->sass_state == 4)
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_FAILED, "%s", S->sass_why);
  else if (!E->tl.nkern)
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_COLLECTED,
               "no kernel ran in the profiled window: nothing to measure");
  else if (!S->nsass && ck_ctx_kernels(E) == 0)
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_UNAVAILABLE,
               "none of the %zu kernel execution(s) of the window ran in "
               "the profiled context (CUPTI binds SASS metrics to one "
               "context: the one where most of them ran)",
               E->tl.nkern);
  else if (!S->nsass)
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_FAILED,
               "no SASS metrics records for the %zu kernel execution(s) of "
               "the window", E->tl.nkern);
  else
    ck_section(E, CUCAP_CUPTI_SASS, CUCAP_CUPTI_COLLECTED,
               "%zu instruction records, %zu joined to sampled instructions",
               S->nsass, joined);
  S->sass_state = 0;
}
