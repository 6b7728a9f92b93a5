/* export_perfetto.c - the timeline model as a Perfetto trace: a `Trace`
 * protobuf message (repeated TracePacket packet = 1) encoded by hand; the
 * field numbers used are listed in cucap_export.h. One packet sequence
 * (trusted_packet_sequence_id 1, first packet SEQ_INCREMENTAL_STATE_CLEARED),
 * no interning: a TrackDescriptor per track, then the events as TrackEvents
 * in time order, slices as BEGIN/END pairs ordered so that they nest. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "cucap_vec.h"
#include "export_internal.h"

/* ---------------------------------------------------------------- encoding */

typedef struct pb {
  uint8_t *p;
  size_t n, cap;
  int oom;
} pb;

static void pb_raw(pb *b, const void *d, size_t n) {
  if (b->oom)
    return;
  if (!CUCAP_VEC_RESERVE(b->p, b->cap, b->n + n, 256)) {
    b->oom = 1;
    return;
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}

static void pb_varint(pb *b, uint64_t v) {
  uint8_t t[10];
  size_t n = 0;
  do {
    t[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      t[n] |= 0x80;
    n++;
  } while (v);
  pb_raw(b, t, n);
}

static void pb_key(pb *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)field << 3 | wire); }
static void pb_uint(pb *b, unsigned f, uint64_t v) { pb_key(b, f, 0); pb_varint(b, v); }
static void pb_int(pb *b, unsigned f, int64_t v) { pb_key(b, f, 0); pb_varint(b, (uint64_t)v); }

static void pb_fixed64(pb *b, unsigned f, uint64_t v) {
  uint8_t t[8];
  for (int i = 0; i < 8; i++)
    t[i] = (uint8_t)(v >> (8 * i));
  pb_key(b, f, 1);
  pb_raw(b, t, 8);
}

static void pb_double(pb *b, unsigned f, double d) {
  uint64_t v;
  memcpy(&v, &d, 8);
  pb_fixed64(b, f, v);
}

static void pb_bytes(pb *b, unsigned f, const void *d, size_t n) {
  pb_key(b, f, 2);
  pb_varint(b, n);
  pb_raw(b, d, n);
}

static void pb_str(pb *b, unsigned f, const char *s) { pb_bytes(b, f, s, strlen(s)); }
static void pb_msg(pb *b, unsigned f, pb *sub) {
  pb_bytes(b, f, sub->p, sub->n);
  b->oom |= sub->oom;
  sub->n = 0;
}

/* perfetto.protos field numbers (protos/perfetto/trace/...) */
enum {
  TRACE_PACKET = 1,
  PKT_TIMESTAMP = 8, PKT_SEQ_ID = 10, PKT_TRACK_EVENT = 11, PKT_SEQ_FLAGS = 13,
  PKT_TRACK_DESCRIPTOR = 60,
  TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5, TD_COUNTER = 8,
  PD_PID = 1, PD_NAME = 6,
  THD_PID = 1, THD_TID = 2, THD_NAME = 5,
  CD_UNIT = 3, CD_UNIT_SIZE_BYTES = 3,
  TE_DEBUG = 4, TE_TYPE = 9, TE_TRACK = 11, TE_CATEGORIES = 22, TE_NAME = 23,
  TE_COUNTER = 30, TE_DOUBLE_COUNTER = 44, TE_FLOW = 47, TE_FLOW_END = 48,
  TE_SLICE_BEGIN = 1, TE_SLICE_END = 2, TE_INSTANT = 3, TE_TYPE_COUNTER = 4,
  DA_UINT = 3, DA_INT = 4, DA_STRING = 6, DA_NAME = 10,
  SEQ_INCREMENTAL_STATE_CLEARED = 1
};

typedef struct pw {
  FILE *out;
  pb pkt, sub, sub2;
  int first;
  int err;
} pw;

static void packet_end(pw *w) {
  if (w->first) {
    pb_uint(&w->pkt, PKT_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
    w->first = 0;
  }
  pb_uint(&w->pkt, PKT_SEQ_ID, 1);
  pb frame = {0};
  pb_key(&frame, TRACE_PACKET, 2);
  pb_varint(&frame, w->pkt.n);
  if (frame.oom || w->pkt.oom || fwrite(frame.p, 1, frame.n, w->out) != frame.n ||
      fwrite(w->pkt.p, 1, w->pkt.n, w->out) != w->pkt.n)
    w->err = 1;
  free(frame.p);
  w->pkt.n = 0;
}

static void track_packet(pw *w, const xp_model *m, const xp_track *t) {
  pb *d = &w->sub, *x = &w->sub2;
  pb_uint(d, TD_UUID, t->uuid);
  if (t->parent)
    pb_uint(d, TD_PARENT, t->parent);
  switch (t->type) {
  case XT_PROCESS:
    pb_int(x, PD_PID, (int64_t)m->pid);
    pb_str(x, PD_NAME, xp_s(m, t->name));
    pb_msg(d, TD_PROCESS, x);
    break;
  case XT_THREAD:
    pb_int(x, THD_PID, (int64_t)m->pid);
    pb_int(x, THD_TID, (int64_t)t->tid);
    pb_str(x, THD_NAME, xp_s(m, t->name));
    pb_msg(d, TD_THREAD, x);
    break;
  case XT_COUNTER:
    pb_str(d, TD_NAME, xp_s(m, t->name));
    if (t->unit_bytes)
      pb_uint(x, CD_UNIT, CD_UNIT_SIZE_BYTES);
    pb_msg(d, TD_COUNTER, x); /* an empty CounterDescriptor marks a counter track */
    break;
  default:
    pb_str(d, TD_NAME, xp_s(m, t->name));
    break;
  }
  pb_msg(&w->pkt, PKT_TRACK_DESCRIPTOR, d);
  packet_end(w);
}

/* ---------------------------------------------------------------- events */

typedef struct atom {
  uint64_t ts;
  int phase;      /* 0 slice end, 1 slice begin, 2 instant/counter */
  uint64_t k2;    /* ends: later begins first; begins: longer first */
  uint64_t k3;
  const xp_event *e;
} atom;

static int atom_cmp(const void *a, const void *b) {
  const atom *x = a, *y = b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->phase != y->phase)
    return x->phase < y->phase ? -1 : 1;
  if (x->k2 != y->k2)
    return x->k2 < y->k2 ? -1 : 1;
  return x->k3 < y->k3 ? -1 : x->k3 > y->k3;
}

/* An integer counter's value for the packet's int64 field, saturated: the
 * sums behind a counter (memory in use) of a damaged capture can pass 2^63,
 * and converting such a double is undefined (fuzz_share, UBSan). */
static int64_t counter_i64(double v) {
  if (!(v == v))
    return 0;
  if (v >= 9223372036854775808.0)
    return INT64_MAX;
  if (v <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}

static void event_packet(pw *w, const xp_model *m, const atom *a, uint64_t base) {
  const xp_event *e = a->e;
  const xp_track *t = sh_vec_at(&m->tracks, e->track);
  pb *te = &w->sub, *da = &w->sub2;
  pb_uint(&w->pkt, PKT_TIMESTAMP, base + a->ts);
  pb_uint(te, TE_TRACK, t->uuid);
  if (e->kind == XE_COUNTER) {
    pb_uint(te, TE_TYPE, TE_TYPE_COUNTER);
    if (e->int_value)
      pb_int(te, TE_COUNTER, counter_i64(e->value));
    else
      pb_double(te, TE_DOUBLE_COUNTER, e->value);
  } else if (a->phase == 0) {
    pb_uint(te, TE_TYPE, TE_SLICE_END);
  } else {
    pb_uint(te, TE_TYPE, e->kind == XE_INSTANT ? TE_INSTANT : TE_SLICE_BEGIN);
    pb_str(te, TE_NAME, xp_s(m, e->name));
    if (e->cat)
      pb_str(te, TE_CATEGORIES, xp_s(m, e->cat));
    if (e->flow_out)
      pb_fixed64(te, TE_FLOW, e->flow_out);
    if (e->flow_in)
      pb_fixed64(te, TE_FLOW_END, e->flow_in);
    for (int i = 0; i < e->nargs; i++) {
      pb_str(da, DA_NAME, xp_s(m, e->args[i].key));
      if (e->args[i].is_str)
        pb_str(da, DA_STRING, xp_s(m, (uint32_t)e->args[i].u));
      else
        pb_uint(da, DA_UINT, e->args[i].u);
      pb_msg(te, TE_DEBUG, da);
    }
  }
  pb_msg(&w->pkt, PKT_TRACK_EVENT, te);
  packet_end(w);
}

cucap_status xp_write_perfetto(const xp_model *m, FILE *out) {
  pw w;
  memset(&w, 0, sizeof w);
  w.out = out;
  w.first = 1;
  for (size_t i = 0; i < m->tracks.n; i++)
    track_packet(&w, m, sh_vec_at(&m->tracks, i));
  size_t na = 0;
  atom *a = malloc((2 * m->events.n + 1) * sizeof *a);
  if (!a) {
    free(w.pkt.p);
    free(w.sub.p);
    free(w.sub2.p);
    return CUCAP_ERR_NOMEM;
  }
  for (size_t i = 0; i < m->events.n; i++) {
    const xp_event *e = sh_vec_at(&m->events, i);
    if (e->kind != XE_SLICE) {
      a[na++] = (atom){e->ts, 2, 0, e->order, e};
      continue;
    }
    a[na++] = (atom){e->ts, 1, UINT64_MAX - e->dur, e->order, e};
    a[na++] = (atom){e->ts + e->dur, 0, UINT64_MAX - e->ts, UINT64_MAX - e->order, e};
  }
  cucap_sort(a, na, sizeof *a, atom_cmp);
  /* absolute-looking times: nanoseconds from 1 (some consumers treat a
   * timestamp of 0 as unset) */
  for (size_t i = 0; i < na && !w.err; i++)
    event_packet(&w, m, &a[i], 1);
  free(a);
  int oom = w.pkt.oom || w.sub.oom || w.sub2.oom;
  free(w.pkt.p);
  free(w.sub.p);
  free(w.sub2.p);
  if (oom)
    return CUCAP_ERR_NOMEM;
  return w.err || fflush(out) != 0 ? CUCAP_ERR_IO : CUCAP_OK;
}
