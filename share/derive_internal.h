/* derive_internal.h - the planner and writer shared by trim.c and
 * extract.c (cucap_derive.h). Internal to share/.
 *
 * A plan marks every source record as dropped, part of the state prefix or
 * part of the kept range, and lists the device regions to upload between
 * the two. Building it takes passes over the source:
 *   1. trim.c / extract.c locate the selection (cut, range ends);
 *   2. dv_scan_state: which objects are live at the cut (records [0, cut));
 *   3. dv_scan_uses: which functions/modules/streams the range uses, then
 *      dv_mark_state keeps the live records the range needs;
 *   4. dv_write copies the marked records (and their blobs) into a writer.
 */
#ifndef CUCAP_DERIVE_INTERNAL_H
#define CUCAP_DERIVE_INTERNAL_H

#include "cucap_derive.h"
#include "cucap_state_observer.h"
#include "cucap_writer.h"
#include "share_internal.h"

enum { DV_DROP = 0, DV_STATE = 1, DV_RANGE = 2 };

#define DV_NONE UINT64_MAX
#define DV_MAX_DEVICES 16

/* Regions read by a replay are split so that one fits in host memory. */
#define DV_REGION_CHUNK ((uint64_t)64 << 20)

typedef struct dv_alloc {
  uint64_t addr, size, ctx, rec, handle;
  uint8_t kind; /* cucap.fb.AllocKind */
  uint8_t live;
  uint8_t keep; /* extract --minimal: needed */
} dv_alloc;

typedef struct dv_global {
  uint64_t module, addr, size, rec;
  int live;
} dv_global;

typedef struct dv_gwrite {
  uint64_t rec, module;
} dv_gwrite;

typedef struct dv_gfn {
  uint64_t exec, fn;
} dv_gfn;

typedef struct dv_plan {
  cucap_reader *r;
  uint64_t nrecords;
  uint8_t *keep;            /* DV_* per source record */
  uint64_t cut;             /* records [0, cut) are candidates for the state */
  uint64_t snap_rec;        /* the Snapshot record giving the contents, or DV_NONE */
  uint64_t first, last;     /* the range (inclusive), source positions */
  uint64_t cut_time;        /* t_enter of the record at the cut */
  /* liveness at the cut (dv_scan_state) */
  sh_vec allocs;            /* dv_alloc (all ever made; live flag) */
  cucap_map a_plain, a_vmap, a_vres, a_vcreate, a_pool, a_array, a_access;
  cucap_map ctx_create, ctx_primary, mod, fn, fn_mod, stream, event, gexec;
  cucap_map fn_alias;          /* KernelFunction records whose handle is their CUkernel's */
  cucap_map mod_lib;           /* LibraryModule: a library's module -> its library */
  sh_vec globals;           /* dv_global */
  sh_vec global_writes;     /* dv_gwrite: uploads/memsets into live globals */
  sh_vec graph_fns;         /* dv_gfn: functions of instantiated graphs */
  sh_vec always;            /* uint64_t rec: Devices, ModuleMap, Callstack, notes */
  int capturing;            /* stream captures open at the cut */
  /* uses of the range (dv_scan_uses / callers) */
  cucap_map use_fn, use_mod, use_stream, use_ctx;
  int all_streams;          /* trim: keep every live stream/event/exec */
  int minimal;              /* extract --minimal: only allocations marked keep */
  int primary_only;         /* extract: no context records (the replayer runs
                               everything in the primary context) */
  uint64_t unknown_fn;      /* launches of functions neither live nor made in range */
  uint64_t seq_first, seq_last;          /* of the range's call records */
  uint64_t t_end;                        /* latest t_exit of the range */
  uint64_t launches, launch_first, launch_last;
  /* contents at the cut: cucap_state_region, sorted by address */
  sh_vec regions;
  sh_vec region_ctx;        /* uint64_t context per region */
  /* counts for the report */
  uint64_t modules_live, modules_kept;
  /* module images (derive_image.c) */
  unsigned sms[DV_MAX_DEVICES];  /* compute capabilities of the recorded devices */
  size_t nsms;
  int keep_all_archs;       /* images copied whole */
  sh_vec images;            /* dv_image: every image a kept Module names */
  /* host callstacks (dv_mark_stacks) */
  cucap_map stack_rec;         /* Callstack id -> record + 1, before the cut */
  cucap_map stack_map;         /* Callstack record -> the ModuleMap record + 1 current there */
  uint64_t last_map;        /* latest ModuleMap record + 1 before the cut */
} dv_plan;

/* A module image of the source and what the derived capture stores for it. */
typedef struct dv_image {
  cucap_hash128 src, dst;   /* dst == src when copied whole */
  uint64_t src_size, dst_size;
  size_t entries, kept;     /* fatbin entries (0: not a fatbin or not selected) */
  int reduce;               /* for Module Load records (a selection was tried) */
} dv_image;

/* The recorded devices' compute capabilities: from the header (setup) and
 * from Devices records (format 1.1; dv_scan_state adds them). */
void dv_images_setup(dv_plan *p, int keep_all_archs);
void dv_images_add_devices(dv_plan *p, const cucap_fb_devices *d);
/* Fills rep's image counts and arch description. */
void dv_images_report(const dv_plan *p, cucap_derive_report *rep);

/* Stores the image of a Module Load record into w: for a fatbin the entries
 * the recorded devices need (cucap_fatbin_select) as a new blob, otherwise
 * the source blob. Once per image. */
cucap_status dv_image_copy(dv_plan *p, cucap_writer *w, const cucap_fb_module *m);

/* Appends a kept record; a Module record whose image was reduced is
 * appended with the new blob's hash and size. */
cucap_status dv_append(dv_plan *p, cucap_writer *w, const void *buf, size_t size,
                       const cucap_fb_record *rec);

/* Marks (DV_STATE) the Callstack records before the cut that kept records
 * name, and the ModuleMap current at each (the one a reader symbolizes the
 * stack with), or the latest one before the cut. One pass over [0, last]. */
cucap_status dv_mark_stacks(dv_plan *p);

void dv_plan_init(dv_plan *p, cucap_reader *r);
void dv_plan_free(dv_plan *p);

/* Pass over every record: counts them (p->nrecords), allocates keep[]. */
cucap_status dv_count(dv_plan *p);

/* A private copy of the record at position idx (a pass up to it). */
cucap_status dv_read_at(dv_plan *p, uint64_t idx, sh_rec_copy *out);

/* Pass 2 over [0, p->cut). */
cucap_status dv_scan_state(dv_plan *p);

/* Pass 3 over the records marked DV_RANGE: functions, modules, streams and
 * contexts they use (adds to the use maps; callers may add more before). */
cucap_status dv_scan_uses(dv_plan *p);

/* Marks DV_STATE on the live records the range needs. */
void dv_mark_state(dv_plan *p);

/* Regions of a Snapshot: every region with contents whose allocation is
 * live (with only_kept: marked keep), sorted by address; out holds
 * cucap_state_region, ctx_out (may be NULL) the context of each. */
cucap_status dv_regions_from_snapshot(dv_plan *p, const cucap_fb_snapshot *s, sh_vec *out,
                                      sh_vec *ctx_out, int only_kept);
/* Regions of the live device allocations (with only_kept: marked keep),
 * split into DV_REGION_CHUNK pieces, contents to be read by a replay. */
cucap_status dv_regions_from_allocs(dv_plan *p, sh_vec *out, sh_vec *ctx_out,
                                    int only_kept);
/* The live device allocation containing addr, or NULL. */
dv_alloc *dv_alloc_find(dv_plan *p, uint64_t addr);

/* Reads p->r's header and fills a new FileHeader with `origin` data; the
 * writer is created at out_path. state_records counts the prefix. */
typedef struct dv_origin {
  const char *command, *source, *selection;
  int state;
  uint64_t state_records, first_seq, last_seq, launch_first, launch_last, cut;
} dv_origin;
cucap_status dv_writer_open(dv_plan *p, const char *out_path, int level,
                            const dv_origin *org, cucap_writer **w);

/* Runs the replay of opts->source_path with a state observer reading
 * `before` (and `after`) at record `at`. */
cucap_status dv_replay_read(const cucap_derive_options *opts, cucap_writer *w, uint64_t at,
                            cucap_state_region *before, size_t nbefore,
                            cucap_state_region *after, size_t nafter,
                            uint64_t *after_checksum, char *msg, size_t msg_size);

/* Copies every blob a record refers to from p->r into w (once). */
cucap_status dv_copy_blobs(dv_plan *p, cucap_writer *w, const cucap_fb_record *rec);
/* A pass copying the blobs of every kept record (before a replay, so that
 * damaged blobs fail the command as bad input, not the replay). */
cucap_status dv_copy_kept_blobs(dv_plan *p, cucap_writer *w);

/* Pass 4: appends the DV_STATE records, then one upload per region, then
 * the DV_RANGE records. *written counts the records appended. */
cucap_status dv_write(dv_plan *p, cucap_writer *w, uint64_t *written);

/* Appends a Snapshot{Exit} record of regions (expected results). */
cucap_status dv_write_exit_snapshot(cucap_writer *w, const cucap_state_region *g, size_t n,
                                    uint64_t launch_index, uint64_t t);

/* Number of state-prefix records dv_write will append (marked + uploads). */
uint64_t dv_state_count(const dv_plan *p);

/* Sets rep->error and rep->status = as (first error wins) and returns st:
 * st is what failed, `as` what the failure is to the user (see
 * cucap_derive_report.status), one of the classes below or
 * CUCAP_ERR_INVALID_ARG for a selection or option the capture cannot
 * satisfy. */
cucap_status dv_fail(cucap_derive_report *rep, cucap_status st, cucap_status as,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Reading the source failed with st: the machine's fault (out of memory,
 * I/O) as itself, anything else as damaged input (CUCAP_ERR_CORRUPT). */
cucap_status dv_as_damage(cucap_status st);
/* Writing the output failed: out of memory as itself, else CUCAP_ERR_IO. */
cucap_status dv_as_write(cucap_status st);
/* The replay failed with st: what this machine cannot do (ENV,
 * UNSUPPORTED), out of memory and I/O as themselves, anything else as a
 * failed driver call (CUCAP_ERR_CUDA). */
cucap_status dv_as_replay(cucap_status st);

/* The output step of trim and extract: creates the writer at out_path
 * (dv_writer_open), copies the kept records' blobs into it
 * (dv_copy_kept_blobs) and, with o->replay, checks that the replay can run.
 * Errors are reported into rep; *w is set once the writer exists, for the
 * caller to destroy (and remove out_path) on any failure. */
cucap_status dv_output_open(dv_plan *p, const cucap_derive_options *o, const char *out_path,
                            const dv_origin *org, cucap_derive_report *rep, cucap_writer **w);

/* The closing step of trim and extract: closes w and fills rep with what
 * both report (output size, cut, kept records, state prefix, regions,
 * modules, images); the launch fields are the caller's. Errors are reported
 * into rep. */
cucap_status dv_output_close(dv_plan *p, cucap_writer *w, const char *out_path,
                             const dv_origin *org, cucap_derive_report *rep);

/* Reads the next record; CUCAP_END at the end. Errors are reported into rep. */
cucap_status dv_next(dv_plan *p, const cucap_fb_record **rec, const void **buf, size_t *size);

#endif
