/* custom_sync.c - stream and event hooks. Stream
 * capture begin/end live in custom_graph.c with the graph walk. */
#include "custom_internal.h"

typedef struct stream_desc {
  uint8_t op;
  uint64_t handle;
  uint32_t flags;
  int priority, has_priority;
  uint64_t event;
} stream_desc;

static void stream_emit(cucap_call *c, const stream_desc *d) {
  c->stack = cucap_rec_stack_id();
  cucap_fbb *b = c->b;
  cucap_fb_stream_start(b);
  cucap_fb_stream_add_op(b, d->op);
  cucap_fb_stream_add_handle(b, d->handle);
  if (d->flags)
    cucap_fb_stream_add_flags(b, d->flags);
  if (d->has_priority)
    cucap_fb_stream_add_priority(b, d->priority);
  if (d->event)
    cucap_fb_stream_add_event(b, d->event);
  c->body = cucap_fb_stream_end(b);
  c->body_type = CUCAP_FB_BODY_STREAM;
}

void custom_stream_create(cucap_call *c, CUresult r, CUstream *ps, unsigned int flags) {
  stream_desc d = {CUCAP_FB_STREAMOP_CREATE, 0, flags, 0, 0, 0};
  if (r == CUDA_SUCCESS && ps) {
    d.handle = CX_U64(*ps);
    (void)cucap_tracker_stream_add(cx_tracker(), d.handle, flags);
  }
  stream_emit(c, &d);
}

void custom_stream_create_prio(cucap_call *c, CUresult r, CUstream *ps, unsigned int flags,
                               int prio) {
  stream_desc d = {CUCAP_FB_STREAMOP_CREATE, 0, flags, prio, 1, 0};
  if (r == CUDA_SUCCESS && ps) {
    d.handle = CX_U64(*ps);
    (void)cucap_tracker_stream_add(cx_tracker(), d.handle, flags);
  }
  stream_emit(c, &d);
}

void custom_stream_destroy(cucap_call *c, CUresult r, CUstream s) {
  if (r == CUDA_SUCCESS)
    cucap_tracker_stream_remove(cx_tracker(), CX_U64(s));
  if (r == CUDA_SUCCESS && cx_capture_any())
    cx_capture_end(s, c->variant);
  stream_desc d = {CUCAP_FB_STREAMOP_DESTROY, CX_U64(s), 0, 0, 0, 0};
  stream_emit(c, &d);
}

/* A successful synchronisation or query is where the program may read what
 * the covered work produced: deferred copy results and managed memory are
 * read there (cx_sync_point), never by synchronising ourselves. */
void custom_stream_synchronize(cucap_call *c, CUresult r, CUstream s) {
  if (r == CUDA_SUCCESS)
    cx_sync_point(CX_SYNC_STREAM, CX_U64(s), c->variant);
  stream_desc d = {CUCAP_FB_STREAMOP_SYNCHRONIZE, CX_U64(s), 0, 0, 0, 0};
  stream_emit(c, &d);
}

void custom_stream_query(cucap_call *c, CUresult r, CUstream s) {
  if (r == CUDA_SUCCESS)
    cx_sync_point(CX_SYNC_STREAM, CX_U64(s), c->variant);
  stream_desc d = {CUCAP_FB_STREAMOP_QUERY, CX_U64(s), 0, 0, 0, 0};
  stream_emit(c, &d);
}

void custom_stream_wait_event(cucap_call *c, CUresult r, CUstream s, CUevent e,
                              unsigned int flags) {
  (void)r;
  stream_desc d = {CUCAP_FB_STREAMOP_WAITEVENT, CX_U64(s), flags, 0, 0, CX_U64(e)};
  stream_emit(c, &d);
}

/* ---------------------------------------------------------------- events */

typedef struct event_desc {
  uint8_t op;
  uint64_t handle;
  uint32_t flags;
  uint64_t stream;
  int has_stream;
  uint64_t end_event;
  float elapsed;
  int has_elapsed;
} event_desc;

static void event_emit(cucap_call *c, const event_desc *d) {
  c->stack = cucap_rec_stack_id();
  cucap_fbb *b = c->b;
  cucap_fb_event_start(b);
  cucap_fb_event_add_op(b, d->op);
  cucap_fb_event_add_handle(b, d->handle);
  if (d->flags)
    cucap_fb_event_add_flags(b, d->flags);
  if (d->has_stream)
    cucap_fb_event_add_stream(b, d->stream);
  if (d->end_event)
    cucap_fb_event_add_end_event(b, d->end_event);
  if (d->has_elapsed)
    cucap_fb_event_add_elapsed_ms(b, d->elapsed);
  c->body = cucap_fb_event_end(b);
  c->body_type = CUCAP_FB_BODY_EVENT;
}

void custom_event_create(cucap_call *c, CUresult r, CUevent *pe, unsigned int flags) {
  event_desc d = {.op = CUCAP_FB_EVENTOP_CREATE, .flags = flags};
  if (r == CUDA_SUCCESS && pe) {
    d.handle = CX_U64(*pe);
    (void)cucap_tracker_event_add(cx_tracker(), d.handle, flags);
  }
  event_emit(c, &d);
}

void custom_event_destroy(cucap_call *c, CUresult r, CUevent e) {
  if (r == CUDA_SUCCESS)
    cucap_tracker_event_remove(cx_tracker(), CX_U64(e));
  event_desc d = {.op = CUCAP_FB_EVENTOP_DESTROY, .handle = CX_U64(e)};
  event_emit(c, &d);
}

void custom_event_record(cucap_call *c, CUresult r, CUevent e, CUstream s) {
  if (r == CUDA_SUCCESS && cx_managed_any())
    cx_managed_event_record(CX_U64(e), s);
  event_desc d = {.op = CUCAP_FB_EVENTOP_RECORD, .handle = CX_U64(e), .stream = CX_U64(s),
                  .has_stream = 1};
  event_emit(c, &d);
}

void custom_event_record_flags(cucap_call *c, CUresult r, CUevent e, CUstream s,
                               unsigned int flags) {
  if (r == CUDA_SUCCESS && cx_managed_any())
    cx_managed_event_record(CX_U64(e), s);
  event_desc d = {.op = CUCAP_FB_EVENTOP_RECORD, .handle = CX_U64(e), .flags = flags,
                  .stream = CX_U64(s), .has_stream = 1};
  event_emit(c, &d);
}

void custom_event_synchronize(cucap_call *c, CUresult r, CUevent e) {
  if (r == CUDA_SUCCESS)
    cx_sync_point(CX_SYNC_EVENT, CX_U64(e), c->variant);
  event_desc d = {.op = CUCAP_FB_EVENTOP_SYNCHRONIZE, .handle = CX_U64(e)};
  event_emit(c, &d);
}

void custom_event_query(cucap_call *c, CUresult r, CUevent e) {
  if (r == CUDA_SUCCESS)
    cx_sync_point(CX_SYNC_EVENT, CX_U64(e), c->variant);
  event_desc d = {.op = CUCAP_FB_EVENTOP_QUERY, .handle = CX_U64(e)};
  event_emit(c, &d);
}

void custom_event_elapsed(cucap_call *c, CUresult r, float *ms, CUevent start, CUevent end) {
  event_desc d = {.op = CUCAP_FB_EVENTOP_ELAPSEDTIME, .handle = CX_U64(start),
                  .end_event = CX_U64(end)};
  if (r == CUDA_SUCCESS && ms) {
    d.elapsed = *ms;
    d.has_elapsed = 1;
  }
  event_emit(c, &d);
}

/* ---- stream memory operations (WaitValue/WriteValue 32/64) ---- */

static void value_op(cucap_call *c, uint8_t op, CUstream s, CUdeviceptr addr, uint64_t v,
                     unsigned int flags) {
  c->stack = cucap_rec_stack_id();
  cucap_fbb *b = c->b;
  cucap_fb_stream_start(b);
  cucap_fb_stream_add_op(b, op);
  cucap_fb_stream_add_handle(b, CX_U64(s));
  cucap_fb_stream_add_flags(b, flags);
  cucap_fb_stream_add_value(b, addr);
  cucap_fb_stream_add_operand(b, v);
  c->body = cucap_fb_stream_end(b);
  c->body_type = CUCAP_FB_BODY_STREAM;
}

void custom_stream_wait_value32(cucap_call *c, CUresult r, CUstream s, CUdeviceptr addr,
                                cuuint32_t v, unsigned int flags) {
  (void)r;
  value_op(c, CUCAP_FB_STREAMOP_WAITVALUE, s, addr, v, flags);
}
void custom_stream_write_value32(cucap_call *c, CUresult r, CUstream s, CUdeviceptr addr,
                                 cuuint32_t v, unsigned int flags) {
  (void)r;
  value_op(c, CUCAP_FB_STREAMOP_WRITEVALUE, s, addr, v, flags);
}
void custom_stream_wait_value64(cucap_call *c, CUresult r, CUstream s, CUdeviceptr addr,
                                cuuint64_t v, unsigned int flags) {
  (void)r;
  value_op(c, CUCAP_FB_STREAMOP_WAITVALUE, s, addr, v, flags | 0x80000000u);
}
void custom_stream_write_value64(cucap_call *c, CUresult r, CUstream s, CUdeviceptr addr,
                                 cuuint64_t v, unsigned int flags) {
  (void)r;
  value_op(c, CUCAP_FB_STREAMOP_WRITEVALUE, s, addr, v, flags | 0x80000000u);
}
