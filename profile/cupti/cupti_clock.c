/* cupti_clock.c - --clock-control: the GPU's clocks during the measurement
 * passes, as Nsight Compute's option of the same name.
 *
 * base (the default, like ncu's): from the first pass after the timeline to
 * the end of the run the GPU runs locked to its rated base clocks
 * (NVPW_Device_SetClockSetting, LOCK_TO_RATED_TDP, in libnvperf_target next
 * to libcupti; the same profiling permission as the counters); the
 * timeline pass runs at the clocks the program would get. none: the clocks
 * are left alone (they boost and vary from kernel to kernel).
 *
 * Why base is the default: at boost clocks the SM clock varies from kernel
 * to kernel, and microsecond kernels are not reproducible to 5 % by either
 * tool; locked to base, two sets of ncu runs agree with each other far
 * more often. bench/profile_vs_ncu.sh with CLOCKS=base and CLOCKS=none
 * shows the difference (ncu's own halves agreement, INFO lines); the
 * figures are in docs/bench-log.md ("Clock control").
 *
 * The lock outlives the process: a process that locks and exits without
 * restoring leaves the SM locked for the next one. So every way
 * out restores the default: the engine's end (ck_clock_restore from
 * ck_end), cucap_cupti_destroy, exit (atexit), SIGINT/SIGTERM/SIGHUP/SIGQUIT
 * while locked (the previous action is put back and the signal raised
 * again), and the CLI's crash handler
 * (cucap_cupti_clocks_emergency_restore). Only SIGKILL leaves the clocks
 * locked; `cucap cupti probe --reset-clocks` restores them.
 * NVPW_Device_GetClockStatus is not used: it can report the state from
 * before the last change; the SM clock a profile ran at is read
 * from its own counters (sm__cycles_elapsed.avg.per_second) instead.
 *
 * nvperf numbers devices its own way: the device is found by its PCI
 * domain/bus/device (NVPW_Device_GetPciBusIds against the CUDA attributes).
 *
 * Owns: the process-wide lock record (g_clk: at most one lock per process,
 * one engine per process) and the signal actions it replaced while locked. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvperf_target.h>

#include "cucap_log.h"
#include "cupti_internal.h"

/* libnvperf_target entry points; LoadDriver is not in the toolkit's headers
 * (its parameters are the usual size + pPriv) and is optional */
typedef struct ck_nvpw {
  void *lib;
  NVPA_Status (*InitializeTarget)(NVPW_InitializeTarget_Params *);
  NVPA_Status (*LoadDriver)(void *);
  NVPA_Status (*GetDeviceCount)(NVPW_GetDeviceCount_Params *);
  NVPA_Status (*GetPciBusIds)(NVPW_Device_GetPciBusIds_Params *);
  NVPA_Status (*SetClockSetting)(NVPW_Device_SetClockSetting_Params *);
} ck_nvpw;

static const int ck_clk_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define CK_CLK_NSIGS (sizeof ck_clk_sigs / sizeof ck_clk_sigs[0])

static struct {
  NVPA_Status (*set)(NVPW_Device_SetClockSetting_Params *);
  size_t index;
  volatile sig_atomic_t locked; /* a lock may be in force */
  struct sigaction old[CK_CLK_NSIGS];
  int handlers;                 /* old[] holds the replaced actions */
  int atexit_set;
} g_clk;

static NVPA_Status ck_nvpw_set(NVPA_Status (*set)(NVPW_Device_SetClockSetting_Params *),
                               size_t index, NVPW_Device_ClockSetting how) {
  NVPW_Device_SetClockSetting_Params p;
  memset(&p, 0, sizeof p);
  p.structSize = NVPW_Device_SetClockSetting_Params_STRUCT_SIZE;
  p.deviceIndex = index;
  p.clockSetting = how;
  return set(&p);
}

/* The default back if a lock is in force (once); SUCCESS when none is. */
static NVPA_Status ck_clk_unlock(void) {
  if (!g_clk.locked || !g_clk.set)
    return NVPA_STATUS_SUCCESS;
  g_clk.locked = 0;
  return ck_nvpw_set(g_clk.set, g_clk.index, NVPW_DEVICE_CLOCK_SETTING_DEFAULT);
}

void cucap_cupti_clocks_emergency_restore(void) { ck_clk_unlock(); }

static void ck_clk_handlers_remove(void) {
  if (!g_clk.handlers)
    return;
  for (size_t i = 0; i < CK_CLK_NSIGS; i++)
    sigaction(ck_clk_sigs[i], &g_clk.old[i], NULL);
  g_clk.handlers = 0;
}

static void ck_clk_on_signal(int sig) {
  cucap_cupti_clocks_emergency_restore();
  ck_clk_handlers_remove(); /* the program's own action, or the default */
  raise(sig);
}

static void ck_clk_handlers_install(void) {
  if (g_clk.handlers)
    return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = ck_clk_on_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < CK_CLK_NSIGS; i++)
    sigaction(ck_clk_sigs[i], &sa, &g_clk.old[i]);
  g_clk.handlers = 1;
}

/* The library CUPTI's Profiler API uses (the preload made it global), else
 * the loader's. 0 with why filled when an entry point is missing. */
static int ck_nvpw_open(const char *dir, ck_nvpw *n, char *why, size_t why_size) {
  memset(n, 0, sizeof *n);
  char p[1024];
  if (dir && dir[0]) {
    snprintf(p, sizeof p, "%s/libnvperf_target.so", dir);
    n->lib = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
  }
  if (!n->lib)
    n->lib = dlopen("libnvperf_target.so", RTLD_NOW | RTLD_GLOBAL);
  if (!n->lib) {
    snprintf(why, why_size, "libnvperf_target.so not found next to libcupti "
             "(%s) or on the loader's path", dir && dir[0] ? dir : "?");
    return 0;
  }
  n->InitializeTarget = (__typeof__(n->InitializeTarget))dlsym(n->lib, "NVPW_InitializeTarget");
  n->LoadDriver = (__typeof__(n->LoadDriver))dlsym(n->lib, "NVPW_CUDA_LoadDriver");
  n->GetDeviceCount = (__typeof__(n->GetDeviceCount))dlsym(n->lib, "NVPW_GetDeviceCount");
  n->GetPciBusIds = (__typeof__(n->GetPciBusIds))dlsym(n->lib, "NVPW_Device_GetPciBusIds");
  n->SetClockSetting =
      (__typeof__(n->SetClockSetting))dlsym(n->lib, "NVPW_Device_SetClockSetting");
  if (!n->InitializeTarget || !n->GetPciBusIds || !n->SetClockSetting) {
    snprintf(why, why_size, "libnvperf_target.so lacks NVPW_Device_SetClockSetting "
             "or its companions (an older CUPTI)");
    return 0;
  }
  return 1;
}

/* nvperf's index of the CUDA device at PCI dom:bus:dev (ndev_cuda: how many
 * CUDA devices there are, for the single-device fallback). */
static int ck_nvpw_index(const ck_nvpw *n, int dom, int bus, int dev, int ndev_cuda,
                         size_t *index, char *why, size_t why_size) {
  NVPW_InitializeTarget_Params ip;
  memset(&ip, 0, sizeof ip);
  ip.structSize = NVPW_InitializeTarget_Params_STRUCT_SIZE;
  NVPA_Status st = n->InitializeTarget(&ip);
  if (st != NVPA_STATUS_SUCCESS) {
    snprintf(why, why_size, "NVPW_InitializeTarget failed (NVPA status %d)", (int)st);
    return 0;
  }
  if (n->LoadDriver) {
    struct { size_t structSize; void *pPriv; } lp = {sizeof lp, NULL};
    n->LoadDriver(&lp); /* CUPTI has usually done it */
  }
  size_t count = 0;
  if (n->GetDeviceCount) {
    NVPW_GetDeviceCount_Params dc;
    memset(&dc, 0, sizeof dc);
    dc.structSize = NVPW_GetDeviceCount_Params_STRUCT_SIZE;
    if (n->GetDeviceCount(&dc) == NVPA_STATUS_SUCCESS)
      count = dc.numDevices;
  }
  /* The count can come back 0 while the bus ids are filled: the table is
   * read at its largest and unused entries stay zero. */
  enum { MAXDEV = 64 };
  NVPW_PciBusId ids[MAXDEV];
  memset(ids, 0, sizeof ids);
  NVPW_Device_GetPciBusIds_Params pb;
  memset(&pb, 0, sizeof pb);
  pb.structSize = NVPW_Device_GetPciBusIds_Params_STRUCT_SIZE;
  pb.pBusIds = ids;
  pb.numDevices = count && count < MAXDEV ? count : MAXDEV;
  st = n->GetPciBusIds(&pb);
  if (st == NVPA_STATUS_SUCCESS)
    for (size_t i = 0; i < pb.numDevices; i++)
      if (ids[i].domain == (uint32_t)dom && ids[i].bus == (uint16_t)bus &&
          ids[i].device == (uint16_t)dev) {
        *index = i;
        return 1;
      }
  if (ndev_cuda == 1 && count <= 1) { /* one GPU: nothing to tell apart */
    *index = 0;
    return 1;
  }
  snprintf(why, why_size, "no nvperf device at PCI %04x:%02x:%02x (NVPA status %d, "
           "%zu device(s))", dom, bus, dev, (int)st, count);
  return 0;
}

/* A CUDA device's PCI domain/bus/device (0 where the driver does not say). */
static void ck_pci_of(CUresult (*attr)(int *, CUdevice_attribute, CUdevice),
                      CUdevice d, int *dom, int *bus, int *slot) {
  *dom = *bus = *slot = 0;
  if (!attr)
    return;
  attr(dom, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d);
  attr(bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d);
  attr(slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d);
}

/* The replay device's PCI address and the CUDA device count. */
static void ck_clk_pci(ck_engine *E, int *dom, int *bus, int *dev, int *ndev) {
  *ndev = 0;
  ck_pci_of(E->cu.DeviceGetAttribute, (CUdevice)E->device, dom, bus, dev);
  CUresult (*count)(int *) =
      E->s ? (CUresult(*)(int *))cucap_replay_session_proc(E->s, "cuDeviceGetCount", 2000)
           : NULL;
  if (count && count(ndev) != CUDA_SUCCESS)
    *ndev = 0;
}

void ck_clock_lock(ck_engine *E) {
  if (E->o.clock_control != CUCAP_CUPTI_CLOCK_BASE || E->clk.tried)
    return;
  E->clk.tried = 1;
  ck_api_nvperf_wait(&E->api); /* the library CUPTI itself loads */
  ck_nvpw n;
  char why[256] = "";
  int dom, bus, dev, ndev;
  ck_clk_pci(E, &dom, &bus, &dev, &ndev);
  size_t index = 0;
  if (!ck_nvpw_open(E->api.dir, &n, why, sizeof why) ||
      !ck_nvpw_index(&n, dom, bus, dev, ndev, &index, why, sizeof why)) {
    snprintf(E->env.clocks, sizeof E->env.clocks, "not locked: %.170s", why);
    CUCAP_WARN("profile: --clock-control=base: clocks not locked (%s); the "
               "measurements run at the GPU's default clocks", why);
    return;
  }
  /* armed before the call: a signal during it restores too */
  g_clk.set = n.SetClockSetting;
  g_clk.index = index;
  g_clk.locked = 1;
  ck_clk_handlers_install();
  if (!g_clk.atexit_set && atexit(cucap_cupti_clocks_emergency_restore) == 0)
    g_clk.atexit_set = 1;
  NVPA_Status st = ck_nvpw_set(n.SetClockSetting, index,
                               NVPW_DEVICE_CLOCK_SETTING_LOCK_TO_RATED_TDP);
  if (st != NVPA_STATUS_SUCCESS) {
    g_clk.locked = 0;
    ck_clk_handlers_remove();
    snprintf(E->env.clocks, sizeof E->env.clocks, "not locked: "
             "NVPW_Device_SetClockSetting failed (NVPA status %d%s)", (int)st,
             st == NVPA_STATUS_INSUFFICIENT_PRIVILEGE ||
                     st == NVPA_STATUS_PROFILING_NOT_ALLOWED
                 ? ": no profiling permission" : "");
    CUCAP_WARN("profile: --clock-control=base: %s; the measurements run at the "
               "GPU's default clocks", E->env.clocks);
    return;
  }
  E->clk.ok = 1;
  snprintf(E->env.clocks, sizeof E->env.clocks,
           "locked to base for the measurement passes (nvperf device %zu)", index);
  CUCAP_INFO("profile: --clock-control=base: GPU clocks locked to base (rated "
             "TDP) for the passes after the timeline; restored at the end");
}

void ck_clock_restore(void) {
  if (!g_clk.locked)
    return;
  NVPA_Status st = ck_clk_unlock();
  ck_clk_handlers_remove();
  if (st != NVPA_STATUS_SUCCESS)
    CUCAP_WARN("profile: the GPU's clocks could not be restored to their "
               "default (NVPA status %d): run `cucap cupti probe --reset-clocks`",
               (int)st);
  else
    CUCAP_DEBUG("profile: GPU clocks restored to their default");
}

const char *ck_clock_note(const ck_engine *E) {
  if (E->o.clock_control != CUCAP_CUPTI_CLOCK_BASE)
    return "; GPU clocks not controlled (--clock-control=none)";
  if (E->clk.ok)
    return "; GPU clocks locked to base";
  return E->clk.tried ? "; GPU clocks NOT locked (see the log)" : "";
}

cucap_status cucap_cupti_reset_clocks(const char *libcuda, const char *library,
                                      int device, char *msg, size_t msg_size) {
  ck_drv d;
  cucap_status st = ck_drv_load(&d, libcuda, msg, msg_size);
  if (st != CUCAP_OK)
    return st;
  CUdevice dev = 0;
  int dom = 0, bus = 0, slot = 0, ndev = 0;
  CUresult cr = d.Init(0);
  if (cr == CUDA_SUCCESS)
    cr = d.DeviceGet(&dev, device);
  if (cr != CUDA_SUCCESS) {
    snprintf(msg, msg_size, "no CUDA device %d (%s)", device, ck_drv_err(&d, cr));
    return CUCAP_ERR_ENV; /* the driver stays loaded, as in the probe */
  }
  ck_pci_of(d.DeviceGetAttribute, dev, &dom, &bus, &slot);
  if (d.DeviceGetCount && d.DeviceGetCount(&ndev) != CUDA_SUCCESS)
    ndev = 0;
  ck_api api;
  if (!ck_api_load(&api, library, msg, msg_size))
    return CUCAP_ERR_ENV;
  ck_nvpw n;
  size_t index = 0;
  int ok = ck_nvpw_open(api.dir, &n, msg, msg_size) &&
           ck_nvpw_index(&n, dom, bus, slot, ndev, &index, msg, msg_size);
  ck_api_unload(&api);
  if (!ok)
    return CUCAP_ERR_ENV;
  NVPA_Status ns = ck_nvpw_set(n.SetClockSetting, index, NVPW_DEVICE_CLOCK_SETTING_DEFAULT);
  if (ns != NVPA_STATUS_SUCCESS) {
    snprintf(msg, msg_size, "NVPW_Device_SetClockSetting(default) failed on "
             "nvperf device %zu (NVPA status %d)", index, (int)ns);
    return CUCAP_ERR_ENV;
  }
  snprintf(msg, msg_size, "restored to the default on nvperf device %zu "
           "(PCI %04x:%02x:%02x)", index, dom, bus, slot);
  return CUCAP_OK;
}
