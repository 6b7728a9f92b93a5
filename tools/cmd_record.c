/* cmd_record.c - `cucap record [options] -- PROGRAM [ARGS...]`.
 *
 * Runs PROGRAM with libcucap.so preloaded (LD_PRELOAD, prepended to any
 * existing value) and CUCAP_OUTPUT / CUCAP_OPTIONS / CUCAP_ROOT_PID (= the
 * program's pid) set, NVTX_INJECTION64_PATH = libcucap.so unless the
 * program's environment names another NVTX tool (NVTX ranges are then
 * recorded), waits for it and exits
 * with its exit code (128+signal when it was killed), then prints a one-line
 * summary of the capture to stderr. The output is checked before PROGRAM
 * starts (a run can take hours): its directory must take a new file, the
 * name must not be a directory or, without --force, an existing file. When
 * PROGRAM exits 0 but its capture could not be written whole the exit code
 * is 4. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "cucap_cli.h"
#include "cucap_knobs.h"
#include "cucap_reader.h"
#include "cucap_recorder.h"
#include "cucap_schema.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: cucap record [options] -- PROGRAM [ARGS...]\n"
          "  -o, --output PATH       capture file (default capture.fb; %%p = pid,\n"
          "                          %%q{VAR} = value of env VAR)\n"
          "      --snapshot=exit|launch:N|range:NAME[@K]\n"
          "                          snapshot device memory at exit / before and after\n"
          "                          launch N / at the start of the K-th (0-based)\n"
          "                          NVTX range NAME (cuProfilerStart: profiler range)\n"
          "      --hash-launches     store content hashes of memory after each launch\n"
          "      --audit             count driver calls with CUPTI and compare\n"
          "      --stack=off|fp|unwind  host callstacks (default fp)\n"
          "      --level N           zstd level (default 1)\n"
          "      --stats             count the recorder's own cost per driver entry point\n"
          "                          (printed here after PROGRAM exits; kept in the capture\n"
          "                          as a Note \"stats\")\n"
          "      --force             overwrite an existing capture file\n"
          "exit: PROGRAM's exit status (128+signal when killed); 2 usage, or the\n"
          "  output refused before PROGRAM starts (a directory, an existing file\n"
          "  without --force, %%q{VAR} with VAR unset); 4 the output cannot be\n"
          "  created (missing or unwritable directory), or PROGRAM exited 0 but\n"
          "  its capture could not be written whole (disk full, I/O error)\n"
          "\n"
          "  The capture file is created at PROGRAM's first CUDA call. Child\n"
          "  processes inherit the recorder: one that never calls CUDA (shells,\n"
          "  compilers) writes nothing; one that does (a second CUDA program, an\n"
          "  MPI/torchrun rank) writes its own capture, PATH with .PID inserted\n"
          "  before the extension (capture.fb -> capture.4242.fb) unless PATH\n"
          "  contains %%p. A child made by fork() without exec is not recorded.\n"
          "  environment: CUCAP_LIB overrides the path of libcucap.so;\n"
          "  CUCAP_ROOT_PID (set here) is the pid whose capture is PATH itself.\n");
}

/* dir of /proc/self/exe + rel, if that file exists. */
static int lib_near_exe(const char *rel, char *out, size_t out_size) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return 0;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash)
    return 0;
  *slash = 0;
  if ((size_t)snprintf(out, out_size, "%s/%s", exe, rel) >= out_size)
    return 0;
  char real[PATH_MAX];
  if (!realpath(out, real) || access(real, R_OK) != 0)
    return 0;
  snprintf(out, out_size, "%s", real);
  return 1;
}

static int find_lib(char *out, size_t out_size) {
  const char *env = cucap_knob_str(CUCAP_KNOB(CUCAP_LIB));
  if (env && *env) {
    snprintf(out, out_size, "%s", env);
    return access(out, R_OK) == 0;
  }
  return lib_near_exe("../interpose/libcucap.so", out, out_size) ||
         lib_near_exe("../lib/cucap/libcucap.so", out, out_size);
}

static int append_opt(char *buf, size_t cap, const char *item) {
  size_t n = strlen(buf);
  int w = snprintf(buf + n, cap - n, "%s%s", n ? "," : "", item);
  return w < 0 || (size_t)w >= cap - n ? -1 : 0;
}

static int g_print_stats;

/* The recorder's --stats table (a Note {kind "stats"}), to stderr. */
static void print_stats(cucap_reader *r) {
  const void *t, *b;
  size_t sz;
  int found = 0;
  while (cucap_reader_next(r, &t, &b, &sz) == CUCAP_OK) {
    const cucap_fb_record *rec = t;
    if (cucap_fb_record_body_type(rec) != CUCAP_FB_BODY_NOTE)
      continue;
    const cucap_fb_note *n = cucap_fb_record_body_as_note(rec);
    const char *k = cucap_fb_note_kind(n), *text = cucap_fb_note_text(n);
    if (k && text && !strcmp(k, "stats")) {
      fprintf(stderr, "%s", text);
      found = 1;
    }
  }
  if (!found)
    fprintf(stderr, "cucap record: no stats in the capture (did the program exit normally?)\n");
}

/* Returns 1 when the capture is complete. */
static int print_summary(const char *path) {
  cucap_reader *r = NULL;
  char msg[256] = "";
  cucap_status st = cucap_reader_open(path, NULL, &r, msg, sizeof msg);
  if (st != CUCAP_OK) {
    fprintf(stderr, "cucap record: %s: cannot read the capture: %s%s%s\n", path,
            cucap_status_str(st), *msg ? ": " : "", msg);
    return 0;
  }
  cucap_reader_recovery rec;
  cucap_reader_recovery_get(r, &rec);
  uint64_t records = rec.records;
  if (!rec.used_index) { /* count by reading */
    const void *t, *b;
    size_t sz;
    records = 0;
    while (cucap_reader_next(r, &t, &b, &sz) == CUCAP_OK)
      records++;
  }
  struct stat sb;
  long long size = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
  /* the writer's totals: what the program's calls came to, and how far
   * zstd took them down (raw / compressed payload of the good chunks) */
  char ratio[64] = "";
  if (rec.compressed_bytes)
    snprintf(ratio, sizeof ratio, " (%llu bytes raw, %.2fx compressed)",
             (unsigned long long)rec.raw_bytes,
             (double)rec.raw_bytes / (double)rec.compressed_bytes);
  fprintf(stderr, "cucap record: %s: %llu records, %lld bytes%s%s\n", path,
          (unsigned long long)records, size, ratio, rec.complete ? "" : " (incomplete)");
  if (g_print_stats && cucap_reader_rewind(r) == CUCAP_OK)
    print_stats(r);
  cucap_reader_destroy(r);
  return rec.complete != 0;
}

/* Summaries of the captures written by CUDA-using child processes:
 * `path` with ".<digits>" inserted before its extension (see
 * cucap_rec_output_path). Returns how many were found. */
static int summarize_children(const char *path) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  const char *base = slash ? slash + 1 : dir;
  if (slash)
    *slash = 0;
  const char *d = slash ? (dir[0] ? dir : "/") : ".";
  char stem[PATH_MAX];
  snprintf(stem, sizeof stem, "%s", slash ? base : path);
  char *dot = strrchr(stem, '.');
  const char *ext = "";
  char extbuf[PATH_MAX];
  if (dot && dot != stem) {
    snprintf(extbuf, sizeof extbuf, "%s", dot);
    ext = extbuf;
    *dot = 0;
  }
  size_t sl = strlen(stem), el = strlen(ext);
  DIR *dh = opendir(d);
  if (!dh)
    return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dh)) != NULL) {
    const char *nm = e->d_name;
    size_t l = strlen(nm);
    if (l < sl + 2 + el || strncmp(nm, stem, sl) != 0 || nm[sl] != '.' ||
        strcmp(nm + l - el, ext) != 0)
      continue;
    size_t k = sl + 1;
    while (k < l - el && nm[k] >= '0' && nm[k] <= '9')
      k++;
    if (k != l - el || k == sl + 1)
      continue;
    char full[PATH_MAX];
    if ((size_t)snprintf(full, sizeof full, "%s/%s", d, nm) >= sizeof full)
      continue;
    print_summary(full);
    n++;
  }
  closedir(dh);
  return n;
}

/* What the command line asked for: the capture path pattern and the
 * recorder options as CUCAP_OPTIONS passes them. */
typedef struct record_args {
  const char *output;
  char opts[1024];
  int force; /* --force: an existing capture file may be overwritten */
} record_args;

/* Fills a from argv up to PROGRAM (optind); returns -1 to go on, else the
 * exit code to return. */
static int record_parse(int argc, char **argv, record_args *a) {
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'},
      {"snapshot", required_argument, NULL, 's'},
      {"hash-launches", no_argument, NULL, 'H'},
      {"audit", no_argument, NULL, 'a'},
      {"stack", required_argument, NULL, 'S'},
      {"level", required_argument, NULL, 'l'},
      {"stats", no_argument, NULL, 'T'},
      {"force", no_argument, NULL, 'F'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  a->output = "capture.fb";
  a->opts[0] = 0;
  a->force = 0;
  char item[256];
  int c;
  optind = 1;
  /* "+": stop at the first non-option (the program). */
  while ((c = getopt_long(argc, argv, "+o:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'o':
      a->output = optarg;
      break;
    case 's':
      snprintf(item, sizeof item, "snapshot=%s", optarg);
      if (strcmp(optarg, "exit") != 0 && strncmp(optarg, "launch:", 7) != 0 &&
          strncmp(optarg, "range:", 6) != 0) {
        cucap_cli_error("record", NULL,
                        "--snapshot must be exit, launch:N or range:NAME[@K], not '%s'", optarg);
        return CUCAP_EXIT_USAGE;
      }
      if (append_opt(a->opts, sizeof a->opts, item) != 0)
        return CUCAP_EXIT_USAGE;
      break;
    case 'H':
      append_opt(a->opts, sizeof a->opts, "hash_launches");
      break;
    case 'a':
      append_opt(a->opts, sizeof a->opts, "audit");
      break;
    case 'F':
      a->force = 1;
      break;
    case 'T':
      append_opt(a->opts, sizeof a->opts, "stats");
      g_print_stats = 1;
      break;
    case 'S':
      snprintf(item, sizeof item, "stack=%s", optarg);
      if (append_opt(a->opts, sizeof a->opts, item) != 0)
        return CUCAP_EXIT_USAGE;
      break;
    case 'l':
      snprintf(item, sizeof item, "level=%s", optarg);
      if (append_opt(a->opts, sizeof a->opts, item) != 0)
        return CUCAP_EXIT_USAGE;
      break;
    case 'h':
      usage(stdout);
      return CUCAP_EXIT_OK;
    default:
      usage(stderr);
      return CUCAP_EXIT_USAGE;
    }
  }
  return -1;
}

/* 1 when the pattern has %p (not %%p): each process names its own file. */
static int pattern_has_pid(const char *pattern) {
  for (const char *p = pattern; *p; p++) {
    if (*p == '%' && p[1] == '%')
      p++;
    else if (*p == '%' && p[1] == 'p')
      return 1;
  }
  return 0;
}

/* The output as PROGRAM's recorder will create it, checked here: the
 * recorder inside PROGRAM can only log a failure, and only at the first CUDA
 * call. Returns -1 to go on, else the exit code (one error line printed). */
static int record_check_output(const record_args *a) {
  const char *pat = a->output;
  /* %q{VAR} of an unset VAR would expand to nothing: a name nobody asked for */
  for (const char *p = pat; *p; p++) {
    if (*p == '%' && p[1] == '%') {
      p++;
    } else if (*p == '%' && p[1] == 'q' && p[2] == '{') {
      const char *close = strchr(p + 3, '}');
      char name[256];
      if (close && close > p + 3 && close - (p + 3) < (long)sizeof name) {
        memcpy(name, p + 3, (size_t)(close - (p + 3)));
        name[close - (p + 3)] = 0;
        if (!getenv(name)) {
          cucap_cli_error("record", pat, "%%q{%s}: %s is not set", name, name);
          return CUCAP_EXIT_USAGE;
        }
      }
    }
  }
  char path[PATH_MAX];
  if (cucap_rec_expand_path(pat, (long)getpid(), path, sizeof path) != CUCAP_OK) {
    cucap_cli_error("record", pat, "invalid output pattern");
    return CUCAP_EXIT_USAGE;
  }
  int rc = cucap_cli_output_check("record", path, NULL, 0);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  struct stat st;
  if (!a->force && !pattern_has_pid(pat) && stat(path, &st) == 0) {
    cucap_cli_error("record", path, "exists: refusing to overwrite it (--force does)");
    return CUCAP_EXIT_USAGE;
  }
  /* a file made and removed again in the output's directory: that directory
   * exists and takes a new file, as the recorder will need */
  cucap_cli_output probe;
  if ((rc = cucap_cli_output_begin("record", path, &probe)) != CUCAP_EXIT_OK)
    return rc;
  cucap_cli_output_abort(&probe);
  return -1;
}

/* The options as the recorder will read them, PROGRAM, libcucap.so (into
 * lib) and the output pattern; returns -1 to go on, else the exit code. */
static int record_validate(int argc, const record_args *a, char *lib, size_t lib_size) {
  /* Validate the options as the recorder will parse them. */
  cucap_rec_options ro;
  cucap_rec_options_init(&ro);
  if (cucap_rec_options_parse(a->opts, &ro) != CUCAP_OK) {
    cucap_cli_error("record", NULL, "invalid option value in '%s'", a->opts);
    return CUCAP_EXIT_USAGE;
  }
  if (optind >= argc) {
    cucap_cli_error("record", NULL, "no program given (usage: cucap record [options] -- PROGRAM [ARGS...])");
    return CUCAP_EXIT_USAGE;
  }
  if (!find_lib(lib, lib_size)) {
    cucap_cli_error("record", NULL,
                    "cannot find libcucap.so (set CUCAP_LIB=/path/to/libcucap.so)");
    return CUCAP_EXIT_IO;
  }
  /* Check the output here (the library expands %p with the app's pid). */
  return record_check_output(a);
}

/* In the forked child: PROGRAM (prog) with the recorder preloaded; does not
 * return. */
static void record_exec(char **prog, const char *lib, const record_args *a) {
  const char *old = getenv("LD_PRELOAD");
#ifdef CUCAP_SANITIZER_RUNTIME
  /* Sanitizer build of cucap (tests only): the ASan/TSan runtime must come
   * first, and the uninstrumented app's own leaks are not ours to report. */
  const char *first = CUCAP_SANITIZER_RUNTIME ":";
  const char *aso = getenv("ASAN_OPTIONS");
  char asan_opts[512];
  snprintf(asan_opts, sizeof asan_opts, "%s%sdetect_leaks=0", aso ? aso : "",
           aso && *aso ? ":" : "");
  setenv("ASAN_OPTIONS", asan_opts, 1);
#else
  const char *first = "";
#endif
  size_t need = strlen(first) + strlen(lib) + (old ? strlen(old) + 2 : 1);
  char *pre = malloc(need);
  if (!pre)
    _exit(127);
  snprintf(pre, need, "%s%s%s%s", first, lib, old && *old ? ":" : "",
           old ? old : "");
  setenv("LD_PRELOAD", pre, 1);
  setenv("CUCAP_OUTPUT", a->output, 1);
  setenv("CUCAP_OPTIONS", a->opts, 1);
  char rootpid[32];
  snprintf(rootpid, sizeof rootpid, "%ld", (long)getpid()); /* exec keeps it */
  setenv("CUCAP_ROOT_PID", rootpid, 1);
  /* NVTX loads this tool at the program's first NVTX call (custom_nvtx.c) */
  const char *nvtx = getenv("NVTX_INJECTION64_PATH");
  if (!nvtx || !*nvtx)
    setenv("NVTX_INJECTION64_PATH", lib, 1);
  execvp(prog[0], prog);
  fprintf(stderr, "cucap record: %s: %s\n", prog[0], strerror(errno));
  _exit(127);
}

/* Waits for PROGRAM; returns its exit status as ours (128 + signal when it
 * was killed). */
static int record_wait(pid_t pid) {
  /* The app gets terminal signals itself (same process group); don't die
   * before it does. */
  struct sigaction ign, old_int, old_quit;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  int status = 0;
  pid_t w;
  do {
    w = waitpid(pid, &status, 0);
  } while (w < 0 && errno == EINTR);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  int code;
  if (w < 0)
    code = CUCAP_EXIT_IO;
  else if (WIFEXITED(status))
    code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    code = 128 + WTERMSIG(status);
  else
    code = 1;
  return code;
}

/* The summary of the capture PROGRAM wrote (pid), and of its children's.
 * Returns 0 when PROGRAM's own capture is there but incomplete (the
 * recorder could not write it whole), else 1: no file is what a program
 * that never calls CUDA leaves. */
static int record_report(const record_args *a, pid_t pid, int code) {
  char path[PATH_MAX];
  int have = cucap_rec_expand_path(a->output, (long)pid, path, sizeof path) == CUCAP_OK;
  int complete = 1;
  if (have && access(path, R_OK) == 0)
    complete = print_summary(path);
  else if (code != 127)
    fprintf(stderr, "cucap record: no capture was written to %s%s\n", a->output,
            have ? " by PROGRAM itself" : "");
  /* Child processes that called CUDA wrote PATH.<pid> captures (only when
   * the pattern has no %p, else each name is already distinct). */
  if (have && !strstr(a->output, "%p"))
    summarize_children(path);
  return complete;
}

int cucap_cmd_record(int argc, char **argv) {
  record_args a;
  int rc = record_parse(argc, argv, &a);
  char lib[PATH_MAX];
  if (rc < 0)
    rc = record_validate(argc, &a, lib, sizeof lib);
  if (rc >= 0)
    return rc;

  pid_t pid = fork();
  if (pid < 0) {
    cucap_cli_error("record", NULL, "fork: %s", strerror(errno));
    return CUCAP_EXIT_IO;
  }
  if (pid == 0)
    record_exec(argv + optind, lib, &a);
  int code = record_wait(pid);
  /* PROGRAM's own status, unless it is a success that hides an incomplete
   * capture (disk full, I/O error: the recorder's error line says why) */
  if (!record_report(&a, pid, code) && code == CUCAP_EXIT_OK)
    code = CUCAP_EXIT_IO;
  return code;
}
