/* cucap_main.c - `cucap` entry point: subcommand dispatch, --help/--version,
 * and the helpers shared by the subcommands (cucap_cli.h). Owner: tools/. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_cli.h"
#include "cucap_format.h"
#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cucap_reader.h"
#include "cucap_status.h"

/* Sanitizer builds only. LeakSanitizer's tracer crashed (SIGSEGV, "DTLS 8 at
 * 0xb4-...") at the exit of `cucap cupti profile` when NVIDIA's
 * libnvperf_host.so (which has dynamic TLS) was loaded: up to GCC 13 / LLVM 16
 * the runtime's __tls_get_addr interceptor takes a dynamic TLS block whose
 * start is 0xb0 past a 4 KiB boundary for a glibc 2.19 block header and reads
 * a garbage range from the words before it (google/sanitizers#1322). Where
 * the heap put the block decided it, which is why it came and went with
 * unrelated changes (kept modules, replay_modkeep.c). Not tracking dynamic
 * TLS costs only leak reports rooted in another library's TLS. ASAN_OPTIONS
 * still overrides this. */
#if defined(__SANITIZE_ADDRESS__)
#define CUCAP_ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUCAP_ASAN_BUILD 1
#endif
#endif
#ifdef CUCAP_ASAN_BUILD
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }
#endif

static const char usage_text[] =
    "usage: cucap <command> [options] [args]\n"
    "\n"
    "commands:\n"
    "  record [options] -- PROGRAM [ARGS...]   record PROGRAM's CUDA driver calls\n"
    "  replay [options] CAPTURE                re-execute a capture's GPU work\n"
    "  analyze CAPTURE [--json]                diagnose the program from its capture\n"
    "  doctor [--json]                         what replay/--profile need here, what to change\n"
    "  info CAPTURE [--json]                   summary of a capture\n"
    "  stats CAPTURE [--profile P] [--csv|--json]\n"
    "                                          API, kernel and copy tables\n"
    "  dump CAPTURE [--json] [--body TYPE] [--limit N] [--no-hex]\n"
    "                                          print records (JSON Lines with --json)\n"
    "  compress CAPTURE -o OUT [--level N] [--workers N]\n"
    "                                          re-encode at a higher zstd level\n"
    "  cupti probe|profile ...                 CUPTI on this machine; the\n"
    "                                          profiling engine on a capture\n"
    "  trim CAPTURE -o OUT --range=SPEC [--replay]\n"
    "                                          a range (launches, NVTX, profiler,\n"
    "                                          time) that replays on its own\n"
    "  extract CAPTURE --launch N|--kernel NAME -o OUT [--minimal] [--emit-c DIR]\n"
    "                                          one launch as a standalone repro\n"
    "  export CAPTURE --format=perfetto|chrome-json -o OUT [--profile FILE]\n"
    "                                          timeline for ui.perfetto.dev\n"
    "  diff A B [--profile-a P --profile-b P]  where two captures differ (exit 1)\n"
    "  help [COMMAND]                          this text, or a command's help\n"
    "\n"
    "options: -h, --help   -V, --version\n"
    "\n"
    "exit status:\n"
    "  0  success (info/dump: the capture is complete and undamaged)\n"
    "  1  verification mismatch / problems found by a check (analyze --fail-on,\n"
    "     doctor: replay works but --profile would lack sections)\n"
    "  2  usage error (bad option or command; also: command not yet implemented)\n"
    "  3  bad input: not a capture, unsupported format version, corrupt or\n"
    "     truncated capture (info/dump still print everything they recovered,\n"
    "     then one error line on stderr); doctor: no driver/GPU here\n"
    "  4  I/O error (missing file, unreadable, disk full)\n"
    "\n"
    "environment: CUCAP_LOG_LEVEL=error|warn|info|debug|trace, CUCAP_LOG_FILE=path\n";

static void print_version(void) {
  printf("cucap %s (capture format %d.%d)\n", CUCAP_VERSION_STRING,
         CUCAP_FORMAT_MAJOR, CUCAP_FORMAT_MINOR);
}

typedef int (*cmd_fn)(int, char **);
static const struct {
  const char *name;
  cmd_fn fn;
} commands[] = {
    {"record", cucap_cmd_record},     {"replay", cucap_cmd_replay},
    {"info", cucap_cmd_info},         {"dump", cucap_cmd_dump},
    {"compress", cucap_cmd_compress}, {"analyze", cucap_cmd_analyze},
    {"doctor", cucap_cmd_doctor},     {"cupti", cucap_cmd_cupti},
    {"trim", cucap_cmd_trim},         {"extract", cucap_cmd_extract},
    {"export", cucap_cmd_export},     {"diff", cucap_cmd_diff},
    {"stats", cucap_cmd_stats},
};

static cmd_fn find_command(const char *name) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(commands[i].name, name) == 0)
      return commands[i].fn;
  return NULL;
}

/* CLI log sink: "cucap: <level>: msg" on stderr, no stdout pollution. */
static void cli_log_sink(cucap_log_level level, const char *msg, void *user) {
  (void)user;
  static const char *const names[] = {"", "error", "warning", "info", "debug",
                                      "trace"};
  fprintf(stderr, "cucap: %s: %s\n",
          (unsigned)level < 6 ? names[level] : "log", msg);
}

int main(int argc, char **argv) {
#if !defined(__SANITIZE_ADDRESS__)
  cucap_cli_crash_report_install();
#endif
  if (!cucap_knob_raw(CUCAP_KNOB(CUCAP_LOG_FILE)))
    cucap_log_set_sink(cli_log_sink, NULL);
  if (argc < 2) {
    fputs(usage_text, stderr);
    return CUCAP_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  /* The read-only commands report problems as their own one-line errors;
   * library warnings would only repeat them. CUCAP_LOG_LEVEL brings them back. */
  if (!cucap_knob_raw(CUCAP_KNOB(CUCAP_LOG_LEVEL)) &&
      (!strcmp(cmd, "info") || !strcmp(cmd, "dump") || !strcmp(cmd, "compress") ||
       !strcmp(cmd, "analyze") || !strcmp(cmd, "export") || !strcmp(cmd, "diff") ||
       !strcmp(cmd, "stats")))
    cucap_log_set_level(CUCAP_LOG_OFF);
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
    fputs(usage_text, stdout);
    return CUCAP_EXIT_OK;
  }
  if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version") ||
      !strcmp(cmd, "version")) {
    print_version();
    return CUCAP_EXIT_OK;
  }
  if (!strcmp(cmd, "help")) {
    if (argc < 3 || !strcmp(argv[2], "help")) { /* help is not in the table */
      fputs(usage_text, stdout);
      return CUCAP_EXIT_OK;
    }
    cmd_fn fn = find_command(argv[2]);
    if (!fn) {
      fprintf(stderr, "cucap help: unknown command '%s'\n", argv[2]);
      fputs(usage_text, stderr);
      return CUCAP_EXIT_USAGE;
    }
    char *hargv[] = {argv[2], (char *)"--help", NULL};
    return fn(2, hargv);
  }
  cmd_fn fn = find_command(cmd);
  if (!fn) {
    fprintf(stderr, "cucap: unknown command '%s'\n", cmd);
    fputs(usage_text, stderr);
    return CUCAP_EXIT_USAGE;
  }
  return fn(argc - 1, argv + 1);
}

/* ------------------------------------------------------------ shared helpers */

void cucap_cli_error(const char *cmd, const char *file, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* Keep it one line whatever the message contains. */
  for (char *p = msg; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  fflush(stdout);
  if (file)
    fprintf(stderr, "cucap %s: %s: %s\n", cmd, file, msg);
  else
    fprintf(stderr, "cucap %s: %s\n", cmd, msg);
}

int cucap_cli_parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-')
    return -1;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || !end || *end)
    return -1;
  *out = v;
  return 0;
}

int cucap_cli_parse_pair(const char *cmd, const char *opt, const char *arg,
                         const char *first, const char *second) {
  if (!strcmp(arg, first))
    return 0;
  if (!strcmp(arg, second))
    return 1;
  cucap_cli_error(cmd, NULL, "--%s=%s: expected %s or %s", opt, arg, first, second);
  return -1;
}

void cucap_cli_json_str(FILE *f, const char *s, size_t len) {
  fputc('"', f);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
    case '"': fputs("\\\"", f); break;
    case '\\': fputs("\\\\", f); break;
    case '\n': fputs("\\n", f); break;
    case '\r': fputs("\\r", f); break;
    case '\t': fputs("\\t", f); break;
    default:
      if (c < 0x20 || c == 0x7f)
        fprintf(f, "\\u%04x", c);
      else
        fputc(c, f); /* UTF-8 passes through; invalid bytes are the producer's */
    }
  }
  fputc('"', f);
}

/* Reads the 32-byte preamble ourselves so that the three most common wrong
 * inputs get the same wording from every command. */
int cucap_cli_check_input(const char *cmd, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    cucap_cli_error(cmd, path, "cannot open: %s", strerror(errno));
    return CUCAP_EXIT_IO;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    cucap_cli_error(cmd, path, "cannot stat: %s", strerror(e));
    return CUCAP_EXIT_IO;
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    cucap_cli_error(cmd, path, "is a directory, not a cucap capture");
    return CUCAP_EXIT_BAD_INPUT;
  }
  unsigned char pre[32];
  ssize_t n = 0;
  while (n < (ssize_t)sizeof pre) {
    ssize_t k = read(fd, pre + n, sizeof pre - (size_t)n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0) {
      int e = errno;
      close(fd);
      cucap_cli_error(cmd, path, "read error: %s", strerror(e));
      return CUCAP_EXIT_IO;
    }
    if (k == 0)
      break;
    n += k;
  }
  close(fd);
  if (n == 0) {
    cucap_cli_error(cmd, path, "not a cucap capture (empty file)");
    return CUCAP_EXIT_BAD_INPUT;
  }
  size_t cmp = (size_t)n < CUCAP_MAGIC_LEN ? (size_t)n : CUCAP_MAGIC_LEN;
  if (memcmp(pre, CUCAP_MAGIC, cmp) != 0) {
    cucap_cli_error(cmd, path, "not a cucap capture (bad magic)");
    return CUCAP_EXIT_BAD_INPUT;
  }
  if (n < (ssize_t)sizeof pre) {
    cucap_cli_error(cmd, path,
                    "truncated: file is %zd bytes, shorter than the 32-byte "
                    "preamble (app killed at start?)",
                    n);
    return CUCAP_EXIT_BAD_INPUT;
  }
  unsigned major = (unsigned)pre[8] | (unsigned)pre[9] << 8;
  unsigned minor = (unsigned)pre[10] | (unsigned)pre[11] << 8;
  if (major != CUCAP_FORMAT_MAJOR) {
    cucap_cli_error(cmd, path,
                    "unsupported capture format version %u.%u (this cucap "
                    "reads %d.x)",
                    major, minor, CUCAP_FORMAT_MAJOR);
    return CUCAP_EXIT_BAD_INPUT;
  }
  return CUCAP_EXIT_OK;
}

int cucap_cli_open(const char *cmd, const char *path, cucap_reader **out) {
  *out = NULL;
  int rc = cucap_cli_check_input(cmd, path);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  char msg[512] = "";
  cucap_status s = cucap_reader_open(path, NULL, out, msg, sizeof msg);
  if (s != CUCAP_OK) {
    *out = NULL;
    if (!msg[0])
      snprintf(msg, sizeof msg, "%s", cucap_status_str(s));
    cucap_cli_error(cmd, path, "%s", msg);
    rc = cucap_cli_exit_code(s);
    return rc == CUCAP_EXIT_OK ? CUCAP_EXIT_BAD_INPUT : rc;
  }
  return CUCAP_EXIT_OK;
}

int cucap_cli_report_recovery(const char *cmd, const char *path,
                              const cucap_reader *r) {
  cucap_reader_recovery rec;
  memset(&rec, 0, sizeof rec);
  cucap_reader_recovery_get(r, &rec);
  if (rec.complete)
    return CUCAP_EXIT_OK;
  rec.problem[sizeof rec.problem - 1] = 0;
  cucap_cli_error(cmd, path,
                  "incomplete capture: recovered %llu chunks (%llu records, "
                  "%llu blobs), good up to byte %llu of %llu: %s",
                  (unsigned long long)rec.chunks,
                  (unsigned long long)rec.records,
                  (unsigned long long)rec.blobs,
                  (unsigned long long)rec.good_bytes,
                  (unsigned long long)rec.file_size,
                  rec.problem[0] ? rec.problem : "no valid trailer/index (app killed?)");
  return CUCAP_EXIT_BAD_INPUT;
}
