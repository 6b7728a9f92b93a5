/* cmd_dump.c - `cucap dump FILE [--json] [--body TYPE] [--limit N] [--no-hex]
 *   [--no-symbols] [--no-demangle]`.
 * Owner: tools/.
 *
 * --json: JSON Lines. Line 1 is {"header": <FileHeader>}; then one line per
 * record, {"index": N, <Record fields as cucap_fb_record_to_json prints them>}
 * where N is the record's 0-based position among the file's records (blob
 * pieces are not records of the stream and are not printed). Keys are the
 * schema's field names, so they are stable across versions (fields are only
 * appended).
 * A record with a host callstack (stack != 0) gets a last key
 * "callstack": ["func+0x1a (libfoo.so+0x1234)", ...], innermost frame first,
 * built from the Callstack record of that id and the latest ModuleMap seen so
 * far (both come before their first use in a capture). Frames read
 * "function (file:line)" from the object's DWARF, else
 * "function+0xOFF (object+0xOFF, no debug info)", "object+0xOFF (no debug
 * info)" (no symbol), "object+0xOFF (build-id mismatch, no debug info)" (the
 * file on this machine is not the recorded one) or "0x..." (in no mapped
 * object / no ModuleMap yet); see cucap_cli_frames. The key is left out when
 * the Callstack record of the id was not seen. --no-symbols leaves the key
 * out altogether (the raw frames stay in the Callstack records) and opens no
 * object files.
 * Without --json: "#seq tid call result body-summary", one line per record;
 * kernels are named (demangled unless --no-demangle), cuGetProcAddress
 * lookups name the entry point asked for and consecutive lookups share one
 * line ("#3-#27 tid cuGetProcAddress_v2 x25: cuInit cuDeviceGet ...");
 * Launch and Memcpy lines are followed by "    at F0 <- F1 <- F2" (the
 * innermost 3 frames) when they have a callstack. A failed call's result
 * reads "CUDA_ERROR_INVALID_VALUE(1)" (the number alone when unknown); lines
 * over 160 characters fold at spaces onto lines indented 6 spaces.
 * On a damaged file everything recovered is printed, then one error line on
 * stderr, exit 3. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cucap_schema.h"
#include "cucap_cli.h"
#include "cucap_format.h"
#include "cucap_json.h"
#include "cucap_reader.h"
#include "cucap_symbolize.h"

static const char dump_usage[] =
    "usage: cucap dump CAPTURE [--json] [--body TYPE] [--limit N] [--no-hex]\n"
    "                          [--no-symbols] [--no-demangle]\n"
    "  --json       JSON Lines: {\"header\":{...}} then {\"index\":N,...} per record\n"
    "  --body TYPE  only records whose body is TYPE (Launch, Memcpy, Alloc, ...;\n"
    "               case-insensitive; NONE for records without a body)\n"
    "  --limit N    stop after printing N records\n"
    "  --no-hex     print byte vectors as arrays of numbers, hashes as\n"
    "               {lo,hi} objects (default: hex strings)\n"
    "  --no-symbols do not symbolize host callstacks (no \"callstack\" key,\n"
    "               no stack lines; object files are not opened)\n"
    "  --no-demangle  print C++ kernel and function names as recorded (mangled)\n"
    "exit: 0 complete, 3 damaged/truncated/not a capture (what was recovered\n"
    "is still printed), 4 I/O error, 2 usage\n";

static int parse_body(const char *s) {
  if (!strcasecmp(s, "none"))
    return 0;
  for (int t = 1; t < 256; t++) {
    const char *n = cucap_fb_body_name(t);
    if (n && !strcasecmp(n, s))
      return t;
  }
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (end && !*end && v >= 0 && v < 256)
    return (int)v;
  return -1;
}

typedef struct dump_names {
  cucap_cli_fnames *fn; /* kernel names by handle */
  int demangle;
} dump_names;

static const char *kernel_text(const dump_names *dn, const char *mangled, char *buf,
                               size_t n) {
  if (!mangled)
    return "?";
  return dn->demangle ? cucap_cli_demangle(mangled, buf, n) : mangled;
}

/* The summaries of the body types that say more than their name, one helper
 * each: out/n is what is left of the line after the body's name. */
static void summary_launch(const dump_names *dn, const cucap_fb_record *rec, char *out,
                           size_t n) {
  char dem[1024];
  const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
  if (!l)
    return;
  const cucap_fb_dim3 *g = cucap_fb_launch_grid(l);
  const cucap_fb_dim3 *b = cucap_fb_launch_block(l);
  if (cucap_fb_launch_kind(l) == CUCAP_FB_LAUNCHKIND_HOSTFUNC) {
    snprintf(out, n, " host function 0x%" PRIx64 " stream=0x%" PRIx64,
             cucap_fb_launch_host_fn(l), cucap_fb_launch_stream(l));
    return;
  }
  snprintf(out, n,
           " #%" PRIu64 " %s grid=(%u,%u,%u) block=(%u,%u,%u)"
           " smem=%u stream=0x%" PRIx64,
           cucap_fb_launch_launch_index(l),
           kernel_text(dn, cucap_cli_fnames_get(dn->fn, cucap_fb_launch_function(l)), dem,
                       sizeof dem),
           g ? g->x : 0, g ? g->y : 0, g ? g->z : 0, b ? b->x : 0,
           b ? b->y : 0, b ? b->z : 0, cucap_fb_launch_shared_mem(l),
           cucap_fb_launch_stream(l));
}

static void summary_memcpy(const cucap_fb_record *rec, char *out, size_t n) {
  const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
  if (!m)
    return;
  const char *kn = cucap_fb_memcpy_kind_name(cucap_fb_memcpy_kind(m));
  snprintf(out, n, " %s dst=0x%" PRIx64 " src=0x%" PRIx64 " size=%" PRIu64 "%s",
           kn ? kn : "?", cucap_fb_memcpy_dst(m), cucap_fb_memcpy_src(m),
           cucap_fb_memcpy_size(m), cucap_fb_memcpy_async(m) ? " async" : "");
}

static void summary_module(const cucap_fb_record *rec, char *out, size_t n) {
  const cucap_fb_module *m = cucap_fb_record_body_as_module(rec);
  if (!m)
    return;
  const char *on = cucap_fb_module_op_name(cucap_fb_module_op(m));
  const char *p = cucap_fb_module_path(m);
  if (cucap_fb_module_op(m) == CUCAP_FB_MODULEOP_LIBRARYMODULE) {
    snprintf(out, n, " %s handle=0x%" PRIx64 " library=0x%" PRIx64, on ? on : "?",
             cucap_fb_module_handle(m), cucap_fb_module_library(m));
    return;
  }
  snprintf(out, n, " %s handle=0x%" PRIx64 " size=%" PRIu64 "%s%s",
           on ? on : "?", cucap_fb_module_handle(m),
           cucap_fb_module_image_size(m), p ? " path=" : "", p ? p : "");
}

static void summary_function(const dump_names *dn, const cucap_fb_record *rec, char *out,
                             size_t n) {
  char dem[1024];
  const cucap_fb_function *f = cucap_fb_record_body_as_function(rec);
  if (!f)
    return;
  const char *nm = cucap_fb_function_name(f);
  if (!nm)
    nm = cucap_cli_fnames_get(dn->fn, cucap_fb_function_handle(f));
  snprintf(out, n, " %s handle=0x%" PRIx64 " module=0x%" PRIx64,
           kernel_text(dn, nm, dem, sizeof dem), cucap_fb_function_handle(f),
           cucap_fb_function_module(f));
}

static void summary_query_counts(const cucap_fb_record *rec, char *out, size_t n) {
  /* one record for many calls: say so, and which */
  const cucap_fb_query_counts *qc = cucap_fb_record_body_as_query_counts(rec);
  size_t nq = qc ? cucap_fb_query_counts_entries_len(qc) : 0;
  uint64_t total = 0;
  for (size_t i = 0; i < nq; i++) {
    const cucap_fb_query_count *e = cucap_fb_query_counts_entries_at(qc, i);
    total += e ? cucap_fb_query_count_count(e) : 0;
  }
  int w = snprintf(out, n, " %" PRIu64 " pure queries of this thread, aggregated:", total);
  for (size_t i = 0; i < nq && w > 0 && (size_t)w < n; i++) {
    const cucap_fb_query_count *e = cucap_fb_query_counts_entries_at(qc, i);
    if (!e)
      continue;
    const char *cn = cucap_cli_cbid_name(cucap_fb_query_count_call(e));
    int res = cucap_fb_query_count_result(e);
    int k2 = res ? snprintf(out + w, n - (size_t)w, " %s[result %d]=%" PRIu64, cn ? cn : "?",
                            res, cucap_fb_query_count_count(e))
                 : snprintf(out + w, n - (size_t)w, " %s=%" PRIu64, cn ? cn : "?",
                            cucap_fb_query_count_count(e));
    if (k2 < 0)
      break;
    w += k2;
  }
}

static void summary_note(const cucap_fb_record *rec, char *out, size_t n) {
  const cucap_fb_note *no = cucap_fb_record_body_as_note(rec);
  if (!no)
    return;
  const char *kd = cucap_fb_note_kind(no);
  const char *tx = cucap_fb_note_text(no);
  if (kd && !strcmp(kd, "proc")) { /* cuGetProcAddress: what was asked for */
    snprintf(out, n, " %s (%" PRId64 ")", tx ? tx : "?", (int64_t)cucap_fb_note_value(no));
    return;
  }
  snprintf(out, n, " %s: %s", kd ? kd : "?", tx ? tx : "");
}

static void summary_snapshot(const cucap_fb_record *rec, char *out, size_t n) {
  const cucap_fb_snapshot *sn = cucap_fb_record_body_as_snapshot(rec);
  if (!sn)
    return;
  const char *rn = cucap_fb_snapshot_reason_name(cucap_fb_snapshot_reason(sn));
  uint64_t bytes = 0;
  size_t nr = cucap_fb_snapshot_regions_len(sn);
  for (size_t i = 0; i < nr; i++)
    bytes += cucap_fb_mem_region_size(cucap_fb_snapshot_regions_at(sn, i));
  snprintf(out, n, " %s launch=%" PRIu64 " %zu regions, %" PRIu64 " bytes", rn ? rn : "?",
           cucap_fb_snapshot_launch_index(sn), nr, bytes);
}

static void summary_nvtx(const cucap_fb_record *rec, char *out, size_t n) {
  const cucap_fb_nvtx *nv = cucap_fb_record_body_as_nvtx(rec);
  if (!nv)
    return;
  const char *on = cucap_fb_nvtx_op_name(cucap_fb_nvtx_op(nv));
  const char *m = cucap_fb_nvtx_message(nv);
  int k = snprintf(out, n, " %s", on ? on : "?");
  if (k < 0 || (size_t)k >= n)
    return;
  if (m)
    k += snprintf(out + k, n - (size_t)k, " \"%s\"", m);
  if (k >= 0 && (size_t)k < n && cucap_fb_nvtx_domain(nv))
    k += snprintf(out + k, n - (size_t)k, " domain=0x%" PRIx64, cucap_fb_nvtx_domain(nv));
  if (k >= 0 && (size_t)k < n && cucap_fb_nvtx_range_id(nv))
    k += snprintf(out + k, n - (size_t)k, " id=%" PRIu64, cucap_fb_nvtx_range_id(nv));
  if (k >= 0 && (size_t)k < n &&
      (cucap_fb_nvtx_op(nv) == CUCAP_FB_NVTXOP_PUSH || cucap_fb_nvtx_op(nv) == CUCAP_FB_NVTXOP_POP))
    snprintf(out + k, n - (size_t)k, " level=%d", (int)cucap_fb_nvtx_level(nv));
}

static void summary(const dump_names *dn, const cucap_fb_record *rec, char *out, size_t n) {
  uint8_t bt = cucap_fb_record_body_type(rec);
  const char *bn = bt ? cucap_fb_body_name(bt) : "-";
  if (!bn)
    bn = "?";
  int k = snprintf(out, n, "%s", bn);
  if (k < 0 || (size_t)k >= n)
    return;
  out += k;
  n -= (size_t)k;
  switch (bt) {
  case CUCAP_FB_BODY_LAUNCH:
    summary_launch(dn, rec, out, n);
    break;
  case CUCAP_FB_BODY_MEMCPY:
    summary_memcpy(rec, out, n);
    break;
  case CUCAP_FB_BODY_ALLOC: {
    const cucap_fb_alloc *a = cucap_fb_record_body_as_alloc(rec);
    if (!a)
      break;
    const char *kn = cucap_fb_alloc_kind_name(cucap_fb_alloc_kind(a));
    snprintf(out, n, " %s addr=0x%" PRIx64 " size=%" PRIu64, kn ? kn : "?",
             cucap_fb_alloc_address(a), cucap_fb_alloc_size(a));
    break;
  }
  case CUCAP_FB_BODY_FREE: {
    const cucap_fb_free *f = cucap_fb_record_body_as_free(rec);
    if (f)
      snprintf(out, n, " addr=0x%" PRIx64, cucap_fb_free_address(f));
    break;
  }
  case CUCAP_FB_BODY_MODULE:
    summary_module(rec, out, n);
    break;
  case CUCAP_FB_BODY_FUNCTION:
    summary_function(dn, rec, out, n);
    break;
  case CUCAP_FB_BODY_CONTEXT: {
    const cucap_fb_context *c = cucap_fb_record_body_as_context(rec);
    if (!c)
      break;
    const char *on = cucap_fb_context_op_name(cucap_fb_context_op(c));
    snprintf(out, n, " %s handle=0x%" PRIx64 " device=%d", on ? on : "?",
             cucap_fb_context_handle(c), (int)cucap_fb_context_device(c));
    break;
  }
  case CUCAP_FB_BODY_STREAM: {
    const cucap_fb_stream *s = cucap_fb_record_body_as_stream(rec);
    if (!s)
      break;
    const char *on = cucap_fb_stream_op_name(cucap_fb_stream_op(s));
    snprintf(out, n, " %s handle=0x%" PRIx64, on ? on : "?",
             cucap_fb_stream_handle(s));
    break;
  }
  case CUCAP_FB_BODY_EVENT: {
    const cucap_fb_event *e = cucap_fb_record_body_as_event(rec);
    if (!e)
      break;
    const char *on = cucap_fb_event_op_name(cucap_fb_event_op(e));
    snprintf(out, n, " %s handle=0x%" PRIx64, on ? on : "?",
             cucap_fb_event_handle(e));
    break;
  }
  case CUCAP_FB_BODY_QUERYCOUNTS:
    summary_query_counts(rec, out, n);
    break;
  case CUCAP_FB_BODY_NOTE:
    summary_note(rec, out, n);
    break;
  case CUCAP_FB_BODY_SNAPSHOT:
    summary_snapshot(rec, out, n);
    break;
  case CUCAP_FB_BODY_NVTX:
    summary_nvtx(rec, out, n);
    break;
  default:
    break;
  }
}

/* "#seq tid call result summary" (no newline) into out. */
static void format_human(const dump_names *dn, const cucap_fb_record *rec, char *out,
                         size_t n) {
  char sum[1536];
  char callbuf[32];
  uint32_t call = cucap_fb_record_call(rec);
  const char *cn = call ? cucap_cli_cbid_name(call) : "-";
  if (!cn) {
    snprintf(callbuf, sizeof callbuf, "cbid%u", (unsigned)call);
    cn = callbuf;
  }
  summary(dn, rec, sum, sizeof sum);
  /* Keep one record per line whatever the strings contain. */
  for (char *p = sum; *p; p++)
    if ((unsigned char)*p < 0x20)
      *p = ' ';
  uint64_t seq = cucap_fb_record_seq(rec);
  char seqbuf[24] = "-";
  if (seq)
    snprintf(seqbuf, sizeof seqbuf, "%" PRIu64, seq);
  /* an error by its CUresult name: a bare number means nothing to a reader */
  int res = (int)cucap_fb_record_result(rec);
  const char *rn = res ? cucap_cli_result_name(res) : NULL;
  char resbuf[80];
  if (rn)
    snprintf(resbuf, sizeof resbuf, "%s(%d)", rn, res);
  else
    snprintf(resbuf, sizeof resbuf, "%d", res);
  snprintf(out, n, "#%s %u %s %s %s", seqbuf, (unsigned)cucap_fb_record_tid(rec), cn,
           resbuf, sum);
}

/* Lines longer than this are folded at spaces (a word longer than a line
 * stays whole); each continuation line starts with DUMP_FOLD_INDENT, which
 * no record line nor "    at" stack line does. */
#define DUMP_FOLD_WIDTH 160
#define DUMP_FOLD_INDENT "      "

static void fold_puts(const char *line) {
  size_t width = DUMP_FOLD_WIDTH, len = strlen(line);
  int cont = 0;
  while (len > width) {
    size_t cut = width;
    while (cut > 0 && line[cut] != ' ')
      cut--;
    if (cut == 0) { /* one long word: up to the next space */
      cut = width;
      while (cut < len && line[cut] != ' ')
        cut++;
      if (cut == len)
        break;
    }
    printf("%s%.*s\n", cont ? DUMP_FOLD_INDENT : "", (int)cut, line);
    line += cut + 1;
    len -= cut + 1;
    width = DUMP_FOLD_WIDTH - (sizeof DUMP_FOLD_INDENT - 1);
    cont = 1;
  }
  printf("%s%s\n", cont ? DUMP_FOLD_INDENT : "", line);
}

static void print_human(const dump_names *dn, const cucap_fb_record *rec) {
  char line[1700];
  format_human(dn, rec, line, sizeof line);
  fold_puts(line);
}

/* Consecutive successful cuGetProcAddress lookups of one thread share a
 * line: "#3-#27 1234 cuGetProcAddress_v2 x25: cuInit cuDeviceGet ...". */
typedef struct proc_run {
  unsigned n;
  char single[1700]; /* the first record's own line */
  uint64_t first_seq, last_seq;
  uint32_t tid, call;
  char names[1200];
  size_t len;
  int cut;
  int named; /* at least one name was recorded */
} proc_run;

/* The entry point a successful lookup asked for; "?" when the capture
 * predates format 1.3 (no name recorded); NULL when rec is no lookup. */
static const char *lookup_name(const cucap_fb_record *rec) {
  uint32_t call = cucap_fb_record_call(rec);
  const char *cn = call ? cucap_cli_cbid_name(call) : NULL;
  if (!cn || strncmp(cn, "cuGetProcAddress", 16) != 0 || cucap_fb_record_result(rec) != 0)
    return NULL;
  if (cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_NONE)
    return "?";
  if (cucap_fb_record_body_type(rec) != CUCAP_FB_BODY_NOTE)
    return NULL;
  const cucap_fb_note *no = cucap_fb_record_body_as_note(rec);
  const char *kd = cucap_fb_note_kind(no);
  const char *tx = kd && !strcmp(kd, "proc") ? cucap_fb_note_text(no) : NULL;
  return tx ? tx : NULL;
}

static void proc_flush(proc_run *pr) {
  if (!pr->n)
    return;
  if (pr->n == 1) {
    fold_puts(pr->single);
  } else {
    const char *cn = cucap_cli_cbid_name(pr->call);
    char line[1400];
    snprintf(line, sizeof line, "#%" PRIu64 "-#%" PRIu64 " %u %s x%u:%s%s", pr->first_seq,
             pr->last_seq, (unsigned)pr->tid, cn ? cn : "?", pr->n,
             pr->named ? pr->names : " (names not recorded: capture older than format 1.3)",
             pr->named && pr->cut ? " ..." : "");
    fold_puts(line);
  }
  pr->n = 0;
  pr->len = 0;
  pr->cut = 0;
  pr->named = 0;
  pr->names[0] = 0;
}

/* 1 when rec was taken into the run (printed later); 0: print it normally. */
static int proc_add(proc_run *pr, const dump_names *dn, const cucap_fb_record *rec) {
  const char *nm = lookup_name(rec);
  if (!nm) {
    proc_flush(pr);
    return 0;
  }
  if (pr->n && (pr->tid != cucap_fb_record_tid(rec) || pr->call != cucap_fb_record_call(rec)))
    proc_flush(pr);
  if (!pr->n) {
    format_human(dn, rec, pr->single, sizeof pr->single);
    pr->first_seq = cucap_fb_record_seq(rec);
    pr->tid = cucap_fb_record_tid(rec);
    pr->call = cucap_fb_record_call(rec);
  }
  pr->last_seq = cucap_fb_record_seq(rec);
  pr->n++;
  pr->named |= strcmp(nm, "?") != 0;
  size_t l = strnlen(nm, 200);
  if (!pr->cut && pr->len + l + 2 < sizeof pr->names) {
    pr->names[pr->len++] = ' ';
    for (size_t i = 0; i < l; i++) /* one line whatever the name holds */
      pr->names[pr->len++] = (unsigned char)nm[i] < 0x20 ? ' ' : nm[i];
    pr->names[pr->len] = 0;
  } else {
    pr->cut = 1;
  }
  return 1;
}

/* ---------------------------------------------------------- callstacks
 * The Callstack records seen so far (id -> frames) and the frame namer fed from
 * the latest ModuleMap. Formatted frames are cached per stack and rebuilt
 * only after a new ModuleMap (gen), so a million launches from one call site
 * cost one symbolization. Owned by cucap_cmd_dump; freed by stacks_free. */
#define STACK_MAX_FRAMES 256 /* longer stacks are cut (the recorder keeps 32) */

typedef struct stack_ent {
  uint32_t id; /* 0 = empty slot */
  uint32_t nframes;
  uint64_t *frames;
  char **text;  /* nframes formatted frames; NULL until first use */
  uint64_t gen; /* ModuleMap generation text was formatted for */
} stack_ent;

typedef struct stack_tab {
  stack_ent *slots; /* open addressing on id, power-of-two capacity */
  size_t cap, used;
  cucap_cli_frames *sym;
  uint64_t gen; /* bumped by every ModuleMap */
} stack_tab;

static void stack_text_free(stack_ent *e) {
  if (e->text)
    for (uint32_t i = 0; i < e->nframes; i++)
      free(e->text[i]);
  free(e->text);
  e->text = NULL;
}

static void stacks_free(stack_tab *t) {
  for (size_t i = 0; i < t->cap; i++) {
    stack_text_free(&t->slots[i]);
    free(t->slots[i].frames);
  }
  free(t->slots);
  cucap_cli_frames_destroy(t->sym);
  memset(t, 0, sizeof *t);
}

static stack_ent *stack_slot(stack_tab *t, uint32_t id) {
  if (!t->cap)
    return NULL;
  size_t m = t->cap - 1, i = (id * 2654435761u) & m;
  while (t->slots[i].id && t->slots[i].id != id)
    i = (i + 1) & m;
  return &t->slots[i];
}

static stack_ent *stack_find(stack_tab *t, uint32_t id) {
  stack_ent *e = stack_slot(t, id);
  return e && e->id == id ? e : NULL;
}

/* Remembers a Callstack record; a repeated id replaces the frames. Out of
 * memory only loses the stack (its records then print without one). */
static void stack_add(stack_tab *t, const cucap_fb_callstack *cs) {
  uint32_t id = cucap_fb_callstack_id(cs);
  size_t n = 0;
  const uint64_t *fr = cucap_fb_callstack_frames(cs, &n);
  if (!id)
    return;
  if (!fr)
    n = 0;
  if (n > STACK_MAX_FRAMES)
    n = STACK_MAX_FRAMES;
  if ((t->used + 1) * 2 > t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 64;
    stack_ent *ns = calloc(nc, sizeof *ns);
    if (!ns)
      return;
    stack_tab old = *t;
    t->slots = ns;
    t->cap = nc;
    for (size_t i = 0; i < old.cap; i++)
      if (old.slots[i].id)
        *stack_slot(t, old.slots[i].id) = old.slots[i];
    free(old.slots);
  }
  uint64_t *copy = malloc((n ? n : 1) * sizeof *copy);
  if (!copy)
    return;
  if (n)
    memcpy(copy, fr, n * sizeof *copy); /* the vector is 8-aligned (verified) */
  stack_ent *e = stack_slot(t, id);
  if (e->id) {
    stack_text_free(e);
    free(e->frames);
  } else {
    t->used++;
  }
  *e = (stack_ent){id, (uint32_t)n, copy, NULL, 0};
}

/* A ModuleMap is the full list of loaded objects. */
static void stacks_map(stack_tab *t, const cucap_fb_module_map *mm) {
  cucap_cli_frames_clear(t->sym);
  t->gen++;
  size_t n = cucap_fb_module_map_objects_len(mm);
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_loaded_object *o = cucap_fb_module_map_objects_at(mm, i);
    const char *path = o ? cucap_fb_loaded_object_path(o) : NULL;
    if (!path)
      continue;
    size_t bl = 0;
    const uint8_t *bid = cucap_fb_loaded_object_build_id(o, &bl);
    /* ignore NOMEM: the frames of that object print as hex */
    cucap_cli_frames_add(t->sym, path, bid, bid ? bl : 0,
                                      cucap_fb_loaded_object_base(o),
                                      cucap_fb_loaded_object_start_get(o),
                                      cucap_fb_loaded_object_end_get(o));
  }
}

/* The formatted frames of stack id, or NULL (unknown id, out of memory). */
static const stack_ent *stack_text(stack_tab *t, uint32_t id) {
  stack_ent *e = stack_find(t, id);
  if (!e)
    return NULL;
  if (e->text && e->gen == t->gen)
    return e;
  stack_text_free(e);
  e->text = calloc(e->nframes ? e->nframes : 1, sizeof *e->text);
  if (!e->text)
    return NULL;
  for (uint32_t i = 0; i < e->nframes; i++) {
    char buf[512];
    int k = cucap_cli_frames_format(t->sym, e->frames[i], buf, sizeof buf);
    if (k < 0)
      k = snprintf(buf, sizeof buf, "0x%" PRIx64, e->frames[i]);
    char *s = malloc((size_t)k + 1);
    if (!s) {
      stack_text_free(e);
      return NULL;
    }
    if ((size_t)k < sizeof buf)
      memcpy(s, buf, (size_t)k + 1);
    else /* a long (C++) name: format again at full length */
      cucap_cli_frames_format(t->sym, e->frames[i], s, (size_t)k + 1);
    e->text[i] = s;
  }
  e->gen = t->gen;
  return e;
}

/* Feeds Callstack / ModuleMap records to the table. */
static void stacks_feed(stack_tab *t, const cucap_fb_record *rec) {
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_CALLSTACK: {
    const cucap_fb_callstack *cs = cucap_fb_record_body_as_callstack(rec);
    if (cs)
      stack_add(t, cs);
    break;
  }
  case CUCAP_FB_BODY_MODULEMAP: {
    const cucap_fb_module_map *mm = cucap_fb_record_body_as_module_map(rec);
    if (mm)
      stacks_map(t, mm);
    break;
  }
  default:
    break;
  }
}

/* "    at F0 <- F1 <- F2" for the human dump (innermost 3 frames). */
static void print_stack_human(stack_tab *t, const cucap_fb_record *rec) {
  uint32_t id = cucap_fb_record_stack(rec);
  uint8_t bt = cucap_fb_record_body_type(rec);
  if (!id || (bt != CUCAP_FB_BODY_LAUNCH && bt != CUCAP_FB_BODY_MEMCPY))
    return;
  const stack_ent *e = stack_text(t, id);
  if (!e) {
    printf("    at (callstack %u not recorded)\n", (unsigned)id);
    return;
  }
  fputs("    at", stdout);
  for (uint32_t i = 0; i < e->nframes && i < 3; i++) {
    fputs(i ? " <- " : " ", stdout);
    for (const char *p = e->text[i]; *p; p++) /* one line whatever the names */
      putchar((unsigned char)*p < 0x20 ? ' ' : *p);
  }
  if (e->nframes > 3)
    printf(" <- ... (%u frames)", (unsigned)e->nframes);
  putchar('\n');
}

/* ,"callstack":[...] (leading comma when the object has other keys). */
static void print_stack_json(stack_tab *t, const cucap_fb_record *rec, int comma) {
  uint32_t id = cucap_fb_record_stack(rec);
  const stack_ent *e = id ? stack_text(t, id) : NULL;
  if (!e)
    return;
  fputs(comma ? ",\"callstack\":[" : "\"callstack\":[", stdout);
  for (uint32_t i = 0; i < e->nframes; i++) {
    if (i)
      fputc(',', stdout);
    cucap_cli_json_str(stdout, e->text[i], strlen(e->text[i]));
  }
  fputc(']', stdout);
}

/* What the command line asked for. */
typedef struct dump_opts {
  int json, nohex, nosym, nodem;
  int body; /* -1: every record */
  uint64_t limit;
  const char *path;
} dump_opts;

/* Fills o from argv; returns -1 to go on, else the exit code to return. */
static int dump_parse(int argc, char **argv, dump_opts *o) {
  static const struct option longopts[] = {
      {"json", no_argument, NULL, 'j'},   {"body", required_argument, NULL, 'b'},
      {"limit", required_argument, NULL, 'n'}, {"no-hex", no_argument, NULL, 'x'},
      {"no-symbols", no_argument, NULL, 'S'},
      {"no-demangle", no_argument, NULL, 'D'},
      {"help", no_argument, NULL, 'h'},   {NULL, 0, NULL, 0}};
  int c;
  memset(o, 0, sizeof *o);
  o->body = -1;
  o->limit = UINT64_MAX;
  optind = 1;
  while ((c = getopt_long(argc, argv, "jb:n:xh", longopts, NULL)) != -1) {
    switch (c) {
    case 'j':
      o->json = 1;
      break;
    case 'x':
      o->nohex = 1;
      break;
    case 'S':
      o->nosym = 1;
      break;
    case 'D':
      o->nodem = 1;
      break;
    case 'b':
      o->body = parse_body(optarg);
      if (o->body < 0) {
        cucap_cli_error("dump", NULL, "unknown body type '%s'", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case 'n':
      if (cucap_cli_parse_u64(optarg, &o->limit)) {
        cucap_cli_error("dump", NULL, "--limit wants a number, got '%s'", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case 'h':
      fputs(dump_usage, stdout);
      return CUCAP_EXIT_OK;
    default:
      fputs(dump_usage, stderr);
      return CUCAP_EXIT_USAGE;
    }
  }
  if (optind + 1 != argc) {
    cucap_cli_error("dump", NULL, optind >= argc ? "missing CAPTURE argument"
                                                 : "too many arguments");
    fputs(dump_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  o->path = argv[optind];
  return -1;
}

/* The first line(s): {"header":...} with --json (w), else two comment lines. */
static void dump_print_header(const dump_opts *o, cucap_reader *r, cucap_json *w,
                              unsigned flags) {
  const cucap_fb_file_header *h = cucap_reader_header(r);
  if (o->json) {
    cucap_json_object_begin(w);
    cucap_json_key(w, "header");
    cucap_fb_file_header_to_json(h, w, flags);
    cucap_json_object_end(w);
    size_t len = 0;
    const char *txt = cucap_json_mem_data(w, &len);
    fwrite(txt, 1, len, stdout);
    fputc('\n', stdout);
    cucap_json_mem_clear(w);
  } else {
    const char *p = cucap_fb_file_header_producer(h);
    unsigned ma = 0, mi = 0;
    cucap_reader_version(r, &ma, &mi);
    printf("# cucap capture format %u.%u, producer %s, pid %u\n", ma, mi,
           p ? p : "?", (unsigned)cucap_fb_file_header_pid(h));
    printf("# seq tid call result body\n");
  }
}

/* Prints the records up to --limit; *index counts the records read,
 * *printed those printed. Returns how reading ended (CUCAP_OK at the end). */
static cucap_status dump_records(const dump_opts *o, cucap_reader *r, dump_names *dn,
                                 stack_tab *stacks, cucap_json *w, unsigned flags,
                                 uint64_t *index, uint64_t *printed) {
  cucap_status s = CUCAP_OK;
  proc_run pr;
  memset(&pr, 0, sizeof pr);
  while (*printed < o->limit) {
    const void *rv = NULL, *buf = NULL;
    size_t size = 0;
    s = cucap_reader_next(r, &rv, &buf, &size);
    if (s != CUCAP_OK)
      break;
    const cucap_fb_record *rec = rv;
    uint64_t my = (*index)++;
    if (stacks->sym) /* before the filter: later records refer to these */
      stacks_feed(stacks, rec);
    cucap_cli_fnames_feed(dn->fn, rec);
    if (o->body >= 0 && cucap_fb_record_body_type(rec) != o->body)
      continue;
    if (!o->json && o->body < 0 && proc_add(&pr, dn, rec)) {
      (*printed)++;
      continue;
    }
    (*printed)++;
    if (!o->json) {
      print_human(dn, rec);
      if (stacks->sym)
        print_stack_human(stacks, rec);
      continue;
    }
    cucap_fb_record_to_json(rec, w, flags);
    size_t len = 0;
    const char *txt = cucap_json_mem_data(w, &len);
    if (cucap_json_status(w) != CUCAP_OK || !txt || len < 2 || txt[0] != '{') {
      s = cucap_json_status(w) != CUCAP_OK ? cucap_json_status(w)
                                           : CUCAP_ERR_INTERNAL;
      break;
    }
    /* Splice the index in as the first key and the callstack in as the
     * last one. */
    printf("{\"index\":%" PRIu64, my);
    if (len > 2) {
      fputc(',', stdout);
      fwrite(txt + 1, 1, len - 2, stdout);
    }
    if (stacks->sym)
      print_stack_json(stacks, rec, 1);
    fputs("}\n", stdout);
    cucap_json_mem_clear(w);
  }
  if (s == CUCAP_END)
    s = CUCAP_OK;
  if (!o->json)
    proc_flush(&pr);
  return s;
}

/* The exit code for how reading ended: one error line when it stopped early
 * on a problem. */
static int dump_verdict(const dump_opts *o, cucap_reader *r, cucap_status s, uint64_t index,
                        uint64_t printed) {
  int rc;
  if (s != CUCAP_OK) {
    cucap_reader_recovery rec;
    cucap_reader_recovery_get(r, &rec);
    rec.problem[sizeof rec.problem - 1] = 0;
    cucap_cli_error("dump", o->path, "%s after record %" PRIu64 ": %s",
                    cucap_status_str(s), index,
                    rec.problem[0] ? rec.problem : "reading stopped");
    rc = cucap_cli_exit_code(s);
    if (rc == CUCAP_EXIT_OK)
      rc = CUCAP_EXIT_BAD_INPUT;
  } else if (printed < o->limit) {
    /* Read to the end: say whether the end was the real one. */
    rc = cucap_cli_report_recovery("dump", o->path, r);
  } else {
    rc = CUCAP_EXIT_OK;
  }
  return rc;
}

int cucap_cmd_dump(int argc, char **argv) {
  dump_opts o;
  int rc = dump_parse(argc, argv, &o);
  if (rc >= 0)
    return rc;
  const char *path = o.path;
  cucap_reader *r = NULL;
  rc = cucap_cli_open("dump", path, &r);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  stack_tab stacks;
  memset(&stacks, 0, sizeof stacks);
  dump_names dn = {cucap_cli_fnames_create(), !o.nodem};
  if (!dn.fn || (!o.nosym && !(stacks.sym = cucap_cli_frames_create(!o.nodem)))) {
    cucap_cli_fnames_destroy(dn.fn);
    stacks_free(&stacks);
    cucap_reader_destroy(r);
    cucap_cli_error("dump", path, "out of memory");
    return CUCAP_EXIT_IO;
  }

  unsigned flags = o.nohex ? 0 : (CUCAP_JSON_HEX_BYTES | CUCAP_JSON_HASH_HEX);
  cucap_json *w = NULL;
  if (o.json) {
    w = cucap_json_create_mem(0);
    if (!w) {
      stacks_free(&stacks);
      cucap_reader_destroy(r);
      cucap_cli_error("dump", path, "out of memory");
      return CUCAP_EXIT_IO;
    }
  }
  dump_print_header(&o, r, w, flags);

  uint64_t index = 0, printed = 0;
  cucap_status s = dump_records(&o, r, &dn, &stacks, w, flags, &index, &printed);
  cucap_cli_fnames_destroy(dn.fn);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    cucap_json_destroy(w);
    stacks_free(&stacks);
    cucap_reader_destroy(r);
    cucap_cli_error("dump", path, "error writing output");
    return CUCAP_EXIT_IO;
  }
  rc = dump_verdict(&o, r, s, index, printed);
  cucap_json_destroy(w);
  stacks_free(&stacks);
  cucap_reader_destroy(r);
  return rc;
}
