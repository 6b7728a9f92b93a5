/* kernel_times.c - a CUPTI injection library (CUDA_INJECTION64_PATH) that
 * writes the GPU duration of every kernel a process runs to
 * $CUCAP_KERNEL_TIMES (one "name<TAB>start_ns<TAB>duration_ns" line each).
 *
 * It is the neutral stopwatch of bench/gpu_bench.sh: the same library times
 * the native application and `cucap replay`, so per-kernel durations compare
 * like with like. Not part of cucap itself. */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *g_out;

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size,
                                   size_t *max_records) {
  *size = 16u << 20;
  *buffer = aligned_alloc(8, *size);
  *max_records = 0;
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream_id,
                                   uint8_t *buffer, size_t size,
                                   size_t valid) {
  (void)ctx;
  (void)stream_id;
  (void)size;
  CUpti_Activity *rec = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
      if (g_out)
        fprintf(g_out, "%s\t%llu\t%llu\n", k->name ? k->name : "?",
                (unsigned long long)k->start,
                (unsigned long long)(k->end - k->start));
    }
  }
  free(buffer);
}

static void flush_at_exit(void) {
  cuptiActivityFlushAll(1);
  if (g_out)
    fclose(g_out);
  g_out = NULL;
}

int InitializeInjection(void);
int InitializeInjection(void) {
  const char *path = getenv("CUCAP_KERNEL_TIMES");
  if (!path || !*path)
    return 1;
  g_out = fopen(path, "w");
  if (!g_out)
    return 1;
  if (cuptiActivityRegisterCallbacks(buf_requested, buf_completed) !=
      CUPTI_SUCCESS)
    return 1;
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  atexit(flush_at_exit);
  return 1;
}
