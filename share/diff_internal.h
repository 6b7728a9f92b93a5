/* diff_internal.h - what `cucap diff` keeps of each capture (diff_model.c)
 * and compares (diff.c). Internal to share/. Every value here survives a
 * rerun of the same program: no handles, host addresses, tids or times. */
#ifndef CUCAP_DIFF_INTERNAL_H
#define CUCAP_DIFF_INTERNAL_H

#include "cucap_diff.h"
#include "share_internal.h"

typedef struct dm_call {       /* one driver call, as compared */
  uint32_t cbid;
  int32_t result;
  uint64_t key;                /* hash of what the call did */
  uint64_t seq;
  uint32_t what;               /* string id of a short description */
} dm_call;

typedef struct dm_thread {
  uint32_t tid;
  sh_vec calls;                /* dm_call */
  uint64_t copies;             /* DtoH copies so far (k-th index) */
} dm_thread;

/* What an 8-byte word of an argument block points into, when it is a
 * recorded region: compared as (class, ordinal, delta), not by value. */
enum { DM_DEVICE = 1, DM_PINNED = 2, DM_GLOBAL = 3 };

typedef struct dm_ptr {        /* an argument word pointing into a recorded region */
  uint32_t offset;             /* in the argument block (a multiple of 8) */
  uint32_t cls;                /* DM_DEVICE / DM_PINNED / DM_GLOBAL */
  uint64_t alloc;              /* allocation ordinal (1-based, creation order);
                                  DM_GLOBAL: hash of the global's name */
  uint64_t delta;              /* offset inside it */
} dm_ptr;

typedef struct dm_launch {
  uint64_t launch_index, seq;
  uint32_t name;               /* string id (mangled) */
  uint64_t site;               /* hash of the host callstack (object+offset) */
  uint64_t group;              /* hash(name, site): launches aligned within it */
  uint64_t nth;                /* occurrence within the group */
  uint32_t grid[3], block[3], smem;
  uint8_t *args;               /* owned; pointer words zeroed */
  uint32_t nargs;
  uint64_t layout;             /* index + 1 into layouts (0: unknown) */
  dm_ptr *ptrs;                /* owned; by offset */
  uint32_t nptrs;
  int matched;
  int has_effect;              /* a LaunchHash followed it (record --hash-launches) */
  uint64_t effect;             /* order-free hash of its regions' (size, content) */
} dm_launch;

typedef struct dm_copy {       /* a DtoH copy: the bytes the program saw */
  uint32_t thread;             /* thread ordinal */
  uint64_t nth;                /* k-th copy of that thread */
  uint64_t seq, size;
  cucap_hash128 payload;
  int has_payload;
} dm_copy;

typedef struct dm_region {     /* a snapshot region */
  uint32_t snap;               /* snapshot ordinal within its (reason, launch) */
  int reason;
  uint64_t launch_index;
  uint64_t alloc, delta, size;
  cucap_hash128 data;
} dm_region;

typedef struct dm_model {
  cucap_reader *r;
  const cucap_diff_options *o;
  sh_vec threads;              /* dm_thread */
  cucap_map thread_of;            /* tid + 1 -> ordinal + 1 */
  sh_vec launches;             /* dm_launch */
  sh_vec copies;               /* dm_copy */
  sh_vec regions;              /* dm_region */
  cucap_map group_count;          /* group -> launches so far */
  cucap_map effects;              /* launch index + 1 -> memory after it (LaunchHash) */
  cucap_map names;                /* function handle -> string id */
  cucap_map params;               /* function handle -> index + 1 into layouts */
  sh_vec layouts;              /* dm_layout */
  sh_vec allocs;               /* dm_alloc: live device and pinned host
                                  allocations, module globals; by address */
  uint64_t nalloc;             /* ordinals handed out */
  sh_vec space;                /* dm_space: every ModuleMap's address ranges
                                  (and allocations ever made), by start */
  uint32_t nmaps;
  size_t *slice;               /* [k, k+1): the ranges of map k (0: allocations) */
  cucap_map stacks;               /* stack id -> site hash */
  sh_vec objects;              /* dm_object: latest ModuleMap */
  cucap_map snap_count;           /* (reason, launch) -> snapshots so far */
  cucap_map copy_by_seq;          /* seq of a DtoH copy -> index + 1 into copies
                                  (its bytes may come later in a
                                  Snapshot{CopyResult}) */
  char *strings;
  size_t nstr, capstr;
  uint64_t ncalls;
} dm_model;

typedef struct dm_layout {
  uint32_t n;
  uint32_t *off, *size;        /* owned */
} dm_layout;

typedef struct dm_alloc {
  uint64_t addr, size, ordinal;
  uint32_t cls;                /* DM_DEVICE / DM_PINNED / DM_GLOBAL */
} dm_alloc;

/* Host address classes of argument words (cucap.fb.AddressKind + these). */
enum { DM_HOST_NONE = 255 };

typedef struct dm_space {      /* a range of the recorded address space */
  uint64_t start, end;
  uint64_t maxend;             /* largest end of this and every range before */
  uint64_t name;               /* File/Device: hash of the path's basename */
  uint32_t map;                /* which ModuleMap (later ones win) */
  uint8_t kind;                /* cucap.fb.AddressKind */
} dm_space;

/* The address range holding v (the latest map's), or NULL. Only after
 * dm_build. */
const dm_space *dm_space_at(const dm_model *m, uint64_t v);
/* 1 if some recorded range overlaps [lo, hi). */
int dm_space_overlaps(const dm_model *m, uint64_t lo, uint64_t hi);
/* 1 if the 8-byte word at offset o of an argument block of n bytes lies
 * inside one parameter of lay (any 8-aligned word when lay is NULL). */
int dm_word_in_param(const dm_layout *lay, uint32_t n, uint32_t o);

typedef struct dm_object {
  uint64_t start, end, base;
  uint64_t name;               /* hash of the path's basename */
} dm_object;

uint32_t dm_str(dm_model *m, const char *s);
const char *dm_s(const dm_model *m, uint32_t id);
cucap_status dm_build(dm_model *m, cucap_reader *r, const cucap_diff_options *o);
void dm_free(dm_model *m);

#endif
