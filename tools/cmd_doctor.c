/* cmd_doctor.c - `cucap doctor`: checks what replay and `replay --profile`
 * need on this machine and says what to change (tools/cucap_doctor.h).
 *
 * Exit: 0 everything --profile needs is there; 1 replay works but --profile
 * would lack sections; 3 replay cannot run (no driver / no GPU); 2 usage. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cucap_cli.h"
#include "cucap_doctor.h"
#include "cucap_json.h"

static const char doctor_usage[] =
    "usage: cucap doctor [--json] [--libcuda PATH] [--cupti PATH] [--device N]\n"
    "  Checks the driver, the GPUs, the CUPTI profiling backend and library,\n"
    "  whether GPU performance counters and PC sampling are allowed for this\n"
    "  user, perf_event_paranoid, nvdisasm and libdw; prints what to change\n"
    "  for each missing piece. Lists the CUCAP_* variables set, with what each\n"
    "  does; a name cucap does not read is flagged (a typo?).\n"
    "  --json          one JSON object\n"
    "  --libcuda PATH  the libcuda to check (default libcuda.so.1)\n"
    "  --cupti PATH    the libcupti to check (default: searched)\n"
    "  --device N      the device replay would use (default 0)\n"
    "  --proc-root DIR read /proc files under DIR (tests)\n"
    "exit: 0 everything --profile needs is there, 1 replay works but --profile\n"
    "would lack sections, 3 replay cannot run here (no driver / no GPU), 2 usage\n";

int cucap_cmd_doctor(int argc, char **argv) {
  enum { O_JSON = 256, O_LIBCUDA, O_CUPTI, O_DEVICE, O_PROC };
  static const struct option lo[] = {{"json", no_argument, NULL, O_JSON},
                                     {"libcuda", required_argument, NULL, O_LIBCUDA},
                                     {"cupti", required_argument, NULL, O_CUPTI},
                                     {"device", required_argument, NULL, O_DEVICE},
                                     {"proc-root", required_argument, NULL, O_PROC},
                                     {"help", no_argument, NULL, 'h'},
                                     {NULL, 0, NULL, 0}};
  cucap_doctor_options o = {0};
  int json = 0, c;
  uint64_t v;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    switch (c) {
    case O_JSON: json = 1; break;
    case O_LIBCUDA: o.libcuda = optarg; break;
    case O_CUPTI: o.libcupti = optarg; break;
    case O_PROC: o.proc_root = optarg; break;
    case O_DEVICE:
      if (cucap_cli_parse_u64(optarg, &v) || v > 1024) {
        cucap_cli_error("doctor", NULL, "--device %s: expected a device ordinal", optarg);
        return CUCAP_EXIT_USAGE;
      }
      o.device = (int)v;
      break;
    case 'h':
      fputs(doctor_usage, stdout);
      return CUCAP_EXIT_OK;
    default:
      fputs(doctor_usage, stderr);
      return CUCAP_EXIT_USAGE;
    }
  }
  if (optind != argc) {
    cucap_cli_error("doctor", NULL, "unexpected argument '%s'", argv[optind]);
    return CUCAP_EXIT_USAGE;
  }
  cucap_doctor_report r;
  cucap_doctor_run(&o, &r);
  if (json) {
    cucap_json *w = cucap_json_create_file(stdout, 0);
    if (!w)
      return CUCAP_EXIT_IO;
    cucap_doctor_write_json(&r, w);
    cucap_json_newline(w);
    cucap_json_destroy(w);
  } else {
    cucap_doctor_print(&r, stdout);
  }
  if (fflush(stdout) != 0)
    return CUCAP_EXIT_IO;
  return r.exit_code;
}
