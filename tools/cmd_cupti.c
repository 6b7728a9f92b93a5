/* cmd_cupti.c - `cucap cupti`: direct access to the CUPTI engine of
 * `replay --profile` (profile/cupti/cucap_cupti.h), for diagnosing a GPU machine
 * and for the GPU self-test:
 *   cucap cupti probe [--list-metrics] [--metrics=LIST] [--cupti LIB]
 *   cucap cupti profile CAPTURE [options]   the engine's own table/JSON/folded
 */
#include <getopt.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_cli.h"
#include "cucap_clock.h"
#include "cucap_cupti.h"
#include "cucap_log.h"
#include "cucap_replay.h"


static const char cupti_usage[] =
    "usage: cucap cupti probe [--list-metrics] [--metrics=LIST] [--cupti LIB]\n"
    "                         [--libcuda LIB] [--device N] [--reset-clocks]\n"
    "       cucap cupti profile [options] CAPTURE\n"
    "probe: one 'probe: key: value' line per fact CUPTI reports on this machine\n"
    "  (version, counter permission, sol/full metric availability and pass\n"
    "  counts, PC sampling stall reasons, SASS metrics, nvdisasm).\n"
    "  --reset-clocks: only put the GPU's clocks back to their default (what a\n"
    "  profile killed with SIGKILL leaves locked to base).\n"
    "profile: replays CAPTURE under the CUPTI engine and prints its report.\n"
    "  --metrics=SET     sol (default), full, none, or metric names a,b,c\n"
    "  --loop N          N timeline passes (median and spread per launch)\n"
    "  --cache=MODE      flush (default: L2 flushed before each profiled\n"
    "                    launch in the metrics passes) or keep\n"
    "  --clock-control=MODE  base (default: GPU clocks locked to base for the\n"
    "                    passes after the timeline, as ncu does) or none\n"
    "  --no-pc           no PC sampling pass\n"
    "  --pc-period N     PC sampling period 2^N cycles (5..31, default 10)\n"
    "  --sass            SASS metrics pass (executed instructions per PC)\n"
    "  --range F[:N]     profile launches F..F+N-1 only (N default: all after F)\n"
    "  --max-ranges N    kernels per range-profiler window (default 4096)\n"
    "  --json FILE       the engine's results as JSON ('-' = stdout)\n"
    "  --folded FILE     folded stacks host;kernel;line;pc sass count\n"
    "  --top N           rows of the kernel table (default 20)\n"
    "  --cupti LIB       libcupti to load (default: CUCAP_CUPTI, CUDA_HOME,\n"
    "                    /usr/local/cuda, loader path)\n"
    "  --nvdisasm PATH   nvdisasm to run ('' = none)\n"
    "  --libcuda LIB  --device N  --relocate  --quiet\n"
    "exit status: as `cucap replay` (3: CUPTI cannot be loaded or attached,\n"
    "or a metric name is unknown); sections that could not be collected are\n"
    "reported with the reason and do not change it.\n";

static int cupti_probe_cmd(int argc, char **argv) {
  enum { O_LIST = 256, O_METRICS, O_CUPTI, O_LIBCUDA, O_DEVICE, O_RESET };
  static const struct option lo[] = {
      {"list-metrics", no_argument, NULL, O_LIST},
      {"metrics", required_argument, NULL, O_METRICS},
      {"cupti", required_argument, NULL, O_CUPTI},
      {"libcuda", required_argument, NULL, O_LIBCUDA},
      {"device", required_argument, NULL, O_DEVICE},
      {"reset-clocks", no_argument, NULL, O_RESET},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int list = 0, reset = 0, c;
  const char *metrics = NULL, *lib = NULL, *libcuda = NULL;
  uint64_t dev = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    switch (c) {
    case O_LIST: list = 1; break;
    case O_RESET: reset = 1; break;
    case O_METRICS: metrics = optarg; break;
    case O_CUPTI: lib = optarg; break;
    case O_LIBCUDA: libcuda = optarg; break;
    case O_DEVICE:
      if (cucap_cli_parse_u64(optarg, &dev) || dev > 1024) {
        cucap_cli_error("cupti", NULL, "--device %s: expected an ordinal", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case 'h': fputs(cupti_usage, stdout); return CUCAP_EXIT_OK;
    default: fputs(cupti_usage, stderr); return CUCAP_EXIT_USAGE;
    }
  }
  if (reset) {
    char msg[512];
    cucap_status rs = cucap_cupti_reset_clocks(libcuda, lib, (int)dev, msg, sizeof msg);
    printf("probe: clocks: %s%s\n", rs == CUCAP_OK ? "" : "NOT reset: ", msg);
    fflush(stdout);
    return rs == CUCAP_OK ? CUCAP_EXIT_OK : CUCAP_EXIT_BAD_INPUT;
  }
  cucap_status st = cucap_cupti_probe(libcuda, lib, (int)dev, metrics, list, stdout);
  fflush(stdout);
  return st == CUCAP_OK ? CUCAP_EXIT_OK : CUCAP_EXIT_BAD_INPUT;
}

/* An output file ("-": stdout), written beside path and renamed over it by
 * cupti_close_out once complete. */
static FILE *cupti_open_out(const char *path, cucap_cli_output *tmp) {
  if (!strcmp(path, "-"))
    return stdout;
  if (cucap_cli_output_begin("cupti", path, tmp) != CUCAP_EXIT_OK)
    return NULL;
  FILE *f = fdopen(dup(tmp->fd), "w");
  if (!f) {
    cucap_cli_error("cupti", path, "cannot create");
    cucap_cli_output_abort(tmp);
  }
  return f;
}

/* Closes f; renames the finished file into place when written is set, else
 * removes it. Returns 0 when the output is in place. */
static int cupti_close_out(FILE *f, const char *path, cucap_cli_output *tmp, int written) {
  if (f == stdout)
    return written ? 0 : -1;
  if (fclose(f) != 0 && written) {
    cucap_cli_error("cupti", path, "write failed");
    written = 0;
  }
  if (!written) {
    cucap_cli_output_abort(tmp);
    return -1;
  }
  return cucap_cli_output_commit("cupti", path, tmp) == CUCAP_EXIT_OK ? 0 : -1;
}

/* --range FIRST[:COUNT] into co; -1 (after the error line) when s is not
 * one. */
static int parse_launch_range(const char *s, cucap_cupti_options *co) {
  uint64_t v;
  char buf[64];
  snprintf(buf, sizeof buf, "%s", s);
  char *colon = strchr(buf, ':');
  uint64_t cnt = CUCAP_CUPTI_ALL_LAUNCHES;
  if (colon) {
    *colon = 0;
    if (cucap_cli_parse_u64(colon + 1, &cnt) || !cnt) {
      cucap_cli_error("cupti", NULL, "--range %s: expected FIRST[:COUNT]", s);
      return -1;
    }
  }
  if (cucap_cli_parse_u64(buf, &v)) {
    cucap_cli_error("cupti", NULL, "--range %s: expected FIRST[:COUNT]", s);
    return -1;
  }
  co->first_launch = v;
  co->launch_count = cnt;
  return 0;
}

/* `cupti profile`'s command line: the engine's and the replay's options and
 * what to write. */
typedef struct cupti_profile_args {
  cucap_cupti_options co;
  cucap_replay_options ro;
  const char *json, *folded;
  uint64_t top;
  int quiet;
  const char *path;
} cupti_profile_args;

/* Fills a from argv; returns -1 to go on, else the exit code to return. */
static int cupti_profile_parse(int argc, char **argv, cupti_profile_args *a) {
  enum { O_METRICS = 256, O_LOOP, O_CACHE, O_NOPC, O_PERIOD, O_SASS, O_RANGE,
         O_MAXR, O_JSON, O_FOLDED, O_TOP, O_CUPTI, O_NVDISASM, O_LIBCUDA,
         O_DEVICE, O_RELOCATE, O_QUIET, O_CLOCK };
  static const struct option lo[] = {
      {"metrics", required_argument, NULL, O_METRICS},
      {"loop", required_argument, NULL, O_LOOP},
      {"cache", required_argument, NULL, O_CACHE},
      {"clock-control", required_argument, NULL, O_CLOCK},
      {"no-pc", no_argument, NULL, O_NOPC},
      {"pc-period", required_argument, NULL, O_PERIOD},
      {"sass", no_argument, NULL, O_SASS},
      {"range", required_argument, NULL, O_RANGE},
      {"max-ranges", required_argument, NULL, O_MAXR},
      {"json", required_argument, NULL, O_JSON},
      {"folded", required_argument, NULL, O_FOLDED},
      {"top", required_argument, NULL, O_TOP},
      {"cupti", required_argument, NULL, O_CUPTI},
      {"nvdisasm", required_argument, NULL, O_NVDISASM},
      {"libcuda", required_argument, NULL, O_LIBCUDA},
      {"device", required_argument, NULL, O_DEVICE},
      {"relocate", no_argument, NULL, O_RELOCATE},
      {"quiet", no_argument, NULL, O_QUIET},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  cucap_cupti_options *co = &a->co;
  cucap_replay_options *ro = &a->ro;
  cucap_cupti_options_init(co);
  co->metrics = "sol";
  co->cache_flush = 1;
  co->pc_sampling = 1;
  cucap_replay_options_init(ro);
  ro->exit_after = 1; /* the command exits once its outputs are written */
  a->json = a->folded = NULL;
  a->top = 20;
  a->quiet = 0;
  uint64_t v;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "hq", lo, NULL)) != -1) {
    switch (c) {
    case O_METRICS: co->metrics = strcmp(optarg, "none") ? optarg : NULL; break;
    case O_LOOP:
      if (cucap_cli_parse_u64(optarg, &v) || !v || v > 256) {
        cucap_cli_error("cupti", NULL, "--loop %s: expected 1..256", optarg);
        return CUCAP_EXIT_USAGE;
      }
      co->timeline_passes = (unsigned)v;
      break;
    case O_CACHE: {
      int keep = cucap_cli_parse_pair("cupti", "cache", optarg, "flush", "keep");
      if (keep < 0)
        return CUCAP_EXIT_USAGE;
      co->cache_flush = !keep;
      break;
    }
    case O_CLOCK: {
      int none = cucap_cli_parse_pair("cupti", "clock-control", optarg, "base", "none");
      if (none < 0)
        return CUCAP_EXIT_USAGE;
      co->clock_control = none ? CUCAP_CUPTI_CLOCK_NONE : CUCAP_CUPTI_CLOCK_BASE;
      break;
    }
    case O_NOPC: co->pc_sampling = 0; break;
    case O_PERIOD:
      if (cucap_cli_parse_u64(optarg, &v) || v < 5 || v > 31) {
        cucap_cli_error("cupti", NULL, "--pc-period %s: expected 5..31", optarg);
        return CUCAP_EXIT_USAGE;
      }
      co->pc_period = (unsigned)v;
      break;
    case O_SASS: co->sass_metrics = 1; break;
    case O_RANGE:
      if (parse_launch_range(optarg, co))
        return CUCAP_EXIT_USAGE;
      break;
    case O_MAXR:
      if (cucap_cli_parse_u64(optarg, &v) || !v || v > 1000000) {
        cucap_cli_error("cupti", NULL, "--max-ranges %s: expected 1..1000000", optarg);
        return CUCAP_EXIT_USAGE;
      }
      co->max_ranges = (unsigned)v;
      break;
    case O_JSON: a->json = optarg; break;
    case O_FOLDED: a->folded = optarg; break;
    case O_TOP:
      if (cucap_cli_parse_u64(optarg, &a->top)) {
        cucap_cli_error("cupti", NULL, "--top %s: expected a number", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case O_CUPTI: co->library = optarg; break;
    case O_NVDISASM: co->nvdisasm = optarg; break;
    case O_LIBCUDA: ro->libcuda = optarg; break;
    case O_DEVICE:
      if (cucap_cli_parse_u64(optarg, &v) || v > 1024) {
        cucap_cli_error("cupti", NULL, "--device %s: expected an ordinal", optarg);
        return CUCAP_EXIT_USAGE;
      }
      ro->device = (int)v;
      break;
    case O_RELOCATE: ro->relocate = 1; break;
    case 'q':
    case O_QUIET: a->quiet = 1; break;
    case 'h': fputs(cupti_usage, stdout); return CUCAP_EXIT_OK;
    default: fputs(cupti_usage, stderr); return CUCAP_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    cucap_cli_error("cupti", NULL, "profile: expected exactly one capture file");
    return CUCAP_EXIT_USAGE;
  }
  a->path = argv[optind];
  return -1;
}

/* --json and --folded after a replay that ran (loops); returns rc, or the
 * I/O error when a file could not be written and rc was 0. */
static int cupti_profile_write(cucap_cupti *e, const cupti_profile_args *a, unsigned loops,
                               int rc) {
  double tw = cucap_clock_now_s();
  cucap_cli_output tmp;
  if (a->json && loops) {
    FILE *f = cupti_open_out(a->json, &tmp);
    int w = f && cucap_cupti_write_json(e, f) == CUCAP_OK;
    if (f && !w)
      cucap_cli_error("cupti", a->json, "write failed");
    if (!f || cupti_close_out(f, a->json, &tmp, w) != 0)
      rc = rc ? rc : CUCAP_EXIT_IO;
  }
  if (a->folded && loops) {
    FILE *f = cupti_open_out(a->folded, &tmp);
    size_t n = 0;
    int w = f && cucap_cupti_write_folded(e, f, &n) == CUCAP_OK;
    if (f && !w)
      cucap_cli_error("cupti", a->folded, "write failed");
    if (!f || cupti_close_out(f, a->folded, &tmp, w) != 0)
      rc = rc ? rc : CUCAP_EXIT_IO;
    else if (!a->quiet)
      fprintf(stderr, "cucap cupti: %zu distinct instruction-level stacks in %s\n",
              n, a->folded);
  }
  if ((a->json || a->folded) && loops)
    CUCAP_INFO("profile: timing: JSON/folded stacks written in %.3f s",
               cucap_clock_now_s() - tw);
  return rc;
}

static int cupti_profile_cmd(int argc, char **argv) {
  cupti_profile_args a;
  int rc = cupti_profile_parse(argc, argv, &a);
  if (rc >= 0)
    return rc;
  const char *path = a.path;
  if (a.quiet && cucap_log_get_level() > CUCAP_LOG_ERROR)
    cucap_log_set_level(CUCAP_LOG_ERROR);
  /* outputs and input before CUPTI is loaded and the replay runs */
  const char *ins[2] = {path, a.json && strcmp(a.json, "-") ? a.json : NULL};
  if (a.json && strcmp(a.json, "-") &&
      (rc = cucap_cli_output_check("cupti", a.json, ins, 1)) != CUCAP_EXIT_OK)
    return rc;
  if (a.folded && strcmp(a.folded, "-") &&
      (rc = cucap_cli_output_check("cupti", a.folded, ins, 2)) != CUCAP_EXIT_OK)
    return rc;
  if ((rc = cucap_cli_check_input("cupti", path)) != CUCAP_EXIT_OK)
    return rc;
  cucap_cupti *e = NULL;
  char msg[512];
  cucap_status st = cucap_cupti_create(&a.co, &e, msg, sizeof msg);
  if (st != CUCAP_OK) {
    cucap_cli_error("cupti", NULL, "%s", msg[0] ? msg : cucap_status_str(st));
    return st == CUCAP_ERR_INVALID_ARG ? CUCAP_EXIT_USAGE : CUCAP_EXIT_IO;
  }
  const cucap_replay_observer *obs[1] = {cucap_cupti_observer(e)};
  a.ro.observers = obs;
  a.ro.nobservers = 1;
  cucap_replay_report rep;
  cucap_replay_run(path, &a.ro, &rep);
  cucap_status rst = cucap_cli_replay_status(&rep, NULL);
  if (!a.quiet && (rep.loops || !rep.error[0]))
    cucap_cli_replay_print(&rep, NULL, rst, stdout, 0);
  if (!a.quiet && rep.loops)
    cucap_cupti_print_report(e, stdout, (unsigned)a.top);
  rc = cucap_cli_exit_code(rst);
  if (rep.error[0])
    cucap_cli_error("cupti", path, "%s", rep.error);
  rc = cupti_profile_write(e, &a, rep.loops, rc);
  cucap_cupti_destroy(e);
  CUCAP_DEBUG("profile: engine released");
  return rc;
}

int cucap_cmd_cupti(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    fputs(cupti_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? CUCAP_EXIT_USAGE : CUCAP_EXIT_OK;
  }
  if (!strcmp(argv[1], "probe"))
    return cupti_probe_cmd(argc - 1, argv + 1);
  if (!strcmp(argv[1], "profile"))
    return cupti_profile_cmd(argc - 1, argv + 1);
  cucap_cli_error("cupti", NULL, "unknown subcommand '%s' (probe, profile)", argv[1]);
  return CUCAP_EXIT_USAGE;
}
