/* cucap_replay_observer.h - watching a replay: the one interface through
 * which verify, profile and the exporters follow the replayer.
 *
 * The replayer executes; observers watch (gfxreconstruct's decoder ->
 * consumers). An observer is a table of optional callbacks plus a user
 * pointer, given to cucap_replay_run in cucap_replay_options.observers. The
 * replayer calls them, in the order the observers were given, at these
 * points of a run:
 *
 *   attach      after libcuda is loaded, before cuInit (CUPTI must be
 *               loaded and subscribed here to see context creation)
 *   begin       the primary context exists and current, recorded memory is
 *               placed, nothing of the capture executed yet
 *   pass_begin  start of a pass: every record of the capture (or of the
 *               replayed range) is executed once per pass; every pass starts
 *               from the same state: recorded device ranges zero-filled (in
 *               the first pass too; relocated allocations when made),
 *               re-created pinned host ranges zero-filled, and for a pass
 *               after the first the live objects of the previous pass
 *               destroyed and the BeforeLaunch snapshot restored; memory is
 *               then re-initialised by re-executing the capture's uploads
 *   op_before / op_after
 *               around every executed record; for a kernel launch exactly
 *               around the driver's launch call, with the live function and
 *               stream filled in
 *   pass_end    all work of the pass finished (the context was
 *               synchronised); return non-zero to ask for another pass
 *   end         the run is over (also after an error), before any object
 *               is destroyed; the report is final except for what
 *               observers add to it here
 *
 * Rules for observers: they run on the replayer's thread; they may call the
 * driver (entry points through cucap_replay_session_proc), but must leave
 * the current context as they found it and must not synchronise or enqueue
 * work on a stream that is being captured (op->capturing). They must not
 * free or keep pointers they are given beyond the callback, unless said
 * otherwise. Failing: cucap_replay_session_fail stops the replay with an
 * error (its status is the run's). What an observer finds (a verification
 * difference, a measurement) is its own: it keeps it in its own report,
 * and the replay goes on.
 *
 * Passes: the number of passes is the largest of --loop and what observers
 * ask for through pass_end (at most CUCAP_REPLAY_MAX_PASSES). --verify is
 * itself an observer (verify/), which its callers put first; it may ask for
 * passes, one of them a diagnostic pass that synchronises after every op
 * that writes device memory.
 * An observer that only needs the beginning of the capture (a profiler working
 * on a launch range) may end a pass early with cucap_replay_session_end_pass. */
#ifndef CUCAP_REPLAY_OBSERVER_H
#define CUCAP_REPLAY_OBSERVER_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_hash.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUCAP_REPLAY_MAX_PASSES 1024
#define CUCAP_REPLAY_NO_LAUNCH UINT64_MAX

typedef struct cucap_reader cucap_reader;
typedef struct cucap_replay_report cucap_replay_report;

/* The running replay, as seen by an observer. Owned by the replayer; valid
 * from attach to the end of end. */
typedef struct cucap_replay_session cucap_replay_session;

/* One executed record. Everything it points to is owned by the replayer
 * and valid only during the callback. */
typedef struct cucap_replay_op {
  const void *record;     /* the verified Record (const cucap_fb_record *,
                             schema/generated/cucap_schema.h accessors) */
  uint64_t rec_index;     /* 0-based position of the record in the file */
  uint64_t seq;           /* recorded sequence number of the call */
  unsigned pass;          /* 0-based pass */
  int body_type;          /* CUCAP_FB_BODY_* of the record */
  int capturing;          /* a stream of the replay is in stream capture:
                             work is being recorded into a graph, not run
                             (also set for an operation of a capture the
                             replay does not redo because it rebuilds the
                             graph from the recorded topology: op_before and
                             op_after then come together, nothing executed) */
  /* kernel launches (body Launch), else launch_index is
   * CUCAP_REPLAY_NO_LAUNCH and the rest is zero/NULL */
  uint64_t launch_index;  /* recorded 0-based launch number */
  const char *kernel;     /* full mangled kernel name (never truncated) */
  uint64_t function;      /* live CUfunction */
  uint64_t stream;        /* live CUstream (0: the NULL stream) */
  uint64_t context;       /* live CUcontext current at the launch */
  uint32_t callstack;     /* recorded host callstack id (0: none) */
  /* copies to the host (DtoH, AtoH): where the replayed bytes are after the
   * copy completed (op_after only; NULL when not such a copy). The buffer is
   * the replayer's scratch buffer, which cucap_replay_session_read reuses:
   * read host_data first. A copy captured into a graph (op->capturing) has
   * not run yet: host_data is the buffer it will fill each time its graph
   * runs, valid until the end of the pass. */
  const void *host_data;
  uint64_t host_size;
  /* op_after only: 0 executed, 1 skipped (not replayable), -1 failed */
  int status;
} cucap_replay_op;

typedef struct cucap_replay_observer {
  const char *name;       /* for messages, e.g. "verify", "profile" */
  void *user;
  cucap_status (*attach)(void *user, cucap_replay_session *s);
  cucap_status (*begin)(void *user, cucap_replay_session *s);
  void (*pass_begin)(void *user, cucap_replay_session *s, unsigned pass);
  void (*op_before)(void *user, cucap_replay_session *s, const cucap_replay_op *op);
  void (*op_after)(void *user, cucap_replay_session *s, const cucap_replay_op *op);
  int (*pass_end)(void *user, cucap_replay_session *s, unsigned pass);
  void (*end)(void *user, cucap_replay_session *s, cucap_replay_report *rep);
  /* 1: the observer reads op->host_data of copies to the host (compares
   * the bytes), so every such copy must run: while an observer with this
   * set is given, cucap_replay_session_skip_host_reads is ignored. */
  int reads_host_data;
} cucap_replay_observer;

/* ---- what an observer may ask the session ---------------------------- */

/* A driver entry point of the libcuda the replay uses (cuGetProcAddress_v2
 * with the given CUDA version, e.g. 12000; legacy default-stream variant).
 * NULL if the driver has none. Valid while that libcuda is loaded: until
 * cucap_replay_run returns. */
void *cucap_replay_session_proc(cucap_replay_session *s, const char *name,
                                int cuda_version);
/* The dlopen handle of that libcuda (for CUPTI and friends, which must use
 * the same driver). Owned by the replayer (never dlclose it); valid until
 * cucap_replay_run returns. The primary context below is the replayer's
 * too, valid from begin until end. */
void *cucap_replay_session_driver(cucap_replay_session *s);
int cucap_replay_session_device(cucap_replay_session *s);        /* CUdevice */
void *cucap_replay_session_context(cucap_replay_session *s);     /* primary CUcontext;
                                                                    NULL before begin */
unsigned cucap_replay_session_pass(cucap_replay_session *s);
/* The capture being replayed (blobs, positions). Owned by the replayer;
 * an observer may read blobs but must not iterate it (the replayer's
 * position would move). */
cucap_reader *cucap_replay_session_reader(cucap_replay_session *s);
/* The replay report, owned by the replayer: observers may add their
 * counts to it. */
cucap_replay_report *cucap_replay_session_report(cucap_replay_session *s);
/* Recorded device address -> live one (identity at fixed addresses). */
uint64_t cucap_replay_session_translate(cucap_replay_session *s, uint64_t addr);
/* Live CUstream for a recorded stream handle (0 = NULL stream). */
uint64_t cucap_replay_session_stream(cucap_replay_session *s, uint64_t recorded);
/* The recorded result of a copy to the host: the bytes the program got.
 * They are in the copy's Memcpy record, or (asynchronous copies of a
 * recorder that never synchronises, format 1.2) in a CopyResult snapshot
 * read after the call; this finds the latter by the copy's seq. Returns 1
 * and the blob's hash and size if there is one, else 0. */
int cucap_replay_session_copy_result(cucap_replay_session *s, uint64_t copy_seq,
                                     cucap_hash128 *blob, uint64_t *size);
/* Results of copies captured into a graph that the recorder read for the
 * graph launch with seq launch_seq (format 1.3 Snapshot.launch_seq; they
 * may be written after later launches of the graph): the k-th (0-based)
 * one's captured copy seq, blob hash and size. Returns 0 past the last. */
int cucap_replay_session_graph_copy_result(cucap_replay_session *s, uint64_t launch_seq,
                                           size_t k, uint64_t *copy_seq,
                                           cucap_hash128 *blob, uint64_t *size);
/* The host address the k-th result of graph launch launch_seq was read
 * from (the copy's recorded destination, its offsets applied). Returns 0
 * past the last. */
int cucap_replay_session_graph_copy_dst(cucap_replay_session *s, uint64_t launch_seq,
                                        size_t k, uint64_t *host_addr);
/* The buffer into which the graph the replay rebuilt for recorded exec
 * rec_exec (a graph the program built with the graph API, a clone, a graph
 * changed after its capture) copies what the program's copy node wrote to
 * host memory at recorded address host_addr (size bytes, packed). Written
 * whenever that exec runs; owned by the replayer, valid until the end of
 * the pass. NULL when the exec was not rebuilt (a re-captured graph: its
 * copies come with their captured Memcpy records, op->host_data) or has
 * no such node. */
const void *cucap_replay_session_graph_host_buffer(cucap_replay_session *s, uint64_t rec_exec,
                                                   uint64_t host_addr, uint64_t size);
/* Recorded bytes may hold handles of objects (texture/surface objects) that
 * the replay re-created under other numbers. In `want`, the recorded bytes
 * of `size` bytes at recorded device address `addr`, this rewrites every
 * aligned 8-byte word equal to such a recorded handle whose live number is
 * at the same place in `got` (the replayed bytes), so that comparing them
 * flags no renumbered handle. Nothing to do (and fast) when no handle moved. */
void cucap_replay_session_fix_expected(cucap_replay_session *s, const void *got,
                                       void *want, uint64_t size, uint64_t addr);
/* Copies `size` bytes of device memory at a recorded address into dst,
 * synchronously (the NULL stream of the current context). Must not be
 * called while op->capturing. */
cucap_status cucap_replay_session_read(cucap_replay_session *s, uint64_t addr,
                                       void *dst, uint64_t size);
/* Ends the current pass after the op being executed: the records after it
 * are not executed in this pass; the context is synchronized and pass_end
 * called as usual, and a next pass starts from the initial state as
 * always. Call it from op_before/op_after. While a stream is being
 * captured the pass goes on until the capture has ended. Every observer
 * sees the shortened pass: with several observers, only one that owns the
 * run should call it. */
void cucap_replay_session_end_pass(cucap_replay_session *s);
/* Ends the replay early without an error: no record after the current one
 * is executed, the pass ends as if the capture ended there (the context is
 * synchronised; pass_end and end are called) and no further pass runs.
 * For observers that only need a prefix of the capture (trim --replay). */
void cucap_replay_session_stop(cucap_replay_session *s);
/* Contexts the program creates (cuCtxCreate) live for the whole run
 * instead of one pass: the first pass creates each, later passes make the
 * same live context current again at its recorded cuCtxCreate, and a
 * recorded cuCtxDestroy only waits for its work and stops its use; its
 * objects still go between passes, and the contexts are destroyed when the
 * run ends. For observers whose state is bound to a context across passes
 * (CUPTI's range profiler, PC sampling). Call from attach or begin. Each
 * pass then also waits for these contexts' work before pass_end. */
void cucap_replay_session_keep_contexts(cucap_replay_session *s);
/* A multi-pass run keeps module images loaded across passes (their
 * variables restored at each pass start); this makes the next pass load
 * every module anew, as a single-pass replay does, for an observer that
 * must see modules load after it set something up (CUPTI's PC sampling and
 * SASS metrics). Call from pass_end. */
void cucap_replay_session_fresh_modules(cucap_replay_session *s);
/* From now on the replay unloads no module or library before the end of
 * the run (the program's unload records, a pass's teardown and the fresh
 * loads above leave them loaded; a destroyed context still takes its
 * modules along), so that no two loads of the run share a handle: CUPTI's
 * SASS metrics gave no record for kernels of modules loaded again after an
 * unload (docs/design.md). Costs the device memory of every pass's modules
 * that would have been unloaded. Call from begin or pass_end. */
void cucap_replay_session_hold_unloads(cucap_replay_session *s);
/* The current pass leaves out copies to the host (their bytes land in a
 * scratch buffer of the replayer's and no device memory depends on them):
 * no DMA, no wait for the stream. For passes whose results are read on the
 * device only (CUPTI counter passes). Ignored while an observer that
 * reads host data watches the run (cucap_replay_observer.reads_host_data:
 * --verify compares those bytes) and inside a stream capture (the copy is
 * part of the graph). Call from pass_begin; every pass starts without it. */
void cucap_replay_session_skip_host_reads(cucap_replay_session *s);
/* The current pass may replay large copies to the device (those whose
 * payloads the replayer keeps across passes) from a device-resident copy
 * of the payload: a device-to-device copy on the same stream (waited for
 * when the recorded copy was synchronous, as any). Same bytes at the same
 * place, in the same order; another copy engine and timing.
 * For passes whose results are kernel measurements only (CUPTI counter,
 * PC-sampling and SASS passes), never for a timeline. Device memory for
 * the copies: CUCAP_REPLAY_PAYLOAD_DEVICE_MB, by default a quarter of the
 * device's free memory at the first such copy (at most 8 GiB); past it,
 * copies come from host memory as in other passes. Call from pass_begin;
 * every pass starts without it. */
void cucap_replay_session_device_uploads(cucap_replay_session *s);
/* Stops the replay with an error: st becomes the run's status (what it
 * means to the user, e.g. the exit code of `cucap replay`, is the caller's
 * business; CUCAP_ERR_ENV / CUCAP_ERR_UNSUPPORTED say that this machine
 * or this request cannot do it, CUCAP_ERR_CUDA that the driver failed). */
void cucap_replay_session_fail(cucap_replay_session *s, cucap_status st,
                               const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
