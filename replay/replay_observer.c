/* replay_observer.c - the replayer's side of cucap_replay_observer.h:
 * dispatching replay events to the observers and answering their queries.
 * The session an observer sees is the replayer's own rp_state; owns its
 * observer dispatch part (rp_obs_state, replay_state.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_replay_observer.h"
#include "replay_graph.h"

static rp_state *rp_of(cucap_replay_session *s) { return (rp_state *)s; }
static cucap_replay_session *rp_session(rp_state *R) {
  return (cucap_replay_session *)R;
}

/* Calls attach (begin: begin) of every observer that has one, in order;
 * the first that fails fails the replay, named, with its status. */
static cucap_status obs_start(rp_state *R, int begin) {
  for (size_t i = 0; i < R->o->nobservers && !R->failed; i++) {
    const cucap_replay_observer *ob = R->o->observers[i];
    cucap_status (*fn)(void *, cucap_replay_session *) = begin ? ob->begin : ob->attach;
    if (!fn)
      continue;
    cucap_status st = fn(ob->user, rp_session(R));
    if (st != CUCAP_OK) {
      rp_set_error(R, st, "%s: %s", ob->name ? ob->name : "observer",
                   cucap_status_str(st));
      return st;
    }
  }
  return R->failed ? R->rep->status : CUCAP_OK;
}

cucap_status rp_obs_attach(rp_state *R) { return obs_start(R, 0); }

cucap_status rp_obs_begin(rp_state *R) { return obs_start(R, 1); }

int rp_obs_reads_host_data(const rp_state *R) {
  for (size_t i = 0; i < R->o->nobservers; i++)
    if (R->o->observers[i]->reads_host_data)
      return 1;
  return 0;
}

void rp_obs_pass_begin(rp_state *R) {
  for (size_t i = 0; i < R->o->nobservers; i++) {
    const cucap_replay_observer *ob = R->o->observers[i];
    if (ob->pass_begin)
      ob->pass_begin(ob->user, rp_session(R), R->run.pass);
  }
}

int rp_obs_pass_end(rp_state *R) {
  int more = 0;
  for (size_t i = 0; i < R->o->nobservers; i++) {
    const cucap_replay_observer *ob = R->o->observers[i];
    if (ob->pass_end && ob->pass_end(ob->user, rp_session(R), R->run.pass))
      more = 1;
  }
  return more;
}

void rp_obs_end(rp_state *R) {
  for (size_t i = 0; i < R->o->nobservers; i++) {
    const cucap_replay_observer *ob = R->o->observers[i];
    if (ob->end)
      ob->end(ob->user, rp_session(R), R->rep);
  }
}

static void obs_before(rp_state *R) {
  for (size_t i = 0; i < R->o->nobservers; i++) {
    const cucap_replay_observer *ob = R->o->observers[i];
    if (ob->op_before)
      ob->op_before(ob->user, rp_session(R), &R->obs.op);
  }
}

static void obs_after(rp_state *R) {
  for (size_t i = 0; i < R->o->nobservers; i++) {
    const cucap_replay_observer *ob = R->o->observers[i];
    if (ob->op_after)
      ob->op_after(ob->user, rp_session(R), &R->obs.op);
  }
}

static void op_fill(rp_state *R, const cucap_fb_record *rec) {
  memset(&R->obs.op, 0, sizeof R->obs.op);
  R->obs.op.record = rec;
  R->obs.op.rec_index = R->rec_index;
  R->obs.op.seq = R->cur_seq;
  R->obs.op.pass = R->run.pass;
  R->obs.op.body_type = cucap_fb_record_body_type(rec);
  R->obs.op.launch_index = CUCAP_REPLAY_NO_LAUNCH;
}

void rp_obs_op_start(rp_state *R, const cucap_fb_record *rec) {
  op_fill(R, rec);
  R->obs.op_announced = 0;
  if (R->obs.op.body_type != CUCAP_FB_BODY_LAUNCH) /* launches: in rp_op_launch */
    rp_obs_op_before(R);
}

void rp_obs_op_before(rp_state *R) {
  R->obs.op.capturing = R->capturing != 0;
  obs_before(R);
  R->obs.op_announced = 1;
}

void rp_obs_op_after(rp_state *R, int status) {
  R->obs.op.status = status;
  R->obs.op.capturing = R->capturing != 0;
  obs_after(R);
}

void rp_obs_captured_dry(rp_state *R, const cucap_fb_record *rec, void *host_data) {
  if (!R->o->nobservers)
    return;
  op_fill(R, rec);
  if (host_data && R->obs.op.body_type == CUCAP_FB_BODY_MEMCPY) {
    R->obs.op.host_data = host_data; /* filled each time the rebuilt graph runs */
    R->obs.op.host_size = cucap_fb_memcpy_size(cucap_fb_record_body_as_memcpy(rec));
  }
  if (R->obs.op.body_type == CUCAP_FB_BODY_LAUNCH) { /* runs in the rebuilt graph */
    const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
    uint64_t idx;
    R->obs.op.launch_index = cucap_fb_launch_launch_index(l);
    if (cucap_map_get(&R->code.func, cucap_fb_launch_function(l), &idx))
      R->obs.op.kernel = R->code.funcs[idx].name;
    R->obs.op.callstack = cucap_fb_record_stack(rec);
  }
  R->obs.op.capturing = 1; /* recorded into a graph, not run here */
  obs_before(R);
  obs_after(R); /* status 0: part of the graph the replay rebuilds */
  R->obs.op_announced = 0;
}

/* ---- session queries -------------------------------------------------- */

/* Reads `size` device bytes at a live address into the DtoH scratch buffer
 * (the buffer op->host_data points to: observers read host_data first). */
cucap_status rp_read_device(rp_state *R, uint64_t live, uint64_t size,
                            void **out) {
  if (rp_grow(&R->buf.scratch, &R->buf.scratch_cap, size ? size : 1,
              &R->buf.scratch_pinned, R) != CUCAP_OK)
    return CUCAP_ERR_NOMEM;
  if (size && (R->d.df.MemcpyDtoHAsync(R->buf.scratch, live, size, NULL) !=
                   CUDA_SUCCESS ||
               R->d.df.StreamSynchronize(NULL) != CUDA_SUCCESS))
    return CUCAP_ERR_CUDA;
  *out = R->buf.scratch;
  return CUCAP_OK;
}

void *cucap_replay_session_proc(cucap_replay_session *s, const char *name,
                                int cuda_version) {
  rp_state *R = rp_of(s);
  return rp_driver_proc(&R->d, name, cuda_version);
}

void *cucap_replay_session_driver(cucap_replay_session *s) { return rp_of(s)->d.lib; }
int cucap_replay_session_device(cucap_replay_session *s) { return (int)rp_of(s)->dev; }
void *cucap_replay_session_context(cucap_replay_session *s) { return rp_of(s)->cx.primary; }
unsigned cucap_replay_session_pass(cucap_replay_session *s) { return rp_of(s)->run.pass; }
cucap_reader *cucap_replay_session_reader(cucap_replay_session *s) { return rp_of(s)->r; }
cucap_replay_report *cucap_replay_session_report(cucap_replay_session *s) {
  return rp_of(s)->rep;
}

uint64_t cucap_replay_session_translate(cucap_replay_session *s, uint64_t addr) {
  return rp_tr(rp_of(s), addr);
}

uint64_t cucap_replay_session_stream(cucap_replay_session *s, uint64_t recorded) {
  return (uint64_t)(uintptr_t)rp_stream(rp_of(s), recorded);
}

void cucap_replay_session_fix_expected(cucap_replay_session *s, const void *got,
                                       void *want, uint64_t size, uint64_t addr) {
  rp_object_fix_expected(rp_of(s), got, want, size, addr);
}

int cucap_replay_session_copy_result(cucap_replay_session *s, uint64_t copy_seq,
                                     cucap_hash128 *blob, uint64_t *size) {
  return rp_deferred_copy_result(rp_of(s), copy_seq, blob, size);
}

int cucap_replay_session_graph_copy_result(cucap_replay_session *s, uint64_t launch_seq,
                                           size_t k, uint64_t *copy_seq,
                                           cucap_hash128 *blob, uint64_t *size) {
  return rp_deferred_graph_copy_result(rp_of(s), launch_seq, k, copy_seq, blob, size, NULL);
}

int cucap_replay_session_graph_copy_dst(cucap_replay_session *s, uint64_t launch_seq,
                                        size_t k, uint64_t *host_addr) {
  return rp_deferred_graph_copy_result(rp_of(s), launch_seq, k, NULL, NULL, NULL, host_addr);
}

const void *cucap_replay_session_graph_host_buffer(cucap_replay_session *s, uint64_t rec_exec,
                                                   uint64_t host_addr, uint64_t size) {
  rp_state *R = rp_of(s);
  return R->gs ? rp_graph_host_dst(R, rec_exec, host_addr, size) : NULL;
}

cucap_status cucap_replay_session_read(cucap_replay_session *s, uint64_t addr,
                                       void *dst, uint64_t size) {
  rp_state *R = rp_of(s);
  if (R->capturing)
    return CUCAP_ERR_STATE;
  void *got = NULL;
  cucap_status st = rp_read_device(R, rp_tr(R, addr), size, &got);
  if (st == CUCAP_OK && size)
    memcpy(dst, got, size);
  return st;
}

void cucap_replay_session_end_pass(cucap_replay_session *s) {
  rp_of(s)->run.end_pass = 1;
}

void cucap_replay_session_stop(cucap_replay_session *s) { rp_of(s)->run.stop = 1; }

void cucap_replay_session_keep_contexts(cucap_replay_session *s) {
  rp_of(s)->cx.keep_ctx = 1;
}

void cucap_replay_session_fresh_modules(cucap_replay_session *s) {
  rp_of(s)->code.mk_fresh = 1;
}

void cucap_replay_session_hold_unloads(cucap_replay_session *s) {
  rp_of(s)->code.hold_unloads = 1;
}

void cucap_replay_session_skip_host_reads(cucap_replay_session *s) {
  rp_of(s)->buf.skip_host_reads = 1;
}

void cucap_replay_session_device_uploads(cucap_replay_session *s) {
  rp_of(s)->buf.device_uploads = 1;
}

void cucap_replay_session_fail(cucap_replay_session *s, cucap_status st,
                               const char *fmt, ...) {
  rp_state *R = rp_of(s);
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  rp_set_error(R, st, "%s", msg);
}
