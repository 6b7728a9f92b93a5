/* cmd_replay.c - `cucap replay`: re-executes a capture without the program. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_cli.h"
#include "cucap_log.h"
#include "cucap_replay.h"
#include "cucap_replay_observer.h"
#include "cucap_verify.h"

static const char replay_usage[] =
    "usage: cucap replay [options] CAPTURE\n"
    "  --verify          compare every DtoH copy and the exit snapshot with the\n"
    "                    recorded bytes (exit 1 on a difference)\n"
    "  --verify=launch   also hash memory after each launch and compare with\n"
    "                    the LaunchHash records (cucap record --hash-launches);\n"
    "                    reports the first divergent kernel\n"
    "  --verify-passes N compare N replays to tell nondeterministic bytes (they\n"
    "                    differ between replays: clocks, atomics order, device\n"
    "                    malloc, floating-point atomics) from real differences;\n"
    "                    default: 1 when everything matches, else 2, and up to\n"
    "                    4 more while differing bytes stay the same; 1 = every\n"
    "                    difference is a mismatch. Implies --verify\n"
    "  --loop N          replay N times (re-uploading the initial state)\n"
    "  --sync            synchronize after every operation (debugging)\n"
    "  --device N        replay on device N (default 0)\n"
    "  --relocate        do not place allocations at their recorded addresses;\n"
    "                    patch pointer kernel parameters instead\n"
    "  --strict          refuse captures holding calls that cannot be replayed\n"
    "  --allow-partial   replay what a damaged/truncated capture still holds\n"
    "  --quiet           print nothing but errors\n"
    "  --json            print the report as one JSON object\n"
    "profiling (docs/design.md \"Profiling\"):\n"
    "  --profile         profile the replay: kernel timeline, hardware metrics,\n"
    "                    bottleneck class per kernel, program findings\n"
    "  --metrics=SET     sol (default), full, none, or metric names a,b,c\n"
    "  --cache=MODE      flush (default: L2 flushed before each profiled kernel)\n"
    "                    or keep\n"
    "  --clock-control=MODE  base (default: GPU clocks locked to base for the\n"
    "                    passes after the timeline, as ncu does) or none\n"
    "  --range SPEC      profile launch:A-B (launch indices) or kernel:REGEX only\n"
    "  --loop N          also: N timing passes (per-launch median and spread)\n"
    "  --pc-sampling     instruction-level stacks (PC sampling + SASS + source)\n"
    "  --sass-metrics    per-instruction SASS metrics\n"
    "  --profile-out F   write the profile file F (cucap export/diff read it)\n"
    "  --folded F        write folded stacks (flamegraph.pl, speedscope) to F\n"
    "  --top N           kernels in the report table (default 20)\n"
    "  --cupti PATH      libcupti to use (default: searched, see cucap doctor)\n"
    "  with --json: {\"replay\": report, \"profile\": profile}\n"
    "exit status: 0 ok, 1 verification mismatch, 2 usage (also: --profile-out\n"
    "or --folded F is the capture or a directory), 3 bad capture / a directory /\n"
    "environment refused (no code for this GPU, no driver, --strict),\n"
    "4 a driver call failed during replay, or the capture cannot be read (I/O)\n";

/* What the command line asked for. */
typedef struct replay_args {
  cucap_replay_options o;
  cucap_verify_options vo;
  cucap_cli_profile_args pa;
  int quiet, json, profile;
  int profile_only; /* a profiling option was given */
  const char *path;
} replay_args;

/* The options of `cucap replay` (getopt_long values). */
enum { O_VERIFY = 256, O_LOOP, O_SYNC, O_DEVICE, O_RELOCATE, O_STRICT,
       O_PARTIAL, O_QUIET, O_JSON, O_LIBCUDA, O_VPASSES, O_PROFILE, O_METRICS, O_CACHE,
       O_RANGE, O_PROFILE_OUT, O_FOLDED, O_TOP, O_CUPTI, O_PCSAMP, O_SASS, O_CLOCK };

/* One of the profiling options (c, with its argument arg) into pa; returns 0,
 * or CUCAP_EXIT_USAGE after the error line. */
static int replay_parse_profile_opt(int c, const char *arg, cucap_cli_profile_args *pa) {
  uint64_t v;
  switch (c) {
  case O_METRICS: pa->metrics = arg; break;
  case O_CACHE:
    if ((pa->cache_keep = cucap_cli_parse_pair("replay", "cache", arg, "flush", "keep")) < 0)
      return CUCAP_EXIT_USAGE;
    break;
  case O_CLOCK:
    if ((pa->clock_none = cucap_cli_parse_pair("replay", "clock-control", arg, "base",
                                              "none")) < 0)
      return CUCAP_EXIT_USAGE;
    break;
  case O_RANGE: pa->range = arg; break;
  case O_PROFILE_OUT: pa->out = arg; break;
  case O_FOLDED: pa->folded = arg; break;
  case O_CUPTI: pa->cupti = arg; break;
  case O_PCSAMP: pa->pc_sampling = 1; break;
  case O_SASS: pa->sass_metrics = 1; break;
  case O_TOP:
    if (cucap_cli_parse_u64(arg, &v) || v == 0 || v > 100000) {
      cucap_cli_error("replay", NULL, "--top %s: expected 1..100000", arg);
      return CUCAP_EXIT_USAGE;
    }
    pa->top = (unsigned)v;
    break;
  default:
    break;
  }
  return 0;
}

/* Fills a from argv; returns -1 to go on, else the exit code to return. */
static int replay_parse(int argc, char **argv, replay_args *a) {
  static const struct option lo[] = {
      {"verify", optional_argument, NULL, O_VERIFY},
      {"verify-passes", required_argument, NULL, O_VPASSES},
      {"loop", required_argument, NULL, O_LOOP},
      {"sync", no_argument, NULL, O_SYNC},
      {"device", required_argument, NULL, O_DEVICE},
      {"relocate", no_argument, NULL, O_RELOCATE},
      {"strict", no_argument, NULL, O_STRICT},
      {"allow-partial", no_argument, NULL, O_PARTIAL},
      {"quiet", no_argument, NULL, O_QUIET},
      {"json", no_argument, NULL, O_JSON},
      {"libcuda", required_argument, NULL, O_LIBCUDA},
      {"profile", no_argument, NULL, O_PROFILE},
      {"metrics", required_argument, NULL, O_METRICS},
      {"cache", required_argument, NULL, O_CACHE},
      {"clock-control", required_argument, NULL, O_CLOCK},
      {"range", required_argument, NULL, O_RANGE},
      {"profile-out", required_argument, NULL, O_PROFILE_OUT},
      {"folded", required_argument, NULL, O_FOLDED},
      {"top", required_argument, NULL, O_TOP},
      {"cupti", required_argument, NULL, O_CUPTI},
      {"pc-sampling", no_argument, NULL, O_PCSAMP},
      {"sass-metrics", no_argument, NULL, O_SASS},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  cucap_replay_options *o = &a->o;
  cucap_verify_options *vo = &a->vo;
  cucap_cli_profile_args *pa = &a->pa;
  int c;
  memset(a, 0, sizeof *a);
  cucap_replay_options_init(o);
  cucap_verify_options_init(vo);
  uint64_t v;
  optind = 1;
  while ((c = getopt_long(argc, argv, "hq", lo, NULL)) != -1) {
    switch (c) {
    case O_VERIFY:
      if (!optarg || !strcmp(optarg, "copies"))
        vo->mode = CUCAP_VERIFY_COPIES;
      else if (!strcmp(optarg, "launch"))
        vo->mode = CUCAP_VERIFY_LAUNCH;
      else {
        cucap_cli_error("replay", NULL, "--verify=%s: expected 'launch'", optarg);
        return CUCAP_EXIT_USAGE;
      }
      break;
    case O_VPASSES:
      if (cucap_cli_parse_u64(optarg, &v) || v == 0 || v > 64) {
        cucap_cli_error("replay", NULL, "--verify-passes %s: expected 1..64", optarg);
        return CUCAP_EXIT_USAGE;
      }
      vo->passes = (unsigned)v;
      break;
    case O_LOOP:
      if (cucap_cli_parse_u64(optarg, &v) || v == 0 || v > 1000000) {
        cucap_cli_error("replay", NULL, "--loop %s: expected 1..1000000", optarg);
        return CUCAP_EXIT_USAGE;
      }
      o->loops = (unsigned)v;
      break;
    case O_SYNC: o->sync_each = 1; break;
    case O_DEVICE:
      if (cucap_cli_parse_u64(optarg, &v) || v > 1024) {
        cucap_cli_error("replay", NULL, "--device %s: expected a device ordinal", optarg);
        return CUCAP_EXIT_USAGE;
      }
      o->device = (int)v;
      break;
    case O_RELOCATE: o->relocate = 1; break;
    case O_STRICT: o->strict = 1; break;
    case O_PARTIAL: o->allow_partial = 1; break;
    case 'q':
    case O_QUIET: a->quiet = 1; break;
    case O_JSON: a->json = 1; break;
    case O_LIBCUDA: o->libcuda = optarg; break;
    case O_PROFILE: a->profile = 1; break;
    case O_METRICS:
    case O_CACHE:
    case O_CLOCK:
    case O_RANGE:
    case O_PROFILE_OUT:
    case O_FOLDED:
    case O_CUPTI:
    case O_PCSAMP:
    case O_SASS:
    case O_TOP:
      if (replay_parse_profile_opt(c, optarg, pa) != 0)
        return CUCAP_EXIT_USAGE;
      a->profile_only = 1;
      break;
    case 'h':
      fputs(replay_usage, stdout);
      return CUCAP_EXIT_OK;
    default:
      fputs(replay_usage, stderr);
      return CUCAP_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    cucap_cli_error("replay", NULL, "expected exactly one capture file");
    fputs(replay_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  a->path = argv[optind];
  return -1;
}

/* The options that only make sense together; returns -1 to go on, else the
 * exit code. */
static int replay_validate(replay_args *a) {
  if (a->vo.passes && a->vo.mode == CUCAP_VERIFY_NONE)
    a->vo.mode = CUCAP_VERIFY_COPIES;
  if (a->profile_only && !a->profile) {
    cucap_cli_error("replay", NULL, "profiling options need --profile");
    return CUCAP_EXIT_USAGE;
  }
  return -1;
}

void cucap_cli_replay_warn(const char *path, const cucap_verify_options *vo,
                           const cucap_replay_report *rep, const cucap_verify_report *vr) {
  if (vo->mode == CUCAP_VERIFY_LAUNCH && !rep->error[0] && !vr->launch_hashes_checked)
    cucap_cli_error("replay", path, "warning: --verify=launch: the capture has no "
                    "LaunchHash records (record with --hash-launches); only copies "
                    "were checked");
}

/* A replay without --profile: run, print the report, say what went wrong. */
static int replay_plain(replay_args *a) {
  cucap_replay_report rep;
  cucap_verify_report vr;
  memset(&vr, 0, sizeof vr);
  const cucap_replay_observer *obs[2];
  cucap_verify *ver = NULL;
  cucap_cli_progress *prog = cucap_cli_progress_create("replay", a->quiet);
  if (cucap_cli_verify_attach(&a->o, &a->vo, obs, &ver) == CUCAP_OK) {
    /* after the verifier is made: it does not count the progress line as
     * an observer that its perturbed passes would disturb */
    if (prog) {
      obs[a->o.nobservers++] = cucap_cli_progress_observer(prog, a->o.loops);
      a->o.observers = obs;
    }
    cucap_replay_run(a->path, &a->o, &rep);
  } else {
    cucap_cli_replay_nomem(&rep, &vr, &a->vo);
  }
  cucap_cli_progress_destroy(prog);
  if (ver)
    vr = *cucap_verify_get_report(ver);
  cucap_verify_destroy(ver);
  cucap_status st = cucap_cli_replay_status(&rep, &vr);
  if (a->json)
    cucap_cli_replay_print(&rep, &vr, st, stdout, 1);
  else if (!a->quiet && (rep.loops || !rep.error[0])) /* nothing ran: error only */
    cucap_cli_replay_print(&rep, &vr, st, stdout, 0);
  cucap_cli_replay_warn(a->path, &a->vo, &rep, &vr);
  if (rep.error[0])
    cucap_cli_error("replay", a->path, "%s", rep.error);
  else if (vr.mismatches)
    cucap_cli_error("replay", a->path, "verification failed: %s",
                    vr.first_mismatch);
  return cucap_cli_exit_code(st);
}

int cucap_cmd_replay(int argc, char **argv) {
  replay_args args, *a = &args;
  int rc = replay_parse(argc, argv, a);
  if (rc < 0)
    rc = replay_validate(a);
  if (rc >= 0)
    return rc;
  if (a->quiet && cucap_log_get_level() > CUCAP_LOG_ERROR)
    cucap_log_set_level(CUCAP_LOG_ERROR);
  /* a directory, an empty file, not a capture: the words and exit code of
   * every other command, before any driver is loaded */
  if ((rc = cucap_cli_check_input("replay", a->path)) != CUCAP_EXIT_OK)
    return rc;
  if (a->profile) {
    /* the outputs are checked before the replay, which may take long */
    const char *ins[2] = {a->path, a->pa.cupti};
    if (a->pa.out && (rc = cucap_cli_output_check("replay", a->pa.out, ins, 2)) != CUCAP_EXIT_OK)
      return rc;
    if (a->pa.folded &&
        (rc = cucap_cli_output_check("replay", a->pa.folded, ins, 2)) != CUCAP_EXIT_OK)
      return rc;
    if (a->pa.out && a->pa.folded && !cucap_cli_output_emit_ok(a->pa.out, a->pa.folded, "")) {
      cucap_cli_error("replay", a->pa.out, "is also the --folded output");
      return CUCAP_EXIT_USAGE;
    }
    /* a profile's time is its user's: the command exits once its outputs
     * are written, so the process exit releases what is costly to release
     * one by one (modules, page-locked buffers, the primary context); a
     * plain replay still releases everything itself, which the mock
     * driver's leak check sees */
    a->o.exit_after = 1;
    a->pa.json = a->json;
    a->pa.quiet = a->quiet;
    return cucap_cli_replay_profile(a->path, &a->o, &a->vo, &a->pa);
  }
  return replay_plain(a);
}

/* ------------------------------------------------ shared with --profile */

cucap_status cucap_cli_verify_attach(cucap_replay_options *ro, const cucap_verify_options *vo,
                                     const cucap_replay_observer **obs, cucap_verify **v) {
  *v = NULL;
  if (!vo || vo->mode == CUCAP_VERIFY_NONE)
    return CUCAP_OK;
  cucap_verify_options o = *vo;
  o.strict = vo->strict || ro->strict; /* --strict is one flag of the command */
  o.loops = ro->loops;
  o.shared = ro->nobservers > 0;
  *v = cucap_verify_create(&o);
  if (!*v)
    return CUCAP_ERR_NOMEM;
  /* first: it reads every copy's bytes before another observer's
   * session reads reuse the scratch buffer they are in */
  if (ro->nobservers)
    memmove(obs + 1, ro->observers, ro->nobservers * sizeof *obs);
  obs[0] = cucap_verify_observer(*v);
  ro->observers = obs;
  ro->nobservers++;
  return CUCAP_OK;
}

void cucap_cli_replay_nomem(cucap_replay_report *rep, cucap_verify_report *vr,
                            const cucap_verify_options *vo) {
  memset(rep, 0, sizeof *rep);
  memset(vr, 0, sizeof *vr);
  rep->gpu_time_s = -1;
  vr->mode = vo->mode;
  rep->status = CUCAP_ERR_NOMEM;
  snprintf(rep->error, sizeof rep->error, "out of memory");
}

cucap_status cucap_cli_replay_status(const cucap_replay_report *rep,
                                     const cucap_verify_report *vr) {
  if (rep->error[0])
    return rep->status;
  return vr ? cucap_verify_status(vr) : CUCAP_OK;
}

void cucap_cli_replay_print(const cucap_replay_report *rep, const cucap_verify_report *vr,
                            cucap_status st, FILE *out, int json) {
  cucap_verify_report none;
  if (!vr || !vr->mode) {
    /* no verifier: the JSON still says what could not have been verified */
    memset(&none, 0, sizeof none);
    none.copies_unverifiable = rep->captured_host_reads;
    vr = &none;
  }
  if (json) {
    fprintf(out, "{\"status\":\"%s\",\"exit_code\":%d", cucap_status_name(st),
            cucap_cli_exit_code(st));
    cucap_replay_report_print(rep, out, 1);
    cucap_verify_report_print(vr, out, 1);
    fputs("}\n", out);
    return;
  }
  if (vr->mismatches && !rep->error[0] && vr != &none) {
    /* the caller's error line names the first mismatch: said once */
    none = *vr;
    none.first_mismatch[0] = 0;
    vr = &none;
  }
  cucap_replay_report_print(rep, out, 0);
  cucap_verify_report_print(vr, out, 0);
  if (rep->error[0] && rep->loops) /* the caller reports the error itself */
    fprintf(out, "stopped: %s\n", rep->error);
}
