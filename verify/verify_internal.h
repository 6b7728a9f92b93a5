/* verify_internal.h - the --verify observer, shared by verify_observer.c
 * (callbacks, comparisons, passes) and verify_judge.c (verdict, messages,
 * the diagnostic pass that names writers). Internal to verify/.
 *
 * Verification watches the replay through cucap_replay_observer.h only: DtoH
 * copies (op->host_data), Snapshot records (every reason but BeforeLaunch,
 * read back at their point in the record stream) and, for --verify=launch,
 * LaunchHash records. Each recorded copy / region / hash is a "check", keyed
 * by its record position and region number, the same in every pass.
 *
 * Nondeterminism: every pass is compared with the recording AND with the
 * first pass that compared the check. A byte that differs between passes is
 * nondeterministic (the program itself gives other bytes from run to run);
 * a byte that differs from the recording but agreed in every pass is a
 * mismatch. Nondeterminism is marked per aligned 4-byte word, extended to
 * the high half of an aligned 8-byte word whose low half varies (a value
 * that varies from run to run varies in its low bytes every time and in its
 * high bytes only sometimes: vo_nd_word). State is kept only for checks that
 * differed once: a check that always matched needs none. */
#ifndef CUCAP_VERIFY_INTERNAL_H
#define CUCAP_VERIFY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "cucap_hash.h"
#include "cucap_map.h"
#include "cucap_replay.h"
#include "cucap_replay_observer.h"
#include "cucap_schema.h"
#include "cucap_verify.h"

enum { VO_COPY = 1, VO_SNAP = 2, VO_HASH = 3 };

#define VO_NEAR 3            /* heuristic writers kept per check */
#define VO_WRITERS 3         /* diagnostic writers kept per check */
#define VO_NO_NAME UINT32_MAX

typedef struct vo_check {
  uint64_t rec_index;        /* record of the copy / snapshot / LaunchHash */
  uint32_t region;           /* region within it (0 for copies) */
  uint8_t kind;              /* VO_* */
  char what[160];            /* for messages: "DtoH copy (record 5, seq 4)" */
  uint64_t addr;             /* recorded device address of byte 0; 0: none (arrays) */
  uint64_t size;
  /* 2D/3D copies: packed offset -> device address (see vo_dev_addr) */
  int geom;
  uint64_t g_width, g_rows, g_pitch, g_slice;
  unsigned align;            /* device address % 8: word boundaries */
  cucap_hash128 blob;        /* expected bytes (copies, snapshot regions) */
  /* byte checks: the first compared pass's bytes where they differ from the
   * recording (NULL: they equal it), nondeterministic-byte bitmask */
  uint8_t *ref;
  uint8_t *nd;
  uint64_t nd_count;
  uint64_t undecided;        /* != recording, same in every pass, not nd */
  int unkept;                /* over the memory budget: compared once */
  int uk_nd;                 /* ... after passes that matched: nondeterministic */
  uint64_t uk_off, uk_count; /* its first difference and count */
  uint8_t uk_got, uk_rec;
  int dead;                  /* abandoned (region unreadable this pass) */
  /* hash checks (VO_HASH) */
  cucap_hash128 want_hash, ref_hash;
  int ref_set, hash_nd;
  uint64_t launch_index, launch_seq;
  /* who wrote it: last launches on its stream when the state was made, and
   * the writers seen by the diagnostic pass (name ids, most recent first) */
  uint32_t near[VO_NEAR];
  unsigned nnear;
  uint32_t writers[VO_WRITERS];
  unsigned nwriters;
  /* the recorded bytes may hold what the program's host code wrote, which
   * no replay reproduces: why ("" if not); differences that agree in every
   * pass are then reported as host-written, not as mismatches */
  char hostw[256];
  /* relocated pointers (verify_reloc.c): bitmask of the accepted words'
   * bytes (NULL: none) and their number */
  uint8_t *rl;
  uint64_t rl_words;
} vo_check;

typedef struct vo_range {   /* a recorded device allocation */
  uint64_t addr, size;
} vo_range;

typedef struct vo_rl_cand {  /* a word that may be a relocated pointer */
  size_t check;              /* index in v->chk */
  uint64_t off;              /* byte offset of the word in the check */
  int64_t delta;             /* replayed - recorded */
  int ok;                    /* accepted (vo_rl_choose) */
} vo_rl_cand;

typedef struct vo_rl_result {
  int64_t offset[4];         /* accepted placement offsets */
  uint64_t words[4];         /* words of each */
  unsigned noffsets;
  uint64_t total_words;
} vo_rl_result;

typedef struct vo_name {
  char *s;                   /* full (mangled) name, owned */
  int kernel;                /* 1: a kernel or graph launch, 0: a copy/memset */
} vo_name;

typedef struct vo_ring {     /* last launches on one recorded stream */
  uint32_t id[VO_NEAR];      /* most recent first */
  unsigned n;
} vo_ring;

typedef struct vo_region {
  uint64_t addr, size;
  cucap_hash128 h;           /* blob (snapshots) or content hash (LaunchHash) */
  int has;
} vo_region;

typedef struct vo_pending {  /* a record naming a launch that has not run yet */
  uint64_t launch_index, seq, rec_index;
  int kind;                  /* VO_SNAP or VO_HASH */
  int reason;
  vo_region *regions;
  size_t n;
} vo_pending;

typedef struct vo_watch {    /* diagnostic pass: a watched device range */
  size_t check;              /* index in v->chk */
  uint64_t until;            /* watched while op rec_index < until */
  uint64_t addr, size;
  cucap_hash128 last;
  int have_last;
} vo_watch;

typedef struct vo_capcopy {  /* a DtoH copy captured into a graph (this pass) */
  const void *buf;           /* filled when its graph runs (replayer-owned) */
  uint64_t size, src, stream;
  int checked;               /* its CopyResult came (else: unverifiable) */
} vo_capcopy;

typedef struct vo_gnode {    /* a copy node to host memory of a recorded exec */
  uint64_t exec, addr, size;   /* recorded exec, host destination, packed size */
  uint64_t src;                /* recorded device source of a 1D copy (0: other) */
  int host_after;              /* a host node of the graph may run after it */
  int seen;                    /* a result came with the current launch */
} vo_gnode;

struct cucap_verify {
  cucap_replay_observer ob;
  cucap_verify_options opts;    /* the caller's, copied at create */
  const cucap_verify_options *o; /* &opts */
  cucap_replay_session *s;
  cucap_reader *r;
  cucap_verify_report report;   /* the verdict (cucap_verify_get_report) */
  cucap_verify_report *rep;     /* &report */
  CUresult (*ctx_sync)(void); /* cuCtxSynchronize */
  unsigned pass;             /* current pass */
  unsigned passes;           /* passes completed */
  int in_diag, diag_done;
  unsigned diag_at;          /* pass that is the diagnostic one (UINT32_MAX: none) */
  /* checks: key -> 0 (compared, always matched) or index + 1 into chk */
  cucap_map seen;
  vo_check *chk;
  size_t nchk, capchk;
  uint64_t kept;             /* bytes held by ref/nd buffers */
  /* kernel names (interned by content) */
  vo_name *names;
  size_t nnames, capnames;
  cucap_map name_ix;            /* fnv64 probe key -> id + 1 */
  /* per pass */
  cucap_map launch_name;        /* launch index -> name id + 1 */
  cucap_map stream_ring;        /* recorded stream -> ring index + 1 */
  vo_ring *rings;
  size_t nrings, caprings;
  vo_ring any;               /* last launches on any stream */
  vo_pending *pend;
  size_t npend, cappend;
  /* recorded device allocations (pass 0), for the address hint */
  vo_range *allocs;
  size_t nallocs, capallocs;
  /* buffers */
  uint8_t *want, *got;
  size_t want_cap, got_cap;
  /* captured copies of this pass: seq -> index + 1 into cap */
  cucap_map captured;
  vo_capcopy *cap;
  size_t ncap, capcap;
  /* diagnostic pass */
  vo_watch *watch;
  size_t nwatch;
  /* graph execs of this pass: their copy nodes to host memory */
  vo_gnode *gn;
  size_t ngn, capgn;
  unsigned hw_listed;        /* host-written lines in the report */
  /* perturbed passes (verify_perturb.c) */
  struct vo_perturb *pt;
  int perturbing;            /* the current pass is perturbed */
  /* managed memory and host code in flight with GPU work (verify_managed.c) */
  struct vo_managed *mg;
};
typedef struct cucap_verify vo_verifier;

typedef struct vo_info {     /* what a new check state is made of */
  uint64_t rec_index;
  uint32_t region;
  uint8_t kind;
  const char *what;
  uint64_t addr, size;
  const cucap_fb_copy_geometry *g;
  cucap_hash128 blob;
  const vo_ring *near;
  const char *hostw;         /* vo_check.hostw (NULL: none) */
} vo_info;

/* verify_observer.c */
cucap_hash128 vo_h(const cucap_fb_hash128 *h);              /* {0,0} for NULL */
uint64_t vo_key(uint64_t rec_index, uint32_t region);      /* a check's key */
vo_ring *vo_ring_of(vo_verifier *v, uint64_t stream, int make);
/* Compares got with the check in's recorded bytes (v->want), across passes. */
void vo_compare(vo_verifier *v, const vo_info *in, const uint8_t *got);
uint64_t vo_dev_addr(const vo_check *c, uint64_t off);
int vo_nd_get(const vo_check *c, uint64_t i);
/* Marks the 4-byte words where got and base differ, from byte `from` (their
 * first difference) on, nondeterministic in c->nd (verify_bytes.c). */
void vo_nd_mark(vo_check *c, const uint8_t *got, const uint8_t *base, uint64_t size,
                uint64_t from);
uint64_t vo_first_diff(const uint8_t *a, const uint8_t *b, uint64_t n);
/* verify_order.c: 1 when check c (first compared pass `got`, recording
 * `want`) differs only in the order of its 4-byte values over the words that
 * vary or differ (*words: how many); 0 otherwise or when not applicable. */
int vo_order_only(const vo_check *c, const uint8_t *got, const uint8_t *want,
                  uint64_t *words);
uint64_t vo_count_diff(const uint8_t *a, const uint8_t *b, uint64_t n, const uint8_t *rl,
                       const uint8_t *nd, uint64_t *in_rl, uint64_t *first);
int vo_grow(uint8_t **buf, size_t *cap, uint64_t need);
uint32_t vo_intern(vo_verifier *v, const char *name, int kernel);
int vo_reads_blob(vo_verifier *v, cucap_hash128 h, uint64_t size); /* into v->want */

/* verify_capture.c: DtoH copies captured into graphs - at the capture
 * (op->capturing), at their CopyResult snapshot, after a graph launch. */
void vo_captured_copy(vo_verifier *v, const cucap_replay_op *op, const cucap_fb_memcpy *m);
void vo_copy_result(vo_verifier *v, const cucap_replay_op *op, const cucap_fb_snapshot *sn);
void vo_graph_launch(vo_verifier *v, cucap_replay_session *s, const cucap_replay_op *op);
void vo_graph_topology(vo_verifier *v, const cucap_fb_graph *g); /* Instantiate, ExecUpdate */

/* verify_perturb.c: passes after the first that verify asks for run with
 * the GPU's scheduling disturbed (a spin kernel on SMs before launches). */
void vo_perturb_pass_begin(vo_verifier *v, unsigned pass); /* after in_diag is set */
void vo_perturb_op(vo_verifier *v, const cucap_replay_op *op); /* op_before */
void vo_perturb_destroy(vo_verifier *v);                      /* end (driver still loaded) */

/* verify_managed.c: SyncPoint regions of managed memory the program's
 * host code may have written while GPU work on it was in flight (their
 * differences are host-written, vo_check.hostw). */
void vo_managed_op(vo_verifier *v, const cucap_replay_op *op); /* every record, op_after */
void vo_managed_pass_end(vo_verifier *v);
void vo_managed_free(vo_verifier *v);

/* verify_reloc.c: relocated pointers (driver-placed memory at another
 * address in the replay; the rule is described there). */
int vo_ptr_like(uint64_t x, const vo_range *allocs, size_t nallocs);
/* The candidate words of one check (got: replayed, want: recorded, nd:
 * nondeterministic bitmask or NULL, align: device address % 8) into out
 * (at most max); returns how many. */
size_t vo_rl_candidates(const uint8_t *got, const uint8_t *want, const uint8_t *nd,
                        uint64_t size, unsigned align, const vo_range *allocs, size_t nallocs,
                        size_t check, vo_rl_cand *out, size_t max);
/* Accepts the offsets shared by enough candidates (sorts c; sets c[i].ok). */
void vo_rl_choose(vo_rl_cand *c, size_t n, vo_rl_result *res);
void vo_reloc_apply(vo_verifier *v); /* at the verdict, before the checks are judged */

/* verify_judge.c */
void vo_judge(vo_verifier *v);              /* verdict into the report */
int vo_diag_plan(vo_verifier *v);           /* 1: something to watch */
void vo_diag_begin(vo_verifier *v);         /* baseline hashes */
void vo_diag_op(vo_verifier *v, const cucap_replay_op *op);
void vo_short_name(const char *name, char *out, size_t cap);

#endif
