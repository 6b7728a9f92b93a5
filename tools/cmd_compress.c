/* cmd_compress.c - `cucap compress FILE -o OUT [--level N] [--workers N]`:
 * re-encodes every record and blob into a new capture at a higher zstd level.
 * Owner: tools/.
 *
 * The FileHeader is copied byte for byte, records keep their order, blobs
 * (deduplicated, re-verified against their XXH3-128 name) are written first.
 * A damaged input is re-encoded as far as it could be recovered: OUT is then a
 * complete capture of the recovered part, and the command exits 3. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cucap_cli.h"
#include "cucap_format.h"
#include "cucap_hash.h"
#include "cucap_reader.h"
#include "cucap_writer.h"

static const char compress_usage[] =
    "usage: cucap compress CAPTURE -o OUT [--level N] [--workers N]\n"
    "  -o, --output OUT  the new capture (must differ from CAPTURE)\n"
    "  -l, --level N     zstd level 1..22 (default 19)\n"
    "  -w, --workers N   zstd worker threads (default 0: single-threaded)\n"
    "  -q, --quiet       print nothing but errors (no summary, no progress)\n"
    "exit: 0 ok, 3 damaged input (the recovered part is written), 4 I/O\n"
    "error (OUT cannot be created), 2 usage / OUT is the input (also through\n"
    "a symlink or hard link) or a directory; OUT is replaced only once complete\n";

/* What the command line asked for. */
typedef struct compress_opts {
  const char *in, *out;
  uint64_t level, workers;
  int quiet;
} compress_opts;

/* Fills o from argv; returns -1 to go on, else the exit code to return. */
static int compress_parse(int argc, char **argv, compress_opts *o) {
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'},
      {"level", required_argument, NULL, 'l'},
      {"workers", required_argument, NULL, 'w'},
      {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  o->out = NULL;
  o->level = 19;
  o->workers = 0;
  o->quiet = 0;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:l:w:qh", longopts, NULL)) != -1) {
    switch (c) {
    case 'o':
      o->out = optarg;
      break;
    case 'l':
      if (cucap_cli_parse_u64(optarg, &o->level) || o->level < 1 || o->level > 22) {
        cucap_cli_error("compress", NULL, "--level wants 1..22, got '%s'", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case 'w':
      if (cucap_cli_parse_u64(optarg, &o->workers) || o->workers > 256) {
        cucap_cli_error("compress", NULL, "--workers wants 0..256, got '%s'",
                        optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case 'q':
      o->quiet = 1;
      break;
    case 'h':
      fputs(compress_usage, stdout);
      return CUCAP_EXIT_OK;
    default:
      fputs(compress_usage, stderr);
      return CUCAP_EXIT_USAGE;
    }
  }
  if (optind + 1 != argc || !o->out) {
    cucap_cli_error("compress", NULL, !o->out ? "missing -o OUT"
                                  : optind >= argc ? "missing CAPTURE argument"
                                                   : "too many arguments");
    fputs(compress_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  o->in = argv[optind];
  return -1;
}

/* Copies every blob, checking that the new file names it as the old one
 * did; *fail_file is the file an error is about. */
static cucap_status copy_blobs(cucap_reader *r, cucap_writer *w, const char *in,
                               const char *out, const char **fail_file, uint64_t *nblob,
                               cucap_cli_progress *prog) {
  cucap_status s = CUCAP_OK;
  void *bb = NULL;
  size_t bcap = 0;
  size_t nb = cucap_reader_blob_count(r);
  for (size_t i = 0; i < nb && s == CUCAP_OK; i++) {
    cucap_hash128 h, h2;
    uint64_t size = 0;
    s = cucap_reader_blob_get(r, i, &h, &size);
    if (s != CUCAP_OK)
      break;
    if (size > (uint64_t)SIZE_MAX / 2) {
      s = CUCAP_ERR_TOO_LARGE;
      break;
    }
    if (size > bcap || !bb) {
      free(bb);
      bcap = size ? (size_t)size : 1;
      bb = malloc(bcap);
      if (!bb) {
        s = CUCAP_ERR_NOMEM;
        break;
      }
    }
    s = cucap_reader_blob_read(r, h, bb, bcap);
    if (s != CUCAP_OK)
      break;
    *fail_file = out;
    s = cucap_writer_put_blob(w, bb, (size_t)size, &h2);
    if (s != CUCAP_OK)
      break;
    *fail_file = in;
    if (!cucap_hash128_eq(h, h2)) {
      s = CUCAP_ERR_CORRUPT;
      break;
    }
    (*nblob)++;
    cucap_cli_progress_count(prog, "", "blobs", *nblob, nb);
  }
  free(bb);
  return s;
}

/* Copies the records in order while *s (writing) stays CUCAP_OK; returns
 * how reading them ended (CUCAP_OK at the end). */
static cucap_status copy_records(cucap_reader *r, cucap_writer *w, const char *out,
                                 cucap_status *s, const char **fail_file, uint64_t *nrec,
                                 cucap_cli_progress *prog) {
  cucap_status rs = CUCAP_OK; /* reading the records */
  cucap_reader_recovery rv;
  cucap_reader_recovery_get(r, &rv);
  cucap_cli_progress_rebase(prog); /* a rate of records, not of blobs */
  while (*s == CUCAP_OK) {
    const void *rec = NULL, *buf = NULL;
    size_t size = 0;
    rs = cucap_reader_next(r, &rec, &buf, &size);
    if (rs != CUCAP_OK)
      break;
    *s = cucap_writer_append(w, buf, size, NULL);
    if (*s != CUCAP_OK) {
      *fail_file = out;
      break;
    }
    (*nrec)++;
    cucap_cli_progress_count(prog, "", "records", *nrec, rv.records);
  }
  if (rs == CUCAP_END)
    rs = CUCAP_OK;
  return rs;
}

/* The summary line, then the exit code for how reading ended: one error
 * line when the input was damaged (out holds what was recovered). */
static int compress_report(const compress_opts *o, cucap_reader *r, cucap_status rs,
                           const cucap_writer_stats *ws, uint64_t nrec, uint64_t nblob) {
  int rc;
  cucap_reader_recovery rec;
  cucap_reader_recovery_get(r, &rec);
  struct stat so;
  uint64_t out_size = stat(o->out, &so) == 0 ? (uint64_t)so.st_size : ws->file_bytes;
  if (!o->quiet)
    printf("%s: %" PRIu64 " bytes -> %s: %" PRIu64 " bytes (%.1f%%, zstd level %d%s), "
         "%" PRIu64 " records, %" PRIu64 " blobs\n",
         o->in, rec.file_size, o->out, out_size,
         rec.file_size ? 100.0 * (double)out_size / (double)rec.file_size : 0.0,
         (int)o->level, o->workers ? ", multi-threaded" : "", nrec, nblob);
  if (rs != CUCAP_OK) {
    rec.problem[sizeof rec.problem - 1] = 0;
    cucap_cli_error("compress", o->in, "%s after %" PRIu64 " records: %s; %s holds "
                    "what was recovered", cucap_status_str(rs), nrec,
                    rec.problem[0] ? rec.problem : "reading stopped", o->out);
    rc = cucap_cli_exit_code(rs);
    if (rc == CUCAP_EXIT_OK)
      rc = CUCAP_EXIT_BAD_INPUT;
  } else {
    rc = cucap_cli_report_recovery("compress", o->in, r);
  }
  return rc;
}

int cucap_cmd_compress(int argc, char **argv) {
  compress_opts opt;
  int rc = compress_parse(argc, argv, &opt);
  if (rc >= 0)
    return rc;
  const char *in = opt.in, *out = opt.out;
  if ((rc = cucap_cli_output_check("compress", out, &in, 1)) != CUCAP_EXIT_OK)
    return rc;
  cucap_reader *r = NULL;
  rc = cucap_cli_open("compress", in, &r);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  cucap_cli_output tmp;
  if ((rc = cucap_cli_output_begin("compress", out, &tmp)) != CUCAP_EXIT_OK) {
    cucap_reader_destroy(r);
    return rc;
  }

  size_t hsize = 0;
  const void *hbuf = cucap_reader_header_buffer(r, &hsize);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.level = (int)opt.level;
  o.nb_workers = (int)opt.workers;
  o.quiet_errors = 1; /* the one error line below says what failed */
  cucap_writer *w = NULL;
  cucap_status s = cucap_writer_create(tmp.tmp, &o, hbuf, hsize, &w);
  if (s != CUCAP_OK) {
    cucap_cli_output_abort(&tmp);
    cucap_reader_destroy(r);
    cucap_cli_error("compress", out, "cannot create: %s", cucap_status_str(s));
    return cucap_cli_exit_code(s);
  }

  const char *fail_file = in;
  uint64_t nrec = 0, nblob = 0;
  cucap_cli_progress *prog = cucap_cli_progress_create("compress", opt.quiet);
  s = copy_blobs(r, w, in, out, &fail_file, &nblob, prog);
  cucap_status rs = copy_records(r, w, out, &s, &fail_file, &nrec, prog);
  if (cucap_cli_progress_due(prog)) /* the last frames are compressed at close */
    cucap_cli_progress_print(prog, "closing %s", out);
  cucap_status cs = cucap_writer_close(w);
  cucap_cli_progress_destroy(prog);
  cucap_writer_stats ws;
  cucap_writer_get_stats(w, &ws);
  char werr[256];
  snprintf(werr, sizeof werr, "%s", cucap_writer_last_error(w));
  cucap_writer_destroy(w);
  if (s == CUCAP_OK && cs != CUCAP_OK) {
    s = cs;
    fail_file = out;
  }
  if (s != CUCAP_OK) {
    cucap_cli_error("compress", fail_file, "%s%s%s (after %" PRIu64 " blobs, %" PRIu64
                    " records)", cucap_status_str(s), werr[0] ? ": " : "", werr, nblob,
                    nrec);
    cucap_cli_output_abort(&tmp);
    cucap_reader_destroy(r);
    return cucap_cli_exit_code(s);
  }
  if ((rc = cucap_cli_output_commit("compress", out, &tmp)) != CUCAP_EXIT_OK) {
    cucap_reader_destroy(r);
    return rc;
  }

  rc = compress_report(&opt, r, rs, &ws, nrec, nblob);
  cucap_reader_destroy(r);
  return rc;
}
