/* drv_first_call: how long the first CUDA call takes (issue 10: the
 * recorder's start-up - loading libcucap, opening the capture, the first
 * module-map scan - must stay within 50 ms of a native run). Prints
 * "first_call_ms: X", the time from main() to the return of cuInit +
 * cuDeviceGetCount + cuDeviceGet (the recorder opens its capture at the
 * process's first CUDA call); the benchmark also compares whole-process
 * wall times, which include the loader and constructors. Not part of the
 * mock's expected-output apps (it prints a time). */
#include <cuda.h>
#include <stdio.h>
#include <time.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(void) {
  double t0 = now_ms();
  int n = 0;
  CUdevice d;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 1 ||
      cuDeviceGet(&d, 0) != CUDA_SUCCESS) {
    fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  double t1 = now_ms();
  printf("devices: %d\n", n);
  printf("first_call_ms: %.3f\n", t1 - t0);
  return 0;
}
