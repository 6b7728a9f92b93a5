/* doctor.c - the environment checks of cucap_doctor.h. Everything is looked
 * up at run time (dlopen/dlsym, /proc files, PATH): nothing here links the
 * driver or CUPTI. */
#include <cuda.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_doctor.h"
#include "cucap_json.h"
#include "cucap_knobs.h"
#include "cucap_profiler.h"

extern char **environ;

typedef CUresult (*drv_ver_fn)(int *);
typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*count_fn)(int *);
typedef CUresult (*get_fn)(CUdevice *, int);
typedef CUresult (*name_fn)(char *, int, CUdevice);
typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*mem_fn)(size_t *, CUdevice);
typedef CUresult (*err_fn)(CUresult, const char **);
typedef int (*cupti_ver_fn)(uint32_t *);

const char *cucap_check_state_name(cucap_check_state s) {
  switch (s) {
  case CUCAP_CHECK_OK: return "ok";
  case CUCAP_CHECK_WARN: return "warn";
  case CUCAP_CHECK_FAIL: return "fail";
  default: return "skip";
  }
}

static cucap_doctor_check *add(cucap_doctor_report *r, const char *name, int need) {
  if (r->n >= CUCAP_DOCTOR_MAX_CHECKS)
    return &r->checks[CUCAP_DOCTOR_MAX_CHECKS - 1];
  cucap_doctor_check *c = &r->checks[r->n++];
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  c->need = need;
  return c;
}

static void set(cucap_doctor_check *c, cucap_check_state st, const char *fix, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));
static void set(cucap_doctor_check *c, cucap_check_state st, const char *fix, const char *fmt,
                ...) {
  c->state = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->value, sizeof c->value, fmt, ap);
  va_end(ap);
  snprintf(c->fix, sizeof c->fix, "%s", fix ? fix : "");
}

static int read_file(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t k = fread(buf, 1, n - 1, f);
  buf[k] = 0;
  fclose(f);
  return 1;
}

/* a file in the directories of $PATH, $CUDA_HOME/bin, /usr/local/cuda/bin */
static int find_tool(const char *name, char *out, size_t n) {
  char dirs[4096];
  const char *path = getenv("PATH"), *home = getenv("CUDA_HOME");
  snprintf(dirs, sizeof dirs, "%s:%s%s/usr/local/cuda/bin", path ? path : "",
           home ? home : "", home ? "/bin:" : "");
  char *save = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    if (!*d)
      continue;
    snprintf(out, n, "%s/%s", d, name);
    if (access(out, X_OK) == 0)
      return 1;
  }
  return 0;
}

static const char *cu_err(err_fn en, CUresult r) {
  const char *s = NULL;
  if (en && en(r, &s) == CUDA_SUCCESS && s)
    return s;
  return "CUDA error";
}

static int cmp_knob(const void *a, const void *b) {
  return strcmp(((const cucap_doctor_knob *)a)->name, ((const cucap_doctor_knob *)b)->name);
}

/* every CUCAP_* variable of env, with its registry doc (NULL: unknown) */
static void list_knobs(char *const *env, cucap_doctor_report *r) {
  r->nknobs = 0;
  for (char *const *e = env; e && *e && r->nknobs < CUCAP_DOCTOR_MAX_KNOBS; e++) {
    if (strncmp(*e, "CUCAP_", 6))
      continue;
    const char *eq = strchr(*e, '=');
    size_t nl = eq ? (size_t)(eq - *e) : strlen(*e);
    const cucap_knob_info *in = cucap_knob_find(*e, nl);
    cucap_doctor_knob *k = &r->knobs[r->nknobs++];
    snprintf(k->name, sizeof k->name, "%.*s", (int)nl, *e);
    snprintf(k->value, sizeof k->value, "%s", eq ? eq + 1 : "");
    k->doc = in ? in->doc : NULL;
  }
  qsort(r->knobs, r->nknobs, sizeof r->knobs[0], cmp_knob);
}

/* driver + gpu; returns the driver handle (NULL if it did not load) */
static void *check_driver(const cucap_doctor_options *o, cucap_doctor_report *r) {
  cucap_doctor_check *d = add(r, "driver", CUCAP_NEED_REPLAY);
  cucap_doctor_check *g = add(r, "gpu", CUCAP_NEED_REPLAY);
  const char *lib = o->libcuda ? o->libcuda : "libcuda.so.1";
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    set(d, CUCAP_CHECK_FAIL,
        "no NVIDIA driver here: run on a machine with an NVIDIA GPU and driver (libcuda.so.1 "
        "from the driver package, not the toolkit's stub), or name one with --libcuda PATH",
        "%s does not load: %s", lib, e ? e : "?");
    set(g, CUCAP_CHECK_SKIP, "", "not checked: no driver");
    return NULL;
  }
  drv_ver_fn ver = (drv_ver_fn)dlsym(h, "cuDriverGetVersion");
  err_fn en = (err_fn)dlsym(h, "cuGetErrorName");
  char where[PATH_MAX] = "";
  Dl_info di;
  if (ver && dladdr((void *)ver, &di) && di.dli_fname)
    snprintf(where, sizeof where, "%s", di.dli_fname);
  int v = 0;
  if (!ver || ver(&v) != CUDA_SUCCESS) {
    set(d, CUCAP_CHECK_FAIL, "this libcuda has no working cuDriverGetVersion: reinstall the "
        "NVIDIA driver", "%s: cuDriverGetVersion failed", where[0] ? where : lib);
    set(g, CUCAP_CHECK_SKIP, "", "not checked: no driver");
    return h;
  }
  set(d, v >= 13000 ? CUCAP_CHECK_OK : CUCAP_CHECK_WARN,
      v >= 13000 ? "" : "cucap is built for CUDA 13: a driver older than 580 (CUDA 13.0) may "
                        "refuse captures and CUPTI 13; update the NVIDIA driver",
      "CUDA %d.%d (%d), %s", v / 1000, (v % 1000) / 10, v, where[0] ? where : lib);
  init_fn init = (init_fn)dlsym(h, "cuInit");
  count_fn cnt = (count_fn)dlsym(h, "cuDeviceGetCount");
  get_fn get = (get_fn)dlsym(h, "cuDeviceGet");
  name_fn nm = (name_fn)dlsym(h, "cuDeviceGetName");
  attr_fn at = (attr_fn)dlsym(h, "cuDeviceGetAttribute");
  mem_fn mem = (mem_fn)dlsym(h, "cuDeviceTotalMem_v2");
  CUresult ir = init ? init(0) : CUDA_ERROR_NOT_FOUND;
  int n = 0;
  if (ir != CUDA_SUCCESS || !cnt || cnt(&n) != CUDA_SUCCESS || n == 0) {
    const char *fix =
        ir == CUDA_ERROR_STUB_LIBRARY
            ? "this libcuda is the CUDA toolkit's stub: put the driver's libcuda.so.1 first "
              "(remove .../lib64/stubs from LD_LIBRARY_PATH) or use --libcuda PATH"
        : ir == CUDA_ERROR_NO_DEVICE || n == 0
            ? "no GPU visible: check nvidia-smi, CUDA_VISIBLE_DEVICES and the container's "
              "GPU access (--gpus / NVIDIA_VISIBLE_DEVICES)"
            : "cuInit failed: check nvidia-smi and dmesg for driver errors; the kernel module "
              "and libcuda versions must match";
    set(g, CUCAP_CHECK_FAIL, fix, "cuInit: %s (%d), %d device(s)",
        ir == CUDA_SUCCESS ? "CUDA_SUCCESS" : cu_err(en, ir), (int)ir, n);
    return h;
  }
  char list[400] = "";
  size_t k = (size_t)snprintf(list, sizeof list, "%d device%s", n, n == 1 ? "" : "s");
  for (int i = 0; i < n && k < sizeof list; i++) {
    CUdevice dev = 0;
    char name[128] = "?";
    int ma = 0, mi = 0, sms = 0;
    size_t bytes = 0;
    if (get && get(&dev, i) == CUDA_SUCCESS) {
      if (nm)
        nm(name, sizeof name, dev);
      if (at) {
        at(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        at(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
        at(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
      }
      if (mem)
        mem(&bytes, dev);
    }
    k += (size_t)snprintf(list + k, sizeof list - k, "; [%d] %s, sm_%d%d, %d SMs, %.1f GiB", i,
                          name, ma, mi, sms, (double)bytes / (1024.0 * 1024 * 1024));
  }
  set(g, o->device < n ? CUCAP_CHECK_OK : CUCAP_CHECK_FAIL,
      o->device < n ? "" : "choose an existing device with --device N", "%s", list);
  return h;
}

static void check_cupti(const cucap_doctor_options *o, cucap_doctor_report *r, char *path,
                        size_t path_size, unsigned *api) {
  cucap_doctor_check *c = add(r, "cupti", CUCAP_NEED_PROFILE);
  char tried[1024];
  *api = 0;
  if (cucap_profiler_find_cupti(o->libcupti, path, path_size, tried, sizeof tried) != CUCAP_OK) {
    path[0] = 0;
    set(c, CUCAP_CHECK_FAIL,
        "install CUPTI (the CUDA toolkit's cuda-cupti-13-* package, or pip nvidia-cuda-cupti) "
        "and set CUDA_HOME, or give its path with --cupti PATH / CUCAP_CUPTI",
        "libcupti not found (looked in: %.300s)", tried);
    return;
  }
  void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    set(c, CUCAP_CHECK_FAIL, "reinstall CUPTI matching the driver (CUDA 13)",
        "%s does not load: %.200s", path, e ? e : "?");
    return;
  }
  cupti_ver_fn gv = (cupti_ver_fn)dlsym(h, "cuptiGetVersion");
  uint32_t v = 0;
  if (gv && gv(&v) == 0)
    *api = v;
  char dir[PATH_MAX], shown[PATH_MAX], p1[PATH_MAX + 32], p2[PATH_MAX + 32];
  Dl_info di;
  if (gv && dladdr((void *)gv, &di) && di.dli_fname)
    snprintf(shown, sizeof shown, "%s", di.dli_fname);
  else
    snprintf(shown, sizeof shown, "%s", path);
  snprintf(dir, sizeof dir, "%s", shown);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = 0;
  snprintf(p1, sizeof p1, "%s/libnvperf_host.so", dir);
  snprintf(p2, sizeof p2, "%s/libnvperf_target.so", dir);
  int nvperf = access(p1, R_OK) == 0 && access(p2, R_OK) == 0;
  set(c, nvperf ? CUCAP_CHECK_OK : CUCAP_CHECK_WARN,
      nvperf ? "" : "the range profiler (metrics) needs libnvperf_host.so and "
                    "libnvperf_target.so next to libcupti: install the full CUPTI package",
      "%s, CUPTI API version %u%s", shown, v,
      nvperf ? ", libnvperf_host/target present" : ", libnvperf_host/target missing");
}

static void check_counters(const cucap_doctor_options *o, cucap_doctor_report *r,
                           const cucap_profiler_probe *pr, int have_gpu) {
  cucap_doctor_check *c = add(r, "counters", CUCAP_NEED_PROFILE);
  char params[8192], path[PATH_MAX];
  snprintf(path, sizeof path, "%s/driver/nvidia/params", o->proc_root ? o->proc_root : "/proc");
  static const char fix_admin[] =
      "GPU performance counters are restricted to admin users: run cucap as root, or add "
      "`options nvidia NVreg_RestrictProfilingToAdminUsers=0` to "
      "/etc/modprobe.d/nvidia-profiling.conf and reload the nvidia kernel module (or reboot)";
  if (!read_file(path, params, sizeof params)) {
    set(c, have_gpu ? CUCAP_CHECK_WARN : CUCAP_CHECK_SKIP, "",
        "%s not readable (no NVIDIA kernel module here?)", path);
  } else {
    const char *k = strstr(params, "RmProfilingAdminOnly:");
    int admin_only = k ? atoi(k + strlen("RmProfilingAdminOnly:")) : -1;
    int root = geteuid() == 0 && !o->assume_non_root;
    if (admin_only == 1 && !root)
      set(c, CUCAP_CHECK_FAIL, fix_admin, "RmProfilingAdminOnly: 1 and this user is not root");
    else if (admin_only == 1)
      set(c, CUCAP_CHECK_OK, "", "RmProfilingAdminOnly: 1, running as root");
    else if (admin_only == 0)
      set(c, CUCAP_CHECK_OK, "", "RmProfilingAdminOnly: 0 (counters allowed for every user)");
    else
      set(c, CUCAP_CHECK_WARN, "", "%s has no RmProfilingAdminOnly line", path);
  }
  size_t k = strlen(c->value);
  if (pr->counters == CUCAP_PROBE_OK) {
    snprintf(c->value + k, sizeof c->value - k, "; CUPTI: counters readable");
  } else if (pr->counters == CUCAP_PROBE_DENIED || pr->counters == CUCAP_PROBE_UNAVAILABLE) {
    c->state = CUCAP_CHECK_FAIL;
    snprintf(c->value + k, sizeof c->value - k, "; CUPTI: %s", pr->counters_msg);
    if (pr->counters == CUCAP_PROBE_DENIED)
      snprintf(c->fix, sizeof c->fix, "%s", fix_admin);
    else if (!c->fix[0])
      snprintf(c->fix, sizeof c->fix, "%s", pr->counters_msg);
  } else {
    snprintf(c->value + k, sizeof c->value - k, "; CUPTI: %s", pr->counters_msg);
  }
}

/* Whether this cucap has the CUPTI profiling backend; returns 1 if so. */
static int check_backend(cucap_doctor_report *r) {
  cucap_doctor_check *b = add(r, "backend", CUCAP_NEED_PROFILE);
  int built = strcmp(cucap_profiler_backend_name(), "none") != 0;
  set(b, built ? CUCAP_CHECK_OK : CUCAP_CHECK_FAIL,
      built ? "" : "this cucap was built without the CUPTI profiling backend "
                   "(profile/cupti/profile_cupti*.c): --profile gives the CUDA-event timeline and the "
                   "program findings only; build a cucap that includes it for metrics and PC "
                   "sampling",
      "%s", built ? cucap_profiler_backend_name() : "not built (stub)");
  return built;
}

/* What CUPTI says about counters and PC sampling here; "not checked" when
 * there is no GPU or no libcupti to ask. */
static void probe_profiler(const cucap_doctor_options *o, int have_gpu, const char *cupti,
                           cucap_profiler_probe *pr) {
  memset(pr, 0, sizeof *pr);
  if (have_gpu && cupti[0]) {
    cucap_profiler_probe_options po = {o->libcuda, cupti, o->device};
    cucap_profiler_probe_run(&po, pr);
  } else {
    const char *why = have_gpu ? "no libcupti" : "no GPU";
    snprintf(pr->counters_msg, sizeof pr->counters_msg, "not checked (%s)", why);
    snprintf(pr->pc_sampling_msg, sizeof pr->pc_sampling_msg, "not checked (%s)", why);
  }
}

static void check_pc_sampling(cucap_doctor_report *r, const cucap_profiler_probe *pr,
                              int have_gpu, const char *cupti, int built) {
  cucap_doctor_check *pc = add(r, "pc_sampling", CUCAP_NEED_PROFILE);
  if (pr->pc_sampling == CUCAP_PROBE_OK)
    set(pc, CUCAP_CHECK_OK, "", "works");
  else if (pr->pc_sampling == CUCAP_PROBE_UNKNOWN)
    set(pc, have_gpu && cupti[0] && built ? CUCAP_CHECK_WARN : CUCAP_CHECK_FAIL,
        !built     ? "needs the CUPTI profiling backend (see backend)"
        : !cupti[0] ? "needs libcupti (see cupti)"
        : !have_gpu ? "needs a GPU and its driver (see driver, gpu)"
                    : "",
        "%s", pr->pc_sampling_msg);
  else
    set(pc, CUCAP_CHECK_FAIL, pr->pc_sampling_msg, "%s: %s",
        cucap_probe_state_name(pr->pc_sampling), pr->pc_sampling_msg);
}

static void check_perf_event(const cucap_doctor_options *o, cucap_doctor_report *r) {
  cucap_doctor_check *pe = add(r, "perf_event", CUCAP_NEED_NONE);
  char path[PATH_MAX], val[64];
  snprintf(path, sizeof path, "%s/sys/kernel/perf_event_paranoid",
           o->proc_root ? o->proc_root : "/proc");
  if (read_file(path, val, sizeof val)) {
    int pv = atoi(val);
    set(pe, pv <= 2 ? CUCAP_CHECK_OK : CUCAP_CHECK_WARN,
        pv <= 2 ? "" : "host-side sampling of cucap's own process needs "
                       "kernel.perf_event_paranoid <= 2: `sysctl -w kernel.perf_event_paranoid=2` "
                       "as root (persist it in /etc/sysctl.d/)",
        "perf_event_paranoid=%d (%s)", pv,
        pv <= 1 ? "user and kernel sampling allowed" : pv == 2 ? "user-space sampling allowed"
                                                               : "sampling not allowed");
  } else {
    set(pe, CUCAP_CHECK_WARN, "", "%s not readable", path);
  }
}

static void check_nvdisasm(cucap_doctor_report *r) {
  cucap_doctor_check *nd = add(r, "nvdisasm", CUCAP_NEED_NONE);
  char tool[PATH_MAX + 32];
  if (find_tool("nvdisasm", tool, sizeof tool))
    set(nd, CUCAP_CHECK_OK, "", "%s", tool);
  else
    set(nd, CUCAP_CHECK_WARN,
        "SASS text in PC-sample stacks needs nvdisasm: install the toolkit's cuda-nvdisasm "
        "package and put its bin/ on PATH (or set CUDA_HOME)",
        "not found on PATH, $CUDA_HOME/bin, /usr/local/cuda/bin");
}

static void check_libdw(cucap_doctor_report *r) {
  cucap_doctor_check *dw = add(r, "libdw", CUCAP_NEED_NONE);
  void *h = dlopen("libdw.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h) {
    Dl_info di;
    void *sym = dlsym(h, "dwfl_begin");
    set(dw, CUCAP_CHECK_OK, "", "%s",
        sym && dladdr(sym, &di) && di.dli_fname ? di.dli_fname : "libdw.so.1");
    dlclose(h);
  } else {
    set(dw, CUCAP_CHECK_WARN,
        "source file:line of host frames needs elfutils' libdw: `apt install libdw1` (Debian/"
        "Ubuntu) or `dnf install elfutils-libs`",
        "libdw.so.1 not found");
  }
}

/* What works here, from the checks: replay needs the driver and a GPU,
 * --profile every check it needs besides. */
static void doctor_verdict(cucap_doctor_report *r) {
  r->can_replay = r->checks[0].state != CUCAP_CHECK_FAIL && r->checks[1].state == CUCAP_CHECK_OK;
  r->can_profile = r->can_replay;
  for (unsigned i = 0; i < r->n; i++)
    if ((r->checks[i].need & CUCAP_NEED_PROFILE) && r->checks[i].state == CUCAP_CHECK_FAIL)
      r->can_profile = 0;
  r->exit_code = !r->can_replay ? 3 : !r->can_profile ? 1 : 0;
}

cucap_status cucap_doctor_run(const cucap_doctor_options *o, cucap_doctor_report *r) {
  cucap_doctor_options dflt;
  if (!o) {
    memset(&dflt, 0, sizeof dflt);
    o = &dflt;
  }
  memset(r, 0, sizeof *r);
  void *drv = check_driver(o, r);
  int have_gpu = r->checks[1].state == CUCAP_CHECK_OK;
  (void)drv; /* stays loaded: the driver cannot be unloaded after cuInit */

  int built = check_backend(r);

  char cupti[PATH_MAX];
  unsigned api = 0;
  check_cupti(o, r, cupti, sizeof cupti, &api);

  cucap_profiler_probe pr;
  probe_profiler(o, have_gpu, cupti, &pr);
  check_counters(o, r, &pr, have_gpu);
  check_pc_sampling(r, &pr, have_gpu, cupti, built);
  check_perf_event(o, r);
  check_nvdisasm(r);
  check_libdw(r);

  list_knobs(o->env ? o->env : environ, r);

  doctor_verdict(r);
  return CUCAP_OK;
}

void cucap_doctor_print(const cucap_doctor_report *r, FILE *out) {
  for (unsigned i = 0; i < r->n; i++) {
    const cucap_doctor_check *c = &r->checks[i];
    const char *tag = c->state == CUCAP_CHECK_OK     ? "[ok]  "
                      : c->state == CUCAP_CHECK_WARN ? "[warn]"
                      : c->state == CUCAP_CHECK_FAIL ? "[FAIL]"
                                                     : "[skip]";
    fprintf(out, "%s %-12s %s\n", tag, c->name, c->value);
    if (c->fix[0] && c->state != CUCAP_CHECK_OK)
      fprintf(out, "       %-12s fix: %s\n", "", c->fix);
  }
  for (unsigned i = 0; i < r->nknobs; i++) {
    const cucap_doctor_knob *k = &r->knobs[i];
    fprintf(out, "%s %s=%s\n       %-12s %s\n", k->doc ? "[env] " : "[env?]", k->name,
            k->value, "", k->doc ? k->doc : "unknown: cucap reads no such variable (a typo?)");
  }
  fputs("result: ", out);
  if (!r->can_replay) {
    fputs("replay cannot run here (driver/GPU); --profile neither (exit 3)\n", out);
    return;
  }
  if (r->can_profile) {
    fputs("replay and --profile have everything they need (exit 0)\n", out);
    return;
  }
  fputs("replay works; --profile would lack:", out);
  for (unsigned i = 0; i < r->n; i++)
    if ((r->checks[i].need & CUCAP_NEED_PROFILE) && r->checks[i].state == CUCAP_CHECK_FAIL)
      fprintf(out, " %s", r->checks[i].name);
  fputs(" (exit 1)\n", out);
}

void cucap_doctor_write_json(const cucap_doctor_report *r, cucap_json *w) {
  cucap_json_object_begin(w);
  cucap_json_key(w, "checks");
  cucap_json_array_begin(w);
  for (unsigned i = 0; i < r->n; i++) {
    const cucap_doctor_check *c = &r->checks[i];
    cucap_json_object_begin(w);
    cucap_json_key(w, "name");
    cucap_json_string(w, c->name);
    cucap_json_key(w, "state");
    cucap_json_string(w, cucap_check_state_name(c->state));
    cucap_json_key(w, "needed_for");
    cucap_json_string(w, c->need & CUCAP_NEED_REPLAY    ? "replay"
                         : c->need & CUCAP_NEED_PROFILE ? "profile"
                                                        : "optional");
    cucap_json_key(w, "value");
    cucap_json_string(w, c->value);
    cucap_json_key(w, "fix");
    cucap_json_string(w, c->fix);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
  cucap_json_key(w, "environment");
  cucap_json_array_begin(w);
  for (unsigned i = 0; i < r->nknobs; i++) {
    const cucap_doctor_knob *k = &r->knobs[i];
    cucap_json_object_begin(w);
    cucap_json_key(w, "name");
    cucap_json_string(w, k->name);
    cucap_json_key(w, "value");
    cucap_json_string(w, k->value);
    cucap_json_key(w, "known");
    cucap_json_bool(w, k->doc != NULL);
    cucap_json_key(w, "doc");
    if (k->doc)
      cucap_json_string(w, k->doc);
    else
      cucap_json_null(w);
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
  cucap_json_key(w, "can_replay");
  cucap_json_bool(w, r->can_replay);
  cucap_json_key(w, "can_profile");
  cucap_json_bool(w, r->can_profile);
  cucap_json_key(w, "exit_code");
  cucap_json_int(w, r->exit_code);
  cucap_json_object_end(w);
}
