/* cmd_analyze.c - `cucap analyze CAPTURE`: diagnosis of the program from its
 * capture alone (analyze/cucap_analyze.h), as text or one JSON object.
 *
 * Exit: 0 analysed; 1 with --fail-on SEVERITY when a finding is at least
 * that severe; 3 damaged/truncated capture (what was read is still
 * analysed and printed, then one error line) or not a capture; 4 I/O;
 * 2 usage. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_analyze.h"
#include "cucap_cli.h"
#include "cucap_json.h"

static const char analyze_usage[] =
    "usage: cucap analyze CAPTURE [options]\n"
    "  Diagnoses the program from its capture alone: allocation churn, small\n"
    "  transfers, pageable host memory in copies, synchronisation and the GPU\n"
    "  idle time after it, launch overhead, stream imbalance, legacy\n"
    "  default-stream serialization; each finding with a severity, numbers,\n"
    "  the host callstacks responsible and the time it could recover.\n"
    "  --json               one JSON object\n"
    "  --window steady|all  analyse the steady state (default; the whole\n"
    "                       capture when none is found) or everything\n"
    "  --warmup PCT         the steady state starts after PCT% of the launches\n"
    "  --link-gbps X        peak host<->device GB/s per direction to assume\n"
    "                       (default: from the recorded device)\n"
    "  --min-severity S     text: show findings at least S (info|low|medium|high)\n"
    "  --fail-on S          exit 1 when a finding is at least S\n"
    "  --sites N            callsites per finding (default 5, max 16)\n"
    "  --no-symbols         do not open object files to name frames\n"
    "exit: 0 analysed, 1 --fail-on matched, 2 usage, 3 damaged/not a capture\n"
    "(what was read is still analysed), 4 I/O error\n";

static int parse_double(const char *s, double *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (!s[0] || !end || *end || v != v)
    return -1;
  *out = v;
  return 0;
}

/* What the command line asked for. */
typedef struct analyze_args {
  cucap_analyze_options o;
  int json, minsev, failon; /* failon -1: --fail-on not given */
  const char *path;
} analyze_args;

/* Fills a from argv; returns -1 to go on, else the exit code to return. */
static int analyze_parse(int argc, char **argv, analyze_args *a) {
  enum { O_JSON = 256, O_WINDOW, O_WARMUP, O_LINK, O_MINSEV, O_FAILON, O_SITES, O_NOSYM };
  static const struct option lo[] = {{"json", no_argument, NULL, O_JSON},
                                     {"window", required_argument, NULL, O_WINDOW},
                                     {"warmup", required_argument, NULL, O_WARMUP},
                                     {"link-gbps", required_argument, NULL, O_LINK},
                                     {"min-severity", required_argument, NULL, O_MINSEV},
                                     {"fail-on", required_argument, NULL, O_FAILON},
                                     {"sites", required_argument, NULL, O_SITES},
                                     {"no-symbols", no_argument, NULL, O_NOSYM},
                                     {"help", no_argument, NULL, 'h'},
                                     {NULL, 0, NULL, 0}};
  cucap_analyze_options *o = &a->o;
  cucap_analyze_options_init(o);
  a->json = 0;
  a->minsev = 0;
  a->failon = -1;
  int c;
  uint64_t v;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    switch (c) {
    case O_JSON: a->json = 1; break;
    case O_WINDOW:
      if (!strcmp(optarg, "steady"))
        o->window = CUCAP_ANALYZE_WINDOW_STEADY;
      else if (!strcmp(optarg, "all"))
        o->window = CUCAP_ANALYZE_WINDOW_ALL;
      else {
        cucap_cli_error("analyze", NULL, "--window %s: expected steady or all", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case O_WARMUP:
      if (parse_double(optarg, &o->warmup_pct) || o->warmup_pct < 0 || o->warmup_pct >= 100) {
        cucap_cli_error("analyze", NULL, "--warmup %s: expected 0 <= PCT < 100", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case O_LINK:
      if (parse_double(optarg, &o->link_gbps) || o->link_gbps <= 0 || o->link_gbps > 1e5) {
        cucap_cli_error("analyze", NULL, "--link-gbps %s: expected a positive number", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case O_MINSEV:
    case O_FAILON: {
      int s = cucap_severity_parse(optarg);
      if (s < 0) {
        cucap_cli_error("analyze", NULL, "%s %s: expected info, low, medium or high",
                        c == O_MINSEV ? "--min-severity" : "--fail-on", optarg);
        return CUCAP_EXIT_USAGE;
      }
      if (c == O_MINSEV)
        a->minsev = s;
      else
        a->failon = s;
      break;
    }
    case O_SITES:
      if (cucap_cli_parse_u64(optarg, &v) || v < 1 || v > CUCAP_FINDING_MAX_SITES) {
        cucap_cli_error("analyze", NULL, "--sites %s: expected 1..%d", optarg,
                        CUCAP_FINDING_MAX_SITES);
        return CUCAP_EXIT_USAGE;
      }
      o->max_sites = (unsigned)v;
      break;
    case O_NOSYM: o->symbolize = 0; break;
    case 'h':
      fputs(analyze_usage, stdout);
      return CUCAP_EXIT_OK;
    default:
      fputs(analyze_usage, stderr);
      return CUCAP_EXIT_USAGE;
    }
  }
  if (optind + 1 != argc) {
    cucap_cli_error("analyze", NULL,
                    optind >= argc ? "missing CAPTURE argument" : "too many arguments");
    fputs(analyze_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  a->path = argv[optind];
  return -1;
}

/* The report (text or --json); returns CUCAP_EXIT_OK or CUCAP_EXIT_IO. */
static int analyze_print(const analyze_args *ar, cucap_analysis *a) {
  int rc = CUCAP_EXIT_OK;
  if (ar->json) {
    cucap_json *w = cucap_json_create_file(stdout, 0);
    if (w) {
      cucap_analysis_write_json(a, w);
      cucap_json_newline(w);
      if (cucap_json_status(w) != CUCAP_OK)
        rc = CUCAP_EXIT_IO;
      cucap_json_destroy(w);
    } else {
      rc = CUCAP_EXIT_IO;
    }
  } else {
    printf("cucap analyze: %s\n", ar->path);
    cucap_analysis_print(a, stdout, (cucap_severity)ar->minsev);
  }
  if (fflush(stdout) != 0 || ferror(stdout))
    rc = CUCAP_EXIT_IO;
  return rc;
}

/* The exit code after a report (rc): what stopped reading, else whether
 * the file was complete, then --fail-on. */
static int analyze_verdict(const analyze_args *ar, cucap_reader *r, const cucap_analysis *a,
                           int rc) {
  const cucap_analysis_summary *s = cucap_analysis_summary_get(a);
  if (rc == CUCAP_EXIT_OK && s->read_status != CUCAP_OK) {
    cucap_cli_error("analyze", ar->path, "%s (analysed what was read)", s->problem);
    rc = cucap_cli_exit_code(s->read_status);
    if (rc == CUCAP_EXIT_OK)
      rc = CUCAP_EXIT_BAD_INPUT;
  } else if (rc == CUCAP_EXIT_OK) {
    rc = cucap_cli_report_recovery("analyze", ar->path, r);
  }
  if (rc == CUCAP_EXIT_OK && ar->failon >= 0)
    for (size_t i = 0; i < cucap_analysis_finding_count(a); i++)
      if ((int)cucap_analysis_finding(a, i)->severity >= ar->failon)
        rc = CUCAP_EXIT_MISMATCH;
  return rc;
}

int cucap_cmd_analyze(int argc, char **argv) {
  analyze_args ar;
  int rc = analyze_parse(argc, argv, &ar);
  if (rc >= 0)
    return rc;
  const char *path = ar.path;
  cucap_reader *r = NULL;
  rc = cucap_cli_open("analyze", path, &r);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  cucap_analysis *a = NULL;
  cucap_status st = cucap_analysis_create(r, &ar.o, &a);
  if (st != CUCAP_OK) {
    cucap_cli_error("analyze", path, "%s", cucap_status_str(st));
    cucap_reader_destroy(r);
    return cucap_cli_exit_code(st);
  }
  rc = analyze_print(&ar, a);
  rc = analyze_verdict(&ar, r, a, rc);
  cucap_analysis_destroy(a);
  cucap_reader_destroy(r);
  return rc;
}
