/* cmd_trim.c - `cucap trim CAPTURE -o OUT --range=SPEC [--replay]`: a range
 * of a capture as a capture that replays on its own (share/cucap_derive.h).
 * Prints one summary line; exit 0, 2 (range not in the capture, no source
 * for the memory contents, usage), 3 (damaged input), 4 (I/O, replay). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cucap_cli.h"
#include "cucap_derive.h"
#include "cucap_range.h"

static const char trim_usage[] =
    "usage: cucap trim CAPTURE -o OUT --range=SPEC [--replay] [--device N]\n"
    "                  [--level N] [--keep-all-archs]\n"
    "  --range=SPEC   launch:N | launch:A-B   kernel launches A..B (0-based)\n"
    "                 nvtx:NAME[@K]           the K-th NVTX range NAME\n"
    "                 profiler[@K]            the K-th cuProfilerStart..Stop\n"
    "                 time:T0-T1              a time window (e.g. time:1.5s-2s)\n"
    "  --replay       take the device memory at the range start by replaying the\n"
    "                 capture up to it on this machine's GPU (else the capture\n"
    "                 needs a snapshot there: record --snapshot=range:NAME[@K]\n"
    "                 or --snapshot=launch:A)\n"
    "  --device N     GPU for --replay; --level N  zstd level of OUT\n"
    "  --keep-all-archs  copy module images whole (by default a fatbin keeps the\n"
    "                 SASS of the recorded GPU and the PTX of the highest virtual\n"
    "                 architecture <= it, which newer GPUs JIT)\n"
    "OUT starts with the objects and memory live at the range start, then the\n"
    "range's records; its header says where the memory contents came from.\n"
    "exit: 0 ok, 2 usage / range not found / no memory source / OUT is the\n"
    "input or a directory, 3 damaged input, 4 I/O error (OUT cannot be\n"
    "created) or replay failure; OUT is replaced only once complete\n";

static const char *state_name(int s) {
  return s == 1 ? "a snapshot recorded there" : s == 2 ? "a replay up to it" : "nothing";
}

void cucap_cli_print_images(const cucap_derive_report *rep) {
  if (!rep->images)
    return;
  printf("module images: %" PRIu64 " (%" PRIu64 " reduced to %s), %" PRIu64 " -> %" PRIu64
         " bytes%s\n", rep->images, rep->images_reduced, rep->archs, rep->image_bytes_in,
         rep->image_bytes_out, rep->images_reduced ? "; --keep-all-archs keeps them whole" : "");
}

int cucap_cmd_trim(int argc, char **argv) {
  enum { O_RANGE = 256, O_REPLAY, O_DEVICE, O_LEVEL, O_LIBCUDA, O_ALLARCH };
  static const struct option lo[] = {
      {"output", required_argument, NULL, 'o'},   {"range", required_argument, NULL, O_RANGE},
      {"replay", no_argument, NULL, O_REPLAY},     {"device", required_argument, NULL, O_DEVICE},
      {"level", required_argument, NULL, O_LEVEL}, {"libcuda", required_argument, NULL, O_LIBCUDA},
      {"keep-all-archs", no_argument, NULL, O_ALLARCH},
      {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0}};
  const char *out = NULL, *range_text = NULL;
  cucap_derive_options o;
  cucap_derive_options_init(&o);
  uint64_t v;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
    switch (c) {
    case 'o': out = optarg; break;
    case O_RANGE: range_text = optarg; break;
    case O_REPLAY: o.replay = 1; break;
    case O_ALLARCH: o.keep_all_archs = 1; break;
    case O_LIBCUDA: o.libcuda = optarg; break;
    case O_DEVICE:
      if (cucap_cli_parse_u64(optarg, &v) || v > 1024) {
        cucap_cli_error("trim", NULL, "--device %s: expected a device ordinal", optarg);
        return CUCAP_EXIT_USAGE;
      }
      o.device = (int)v;
      break;
    case O_LEVEL:
      if (cucap_cli_parse_u64(optarg, &v) || v < 1 || v > 22) {
        cucap_cli_error("trim", NULL, "--level %s: expected 1..22", optarg);
        return CUCAP_EXIT_USAGE;
      }
      o.level = (int)v;
      break;
    case 'h': fputs(trim_usage, stdout); return CUCAP_EXIT_OK;
    default: fputs(trim_usage, stderr); return CUCAP_EXIT_USAGE;
    }
  }
  if (optind + 1 != argc || !out || !range_text) {
    cucap_cli_error("trim", NULL, "%s",
                    optind + 1 != argc ? "expected exactly one CAPTURE"
                    : !out             ? "missing -o OUT"
                                       : "missing --range=SPEC");
    fputs(trim_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  cucap_range_spec range;
  char msg[256];
  if (cucap_range_parse(range_text, &range, msg, sizeof msg) != CUCAP_OK) {
    cucap_cli_error("trim", NULL, "--range=%s", msg);
    return CUCAP_EXIT_USAGE;
  }
  const char *path = argv[optind];
  int rc = cucap_cli_output_check("trim", out, &path, 1);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  cucap_reader *r = NULL;
  rc = cucap_cli_open("trim", path, &r);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  cucap_cli_output tmp;
  if ((rc = cucap_cli_output_begin("trim", out, &tmp)) != CUCAP_EXIT_OK) {
    cucap_reader_destroy(r);
    return rc;
  }
  o.source_path = path;
  o.selection = range_text;
  cucap_derive_report rep;
  /* the replay up to the cut is what takes time */
  cucap_cli_progress *prog = o.replay ? cucap_cli_progress_create("trim --replay", 0) : NULL;
  o.watch = cucap_cli_progress_observer(prog, 0);
  cucap_status st = cucap_trim(r, &range, tmp.tmp, &o, &rep);
  cucap_cli_progress_destroy(prog);
  cucap_reader_recovery rv;
  cucap_reader_recovery_get(r, &rv);
  cucap_reader_destroy(r);
  if (st != CUCAP_OK) {
    cucap_cli_output_rename_in(&tmp, out, rep.error, sizeof rep.error);
    cucap_cli_output_abort(&tmp);
    cucap_cli_error("trim", path, "%s", rep.error[0] ? rep.error : cucap_status_str(st));
    rc = cucap_cli_exit_code(rep.status);
    return rc ? rc : CUCAP_EXIT_IO;
  }
  if ((rc = cucap_cli_output_commit("trim", out, &tmp)) != CUCAP_EXIT_OK)
    return rc;
  printf("trim %s -> %s: source records %" PRIu64 "..%" PRIu64 " of %" PRIu64,
         range_text, out, rep.first_record, rep.last_record, rep.source_records);
  if (rep.launches)
    printf(" (launches %" PRIu64 "..%" PRIu64 ")", rep.launch_first, rep.launch_last);
  printf("; memory at the start from %s (record %" PRIu64 "): %" PRIu64
         " state records incl. %" PRIu64 " uploads (%" PRIu64 " bytes); modules %" PRIu64
         " of %" PRIu64 " live; %" PRIu64 " -> %" PRIu64 " bytes (%.3fx)\n",
         state_name(rep.state), rep.cut, rep.state_records, rep.regions, rep.region_bytes,
         rep.modules_kept, rep.modules_live, rv.file_size, rep.out_bytes,
         rv.file_size ? (double)rep.out_bytes / (double)rv.file_size : 0.0);
  cucap_cli_print_images(&rep);
  return CUCAP_EXIT_OK;
}
