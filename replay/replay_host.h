/* replay_host.h - recorded page-locked host allocations re-created at their
 * recorded addresses during replay. Internal: only
 * replay/replay_*.c include it.
 *
 * A kernel may read or write mapped pinned host memory through the pointer
 * the program got (zero-copy; cuMemHostAlloc(DEVICEMAP), cuMemHostRegister,
 * and under UVA cuMemAllocHost). Replayed launches pass the recorded pointer
 * unchanged, so the same host address must be mapped and registered with the
 * driver here too. Replayed HtoD/DtoH copies do not use these ranges: they
 * keep using the payloads stored in the capture. */
#ifndef CUCAP_REPLAY_HOST_H
#define CUCAP_REPLAY_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "replay_internal.h"

typedef struct rp_host_pin {   /* one recorded pinned-host allocation */
  uint64_t host;               /* recorded host pointer */
  uint64_t dev;                /* recorded device-side address (UVA: = host) */
  uint64_t size;
  uint64_t map_addr, map_size; /* page-aligned mmap'ed range; 0 = not ours */
  int registered;              /* 1: cuMemHostRegister'ed by us */
  uint64_t gs, ge;             /* group's first entry: page-aligned range */
  size_t gend;                 /* group's first entry: index past the group */
} rp_host_pin;

typedef struct rp_host_pins {
  rp_host_pin *v;
  size_t n, cap;
  int grouped;                 /* v sorted and grouped (no adds after) */
  size_t placed, failed;       /* after rp_host_pins_place: groups */
  size_t device_backed;        /* groups inside a reserved device range */
} rp_host_pins;

/* Notes one recorded allocation (kind Host, HostAlloc or HostRegister;
 * other kinds are ignored and return 1). host = host_address (or address
 * when absent), dev = address. Returns 0 on out of memory. */
int rp_host_pins_add(rp_host_pins *p, int kind, uint64_t host, uint64_t dev,
                     uint64_t size);

/* After the scan (no more adds): gives the memory plan the page-aligned
 * ranges of the noted allocations (rp_mem_add_pin), so that the parts that
 * fall inside a device super-range are backed there. 0 on out of memory. */
int rp_host_pins_plan(rp_host_pins *p, rp_mem *m);

/* Before libcuda is loaded: maps (read/write, MAP_FIXED_NOREPLACE) each
 * range that is not within 32 MiB of a planned device super-range, so that
 * neither the driver's libraries nor its mappings take it; registered later
 * by rp_host_pins_place. Best effort; returns the ranges mapped. */
size_t rp_host_pins_premap(rp_host_pins *p, rp_mem *m);

/* With the driver loaded, device memory placed and a context current: for
 * each noted allocation (ranges that overlap - re-allocations at a reused
 * address - are merged): a range that m backs with device memory counts as
 * device_backed; otherwise mmap an anonymous read/write range at exactly the
 * recorded host address (unless premapped), cuMemHostRegister it (DEVICEMAP
 * | PORTABLE) and check that cuMemHostGetDevicePointer gives the recorded
 * device-side address. Best effort: a failure warns once (per run, naming
 * what this process has mapped there) and leaves that allocation unplaced.
 * Sets p->placed / p->failed / p->device_backed and returns p->placed.
 * m may be NULL. */
size_t rp_host_pins_place(rp_host_pins *p, const rp_driver *d, const rp_mem *m);

/* Zero-fills what rp_host_pins_place mapped (between replay passes, with no
 * GPU work in flight: each pass starts as the first found them). */
void rp_host_pins_zero(rp_host_pins *p);

/* Unregisters and unmaps what rp_host_pins_place made, frees p's arrays
 * and zeroes it. d may be NULL (or have no lib) when the driver was never
 * loaded: then only the mappings go. Accepts a zeroed p. */
void rp_host_pins_release(rp_host_pins *p, const rp_driver *d);

#endif
