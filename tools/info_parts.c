/* info_parts.c - pieces of `cucap info` (cmd_info.c): the stored bytes by use and the --audit summary. See info_parts.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_cli.h"
#include "cucap_json.h"
#include "cucap_reader.h"
#include "info_parts.h"

/* A freed allocation keeps its key with size 0 (no deletion needed). */
int info_is_device_kind(int k) {
  return k == CUCAP_FB_ALLOCKIND_DEVICE || k == CUCAP_FB_ALLOCKIND_PITCH ||
         k == CUCAP_FB_ALLOCKIND_MANAGED || k == CUCAP_FB_ALLOCKIND_ASYNC ||
         k == CUCAP_FB_ALLOCKIND_FROMPOOL || k == CUCAP_FB_ALLOCKIND_VMMMAP;
}

/* ------------------------------------------------------------- audit
 * An Audit record counts, per CUPTI driver cbid, the calls an independent
 * CUPTI subscriber saw (driver_seen) and the calls cucap recorded. recorded
 * may exceed driver_seen (the subscriber starts after the first calls and
 * CUPTI does not report some calls); only driver_seen > recorded is a miss. */
typedef struct audit_sum {
  uint64_t seen, recorded;
  size_t nmiss;
  const cucap_fb_audit_entry **miss; /* biggest miss first; NULL if none */
} audit_sum;

static int cmp_miss(const void *a, const void *b) {
  const cucap_fb_audit_entry *x = *(const cucap_fb_audit_entry *const *)a;
  const cucap_fb_audit_entry *y = *(const cucap_fb_audit_entry *const *)b;
  uint64_t mx = cucap_fb_audit_entry_driver_seen(x) - cucap_fb_audit_entry_recorded(x);
  uint64_t my = cucap_fb_audit_entry_driver_seen(y) - cucap_fb_audit_entry_recorded(y);
  if (mx != my)
    return mx > my ? -1 : 1;
  uint32_t cx = cucap_fb_audit_entry_cbid(x), cy = cucap_fb_audit_entry_cbid(y);
  return cx < cy ? -1 : cx > cy;
}

/* Fills sum from a; sum->miss is malloc'ed (caller frees; NULL on OOM, then
 * nmiss is still right but the names are not listed). */
static void audit_summarize(const cucap_fb_audit *a, audit_sum *sum) {
  memset(sum, 0, sizeof *sum);
  size_t n = cucap_fb_audit_entries_len(a);
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_audit_entry *e = cucap_fb_audit_entries_at(a, i);
    if (!e)
      continue;
    uint64_t sn = cucap_fb_audit_entry_driver_seen(e), rc = cucap_fb_audit_entry_recorded(e);
    sum->seen += sn;
    sum->recorded += rc;
    if (sn > rc)
      sum->nmiss++;
  }
  if (!sum->nmiss)
    return;
  sum->miss = malloc(sum->nmiss * sizeof *sum->miss);
  if (!sum->miss)
    return;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_audit_entry *e = cucap_fb_audit_entries_at(a, i);
    if (e && cucap_fb_audit_entry_driver_seen(e) > cucap_fb_audit_entry_recorded(e))
      sum->miss[k++] = e;
  }
  qsort(sum->miss, k, sizeof *sum->miss, cmp_miss);
}

/* The entry's name, else the cbid's name, else "cbid N" in tmp. */
static const char *audit_name(const cucap_fb_audit_entry *e, char *tmp, size_t n) {
  const char *nm = cucap_fb_audit_entry_name(e);
  if (nm && *nm)
    return nm;
  unsigned cb = cucap_fb_audit_entry_cbid(e);
  nm = cucap_cli_cbid_name(cb);
  if (nm)
    return nm;
  snprintf(tmp, n, "cbid %u", cb);
  return tmp;
}

void info_print_audit_text(const cucap_fb_audit *a) {
  audit_sum sum;
  audit_summarize(a, &sum);
  printf("audit:           CUPTI saw %" PRIu64 " driver calls, cucap recorded %" PRIu64
         "; %zu function%s with missed calls\n",
         sum.seen, sum.recorded, sum.nmiss, sum.nmiss == 1 ? "" : "s");
  char tmp[32];
  for (size_t i = 0; sum.miss && i < sum.nmiss && i < 10; i++) {
    const char *nm = audit_name(sum.miss[i], tmp, sizeof tmp);
    printf("  ");
    for (const char *p = nm; *p; p++) /* one line whatever the name holds */
      putchar((unsigned char)*p < 0x20 ? ' ' : *p);
    printf(": seen %" PRIu64 ", recorded %" PRIu64 "\n",
           cucap_fb_audit_entry_driver_seen(sum.miss[i]),
           cucap_fb_audit_entry_recorded(sum.miss[i]));
  }
  if (sum.miss && sum.nmiss > 10)
    printf("  ... and %zu more\n", sum.nmiss - 10);
  free(sum.miss);
}

void info_print_audit_json(cucap_json *w, const cucap_fb_audit *a) {
  audit_sum sum;
  audit_summarize(a, &sum);
  cucap_json_key(w, "audit");
  cucap_json_object_begin(w);
  cucap_json_key(w, "driver_seen");
  cucap_json_uint(w, sum.seen);
  cucap_json_key(w, "recorded");
  cucap_json_uint(w, sum.recorded);
  cucap_json_key(w, "missing_count");
  cucap_json_uint(w, sum.nmiss);
  cucap_json_key(w, "missing_functions"); /* all of them, biggest miss first */
  cucap_json_array_begin(w);
  char tmp[32];
  for (size_t i = 0; sum.miss && i < sum.nmiss; i++) {
    const cucap_fb_audit_entry *e = sum.miss[i];
    cucap_json_object_begin(w);
    cucap_json_key(w, "name");
    cucap_json_string(w, audit_name(e, tmp, sizeof tmp));
    cucap_json_key(w, "cbid");
    cucap_json_uint(w, cucap_fb_audit_entry_cbid(e));
    cucap_json_key(w, "driver_seen");
    cucap_json_uint(w, cucap_fb_audit_entry_driver_seen(e));
    cucap_json_key(w, "recorded");
    cucap_json_uint(w, cucap_fb_audit_entry_recorded(e));
    cucap_json_object_end(w);
  }
  cucap_json_array_end(w);
  cucap_json_object_end(w);
  free(sum.miss);
}


/* ---------------------------------------------------------------- stored bytes */

static uint64_t blob_key(const cucap_fb_hash128 *h) {
  return (h->lo ^ (h->hi * 0x9E3779B97F4A7C15ull)) | 1;
}

static void use(info_store *s, const cucap_fb_hash128 *h, int what) {
  if (!h)
    return;
  uint64_t *v = info_map_slot(&s->use, blob_key(h), 1);
  if (v && !*v)
    *v = (uint64_t)what + 1;
}

void info_store_feed(info_store *s, const cucap_fb_record *rec) {
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_MODULE: {
    const cucap_fb_module *m = cucap_fb_record_body_as_module(rec);
    if (m)
      use(s, cucap_fb_module_image(m), IS_IMAGES);
    break;
  }
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
    if (m && cucap_fb_memcpy_has_payload(m))
      use(s, cucap_fb_memcpy_payload(m), cucap_fb_record_seq(rec) ? IS_COPIES : IS_UPLOADS);
    break;
  }
  case CUCAP_FB_BODY_LAUNCH: {
    const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
    if (l && cucap_fb_launch_has_args_blob(l))
      use(s, cucap_fb_launch_args_blob(l), IS_ARGS);
    break;
  }
  case CUCAP_FB_BODY_SNAPSHOT: {
    const cucap_fb_snapshot *sn = cucap_fb_record_body_as_snapshot(rec);
    size_t n = sn ? cucap_fb_snapshot_regions_len(sn) : 0;
    for (size_t i = 0; i < n; i++) {
      const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(sn, i);
      if (g)
        use(s, cucap_fb_mem_region_data(g), IS_SNAPSHOTS);
    }
    break;
  }
  case CUCAP_FB_BODY_GRAPH: {
    const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
    size_t n = g ? cucap_fb_graph_nodes_len(g) : 0;
    for (size_t i = 0; i < n; i++) {
      const cucap_fb_graph_node *nd = cucap_fb_graph_nodes_at(g, i);
      const cucap_fb_launch *l = nd ? cucap_fb_graph_node_launch(nd) : NULL;
      const cucap_fb_memcpy *m = nd ? cucap_fb_graph_node_memcpy(nd) : NULL;
      if (l && cucap_fb_launch_has_args_blob(l))
        use(s, cucap_fb_launch_args_blob(l), IS_GRAPHS);
      if (m && cucap_fb_memcpy_has_payload(m))
        use(s, cucap_fb_memcpy_payload(m), IS_GRAPHS);
    }
    size_t np = g ? cucap_fb_graph_payloads_len(g) : 0;
    for (size_t i = 0; i < np; i++) {
      const cucap_fb_mem_region *p = cucap_fb_graph_payloads_at(g, i);
      if (p)
        use(s, cucap_fb_mem_region_data(p), IS_GRAPHS);
    }
    break;
  }
  default:
    break;
  }
}

void info_store_total(info_store *s, const cucap_reader *r) {
  size_t nc = cucap_reader_chunk_count(r), nb = cucap_reader_blob_count(r);
  for (size_t c = 0; c < nc; c++) {
    cucap_reader_chunk ch;
    if (cucap_reader_chunk_get(r, c, &ch) == CUCAP_OK && ch.kind == CUCAP_FB_CHUNKKIND_RECORDS) {
      s->count[IS_RECORDS] += ch.records;
      s->raw[IS_RECORDS] += ch.raw_size;
      s->comp[IS_RECORDS] += ch.compressed_size;
    }
  }
  for (size_t i = 0; i < nb; i++) {
    cucap_hash128 h;
    uint64_t size = 0;
    uint32_t first = 0, pieces = 0;
    if (cucap_reader_blob_get(r, i, &h, &size) != CUCAP_OK ||
        cucap_reader_blob_place(r, i, &first, &pieces) != CUCAP_OK)
      continue;
    cucap_fb_hash128 fh = {h.lo, h.hi};
    uint64_t *v = info_map_slot(&s->use, blob_key(&fh), 0);
    int what = v && *v ? (int)*v - 1 : IS_OTHER;
    /* its pieces' share of the compressed bytes of the blob chunks they
     * lie in (pieces split evenly: an estimate) */
    double comp = 0;
    uint32_t seen = 0;
    for (size_t c = first; c < nc && seen < pieces; c++) {
      cucap_reader_chunk ch;
      if (cucap_reader_chunk_get(r, c, &ch) != CUCAP_OK || ch.kind != CUCAP_FB_CHUNKKIND_BLOBS)
        continue;
      double piece = pieces ? (double)size / pieces : 0;
      if (ch.raw_size)
        comp += piece * (double)ch.compressed_size / (double)ch.raw_size;
      seen++;
    }
    s->count[what]++;
    s->raw[what] += size;
    s->comp[what] += (uint64_t)(comp + 0.5);
  }
}

static const char *const is_names[IS_N] = {"module images", "memory uploads", "copy payloads",
                                           "snapshots",     "argument blocks", "graph payloads",
                                           "other blobs",   "records"};
static const char *const is_keys[IS_N] = {"images", "uploads", "copies", "snapshots",
                                          "args", "graphs", "other", "records"};

void info_store_print_text(const info_store *s) {
  printf("stored by use:   (bytes raw -> compressed; blobs' share estimated per chunk)\n");
  for (int k = 0; k < IS_N; k++)
    if (s->count[k])
      printf("  %-16s %6" PRIu64 " %-7s %12" PRIu64 " -> %12" PRIu64 "\n", is_names[k],
             s->count[k], k == IS_RECORDS ? "records" : "blobs", s->raw[k], s->comp[k]);
}

void info_store_print_json(cucap_json *w, const info_store *s) {
  cucap_json_key(w, "stored");
  cucap_json_object_begin(w);
  for (int k = 0; k < IS_N; k++) {
    cucap_json_key(w, is_keys[k]);
    cucap_json_object_begin(w);
    cucap_json_key(w, "count");
    cucap_json_uint(w, s->count[k]);
    cucap_json_key(w, "raw_bytes");
    cucap_json_uint(w, s->raw[k]);
    cucap_json_key(w, "compressed_bytes");
    cucap_json_uint(w, s->comp[k]);
    cucap_json_object_end(w);
  }
  cucap_json_object_end(w);
}

void info_store_free(info_store *s) { cucap_map_free(&s->use); }
