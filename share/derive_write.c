/* derive_write.c - writing a derived capture: its header (source header +
 * Origin), the blobs kept records refer to, the state uploads and the kept
 * records (derive_internal.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_replay.h"
#include "derive_internal.h"

static cucap_fb_ref str(cucap_fbb *b, const char *s) {
  return s ? cucap_fbb_string(b, s, strlen(s)) : 0;
}

static cucap_fb_ref copy_device(cucap_fbb *b, const cucap_fb_device_props *d) {
  size_t ul = 0;
  const uint8_t *uuid = cucap_fb_device_props_uuid(d, &ul);
  cucap_fb_ref name = str(b, cucap_fb_device_props_name(d));
  cucap_fb_ref pci = str(b, cucap_fb_device_props_pci_bus_id(d));
  cucap_fb_ref u = uuid ? cucap_fbb_vector(b, uuid, ul, 1, 1) : 0;
  cucap_fb_device_props_start(b);
  cucap_fb_device_props_add_ordinal(b, cucap_fb_device_props_ordinal(d));
  if (name)
    cucap_fb_device_props_add_name(b, name);
  if (u)
    cucap_fb_device_props_add_uuid(b, u);
  cucap_fb_device_props_add_cc_major(b, cucap_fb_device_props_cc_major(d));
  cucap_fb_device_props_add_cc_minor(b, cucap_fb_device_props_cc_minor(d));
  cucap_fb_device_props_add_total_mem(b, cucap_fb_device_props_total_mem(d));
  cucap_fb_device_props_add_sm_count(b, cucap_fb_device_props_sm_count(d));
  if (pci)
    cucap_fb_device_props_add_pci_bus_id(b, pci);
  cucap_fb_device_props_add_va_granularity(b, cucap_fb_device_props_va_granularity(d));
  return cucap_fb_device_props_end(b);
}

/* The source's header with a new format version, producer and Origin. */
static const uint8_t *build_header(cucap_fbb *b, const cucap_fb_file_header *h,
                                   const dv_origin *o, size_t *size) {
  size_t nd = cucap_fb_file_header_devices_len(h);
  size_t na = cucap_fb_file_header_argv_len(h);
  size_t ne = cucap_fb_file_header_env_len(h);
  size_t most = nd > na ? nd : na;
  if (ne > most)
    most = ne;
  cucap_fb_ref *refs = malloc((most ? most : 1) * sizeof *refs);
  if (!refs)
    return NULL;
  for (size_t i = 0; i < nd; i++)
    refs[i] = copy_device(b, cucap_fb_file_header_devices_at(h, i));
  cucap_fb_ref devices = nd ? cucap_fbb_vector_refs(b, refs, nd) : 0;
  for (size_t i = 0; i < na; i++)
    refs[i] = str(b, cucap_fb_file_header_argv_at(h, i));
  cucap_fb_ref argv = na ? cucap_fbb_vector_refs(b, refs, na) : 0;
  for (size_t i = 0; i < ne; i++) {
    const cucap_fb_env_var *e = cucap_fb_file_header_env_at(h, i);
    cucap_fb_ref k = str(b, cucap_fb_env_var_key(e)), v = str(b, cucap_fb_env_var_value(e));
    cucap_fb_env_var_start(b);
    if (k)
      cucap_fb_env_var_add_key(b, k);
    if (v)
      cucap_fb_env_var_add_value(b, v);
    refs[i] = cucap_fb_env_var_end(b);
  }
  cucap_fb_ref env = ne ? cucap_fbb_vector_refs(b, refs, ne) : 0;
  free(refs);
  cucap_fb_ref host = str(b, cucap_fb_file_header_hostname(h));
  cucap_fb_ref opts = str(b, cucap_fb_file_header_options(h));
  cucap_fb_ref ver = str(b, CUCAP_VERSION_STRING);
  char prod[64];
  snprintf(prod, sizeof prod, "cucap %s", o->command);
  cucap_fb_ref producer = str(b, prod);
  cucap_fb_ref cmd = str(b, o->command), src = str(b, o->source), sel = str(b, o->selection);
  cucap_fb_origin_start(b);
  if (cmd)
    cucap_fb_origin_add_command(b, cmd);
  if (src)
    cucap_fb_origin_add_source(b, src);
  if (sel)
    cucap_fb_origin_add_selection(b, sel);
  cucap_fb_origin_add_state(b, (uint8_t)o->state);
  cucap_fb_origin_add_state_records(b, o->state_records);
  cucap_fb_origin_add_first_seq(b, o->first_seq);
  cucap_fb_origin_add_last_seq(b, o->last_seq);
  cucap_fb_origin_add_launch_first(b, o->launch_first);
  cucap_fb_origin_add_launch_last(b, o->launch_last);
  cucap_fb_origin_add_source_records(b, o->cut);
  cucap_fb_ref origin = cucap_fb_origin_end(b);
  cucap_fb_file_header_start(b);
  cucap_fb_file_header_add_format_major(b, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_format_minor(b, CUCAP_FORMAT_MINOR);
  cucap_fb_file_header_add_cucap_version(b, ver);
  if (host)
    cucap_fb_file_header_add_hostname(b, host);
  cucap_fb_file_header_add_pid(b, cucap_fb_file_header_pid(h));
  cucap_fb_file_header_add_start_time_ns(b, cucap_fb_file_header_start_time_ns(h));
  cucap_fb_file_header_add_start_mono_ns(b, cucap_fb_file_header_start_mono_ns(h));
  cucap_fb_file_header_add_driver_version(b, cucap_fb_file_header_driver_version(h));
  cucap_fb_file_header_add_toolkit_version(b, cucap_fb_file_header_toolkit_version(h));
  if (devices)
    cucap_fb_file_header_add_devices(b, devices);
  if (argv)
    cucap_fb_file_header_add_argv(b, argv);
  if (env)
    cucap_fb_file_header_add_env(b, env);
  if (opts)
    cucap_fb_file_header_add_options(b, opts);
  cucap_fb_file_header_add_producer(b, producer);
  cucap_fb_file_header_add_origin(b, origin);
  cucap_fb_ref root = cucap_fb_file_header_end(b);
  return cucap_fbb_finish(b, root, 1, size);
}

cucap_status dv_writer_open(dv_plan *p, const char *out_path, int level,
                            const dv_origin *org, cucap_writer **w) {
  *w = NULL;
  cucap_fbb *b = cucap_fbb_create(4096);
  CUCAP_RETURN_IF(!b, CUCAP_ERR_NOMEM);
  size_t size = 0;
  const uint8_t *hb = build_header(b, cucap_reader_header(p->r), org, &size);
  cucap_status st = CUCAP_ERR_NOMEM;
  if (hb) {
    cucap_writer_options wo;
    cucap_writer_options_init(&wo);
    if (level)
      wo.level = level;
    /* the end of what is kept, on the source's clock */
    wo.end_mono_ns = cucap_fb_file_header_start_mono_ns(cucap_reader_header(p->r)) + p->t_end;
    st = cucap_writer_create(out_path, &wo, hb, size, w);
  }
  cucap_fbb_destroy(b);
  return st;
}

/* ---------------------------------------------------------------- blobs */

typedef struct blob_copy {
  dv_plan *p;
  cucap_writer *w;
  void *buf;
  uint64_t cap;
  cucap_status st;
} blob_copy;

static blob_copy g_copy_state; /* reused buffer; share/ is single-threaded */

static void copy_one(void *u, cucap_hash128 h) {
  blob_copy *c = u;
  if (c->st != CUCAP_OK || cucap_writer_has_blob(c->w, h))
    return;
  uint64_t size = 0;
  cucap_status st = cucap_reader_blob_size(c->p->r, h, &size);
  if (st != CUCAP_OK) {
    c->st = st == CUCAP_ERR_NOT_FOUND ? CUCAP_OK : st; /* never stored: nothing to copy */
    return;
  }
  if (size > c->cap) {
    if (size > SIZE_MAX) {
      c->st = CUCAP_ERR_TOO_LARGE;
      return;
    }
    void *nb = realloc(c->buf, (size_t)size);
    if (!nb) {
      c->st = CUCAP_ERR_NOMEM;
      return;
    }
    c->buf = nb;
    c->cap = size;
  }
  st = cucap_reader_blob_read(c->p->r, h, c->buf, size);
  if (st == CUCAP_OK)
    st = cucap_writer_put_blob_hashed(c->w, c->buf, (size_t)size, h);
  c->st = st;
}

cucap_status dv_copy_blobs(dv_plan *p, cucap_writer *w, const cucap_fb_record *rec) {
  if (cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_MODULE) /* its image, maybe reduced */
    return dv_image_copy(p, w, cucap_fb_record_body_as_module(rec));
  g_copy_state.p = p;
  g_copy_state.w = w;
  g_copy_state.st = CUCAP_OK;
  sh_record_blobs(rec, copy_one, &g_copy_state);
  return g_copy_state.st;
}

cucap_status dv_copy_kept_blobs(dv_plan *p, cucap_writer *w) {
  cucap_status st = cucap_reader_rewind(p->r);
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  for (uint64_t i = 0; st == CUCAP_OK && i < p->nrecords && i <= p->last; i++) {
    if ((st = dv_next(p, &rec, &buf, &size)) == CUCAP_OK && p->keep[i] != DV_DROP)
      st = dv_copy_blobs(p, w, rec);
  }
  return st == CUCAP_END ? CUCAP_ERR_TRUNCATED : st;
}

static void copy_release(void) {
  free(g_copy_state.buf);
  memset(&g_copy_state, 0, sizeof g_copy_state);
}

/* ---------------------------------------------------------------- records */

static cucap_status append_built(cucap_writer *w, cucap_fbb *b, uint8_t type, cucap_fb_ref body,
                                 uint64_t ctx, uint64_t t) {
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, 0);
  cucap_fb_record_add_t_enter(b, t);
  cucap_fb_record_add_t_exit(b, t);
  cucap_fb_record_add_body(b, type, body);
  if (ctx)
    cucap_fb_record_add_context(b, ctx);
  cucap_fb_ref rec = cucap_fb_record_end(b);
  size_t size = 0;
  const uint8_t *buf = cucap_fbb_finish(b, rec, 1, &size);
  CUCAP_RETURN_IF(!buf, CUCAP_ERR_NOMEM);
  return cucap_writer_append(w, buf, size, NULL);
}

/* One synchronous HtoD copy of a region's contents (what the replayer
 * executes to restore memory at the cut). */
static cucap_status write_upload(cucap_writer *w, cucap_fbb *b, const cucap_state_region *g,
                                 uint64_t ctx, uint64_t t) {
  cucap_fbb_reset(b);
  cucap_fb_hash128 h = {g->data.lo, g->data.hi};
  cucap_fb_memcpy_start(b);
  cucap_fb_memcpy_add_kind(b, CUCAP_FB_MEMCPYKIND_HTOD);
  cucap_fb_memcpy_add_dst(b, g->address);
  cucap_fb_memcpy_add_size(b, g->size);
  cucap_fb_memcpy_add_payload(b, &h);
  cucap_fb_memcpy_add_has_payload(b, 1);
  cucap_fb_ref body = cucap_fb_memcpy_end(b);
  return append_built(w, b, CUCAP_FB_BODY_MEMCPY, body, ctx, t);
}

cucap_status dv_write_exit_snapshot(cucap_writer *w, const cucap_state_region *g, size_t n,
                                    uint64_t launch_index, uint64_t t) {
  cucap_fbb *b = cucap_fbb_create(256 + 64 * n);
  cucap_fb_ref *refs = malloc((n ? n : 1) * sizeof *refs);
  cucap_status st = CUCAP_ERR_NOMEM;
  if (b && refs) {
    for (size_t i = 0; i < n; i++) {
      cucap_fb_hash128 h = {g[i].data.lo, g[i].data.hi};
      cucap_fb_mem_region_start(b);
      cucap_fb_mem_region_add_address(b, g[i].address);
      cucap_fb_mem_region_add_size(b, g[i].size);
      cucap_fb_mem_region_add_data(b, &h);
      refs[i] = cucap_fb_mem_region_end(b);
    }
    cucap_fb_ref regions = cucap_fbb_vector_refs(b, refs, n);
    cucap_fb_snapshot_start(b);
    cucap_fb_snapshot_add_reason(b, CUCAP_FB_SNAPSHOTREASON_EXIT);
    cucap_fb_snapshot_add_launch_index(b, launch_index);
    cucap_fb_snapshot_add_regions(b, regions);
    cucap_fb_ref body = cucap_fb_snapshot_end(b);
    st = append_built(w, b, CUCAP_FB_BODY_SNAPSHOT, body, 0, t);
  }
  free(refs);
  cucap_fbb_destroy(b);
  return st;
}

static cucap_status write_uploads(dv_plan *p, cucap_writer *w, uint64_t *written) {
  cucap_fbb *b = cucap_fbb_create(512);
  CUCAP_RETURN_IF(!b, CUCAP_ERR_NOMEM);
  cucap_status st = CUCAP_OK;
  g_copy_state.p = p;
  g_copy_state.w = w;
  for (size_t i = 0; i < p->regions.n && st == CUCAP_OK; i++) {
    const cucap_state_region *g = sh_vec_at(&p->regions, i);
    const uint64_t *ctx = sh_vec_at(&p->region_ctx, i);
    /* contents from the source's snapshot (a replay put its own already) */
    g_copy_state.st = CUCAP_OK;
    copy_one(&g_copy_state, g->data);
    if ((st = g_copy_state.st) != CUCAP_OK)
      break;
    st = write_upload(w, b, g, ctx ? *ctx : 0, p->cut_time);
    if (st == CUCAP_OK)
      (*written)++;
  }
  cucap_fbb_destroy(b);
  return st;
}

cucap_status dv_write(dv_plan *p, cucap_writer *w, uint64_t *written) {
  *written = 0;
  cucap_status st = cucap_reader_rewind(p->r);
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  int uploaded = 0;
  for (uint64_t i = 0; st == CUCAP_OK && i < p->nrecords && i <= p->last; i++) {
    if ((st = dv_next(p, &rec, &buf, &size)) != CUCAP_OK)
      break;
    if (!uploaded && i >= p->first) {
      if ((st = write_uploads(p, w, written)) != CUCAP_OK)
        break;
      uploaded = 1;
    }
    if (p->keep[i] == DV_DROP)
      continue;
    if ((st = dv_copy_blobs(p, w, rec)) != CUCAP_OK ||
        (st = dv_append(p, w, buf, size, rec)) != CUCAP_OK)
      break;
    (*written)++;
  }
  if (st == CUCAP_END)
    st = CUCAP_ERR_TRUNCATED;
  if (st == CUCAP_OK && !uploaded)
    st = write_uploads(p, w, written);
  copy_release();
  return st;
}

/* ---------------------------------------------------------------- replay */

cucap_status dv_replay_read(const cucap_derive_options *opts, cucap_writer *w, uint64_t at,
                            cucap_state_region *before, size_t nbefore,
                            cucap_state_region *after, size_t nafter,
                            uint64_t *after_checksum, char *msg, size_t msg_size) {
  cucap_state_observer *so = NULL;
  cucap_status st = cucap_state_observer_create(w, at, before, nbefore, after, nafter, &so);
  if (st != CUCAP_OK)
    return st;
  const cucap_replay_observer *obs[2] = {cucap_state_observer_get(so), opts->watch};
  cucap_replay_options ro;
  cucap_replay_options_init(&ro);
  ro.libcuda = opts->libcuda;
  ro.device = opts->device;
  ro.observers = obs;
  ro.nobservers = opts->watch ? 2 : 1;
  cucap_replay_report rep;
  cucap_status rs = cucap_replay_run(opts->source_path, &ro, &rep);
  st = cucap_state_observer_result(so, msg, msg_size);
  if (st != CUCAP_OK && rep.error[0] && msg && msg_size)
    snprintf(msg, msg_size, "%s", rep.error);
  else if (st == CUCAP_OK && rs != CUCAP_OK && rs != CUCAP_ERR_MISMATCH) {
    st = rs;
    if (msg && msg_size)
      snprintf(msg, msg_size, "%s", rep.error[0] ? rep.error : cucap_status_str(rs));
  }
  if (st == CUCAP_OK && after_checksum)
    *after_checksum = cucap_state_observer_after_checksum(so);
  cucap_state_observer_destroy(so);
  return st;
}
