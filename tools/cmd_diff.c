/* cmd_diff.c - `cucap diff A B [--profile-a P --profile-b P]`: where two
 * captures of the same program differ (share/cucap_diff.h). Like diff(1):
 * exit 0 when they are the same, 1 when they differ, 2 usage, 3 a damaged
 * capture or timings file, 4 I/O. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cucap_cli.h"
#include "cucap_diff.h"
#include "cucap_profile_table.h"

static const char diff_usage[] =
    "usage: cucap diff A B [--profile-a TIMES --profile-b TIMES] [--max N]\n"
    "                      [--no-demangle]\n"
    "  Aligns the two captures (threads in order of appearance, launches by\n"
    "  kernel name and host call site) and reports the first divergence of the\n"
    "  API sequence, launches whose configuration or arguments differ (pointer\n"
    "  arguments compared as allocation + offset), DtoH copies and snapshot\n"
    "  regions whose bytes differ, and with two GPU timings files the\n"
    "  per-kernel time and metric changes, largest first.\n"
    "  --profile-a/-b TIMES  profile files (replay --profile-out) or CSV:\n"
    "                        launch_index,start_ns,end_ns[,kernel][,metrics]\n"
    "  --max N               findings listed per section (default 10)\n"
    "exit: 0 same, 1 different, 2 usage, 3 damaged input, 4 I/O error\n";

static const char *kernel_name(const char *mangled, char *buf, size_t size) {
  return cucap_cli_demangle(mangled, buf, size);
}

static int load(const char *path, cucap_profile_table **t) {
  return cucap_cli_load_timings("diff", path, t);
}

int cucap_cmd_diff(int argc, char **argv) {
  enum { O_PA = 256, O_PB, O_MAX, O_NODEM };
  static const struct option lo[] = {
      {"profile-a", required_argument, NULL, O_PA}, {"profile-b", required_argument, NULL, O_PB},
      {"max", required_argument, NULL, O_MAX},      {"no-demangle", no_argument, NULL, O_NODEM},
      {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};
  const char *pa = NULL, *pb = NULL;
  cucap_diff_options o;
  memset(&o, 0, sizeof o);
  o.call_name = cucap_cli_cbid_name;
  o.kernel_name = kernel_name;
  uint64_t v;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    switch (c) {
    case O_PA: pa = optarg; break;
    case O_PB: pb = optarg; break;
    case O_NODEM: o.kernel_name = NULL; break;
    case O_MAX:
      if (cucap_cli_parse_u64(optarg, &v) || v == 0 || v > 1000000) {
        cucap_cli_error("diff", NULL, "--max %s: expected 1..1000000", optarg);
        return CUCAP_EXIT_USAGE;
      }
      o.max_items = (size_t)v;
      break;
    case 'h': fputs(diff_usage, stdout); return CUCAP_EXIT_OK;
    default: fputs(diff_usage, stderr); return CUCAP_EXIT_USAGE;
    }
  }
  if (optind + 2 != argc || !pa != !pb) {
    cucap_cli_error("diff", NULL, "%s", optind + 2 != argc ? "expected two captures A B"
                                                            : "give both --profile-a and --profile-b");
    fputs(diff_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  cucap_profile_table *ta = NULL, *tb = NULL;
  int rc = CUCAP_EXIT_OK;
  if (pa && ((rc = load(pa, &ta)) != CUCAP_EXIT_OK || (rc = load(pb, &tb)) != CUCAP_EXIT_OK)) {
    cucap_profile_table_destroy(ta);
    return rc;
  }
  o.profile_a = ta;
  o.profile_b = tb;
  cucap_reader *a = NULL, *b = NULL;
  if ((rc = cucap_cli_open("diff", argv[optind], &a)) != CUCAP_EXIT_OK ||
      (rc = cucap_cli_open("diff", argv[optind + 1], &b)) != CUCAP_EXIT_OK)
    goto out;
  cucap_diff_report rep;
  cucap_status st = cucap_diff(a, b, stdout, &o, &rep);
  if (st != CUCAP_OK) {
    const char *which = rep.error[0] == 'B' ? argv[optind + 1] : argv[optind];
    cucap_cli_error("diff", st == CUCAP_ERR_IO ? NULL : which, "%s",
                    st == CUCAP_ERR_IO ? "error writing the report"
                                       : "damaged or truncated capture");
    rc = cucap_cli_exit_code(st);
    if (rc == CUCAP_EXIT_OK || rc == CUCAP_EXIT_MISMATCH)
      rc = CUCAP_EXIT_BAD_INPUT;
  } else {
    rc = rep.same ? CUCAP_EXIT_OK : CUCAP_EXIT_MISMATCH;
  }
out:
  cucap_reader_destroy(a);
  cucap_reader_destroy(b);
  cucap_profile_table_destroy(ta);
  cucap_profile_table_destroy(tb);
  return rc;
}
