/* cucap_export.h - a capture as a timeline (`cucap export`): Perfetto's
 * protobuf trace format (written by hand, no protobuf library) or the Chrome
 * JSON trace event format.
 *
 * What the timeline shows:
 *   * one track per host thread with its driver calls as slices (args: seq,
 *     result, kernel / bytes), NVTX push/pop ranges of the default domain
 *     nested among them, ranges of other domains on a child track per
 *     thread and domain, NVTX marks as instants;
 *   * one track per stream with the GPU work submitted to it (kernels,
 *     copies, memsets, graph launches); kernel times from a GPU timings
 *     table (cucap_profile_table.h) when given, else from KernelTiming
 *     records in the capture, else approximated from the host (each op
 *     starts after the call that submitted it and after the previous op of
 *     its stream, and lasts as long as that call: arg timing=host);
 *     GPU timestamps are aligned to the host clock by the smallest shift
 *     that starts no kernel before its launch call;
 *   * flows from each launch call to its kernel;
 *   * counter tracks "device memory in use" (bytes, from Alloc/Free) and
 *     "copy bandwidth" (GB/s of each copy while it runs);
 *   * NVTX start/end ranges and cuProfilerStart..Stop on async tracks.
 * Times are nanoseconds since the capture started.
 *
 * Perfetto fields written (checked against google/perfetto's
 * protos/perfetto/trace/ files; tests/export/perfetto_subset.proto holds
 * exactly this subset): Trace.packet = 1; TracePacket: timestamp = 8,
 * trusted_packet_sequence_id = 10, track_event = 11, sequence_flags = 13,
 * track_descriptor = 60; TrackDescriptor: uuid = 1, name = 2, process = 3,
 * thread = 4, parent_uuid = 5, counter = 8; ProcessDescriptor: pid = 1,
 * process_name = 6; ThreadDescriptor: pid = 1, tid = 2, thread_name = 5;
 * CounterDescriptor: unit = 3; TrackEvent: debug_annotations = 4, type = 9,
 * track_uuid = 11, categories = 22, name = 23, counter_value = 30,
 * double_counter_value = 44, flow_ids = 47, terminating_flow_ids = 48;
 * DebugAnnotation: uint_value = 3, int_value = 4, string_value = 6,
 * name = 10.
 *
 * Ownership: nothing returned needs freeing; the caller owns `out`. */
#ifndef CUCAP_EXPORT_H
#define CUCAP_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cucap_profile_table.h"
#include "cucap_reader.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cucap_export_format {
  CUCAP_EXPORT_PERFETTO = 1,
  CUCAP_EXPORT_CHROME_JSON = 2
} cucap_export_format;

typedef struct cucap_export_options {
  cucap_export_format format;
  const cucap_profile_table *profile;      /* GPU timings, or NULL */
  /* names: driver calls by CUPTI cbid (NULL or a NULL result: "cbid N"),
   * kernels (NULL: as recorded; else the readable form into buf, returning
   * buf or mangled) */
  const char *(*call_name)(unsigned cbid);
  const char *(*kernel_name)(const char *mangled, char *buf, size_t size);
} cucap_export_options;

typedef struct cucap_export_report {
  uint64_t records, threads, streams, calls, gpu_ops, launches;
  uint64_t kernels_timed;        /* GPU times from the profile / KernelTiming */
  uint64_t nvtx_ranges, counters;
  const char *gpu_times;         /* "profile", "capture" or "host" (static) */
  char error[256];
} cucap_export_report;

/* Reads every record of r and writes the timeline to out. Errors: a damaged
 * capture (CUCAP_ERR_CORRUPT & co., what was read is not written),
 * CUCAP_ERR_IO when out cannot be written, CUCAP_ERR_NOMEM. */
cucap_status cucap_export(cucap_reader *r, FILE *out, const cucap_export_options *o,
                          cucap_export_report *rep);

#ifdef __cplusplus
}
#endif
#endif
