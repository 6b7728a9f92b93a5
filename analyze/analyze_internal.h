/* analyze_internal.h - the program model the analysis builds from a capture
 * (analyze_scan.c) and the finding builders work on (analyze_find.c,
 * analyze_launch.c); printed by analyze_report.c. Internal to analyze/. */
#ifndef CUCAP_ANALYZE_INTERNAL_H
#define CUCAP_ANALYZE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cucap_analyze.h"
#include "cucap_map.h"
#include "cucap_stacktab.h"
#include "cucap_strs.h"

/* one event of interest (a driver call with a body the analysis uses) */
typedef enum az_kind {
  AZ_LAUNCH = 1,   /* kernel launch (not host functions) */
  AZ_GRAPH,        /* graph launch */
  AZ_COPY,
  AZ_MEMSET,
  AZ_ALLOC,
  AZ_FREE,
  AZ_SYNC_CTX,
  AZ_SYNC_STREAM,
  AZ_SYNC_EVENT,
  AZ_QUERY,        /* stream / event query */
  AZ_EVENT_RECORD,
  AZ_HOSTFN
} az_kind;

enum {
  AZF_ASYNC = 1,      /* async API */
  AZF_LEGACY = 2,     /* on the legacy default stream */
  AZF_PINNED = 4,     /* copy: host side in a page-locked range */
  AZF_PAGEABLE = 8,   /* copy: host side pageable */
  AZF_RECSYNC = 16,   /* async DtoH the recorder synchronised (time not the app's) */
  AZF_CLEAN = 32,     /* sync copy: no unsynchronised work queued at its start */
  AZF_DRAINED = 64,   /* sync: the GPU is known empty when it returns */
  AZF_HOSTMEM = 128,  /* alloc/free: page-locked host memory */
  AZF_CAPTURED = 256, /* issued into a stream capture (not executed then) */
  AZF_PTDS = 512      /* on a per-thread default stream */
};

/* copy direction classes */
enum { AZ_DIR_NONE = 0, AZ_DIR_H2D = 1, AZ_DIR_D2H = 2, AZ_DIR_D2D = 3 };

typedef struct az_ev {
  uint64_t t0, t1;    /* t_enter, t_exit */
  uint64_t seq;
  uint64_t stream;    /* recorded stream (sync event: the event's stream) */
  uint64_t bytes;     /* copy/memset/alloc/free size */
  uint64_t addr;      /* copy: host address; alloc/free: address */
  uint64_t gpu_ns;    /* work: measured GPU duration (0 unknown) */
  uint32_t stack, tid;
  uint32_t name;      /* launch: interned kernel name; graph: interned "graph" */
  uint32_t launch;    /* launch: index into az.launches */
  uint8_t kind;       /* az_kind */
  uint8_t sub;        /* copy: AZ_DIR_*; alloc/free: AllocKind */
  uint16_t flags;     /* AZF_* */
} az_ev;

typedef struct az_launch {
  uint64_t launch_index, seq, rec_index;
  uint32_t ev;        /* index into az.ev */
  uint32_t name;
  uint32_t grid[3], block[3];
  uint32_t smem;
} az_launch;

struct cucap_analysis {
  cucap_analyze_options o;
  cucap_analysis_summary sum;
  az_ev *ev;
  size_t nev, capev;
  az_launch *launches;
  size_t nlaunch, caplaunch;
  uint32_t *work_by_t0; /* indices of work events sorted by t0 */
  size_t nwork;
  cucap_map seq_ev;        /* seq -> ev index + 1 (work events) */
  cucap_strs names;
  cucap_stacktab *stacks;
  uint64_t window_t0, window_t1;
  size_t window_ev0;    /* first event inside the window */
  cucap_finding *findings;
  size_t nfind, capfind;
  /* streams seen: recorded handle -> flags (bit 0 CU_STREAM_NON_BLOCKING) */
  cucap_map stream_flags;
};

/* analyze_scan.c */
cucap_status az_scan(cucap_analysis *a, cucap_reader *r);
const char *az_name(const cucap_analysis *a, uint32_t id);
void az_window(cucap_analysis *a);

/* findings: helpers (analyze_find.c) */
cucap_finding *az_finding_new(cucap_analysis *a, const char *id);
void az_num(cucap_finding *f, const char *name, const char *unit, double v);
void az_finish(cucap_analysis *a, cucap_finding *f, uint64_t recoverable_ns,
               int estimated, cucap_severity count_severity);
/* callsite accumulation: a small table per finding */
typedef struct az_sites {
  cucap_finding_site *s;
  size_t n, cap;
  cucap_map idx; /* stack id -> index + 1 */
} az_sites;
void az_site_add(az_sites *t, uint32_t stack, uint64_t count, uint64_t time_ns);
void az_sites_take(cucap_analysis *a, cucap_finding *f, az_sites *t);
void az_sites_free(az_sites *t);
double az_window_ns(const cucap_analysis *a);
int az_in_window(const cucap_analysis *a, const az_ev *e);

void az_find_memory(cucap_analysis *a);   /* churn, small, pageable */
void az_find_sync(cucap_analysis *a);     /* sync calls */
void az_find_launch(cucap_analysis *a);   /* analyze_launch.c: overhead, bound, streams */

#endif
