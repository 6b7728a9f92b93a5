/* cmd_info.c - `cucap info FILE [--json] [--no-demangle]`: a summary of a
 * capture (header, where a trimmed/extracted file came from, record
 * statistics, the top kernels by launch count, the device memory high-water
 * mark, chunk/blob/size figures, the `record --audit` summary when the
 * capture has an Audit record, recovery status). Owner: tools/.
 *
 * Exit: 0 complete capture; 3 damaged/truncated (everything recovered is still
 * printed, then one error line on stderr) or not a capture; 4 I/O error. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucap_cli.h"
#include "cucap_format.h"
#include "cucap_json.h"
#include "cucap_reader.h"
#include "cucap_units.h"
#include "info_parts.h"

#define BODY_SLOTS 256   /* Body union type is a ubyte */

#define MEMCPY_KINDS 256 /* MemcpyKind is a ubyte */
#define CALL_SLOTS 4096  /* cbids above this are counted as "other" */

typedef struct info_stats {
  uint64_t records;
  uint64_t by_body[BODY_SLOTS];
  uint64_t *by_call; /* CALL_SLOTS */
  uint64_t calls_other;
  uint64_t calls_failed; /* result != 0 */
  uint64_t queries_aggregated; /* calls counted in QueryCounts records */
  uint64_t launches;
  uint64_t memcpy_count[MEMCPY_KINDS];
  uint64_t memcpy_bytes[MEMCPY_KINDS];
  uint64_t modules_loaded;
  uint64_t functions;
  uint64_t allocs;
  uint64_t alloc_bytes;
  uint64_t frees;
  uint64_t max_t_exit;
  uint64_t first_seq, last_seq;
  int have_seq;
  /* The first Devices record (format 1.1; libcucap writes the header before
   * the driver is up): a private copy of its buffer (freed by main) and the
   * table inside it. NULL if none. */
  uint8_t *devices_buf;
  const cucap_fb_devices *devices;
  /* The last Audit record (cucap record --audit writes one at exit): a
   * private copy like devices_buf. NULL if none. */
  uint8_t *audit_buf;
  const cucap_fb_audit *audit;
  /* kernels: launches per function handle, names from Function records */
  cucap_cli_fnames *names;
  cucap_map fn_launches;    /* function handle -> launches */
  /* device memory: address -> size of live allocations */
  cucap_map live;
  uint64_t mem_in_use, mem_high;
  uint64_t nvtx_ranges;
  info_store store; /* stored bytes by use */
} info_stats;

static const char info_usage[] =
    "usage: cucap info CAPTURE [--json] [--no-demangle]\n"
    "  Prints the capture's header, record counts per body type and per driver\n"
    "  call, launches, memcpy bytes by direction, modules, functions,\n"
    "  allocations, the top kernels by launch count (demangled unless\n"
    "  --no-demangle), the device memory high-water mark, NVTX ranges,\n"
    "  where a trimmed/extracted file came from, blobs, chunks, raw vs\n"
    "  compressed size, stored bytes by use (module images, memory uploads,\n"
    "  copies, snapshots, argument blocks, records), duration, the\n"
    "  driver-call audit (captures made with `record --audit`) and whether\n"
    "  the file is complete.\n"
    "  --json   one JSON object instead of text\n"
    "exit: 0 complete, 3 damaged/truncated/not a capture (what was recovered\n"
    "is still printed), 4 I/O error, 2 usage\n";

static void iso8601(uint64_t ns, char *out, size_t n) {
  time_t s = (time_t)(ns / 1000000000ull);
  struct tm tm;
  if (!gmtime_r(&s, &tm)) {
    snprintf(out, n, "?");
    return;
  }
  char base[40];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, n, "%s.%09" PRIu64 "Z", base, (uint64_t)(ns % 1000000000u));
}

/* CUDA version ints are 1000*major + 10*minor. */
static void cuda_version_str(int v, char *out, size_t n) {
  if (v <= 0)
    snprintf(out, n, "unknown");
  else
    snprintf(out, n, "%d.%d (%d)", v / 1000, (v % 1000) / 10, v);
}

static const char *body_name(unsigned t) {
  const char *s = cucap_fb_body_name((int)t);
  return s ? s : "?";
}

static const char *memcpy_kind_name(unsigned k) {
  const char *s = cucap_fb_memcpy_kind_name((int)k);
  return s ? s : "?";
}

/* Keeps a copy of the first Devices record. */
static void keep_devices(info_stats *st, const cucap_fb_record *rec, const void *buf,
                         size_t size) {
  if (!st->devices && buf && size >= 4) {
    /* buf is verified and valid until the next call: keep a copy. The
     * copy is 8-aligned (malloc) like the reader's buffer, so the table
     * offset carries over. */
    const cucap_fb_devices *dv = cucap_fb_record_body_as_devices(rec);
    uint8_t *copy = dv ? malloc(size) : NULL;
    if (copy) {
      memcpy(copy, buf, size);
      st->devices_buf = copy;
      st->devices =
          (const cucap_fb_devices *)(copy + ((const uint8_t *)dv - (const uint8_t *)buf));
    }
  }
}

/* Keeps a copy of the last Audit record. */
static void keep_audit(info_stats *st, const cucap_fb_record *rec, const void *buf,
                       size_t size) {
  if (buf && size >= 4) { /* keep the last one; copied as for Devices */
    const cucap_fb_audit *au = cucap_fb_record_body_as_audit(rec);
    uint8_t *copy = au ? malloc(size) : NULL;
    if (copy) {
      memcpy(copy, buf, size);
      free(st->audit_buf);
      st->audit_buf = copy;
      st->audit =
          (const cucap_fb_audit *)(copy + ((const uint8_t *)au - (const uint8_t *)buf));
    }
  }
}

/* The calls a QueryCounts record counts, added to the per-call counts. */
static void count_queries(info_stats *st, const cucap_fb_record *rec) {
  /* format 1.3: pure queries counted per thread, one record per flush */
  const cucap_fb_query_counts *qc = cucap_fb_record_body_as_query_counts(rec);
  size_t nq = qc ? cucap_fb_query_counts_entries_len(qc) : 0;
  for (size_t i = 0; i < nq; i++) {
    const cucap_fb_query_count *e = cucap_fb_query_counts_entries_at(qc, i);
    if (!e)
      continue;
    uint32_t c = cucap_fb_query_count_call(e);
    uint64_t k = cucap_fb_query_count_count(e);
    if (c && c < CALL_SLOTS)
      st->by_call[c] += k;
    else if (c)
      st->calls_other += k;
    if (c && cucap_fb_query_count_result(e) != 0)
      st->calls_failed += k;
    st->queries_aggregated += k;
  }
}

/* An allocation, and the device memory live after it. */
static void count_alloc(info_stats *st, const cucap_fb_record *rec) {
  const cucap_fb_alloc *a = cucap_fb_record_body_as_alloc(rec);
  if (a) {
    st->allocs++;
    st->alloc_bytes += cucap_fb_alloc_size(a);
    uint64_t *sz = cucap_fb_record_result(rec) == 0 && info_is_device_kind(cucap_fb_alloc_kind(a))
                       ? info_map_slot(&st->live, cucap_fb_alloc_address(a), 1) : NULL;
    if (sz) {
      st->mem_in_use += cucap_fb_alloc_size(a) - *sz; /* a reused address replaces */
      *sz = cucap_fb_alloc_size(a);
      if (st->mem_in_use > st->mem_high)
        st->mem_high = st->mem_in_use;
    }
  }
}

/* What every record adds: counts by body type and call, the seq range, the
 * latest exit time. */
static void count_record(info_stats *st, const cucap_fb_record *rec) {
  st->records++;
  cucap_cli_fnames_feed(st->names, rec);
  info_store_feed(&st->store, rec);
  uint8_t bt = cucap_fb_record_body_type(rec);
  st->by_body[bt]++;
  uint32_t call = cucap_fb_record_call(rec);
  if (call) {
    if (call < CALL_SLOTS)
      st->by_call[call]++;
    else
      st->calls_other++;
    if (cucap_fb_record_result(rec) != 0)
      st->calls_failed++;
  }
  uint64_t seq = cucap_fb_record_seq(rec);
  if (seq) {
    if (!st->have_seq || seq < st->first_seq)
      st->first_seq = seq;
    if (!st->have_seq || seq > st->last_seq)
      st->last_seq = seq;
    st->have_seq = 1;
  }
  uint64_t te = cucap_fb_record_t_exit(rec);
  if (te > st->max_t_exit)
    st->max_t_exit = te;
}

/* What a record adds by its body type. */
static void count_body(info_stats *st, const cucap_fb_record *rec, const void *buf,
                       size_t size) {
  uint8_t bt = cucap_fb_record_body_type(rec);
  switch (bt) {
  case CUCAP_FB_BODY_DEVICES:
    keep_devices(st, rec, buf, size);
    break;
  case CUCAP_FB_BODY_AUDIT:
    keep_audit(st, rec, buf, size);
    break;
  case CUCAP_FB_BODY_QUERYCOUNTS:
    count_queries(st, rec);
    break;
  case CUCAP_FB_BODY_LAUNCH: {
    st->launches++;
    const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
    uint64_t *c = l && cucap_fb_record_result(rec) == 0
                      ? info_map_slot(&st->fn_launches, cucap_fb_launch_function(l), 1) : NULL;
    if (c)
      (*c)++;
    break;
  }
  case CUCAP_FB_BODY_NVTX: {
    int op = cucap_fb_nvtx_op(cucap_fb_record_body_as_nvtx(rec));
    st->nvtx_ranges += op == CUCAP_FB_NVTXOP_PUSH || op == CUCAP_FB_NVTXOP_RANGESTART;
    break;
  }
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
    if (m) {
      uint8_t k = cucap_fb_memcpy_kind(m);
      st->memcpy_count[k]++;
      st->memcpy_bytes[k] += cucap_fb_memcpy_size(m);
    }
    break;
  }
  case CUCAP_FB_BODY_MODULE: {
    const cucap_fb_module *m = cucap_fb_record_body_as_module(rec);
    if (m && cucap_fb_module_op(m) == CUCAP_FB_MODULEOP_LOAD)
      st->modules_loaded++;
    break;
  }
  case CUCAP_FB_BODY_FUNCTION:
    st->functions++;
    break;
  case CUCAP_FB_BODY_ALLOC:
    count_alloc(st, rec);
    break;
  case CUCAP_FB_BODY_FREE: {
    st->frees++;
    const cucap_fb_free *f = cucap_fb_record_body_as_free(rec);
    uint64_t *sz = f && cucap_fb_record_result(rec) == 0
                       ? info_map_slot(&st->live, cucap_fb_free_address(f), 0) : NULL;
    if (sz) {
      st->mem_in_use -= *sz;
      *sz = 0;
    }
    break;
  }
  default:
    break;
  }
}

static cucap_status gather(cucap_reader *r, info_stats *st) {
  for (;;) {
    const void *rec_v = NULL, *buf = NULL;
    size_t size = 0;
    cucap_status s = cucap_reader_next(r, &rec_v, &buf, &size);
    if (s == CUCAP_END)
      return CUCAP_OK;
    if (s != CUCAP_OK)
      return s;
    const cucap_fb_record *rec = rec_v;
    count_record(st, rec);
    count_body(st, rec, buf, size);
  }
}

typedef struct info_totals {
  uint64_t blob_count, blob_bytes;
  uint64_t duration_ns;
  int duration_from_index;
  cucap_reader_recovery rec;
  unsigned major, minor;
} info_totals;

static const uint64_t *sort_calls; /* qsort has no context argument */
static int cmp_calls(const void *a, const void *b) {
  unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
  if (sort_calls[x] != sort_calls[y])
    return sort_calls[x] > sort_calls[y] ? -1 : 1;
  return x < y ? -1 : (x > y);
}

/* Kernels by launch count (handles of the same name added up). */
typedef struct kcount {
  const char *name;
  uint64_t n;
} kcount;

static int kcount_cmp(const void *a, const void *b) {
  const kcount *x = a, *y = b;
  if (x->n != y->n)
    return x->n > y->n ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* malloc'ed array (caller frees), *n entries; NULL on OOM or none. */
static kcount *top_kernels(const info_stats *st, size_t *n) {
  *n = 0;
  kcount *v = calloc(cucap_map_size(&st->fn_launches) + 1, sizeof *v);
  if (!v)
    return NULL;
  /* slot order; the sort below orders by count and the merged names */
  uint64_t fn, launches;
  for (size_t pos = 0; cucap_map_next(&st->fn_launches, &pos, &fn, &launches);) {
    const char *nm = cucap_cli_fnames_get(st->names, fn);
    if (!nm)
      nm = "(unknown function)";
    size_t j = 0;
    while (j < *n && strcmp(v[j].name, nm))
      j++;
    if (j == *n)
      v[(*n)++].name = nm;
    v[j].n += launches;
  }
  qsort(v, *n, sizeof *v, kcount_cmp);
  return v;
}

static int g_demangle = 1;

static const char *shown_name(const char *nm, char *buf, size_t n) {
  return g_demangle ? cucap_cli_demangle(nm, buf, n) : nm;
}

/* The sections of the text summary, in the order printed; first where the
 * file is and what made it. */
static void text_header(const cucap_fb_file_header *h, const info_totals *t, const char *path) {
  char tmp[128];
  printf("file:            %s\n", path);
  printf("format:          %u.%u\n", t->major, t->minor);
  const char *s;
  printf("cucap version:   %s\n",
         (s = cucap_fb_file_header_cucap_version(h)) ? s : "?");
  printf("producer:        %s\n",
         (s = cucap_fb_file_header_producer(h)) ? s : "?");
  printf("host:            %s\n",
         (s = cucap_fb_file_header_hostname(h)) ? s : "?");
  printf("pid:             %u\n", (unsigned)cucap_fb_file_header_pid(h));
  iso8601(cucap_fb_file_header_start_time_ns(h), tmp, sizeof tmp);
  printf("start time:      %s\n", tmp);
  printf("command line:   ");
  size_t na = cucap_fb_file_header_argv_len(h);
  if (na == 0)
    printf(" ?");
  for (size_t i = 0; i < na; i++) {
    const char *a = cucap_fb_file_header_argv_at(h, i);
    printf(" %s", a ? a : "");
  }
  printf("\n");
  if ((s = cucap_fb_file_header_options(h)) && *s)
    printf("record options:  %s\n", s);
}

/* Where a trimmed/extracted file came from. */
static void text_origin(const cucap_fb_file_header *h) {
  const cucap_fb_origin *org = cucap_fb_file_header_origin(h);
  if (org) {
    const char *cmd = cucap_fb_origin_command(org), *src = cucap_fb_origin_source(org);
    const char *sel = cucap_fb_origin_selection(org);
    int state = cucap_fb_origin_state(org);
    printf("made by:         cucap %s %s of %s (launches %" PRIu64 "..%" PRIu64 ")\n",
           cmd ? cmd : "?", sel ? sel : "?", src ? src : "?",
           cucap_fb_origin_launch_first(org), cucap_fb_origin_launch_last(org));
    printf("state prefix:    %" PRIu64 " records; memory contents from %s\n",
           cucap_fb_origin_state_records(org),
           state == CUCAP_FB_STATESOURCE_RECORDEDSNAPSHOT ? "a snapshot recorded in the source"
           : state == CUCAP_FB_STATESOURCE_REPLAY         ? "a replay of the source on a GPU"
                                                          : "nowhere (no state)");
  }
}

/* The recording machine: driver, toolkit, environment, devices. */
static void text_machine(const cucap_fb_file_header *h, const info_stats *st) {
  char tmp[128], tmp2[64];
  /* Header first; libcucap captures have them in the Devices record. */
  int drv = cucap_fb_file_header_driver_version(h);
  if (drv <= 0 && st->devices)
    drv = cucap_fb_devices_driver_version(st->devices);
  cuda_version_str(drv, tmp, sizeof tmp);
  printf("driver version:  %s\n", tmp);
  cuda_version_str(cucap_fb_file_header_toolkit_version(h), tmp, sizeof tmp);
  printf("toolkit version: %s\n", tmp);
  size_t ne = cucap_fb_file_header_env_len(h);
  if (ne) {
    printf("environment:\n");
    for (size_t i = 0; i < ne; i++) {
      const cucap_fb_env_var *e = cucap_fb_file_header_env_at(h, i);
      const char *k = e ? cucap_fb_env_var_key(e) : NULL;
      const char *v = e ? cucap_fb_env_var_value(e) : NULL;
      /* Long values (NVIDIA_REQUIRE_CUDA is kilobytes) are cut for reading;
       * `cucap dump` prints them whole. */
      size_t vl = v ? strlen(v) : 0;
      if (vl > 100)
        printf("  %s=%.97s... (%zu chars)\n", k ? k : "?", v, vl);
      else
        printf("  %s=%s\n", k ? k : "?", v ? v : "");
    }
  }
  size_t nd = cucap_fb_file_header_devices_len(h);
  int from_rec = nd == 0 && st->devices;
  if (from_rec)
    nd = cucap_fb_devices_devices_len(st->devices);
  printf("devices:         %zu\n", nd);
  for (size_t i = 0; i < nd; i++) {
    const cucap_fb_device_props *d = from_rec
                                         ? cucap_fb_devices_devices_at(st->devices, i)
                                         : cucap_fb_file_header_devices_at(h, i);
    if (!d)
      continue;
    const char *name = cucap_fb_device_props_name(d);
    const char *pci = cucap_fb_device_props_pci_bus_id(d);
    cucap_bytes_human(cucap_fb_device_props_total_mem(d), tmp2, sizeof tmp2);
    printf("  [%d] %s, sm_%d%d, %d SMs, %s, pci %s\n",
           (int)cucap_fb_device_props_ordinal(d), name ? name : "?",
           (int)cucap_fb_device_props_cc_major(d),
           (int)cucap_fb_device_props_cc_minor(d),
           (int)cucap_fb_device_props_sm_count(d), tmp2, pci ? pci : "?");
  }
}

/* Records per body type and driver calls per entry point. */
static void text_calls(const info_stats *st) {
  char tmp[128];
  printf("records:         %" PRIu64 "\n", st->records);
  for (unsigned b = 0; b < BODY_SLOTS; b++)
    if (st->by_body[b])
      printf("  %-16s %" PRIu64 "\n", b == 0 ? "(none)" : body_name(b),
             st->by_body[b]);
  uint64_t ncalls = st->calls_other;
  for (unsigned c = 0; c < CALL_SLOTS; c++)
    ncalls += st->by_call[c];
  printf("driver calls:    %" PRIu64 " (%" PRIu64 " returned an error)\n",
         ncalls, st->calls_failed);
  if (st->queries_aggregated)
    printf("                 of which %" PRIu64 " pure queries counted in QueryCounts "
           "records, not recorded one by one\n", st->queries_aggregated);
  /* Most frequent first (ties by cbid), like a profile. */
  unsigned order[CALL_SLOTS], n_order = 0;
  for (unsigned c = 0; c < CALL_SLOTS; c++)
    if (st->by_call[c])
      order[n_order++] = c;
  sort_calls = st->by_call;
  qsort(order, n_order, sizeof order[0], cmp_calls);
  for (unsigned i = 0; i < n_order; i++) {
    unsigned c = order[i];
    const char *n = cucap_cli_cbid_name(c);
    if (n)
      printf("  %-32s %" PRIu64 "\n", n, st->by_call[c]);
    else {
      snprintf(tmp, sizeof tmp, "cbid %u", c);
      printf("  %-32s %" PRIu64 "\n", tmp, st->by_call[c]);
    }
  }
  if (st->calls_other)
    printf("  %-32s %" PRIu64 "\n", "(cbid >= 4096)", st->calls_other);
}

/* Launches and the top kernels by launch count. */
static void text_kernels(const info_stats *st) {
  printf("launches:        %" PRIu64 "\n", st->launches);
  size_t nk = 0;
  kcount *kc = top_kernels(st, &nk);
  if (kc && nk) {
    printf("top kernels by launch count:\n");
    char dem[2048];
    for (size_t i = 0; i < nk && i < 10; i++) {
      printf("  %8" PRIu64 "  ", kc[i].n);
      for (const char *p = shown_name(kc[i].name, dem, sizeof dem); *p; p++)
        putchar((unsigned char)*p < 0x20 ? ' ' : *p);
      putchar('\n');
    }
    if (nk > 10)
      printf("  ... and %zu more kernels\n", nk - 10);
  }
  free(kc);
}

/* Device memory, NVTX ranges, copies, modules, functions, allocations. */
static void text_resources(const info_stats *st) {
  char tmp2[64];
  cucap_bytes_human(st->mem_high, tmp2, sizeof tmp2);
  printf("device memory:   high-water mark %" PRIu64 " bytes (%s) of allocations live at once\n",
         st->mem_high, tmp2);
  if (st->nvtx_ranges)
    printf("NVTX ranges:     %" PRIu64 "\n", st->nvtx_ranges);
  printf("memcpy:\n");
  int any = 0;
  for (unsigned k = 0; k < MEMCPY_KINDS; k++) {
    if (!st->memcpy_count[k])
      continue;
    any = 1;
    cucap_bytes_human(st->memcpy_bytes[k], tmp2, sizeof tmp2);
    printf("  %-8s %" PRIu64 " copies, %" PRIu64 " bytes (%s)\n",
           memcpy_kind_name(k), st->memcpy_count[k], st->memcpy_bytes[k], tmp2);
  }
  if (!any)
    printf("  (none)\n");
  printf("modules loaded:  %" PRIu64 "\n", st->modules_loaded);
  printf("functions:       %" PRIu64 "\n", st->functions);
  cucap_bytes_human(st->alloc_bytes, tmp2, sizeof tmp2);
  printf("allocations:     %" PRIu64 " (%" PRIu64 " bytes, %s), %" PRIu64
         " frees\n",
         st->allocs, st->alloc_bytes, tmp2, st->frees);
}

/* Blobs, chunks, payload, stored bytes by use, file size, duration. */
static void text_storage(const info_stats *st, const info_totals *t) {
  char tmp2[64];
  cucap_bytes_human(t->blob_bytes, tmp2, sizeof tmp2);
  printf("blobs:           %" PRIu64 " (%" PRIu64 " bytes, %s)\n",
         t->blob_count, t->blob_bytes, tmp2);
  printf("chunks:          %" PRIu64 " (%" PRIu64 " record, %" PRIu64
         " blob)\n",
         t->rec.chunks, t->rec.record_chunks, t->rec.blob_chunks);
  double ratio = t->rec.compressed_bytes
                     ? (double)t->rec.raw_bytes / (double)t->rec.compressed_bytes
                     : 0.0;
  printf("payload:         %" PRIu64 " bytes raw, %" PRIu64
         " compressed (ratio %.2fx)\n",
         t->rec.raw_bytes, t->rec.compressed_bytes, ratio);
  info_store_print_text(&st->store);
  cucap_bytes_human(t->rec.file_size, tmp2, sizeof tmp2);
  printf("file size:       %" PRIu64 " bytes (%s)\n", t->rec.file_size, tmp2);
  printf("duration:        %.6f s%s\n", (double)t->duration_ns / 1e9,
         t->duration_from_index ? "" : " (from last record; no end time)");
}

/* Whether the file is complete, else what stopped reading. */
static void text_status(const info_totals *t, cucap_status iter_status) {
  if (t->rec.complete && iter_status == CUCAP_OK)
    printf("status:          complete\n");
  else
    printf("status:          recovered %" PRIu64 " chunks; problem: %s\n",
           t->rec.chunks,
           t->rec.problem[0] ? t->rec.problem
                             : (iter_status != CUCAP_OK
                                    ? cucap_status_str(iter_status)
                                    : "no valid trailer/index"));
}

static void print_text(const cucap_fb_file_header *h, const info_stats *st,
                       const info_totals *t, const char *path,
                       cucap_status iter_status) {
  text_header(h, t, path);
  text_origin(h);
  text_machine(h, st);
  text_calls(st);
  text_kernels(st);
  text_resources(st);
  text_storage(st, t);
  if (st->audit)
    info_print_audit_text(st->audit);
  text_status(t, iter_status);
}

static void json_str_or_null(cucap_json *w, const char *key, const char *s) {
  cucap_json_key(w, key);
  cucap_json_string(w, s);
}

/* The sections of the JSON object, in the order written; first the file,
 * its format, header, start time and Devices record. */
static void json_header(cucap_json *w, const cucap_fb_file_header *h, const info_stats *st,
                        const info_totals *t, const char *path) {
  char tmp[128];
  json_str_or_null(w, "file", path);
  cucap_json_key(w, "format");
  snprintf(tmp, sizeof tmp, "%u.%u", t->major, t->minor);
  cucap_json_string(w, tmp);
  cucap_json_key(w, "header");
  cucap_fb_file_header_to_json(h, w, CUCAP_JSON_HEX_BYTES | CUCAP_JSON_HASH_HEX);
  iso8601(cucap_fb_file_header_start_time_ns(h), tmp, sizeof tmp);
  json_str_or_null(w, "start_time", tmp);
  if (st->devices) { /* the first Devices record's body (format 1.1) */
    cucap_json_key(w, "devices_record");
    cucap_fb_devices_to_json(st->devices, w, CUCAP_JSON_HEX_BYTES | CUCAP_JSON_HASH_HEX);
  }
}

/* Records per body type, driver calls per entry point. */
static void json_calls(cucap_json *w, const info_stats *st) {
  char tmp[128];
  cucap_json_key(w, "records");
  cucap_json_uint(w, st->records);
  cucap_json_key(w, "records_by_body");
  cucap_json_object_begin(w);
  for (unsigned b = 0; b < BODY_SLOTS; b++)
    if (st->by_body[b]) {
      cucap_json_key(w, b == 0 ? "NONE" : body_name(b));
      cucap_json_uint(w, st->by_body[b]);
    }
  cucap_json_object_end(w);
  cucap_json_key(w, "calls_by_name");
  cucap_json_object_begin(w);
  for (unsigned c = 0; c < CALL_SLOTS; c++) {
    if (!st->by_call[c])
      continue;
    const char *n = cucap_cli_cbid_name(c);
    if (!n) {
      snprintf(tmp, sizeof tmp, "cbid_%u", c);
      n = tmp;
    }
    cucap_json_key(w, n);
    cucap_json_uint(w, st->by_call[c]);
  }
  if (st->calls_other) {
    cucap_json_key(w, "other");
    cucap_json_uint(w, st->calls_other);
  }
  cucap_json_object_end(w);
  cucap_json_key(w, "calls_failed");
  cucap_json_uint(w, st->calls_failed);
  cucap_json_key(w, "queries_aggregated");
  cucap_json_uint(w, st->queries_aggregated);
}

/* Launches and every kernel by launch count. */
static void json_kernels(cucap_json *w, const info_stats *st) {
  cucap_json_key(w, "launches");
  cucap_json_uint(w, st->launches);
  cucap_json_key(w, "top_kernels"); /* all of them, most launches first */
  cucap_json_array_begin(w);
  size_t nk = 0;
  kcount *kc = top_kernels(st, &nk);
  char dem[2048];
  for (size_t i = 0; kc && i < nk; i++) {
    cucap_json_object_begin(w);
    cucap_json_key(w, "name");
    cucap_json_string(w, shown_name(kc[i].name, dem, sizeof dem));
    cucap_json_key(w, "launches");
    cucap_json_uint(w, kc[i].n);
    cucap_json_object_end(w);
  }
  free(kc);
  cucap_json_array_end(w);
}

/* Device memory, NVTX ranges, copies, modules, functions, allocations. */
static void json_resources(cucap_json *w, const info_stats *st) {
  cucap_json_key(w, "memory_high_water_bytes");
  cucap_json_uint(w, st->mem_high);
  cucap_json_key(w, "nvtx_ranges");
  cucap_json_uint(w, st->nvtx_ranges);
  cucap_json_key(w, "memcpy");
  cucap_json_object_begin(w);
  for (unsigned k = 0; k < MEMCPY_KINDS; k++) {
    if (!st->memcpy_count[k])
      continue;
    cucap_json_key(w, memcpy_kind_name(k));
    cucap_json_object_begin(w);
    cucap_json_key(w, "count");
    cucap_json_uint(w, st->memcpy_count[k]);
    cucap_json_key(w, "bytes");
    cucap_json_uint(w, st->memcpy_bytes[k]);
    cucap_json_object_end(w);
  }
  cucap_json_object_end(w);
  cucap_json_key(w, "modules_loaded");
  cucap_json_uint(w, st->modules_loaded);
  cucap_json_key(w, "functions");
  cucap_json_uint(w, st->functions);
  cucap_json_key(w, "allocations");
  cucap_json_uint(w, st->allocs);
  cucap_json_key(w, "allocation_bytes");
  cucap_json_uint(w, st->alloc_bytes);
  cucap_json_key(w, "frees");
  cucap_json_uint(w, st->frees);
}

/* Blobs, chunks, payload, stored bytes by use, file size, duration. */
static void json_storage(cucap_json *w, const info_stats *st, const info_totals *t) {
  cucap_json_key(w, "blobs");
  cucap_json_uint(w, t->blob_count);
  cucap_json_key(w, "blob_bytes");
  cucap_json_uint(w, t->blob_bytes);
  cucap_json_key(w, "chunks");
  cucap_json_uint(w, t->rec.chunks);
  cucap_json_key(w, "record_chunks");
  cucap_json_uint(w, t->rec.record_chunks);
  cucap_json_key(w, "blob_chunks");
  cucap_json_uint(w, t->rec.blob_chunks);
  cucap_json_key(w, "raw_bytes");
  cucap_json_uint(w, t->rec.raw_bytes);
  cucap_json_key(w, "compressed_bytes");
  cucap_json_uint(w, t->rec.compressed_bytes);
  cucap_json_key(w, "ratio");
  cucap_json_double(w, t->rec.compressed_bytes
                           ? (double)t->rec.raw_bytes /
                                 (double)t->rec.compressed_bytes
                           : 0.0);
  info_store_print_json(w, &st->store);
  cucap_json_key(w, "file_size");
  cucap_json_uint(w, t->rec.file_size);
  cucap_json_key(w, "duration_ns");
  cucap_json_uint(w, t->duration_ns);
}

/* Whether the file is complete, else what stopped reading. */
static void json_status(cucap_json *w, const info_totals *t, cucap_status iter_status) {
  cucap_json_key(w, "complete");
  cucap_json_bool(w, t->rec.complete && iter_status == CUCAP_OK);
  cucap_json_key(w, "problem");
  if (t->rec.complete && iter_status == CUCAP_OK)
    cucap_json_null(w);
  else
    cucap_json_string(w, t->rec.problem[0] ? t->rec.problem
                                           : cucap_status_str(iter_status));
}

static void print_json(const cucap_fb_file_header *h, const info_stats *st,
                       const info_totals *t, const char *path,
                       cucap_status iter_status) {
  cucap_json *w = cucap_json_create_file(stdout, 0);
  if (!w)
    return;
  cucap_json_object_begin(w);
  json_header(w, h, st, t, path);
  json_calls(w, st);
  json_kernels(w, st);
  json_resources(w, st);
  json_storage(w, st, t);
  if (st->audit)
    info_print_audit_json(w, st->audit);
  json_status(w, t, iter_status);
  cucap_json_object_end(w);
  cucap_json_newline(w);
  cucap_json_destroy(w);
}

/* Reads the options (--no-demangle sets g_demangle); returns -1 to go on,
 * else the exit code to return. */
static int info_parse(int argc, char **argv, int *json, const char **path) {
  static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
                                           {"no-demangle", no_argument, NULL, 'D'},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  int c;
  *json = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
    switch (c) {
    case 'j':
      *json = 1;
      break;
    case 'D':
      g_demangle = 0;
      break;
    case 'h':
      fputs(info_usage, stdout);
      return CUCAP_EXIT_OK;
    default:
      fputs(info_usage, stderr);
      return CUCAP_EXIT_USAGE;
    }
  }
  if (optind + 1 != argc) {
    cucap_cli_error("info", NULL, optind >= argc ? "missing CAPTURE argument"
                                                 : "too many arguments");
    fputs(info_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  *path = argv[optind];
  return -1;
}

/* The figures of the file as a whole (chunks, blobs, sizes, duration), after
 * the records were read. */
static void info_totals_fill(cucap_reader *r, info_stats *st, info_totals *t) {
  memset(t, 0, sizeof *t);
  cucap_reader_recovery_get(r, &t->rec);
  t->rec.problem[sizeof t->rec.problem - 1] = 0;
  cucap_reader_version(r, &t->major, &t->minor);
  size_t nb = cucap_reader_blob_count(r);
  for (size_t i = 0; i < nb; i++) {
    cucap_hash128 hh;
    uint64_t sz = 0;
    if (cucap_reader_blob_get(r, i, &hh, &sz) == CUCAP_OK) {
      t->blob_count++;
      t->blob_bytes += sz;
    }
  }
  info_store_total(&st->store, r);
  const cucap_fb_file_header *h = cucap_reader_header(r);
  uint64_t start = cucap_fb_file_header_start_mono_ns(h);
  if (t->rec.end_mono_ns && t->rec.end_mono_ns >= start) {
    t->duration_ns = t->rec.end_mono_ns - start;
    t->duration_from_index = 1;
  } else {
    t->duration_ns = st->max_t_exit; /* record times are relative to start */
  }
}

/* The exit code for how reading ended (is): one error line when it stopped
 * on a problem. */
static int info_verdict(const char *path, cucap_reader *r, const info_stats *st,
                        cucap_status is) {
  int rc;
  if (is != CUCAP_OK) {
    cucap_reader_recovery rec;
    cucap_reader_recovery_get(r, &rec);
    rec.problem[sizeof rec.problem - 1] = 0;
    cucap_cli_error("info", path, "%s after %" PRIu64 " records: %s",
                    cucap_status_str(is), st->records,
                    rec.problem[0] ? rec.problem : "reading stopped");
    rc = cucap_cli_exit_code(is);
    if (rc == CUCAP_EXIT_OK)
      rc = CUCAP_EXIT_BAD_INPUT;
  } else {
    rc = cucap_cli_report_recovery("info", path, r);
  }
  return rc;
}

static void info_stats_free(info_stats *st) {
  free(st->by_call);
  cucap_cli_fnames_destroy(st->names);
  cucap_map_free(&st->fn_launches);
  cucap_map_free(&st->live);
  info_store_free(&st->store);
  free(st->devices_buf);
  free(st->audit_buf);
  free(st);
}

int cucap_cmd_info(int argc, char **argv) {
  int json;
  const char *path = NULL;
  int rc = info_parse(argc, argv, &json, &path);
  if (rc >= 0)
    return rc;
  cucap_reader *r = NULL;
  rc = cucap_cli_open("info", path, &r);
  if (rc != CUCAP_EXIT_OK)
    return rc;

  info_stats *st = calloc(1, sizeof *st);
  uint64_t *calls = calloc(CALL_SLOTS, sizeof *calls);
  if (!st || !calls) {
    free(st);
    free(calls);
    cucap_reader_destroy(r);
    cucap_cli_error("info", path, "out of memory");
    return CUCAP_EXIT_IO;
  }
  st->by_call = calls;
  st->names = cucap_cli_fnames_create();
  cucap_status is = st->names ? gather(r, st) : CUCAP_ERR_NOMEM;

  info_totals t;
  info_totals_fill(r, st, &t);
  const cucap_fb_file_header *h = cucap_reader_header(r);
  if (json)
    print_json(h, st, &t, path, is);
  else
    print_text(h, st, &t, path, is);
  fflush(stdout);

  rc = info_verdict(path, r, st, is);
  info_stats_free(st);
  cucap_reader_destroy(r);
  return rc;
}
