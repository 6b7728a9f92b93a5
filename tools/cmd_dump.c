/* cmd_dump.c - `cucap dump FILE [--json] [--body TYPE] [--limit N] [--no-hex]`.
 * Owner: tools/.
 *
 * --json: JSON Lines. Line 1 is {"header": <FileHeader>}; then one line per
 * record, {"index": N, <Record fields as cucap_fb_record_to_json prints them>}
 * where N is the record's 0-based position among the file's records (blob
 * pieces are not records of the stream and are not printed). Keys are the
 * schema's field names, so they are stable across versions (fields are only
 * appended).
 * Without --json: "#seq tid call result body-summary", one line per record.
 * On a damaged file everything recovered is printed, then one error line on
 * stderr, exit 3. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cucap_cli.h"
#include "cucap_format.h"
#include "cucap_json.h"
#include "cucap_reader.h"

static const char dump_usage[] =
    "usage: cucap dump CAPTURE [--json] [--body TYPE] [--limit N] [--no-hex]\n"
    "  --json       JSON Lines: {\"header\":{...}} then {\"index\":N,...} per record\n"
    "  --body TYPE  only records whose body is TYPE (Launch, Memcpy, Alloc, ...;\n"
    "               case-insensitive; NONE for records without a body)\n"
    "  --limit N    stop after printing N records\n"
    "  --no-hex     print byte vectors as arrays of numbers, hashes as\n"
    "               {lo,hi} objects (default: hex strings)\n"
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

static void summary(const cucap_fb_record *rec, char *out, size_t n) {
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
  case CUCAP_FB_BODY_LAUNCH: {
    const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
    if (!l)
      break;
    const cucap_fb_dim3 *g = cucap_fb_launch_grid(l);
    const cucap_fb_dim3 *b = cucap_fb_launch_block(l);
    snprintf(out, n,
             " #%" PRIu64 " fn=0x%" PRIx64 " grid=(%u,%u,%u) block=(%u,%u,%u)"
             " smem=%u stream=0x%" PRIx64,
             cucap_fb_launch_launch_index(l), cucap_fb_launch_function(l),
             g ? g->x : 0, g ? g->y : 0, g ? g->z : 0, b ? b->x : 0,
             b ? b->y : 0, b ? b->z : 0, cucap_fb_launch_shared_mem(l),
             cucap_fb_launch_stream(l));
    break;
  }
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
    if (!m)
      break;
    const char *kn = cucap_fb_memcpy_kind_name(cucap_fb_memcpy_kind(m));
    snprintf(out, n, " %s dst=0x%" PRIx64 " src=0x%" PRIx64 " size=%" PRIu64 "%s",
             kn ? kn : "?", cucap_fb_memcpy_dst(m), cucap_fb_memcpy_src(m),
             cucap_fb_memcpy_size(m), cucap_fb_memcpy_async(m) ? " async" : "");
    break;
  }
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
  case CUCAP_FB_BODY_MODULE: {
    const cucap_fb_module *m = cucap_fb_record_body_as_module(rec);
    if (!m)
      break;
    const char *on = cucap_fb_module_op_name(cucap_fb_module_op(m));
    const char *p = cucap_fb_module_path(m);
    snprintf(out, n, " %s handle=0x%" PRIx64 " size=%" PRIu64 "%s%s",
             on ? on : "?", cucap_fb_module_handle(m),
             cucap_fb_module_image_size(m), p ? " path=" : "", p ? p : "");
    break;
  }
  case CUCAP_FB_BODY_FUNCTION: {
    const cucap_fb_function *f = cucap_fb_record_body_as_function(rec);
    if (!f)
      break;
    const char *nm = cucap_fb_function_name(f);
    snprintf(out, n, " %s handle=0x%" PRIx64 " module=0x%" PRIx64,
             nm ? nm : "?", cucap_fb_function_handle(f),
             cucap_fb_function_module(f));
    break;
  }
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
  case CUCAP_FB_BODY_NOTE: {
    const cucap_fb_note *no = cucap_fb_record_body_as_note(rec);
    if (!no)
      break;
    const char *kd = cucap_fb_note_kind(no);
    const char *tx = cucap_fb_note_text(no);
    snprintf(out, n, " %s: %s", kd ? kd : "?", tx ? tx : "");
    break;
  }
  default:
    break;
  }
}

static void print_human(const cucap_fb_record *rec) {
  char sum[512];
  char callbuf[32];
  uint32_t call = cucap_fb_record_call(rec);
  const char *cn = call ? cucap_cli_cbid_name(call) : "-";
  if (!cn) {
    snprintf(callbuf, sizeof callbuf, "cbid%u", (unsigned)call);
    cn = callbuf;
  }
  summary(rec, sum, sizeof sum);
  /* Keep one record per line whatever the strings contain. */
  for (char *p = sum; *p; p++)
    if ((unsigned char)*p < 0x20)
      *p = ' ';
  uint64_t seq = cucap_fb_record_seq(rec);
  char seqbuf[24] = "-";
  if (seq)
    snprintf(seqbuf, sizeof seqbuf, "%" PRIu64, seq);
  printf("#%s %u %s %d %s\n", seqbuf,
         (unsigned)cucap_fb_record_tid(rec), cn, (int)cucap_fb_record_result(rec),
         sum);
}

int cucap_cmd_dump(int argc, char **argv) {
  static const struct option longopts[] = {
      {"json", no_argument, NULL, 'j'},   {"body", required_argument, NULL, 'b'},
      {"limit", required_argument, NULL, 'n'}, {"no-hex", no_argument, NULL, 'x'},
      {"help", no_argument, NULL, 'h'},   {NULL, 0, NULL, 0}};
  int json = 0, nohex = 0, body = -1, c;
  uint64_t limit = UINT64_MAX;
  optind = 1;
  while ((c = getopt_long(argc, argv, "jb:n:xh", longopts, NULL)) != -1) {
    switch (c) {
    case 'j':
      json = 1;
      break;
    case 'x':
      nohex = 1;
      break;
    case 'b':
      body = parse_body(optarg);
      if (body < 0) {
        cucap_cli_error("dump", NULL, "unknown body type '%s'", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case 'n':
      if (cucap_cli_parse_u64(optarg, &limit)) {
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
  const char *path = argv[optind];
  cucap_reader *r = NULL;
  int rc = cucap_cli_open("dump", path, &r);
  if (rc != CUCAP_EXIT_OK)
    return rc;

  unsigned flags = nohex ? 0 : (CUCAP_JSON_HEX_BYTES | CUCAP_JSON_HASH_HEX);
  cucap_json *w = NULL;
  const cucap_fb_file_header *h = cucap_reader_header(r);
  if (json) {
    w = cucap_json_create_mem(0);
    if (!w) {
      cucap_reader_destroy(r);
      cucap_cli_error("dump", path, "out of memory");
      return CUCAP_EXIT_IO;
    }
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

  uint64_t index = 0, printed = 0;
  cucap_status s = CUCAP_OK;
  while (printed < limit) {
    const void *rv = NULL, *buf = NULL;
    size_t size = 0;
    s = cucap_reader_next(r, &rv, &buf, &size);
    if (s != CUCAP_OK)
      break;
    const cucap_fb_record *rec = rv;
    uint64_t my = index++;
    if (body >= 0 && cucap_fb_record_body_type(rec) != body)
      continue;
    printed++;
    if (!json) {
      print_human(rec);
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
    /* Splice the index in as the first key. */
    if (len == 2)
      printf("{\"index\":%" PRIu64 "}\n", my);
    else {
      printf("{\"index\":%" PRIu64 ",", my);
      fwrite(txt + 1, 1, len - 1, stdout);
      fputc('\n', stdout);
    }
    cucap_json_mem_clear(w);
  }
  if (s == CUCAP_END)
    s = CUCAP_OK;
  if (fflush(stdout) != 0 || ferror(stdout)) {
    cucap_json_destroy(w);
    cucap_reader_destroy(r);
    cucap_cli_error("dump", path, "error writing output");
    return CUCAP_EXIT_IO;
  }
  if (s != CUCAP_OK) {
    cucap_reader_recovery rec;
    cucap_reader_recovery_get(r, &rec);
    rec.problem[sizeof rec.problem - 1] = 0;
    cucap_cli_error("dump", path, "%s after record %" PRIu64 ": %s",
                    cucap_status_str(s), index,
                    rec.problem[0] ? rec.problem : "reading stopped");
    rc = cucap_cli_exit_code(s);
    if (rc == CUCAP_EXIT_OK)
      rc = CUCAP_EXIT_BAD_INPUT;
  } else if (printed < limit) {
    /* Read to the end: say whether the end was the real one. */
    rc = cucap_cli_report_recovery("dump", path, r);
  } else {
    rc = CUCAP_EXIT_OK;
  }
  cucap_json_destroy(w);
  cucap_reader_destroy(r);
  return rc;
}
