/* cmd_extract.c - `cucap extract CAPTURE (--launch N | --kernel NAME [--nth K])
 * -o OUT [--minimal] [--emit-c DIR] [--replay]`: one launch as a standalone
 * capture that `cucap replay OUT --verify` checks (share/cucap_derive.h).
 * Prints one summary line with the expected checksum (what the --emit-c
 * program prints). Exit codes as for trim. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cucap_cli.h"
#include "cucap_derive.h"

static const char extract_usage[] =
    "usage: cucap extract CAPTURE (--launch N | --kernel NAME [--nth K]) -o OUT\n"
    "                     [--minimal] [--emit-c DIR] [--replay] [--device N]\n"
    "                     [--level N] [--no-demangle] [--keep-all-archs]\n"
    "  --launch N     the launch with index N (0-based, as `cucap dump` shows)\n"
    "  --kernel NAME  the K-th launch (--nth, default 0) of kernel NAME: mangled,\n"
    "                 demangled, or its bare name (\"saxpy\")\n"
    "  --minimal      only the allocations the launch's pointer parameters point\n"
    "                 into (default: every live allocation)\n"
    "  --emit-c DIR   also write DIR/repro.c + data files: a C program that\n"
    "                 launches the kernel with the driver API (cc ... -lcuda)\n"
    "  --replay       take memory before and after the launch by replaying the\n"
    "                 capture on this machine's GPU (else the capture needs\n"
    "                 record --snapshot=launch:N)\n"
    "  --keep-all-archs  copy the module image whole (default: a fatbin keeps\n"
    "                 the recorded GPU's SASS and the PTX <= its architecture)\n"
    "OUT replays standalone: `cucap replay OUT --verify [--loop 1000]`.\n"
    "exit: 0 ok, 2 usage / launch not found / no memory source / OUT or DIR\n"
    "is the input, 3 damaged input, 4 I/O error (OUT cannot be created) or\n"
    "replay failure; OUT is replaced only once complete\n";

/* What the command line asked for. */
typedef struct extract_args {
  cucap_derive_options o;
  cucap_launch_select sel;
  const char *out, *emit;
  int demangle;
  const char *path;
} extract_args;

/* Fills a from argv; returns -1 to go on, else the exit code to return. */
static int extract_parse(int argc, char **argv, extract_args *a) {
  enum { O_LAUNCH = 256, O_KERNEL, O_NTH, O_MIN, O_EMIT, O_REPLAY, O_DEVICE, O_LEVEL,
         O_LIBCUDA, O_NODEM, O_ALLARCH };
  static const struct option lo[] = {
      {"output", required_argument, NULL, 'o'},   {"launch", required_argument, NULL, O_LAUNCH},
      {"kernel", required_argument, NULL, O_KERNEL}, {"nth", required_argument, NULL, O_NTH},
      {"minimal", no_argument, NULL, O_MIN},       {"emit-c", required_argument, NULL, O_EMIT},
      {"replay", no_argument, NULL, O_REPLAY},     {"device", required_argument, NULL, O_DEVICE},
      {"level", required_argument, NULL, O_LEVEL}, {"libcuda", required_argument, NULL, O_LIBCUDA},
      {"no-demangle", no_argument, NULL, O_NODEM}, {"help", no_argument, NULL, 'h'},
      {"keep-all-archs", no_argument, NULL, O_ALLARCH},
      {NULL, 0, NULL, 0}};
  cucap_derive_options *o = &a->o;
  cucap_launch_select *sel = &a->sel;
  a->out = a->emit = NULL;
  cucap_derive_options_init(o);
  memset(sel, 0, sizeof *sel);
  sel->match = cucap_cli_kernel_match;
  a->demangle = 1;
  int have_launch = 0, c;
  uint64_t v;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
    switch (c) {
    case 'o': a->out = optarg; break;
    case O_KERNEL: sel->kernel = optarg; break;
    case O_MIN: o->minimal = 1; break;
    case O_EMIT: a->emit = optarg; break;
    case O_REPLAY: o->replay = 1; break;
    case O_LIBCUDA: o->libcuda = optarg; break;
    case O_NODEM: a->demangle = 0; break;
    case O_ALLARCH: o->keep_all_archs = 1; break;
    case O_LAUNCH:
    case O_NTH:
    case O_DEVICE:
    case O_LEVEL:
      if (cucap_cli_parse_u64(optarg, &v) || (c == O_DEVICE && v > 1024) ||
          (c == O_LEVEL && (v < 1 || v > 22))) {
        cucap_cli_error("extract", NULL, "%s: '%s' is not a valid value", argv[optind - 1], optarg);
        return CUCAP_EXIT_USAGE;
      }
      if (c == O_LAUNCH) {
        sel->launch_index = v;
        have_launch = 1;
      } else if (c == O_NTH) {
        sel->nth = v;
      } else if (c == O_DEVICE) {
        o->device = (int)v;
      } else {
        o->level = (int)v;
      }
      break;
    case 'h': fputs(extract_usage, stdout); return CUCAP_EXIT_OK;
    default: fputs(extract_usage, stderr); return CUCAP_EXIT_USAGE;
    }
  }
  if (optind + 1 != argc || !a->out || have_launch == !!sel->kernel) {
    cucap_cli_error("extract", NULL, "%s",
                    optind + 1 != argc ? "expected exactly one CAPTURE"
                    : !a->out          ? "missing -o OUT"
                                       : "give one of --launch N or --kernel NAME");
    fputs(extract_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  a->path = argv[optind];
  return -1;
}

/* The summary: what was extracted, the expected checksum, the images. */
static void extract_print(const extract_args *a, const cucap_derive_report *rep) {
  char dem[2048];
  printf("extract launch %" PRIu64 " (%s) -> %s: %" PRIu64 " regions (%" PRIu64
         " bytes) from %s, %" PRIu64 " records, %" PRIu64 " bytes\n",
         rep->launch_index, a->demangle ? cucap_cli_demangle(rep->kernel, dem, sizeof dem) : rep->kernel,
         a->out, rep->regions, rep->region_bytes,
         rep->state == 1 ? "the recorded snapshot" : "a replay", rep->records_written, rep->out_bytes);
  if (rep->have_expected)
    printf("expected checksum 0x%016" PRIx64 " (FNV-1a 64 of %" PRIu64
           " result regions; `cucap replay %s --verify` compares every byte)\n",
           rep->expected_checksum, rep->expected_regions, a->out);
  else
    printf("no expected result stored (record with --snapshot=launch:%" PRIu64
           " or use --replay to have one)\n", rep->launch_index);
  cucap_cli_print_images(rep);
}

/* --emit-c: the C program that launches the kernel, from OUT. */
static int extract_emit_c(const extract_args *a) {
  int rc;
  char msg[512] = "";
  cucap_reader *x = NULL;
  if ((rc = cucap_cli_open("extract", a->out, &x)) != CUCAP_EXIT_OK)
    return rc;
  cucap_status st = cucap_emit_c(x, a->emit, msg, sizeof msg);
  cucap_reader_destroy(x);
  if (st != CUCAP_OK) {
    cucap_cli_error("extract", a->emit, "--emit-c: %s", msg);
    return cucap_cli_exit_code(st) ? cucap_cli_exit_code(st) : CUCAP_EXIT_IO;
  }
  printf("C program: %s/repro.c (build: make -C %s, or cc -O2 -o repro repro.c "
         "-I/usr/local/cuda/include -lcuda; run ./repro in %s)\n", a->emit, a->emit, a->emit);
  return CUCAP_EXIT_OK;
}

int cucap_cmd_extract(int argc, char **argv) {
  extract_args a;
  int rc = extract_parse(argc, argv, &a);
  if (rc >= 0)
    return rc;
  const char *path = a.path;
  if ((rc = cucap_cli_output_check("extract", a.out, &path, 1)) != CUCAP_EXIT_OK)
    return rc;
  /* --emit-c DIR writes files into DIR: neither the input nor OUT may be DIR. */
  if (a.emit && !cucap_cli_output_emit_ok(a.emit, path, a.out)) {
    cucap_cli_error("extract", a.emit, "--emit-c: is the input or the output: refusing "
                    "to overwrite it");
    return CUCAP_EXIT_USAGE;
  }
  cucap_reader *r = NULL;
  rc = cucap_cli_open("extract", path, &r);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  cucap_cli_output tmp;
  if ((rc = cucap_cli_output_begin("extract", a.out, &tmp)) != CUCAP_EXIT_OK) {
    cucap_reader_destroy(r);
    return rc;
  }
  a.o.source_path = path;
  cucap_derive_report rep;
  /* the replay up to the cut is what takes time */
  cucap_cli_progress *prog = a.o.replay ? cucap_cli_progress_create("extract --replay", 0) : NULL;
  a.o.watch = cucap_cli_progress_observer(prog, 0);
  cucap_status st = cucap_extract(r, &a.sel, tmp.tmp, &a.o, &rep);
  cucap_cli_progress_destroy(prog);
  cucap_reader_destroy(r);
  if (st == CUCAP_OK && (rc = cucap_cli_output_commit("extract", a.out, &tmp)) != CUCAP_EXIT_OK)
    return rc;
  if (st != CUCAP_OK) {
    cucap_cli_output_rename_in(&tmp, a.out, rep.error, sizeof rep.error);
    cucap_cli_output_abort(&tmp);
    cucap_cli_error("extract", path, "%s", rep.error[0] ? rep.error : cucap_status_str(st));
    rc = cucap_cli_exit_code(rep.status);
    return rc ? rc : CUCAP_EXIT_IO;
  }
  extract_print(&a, &rep);
  if (a.emit)
    return extract_emit_c(&a);
  return CUCAP_EXIT_OK;
}
