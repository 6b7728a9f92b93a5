/* mock_nvperf.c - a stand-in libnvperf_target.so for CI: the clock entry
 * points of --clock-control (profile/cupti/cupti_clock.c), next to the stand-in
 * libcupti so that the engine finds it where it finds the real one. Test
 * code only; built from the real nvperf_target.h (exact struct layouts).
 *
 * Two devices: nvperf index 0 at PCI 0000:3b:00 (another GPU) and index 1 at
 * 0000:18:00, the mock libcuda's device: an engine that took the CUDA
 * ordinal for nvperf's index would lock the wrong GPU.
 *
 * MOCK_NVPERF_LOG=FILE: every clock change is appended as "lock INDEX" or
 * "default INDEX", and at exit one line "kernels timeline locked=A
 * unlocked=B measured locked=C unlocked=D": the stand-in libcupti reports
 * each kernel it sees (mock_nvperf_count_kernel), as part of the timeline
 * (activity records on) or of a measurement pass.
 * Knobs: MOCK_NVPERF_REFUSE=1 (locking fails with
 * NVPA_STATUS_INSUFFICIENT_PRIVILEGE), MOCK_NVPERF_SIGNAL=N (raise signal N
 * right after locking, as a user's Ctrl-C during a profile would). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvperf_target.h>

#define EXPORT __attribute__((visibility("default")))

static int locked;
static unsigned long counts[2][2]; /* [measured][locked] */

/* MOCK_NVPERF_LOG for appending; NULL without it */
static FILE *log_open(void) {
  const char *path = getenv("MOCK_NVPERF_LOG");
  return path && *path ? fopen(path, "a") : NULL;
}

static void note(const char *fmt, size_t index) {
  FILE *f = log_open();
  if (!f)
    return;
  fprintf(f, fmt, index);
  fputc('\n', f);
  fclose(f);
}

EXPORT void mock_nvperf_count_kernel(int timeline) { counts[!timeline][locked]++; }

__attribute__((destructor)) static void mock_nvperf_fini(void) {
  FILE *f = log_open();
  if (!f)
    return;
  fprintf(f, "kernels timeline locked=%lu unlocked=%lu measured locked=%lu unlocked=%lu\n",
          counts[0][1], counts[0][0], counts[1][1], counts[1][0]);
  fclose(f);
}

EXPORT NVPA_Status NVPW_InitializeTarget(NVPW_InitializeTarget_Params *p) {
  return p && p->structSize ? NVPA_STATUS_SUCCESS : NVPA_STATUS_INVALID_ARGUMENT;
}

EXPORT NVPA_Status NVPW_CUDA_LoadDriver(void *p) {
  return p ? NVPA_STATUS_SUCCESS : NVPA_STATUS_INVALID_ARGUMENT;
}

EXPORT NVPA_Status NVPW_GetDeviceCount(NVPW_GetDeviceCount_Params *p) {
  if (!p || !p->structSize)
    return NVPA_STATUS_INVALID_ARGUMENT;
  p->numDevices = 2;
  return NVPA_STATUS_SUCCESS;
}

EXPORT NVPA_Status NVPW_Device_GetPciBusIds(NVPW_Device_GetPciBusIds_Params *p) {
  if (!p || !p->structSize || !p->pBusIds || p->numDevices < 2)
    return NVPA_STATUS_INVALID_ARGUMENT;
  memset(p->pBusIds, 0, p->numDevices * sizeof *p->pBusIds);
  p->pBusIds[0].bus = 0x3b;
  p->pBusIds[1].bus = 0x18;
  return NVPA_STATUS_SUCCESS;
}

EXPORT NVPA_Status NVPW_Device_SetClockSetting(NVPW_Device_SetClockSetting_Params *p) {
  if (!p || !p->structSize || p->deviceIndex > 1)
    return NVPA_STATUS_INVALID_ARGUMENT;
  if (p->clockSetting == NVPW_DEVICE_CLOCK_SETTING_DEFAULT) {
    locked = 0;
    note("default %zu", p->deviceIndex);
    return NVPA_STATUS_SUCCESS;
  }
  if (p->clockSetting != NVPW_DEVICE_CLOCK_SETTING_LOCK_TO_RATED_TDP)
    return NVPA_STATUS_INVALID_ARGUMENT;
  const char *r = getenv("MOCK_NVPERF_REFUSE");
  if (r && *r == '1')
    return NVPA_STATUS_INSUFFICIENT_PRIVILEGE;
  locked = 1;
  note("lock %zu", p->deviceIndex);
  const char *sig = getenv("MOCK_NVPERF_SIGNAL");
  if (sig && atoi(sig) > 0)
    raise(atoi(sig));
  return NVPA_STATUS_SUCCESS;
}
