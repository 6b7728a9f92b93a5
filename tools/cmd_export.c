/* cmd_export.c - `cucap export CAPTURE --format=perfetto|chrome-json -o OUT
 * [--profile TIMES] [--no-demangle]`: the capture as a timeline
 * (share/cucap_export.h). Exit 0, 2 usage, 3 damaged capture or GPU
 * timings file, 4 I/O. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cucap_cli.h"
#include "cucap_export.h"
#include "cucap_profile_table.h"

static const char export_usage[] =
    "usage: cucap export CAPTURE --format=perfetto|chrome-json -o OUT\n"
    "                    [--profile TIMES] [--no-demangle]\n"
    "  --format=perfetto     Perfetto protobuf trace (open in ui.perfetto.dev)\n"
    "  --format=chrome-json  Chrome trace event JSON (ui.perfetto.dev,\n"
    "                        chrome://tracing)\n"
    "  --profile TIMES       GPU kernel times: a profile file (replay --profile-out)\n"
    "                        or CSV with a header naming\n"
    "                        launch_index,start_ns,end_ns[,kernel][,metrics...]\n"
    "                        (else KernelTiming records, else host times)\n"
    "Tracks: host threads (driver calls, NVTX ranges), GPU streams (kernels,\n"
    "copies; flows from each launch), device memory in use, copy bandwidth.\n"
    "exit: 0 ok, 2 usage / OUT is an input or a directory, 3 damaged capture\n"
    "or timings file, 4 I/O error (OUT cannot be created); OUT is replaced\n"
    "only once complete\n";

static const char *kernel_name(const char *mangled, char *buf, size_t size) {
  return cucap_cli_demangle(mangled, buf, size);
}

int cucap_cmd_export(int argc, char **argv) {
  enum { O_FORMAT = 256, O_PROFILE, O_NODEM };
  static const struct option lo[] = {
      {"output", required_argument, NULL, 'o'}, {"format", required_argument, NULL, O_FORMAT},
      {"profile", required_argument, NULL, O_PROFILE}, {"no-demangle", no_argument, NULL, O_NODEM},
      {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  const char *out = NULL, *profile = NULL;
  cucap_export_options o;
  memset(&o, 0, sizeof o);
  o.call_name = cucap_cli_cbid_name;
  o.kernel_name = kernel_name;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
    switch (c) {
    case 'o': out = optarg; break;
    case O_PROFILE: profile = optarg; break;
    case O_NODEM: o.kernel_name = NULL; break;
    case O_FORMAT:
      if (!strcmp(optarg, "perfetto"))
        o.format = CUCAP_EXPORT_PERFETTO;
      else if (!strcmp(optarg, "chrome-json") || !strcmp(optarg, "json"))
        o.format = CUCAP_EXPORT_CHROME_JSON;
      else {
        cucap_cli_error("export", NULL, "--format=%s: expected perfetto or chrome-json", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case 'h': fputs(export_usage, stdout); return CUCAP_EXIT_OK;
    default: fputs(export_usage, stderr); return CUCAP_EXIT_USAGE;
    }
  }
  if (optind + 1 != argc || !out || !o.format) {
    cucap_cli_error("export", NULL, "%s",
                    optind + 1 != argc ? "expected exactly one CAPTURE"
                    : !out             ? "missing -o OUT"
                                       : "missing --format=perfetto|chrome-json");
    fputs(export_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  const char *path = argv[optind];
  const char *ins[2] = {path, profile};
  int rc = cucap_cli_output_check("export", out, ins, 2);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  cucap_profile_table *pt = NULL;
  if (profile) {
    int lrc = cucap_cli_load_timings("export", profile, &pt);
    if (lrc != CUCAP_EXIT_OK)
      return lrc;
    o.profile = pt;
  }
  cucap_reader *r = NULL;
  rc = cucap_cli_open("export", path, &r);
  if (rc != CUCAP_EXIT_OK) {
    cucap_profile_table_destroy(pt);
    return rc;
  }
  cucap_cli_output tmp;
  FILE *f = NULL;
  if ((rc = cucap_cli_output_begin("export", out, &tmp)) != CUCAP_EXIT_OK ||
      !(f = fdopen(dup(tmp.fd), "wb"))) {
    if (rc == CUCAP_EXIT_OK)
      cucap_cli_error("export", out, "cannot create the output");
    cucap_cli_output_abort(&tmp);
    cucap_reader_destroy(r);
    cucap_profile_table_destroy(pt);
    return CUCAP_EXIT_IO;
  }
  cucap_export_report rep;
  cucap_status st = cucap_export(r, f, &o, &rep);
  int closed = fclose(f);
  if (st == CUCAP_OK && closed != 0)
    st = CUCAP_ERR_IO;
  if (st == CUCAP_OK && (rc = cucap_cli_output_commit("export", out, &tmp)) != CUCAP_EXIT_OK) {
    cucap_reader_destroy(r);
    cucap_profile_table_destroy(pt);
    return rc;
  }
  if (st != CUCAP_OK) {
    cucap_cli_output_abort(&tmp);
    cucap_reader_recovery rv;
    cucap_reader_recovery_get(r, &rv);
    rv.problem[sizeof rv.problem - 1] = 0;
    if (st == CUCAP_ERR_IO || st == CUCAP_ERR_NOMEM)
      cucap_cli_error("export", out, "%s", cucap_status_str(st));
    else
      cucap_cli_error("export", path, "damaged or truncated capture (%s): %s",
                      cucap_status_str(st), rv.problem[0] ? rv.problem : "no valid end");
    rc = cucap_cli_exit_code(st);
    if (rc == CUCAP_EXIT_OK || rc == CUCAP_EXIT_MISMATCH)
      rc = CUCAP_EXIT_BAD_INPUT;
  } else {
    printf("export %s -> %s: %" PRIu64 " threads (%" PRIu64 " driver calls), %" PRIu64
           " streams (%" PRIu64 " GPU ops, %" PRIu64 " kernels, GPU times from %s: %" PRIu64
           " timed), %" PRIu64 " NVTX ranges, %" PRIu64 " counter samples\n",
           path, out, rep.threads, rep.calls, rep.streams, rep.gpu_ops, rep.launches,
           rep.gpu_times, rep.kernels_timed, rep.nvtx_ranges, rep.counters);
  }
  cucap_reader_destroy(r);
  cucap_profile_table_destroy(pt);
  return rc;
}
