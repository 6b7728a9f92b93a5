/* cucap_cli.h - internal interface of the `cucap` command-line tool (tools/).
 *
 * Owner: tools/ (the CLI). tools/ uses public headers only (see docs/design.md).
 * Each subcommand is `int cucap_cmd_<name>(int argc, char **argv)` with
 * argv[0] == "<name>" (getopt_long-ready); it returns a process exit code
 * (CUCAP_EXIT_*), prints results to stdout and errors to stderr as one line
 * "cucap <cmd>: <file>: <what went wrong>".
 */
#ifndef CUCAP_CLI_H
#define CUCAP_CLI_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cucap_reader.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes of every cucap command (documented in `cucap --help`). */
enum {
  CUCAP_EXIT_OK = 0,        /* success; for info/dump: the capture is complete */
  CUCAP_EXIT_MISMATCH = 1,  /* verification mismatch / problems found by a check */
  CUCAP_EXIT_USAGE = 2,     /* bad command line; also "not yet implemented" */
  CUCAP_EXIT_BAD_INPUT = 3, /* not a capture, corrupt, unknown version, truncated
                               (what could be recovered is still printed) */
  CUCAP_EXIT_IO = 4         /* I/O error (missing file, disk full, ...) */
};

int cucap_cmd_info(int argc, char **argv);
int cucap_cmd_dump(int argc, char **argv);
int cucap_cmd_compress(int argc, char **argv);
int cucap_cmd_record(int argc, char **argv);  /* tools/cmd_record.c */
int cucap_cmd_replay(int argc, char **argv);  /* tools/cmd_replay.c */
int cucap_cmd_trim(int argc, char **argv);    /* tools/cmd_trim.c */
int cucap_cmd_extract(int argc, char **argv); /* tools/cmd_extract.c */
int cucap_cmd_export(int argc, char **argv);  /* tools/cmd_export.c */
int cucap_cmd_diff(int argc, char **argv);    /* tools/cmd_diff.c */
int cucap_cmd_cupti(int argc, char **argv);   /* tools/cmd_cupti.c */
int cucap_cmd_analyze(int argc, char **argv); /* tools/cmd_analyze.c */
int cucap_cmd_doctor(int argc, char **argv);  /* tools/cmd_doctor.c */
int cucap_cmd_stats(int argc, char **argv);   /* tools/cmd_stats.c */

/* `cucap replay --profile` (tools/cmd_replay_profile.c): the profile options
 * parsed by cmd_replay.c. Strings point into argv. */
typedef struct cucap_cli_profile_args {
  const char *metrics;   /* --metrics=sol|full|none|a,b,c (NULL: sol) */
  int cache_keep;        /* --cache=keep */
  int clock_none;        /* --clock-control=none */
  const char *range;     /* --range launch:A-B | kernel:REGEX */
  const char *out;       /* --profile-out FILE */
  const char *folded;    /* --folded FILE */
  const char *cupti;     /* --cupti PATH */
  int pc_sampling, sass_metrics;
  unsigned top;          /* --top N kernels in the report */
  int json, quiet;
} cucap_cli_profile_args;
struct cucap_replay_options;
struct cucap_verify_options;
int cucap_cli_replay_profile(const char *path, struct cucap_replay_options *ro,
                             const struct cucap_verify_options *vo,
                             const cucap_cli_profile_args *pa);

/* Maps a status to an exit code: the one place that does (tools/cli_exit.c).
 * IO, NOMEM, COMPRESS, INTERNAL, CUDA (a driver call failed) -> 4; format
 * problems and what this machine cannot do (ENV, UNSUPPORTED) -> 3;
 * MISMATCH -> 1; INVALID_ARG -> 2. */
int cucap_cli_exit_code(cucap_status s);

/* `cucap replay` (tools/cmd_replay.c): the outcome of a run, the replay's
 * error first, else the verifier's verdict (vr may be NULL). */
struct cucap_replay_report;
struct cucap_verify_report;
cucap_status cucap_cli_replay_status(const struct cucap_replay_report *rep,
                                     const struct cucap_verify_report *vr);
/* Prints the report of `cucap replay` as text (the verify line after the
 * time line, then "stopped:" when the run failed after it began) or as one
 * JSON object; `st` is cucap_cli_replay_status's. */
void cucap_cli_replay_print(const struct cucap_replay_report *rep,
                            const struct cucap_verify_report *vr, cucap_status st,
                            FILE *out, int json);
/* Creates the verifier of `cucap replay --verify` for *ro (its loops,
 * shared and strict taken from ro, as cucap_verify_replay_run does) and
 * puts its observer first among ro's observers (obs: room for
 * ro->nobservers + 1,
 * the caller's; ro->observers then points to it). *v is NULL when vo->mode
 * is CUCAP_VERIFY_NONE. Returns CUCAP_ERR_NOMEM on failure. The caller
 * destroys *v (cucap_verify_destroy) after the run. */
struct cucap_verify;
struct cucap_verify_options;
struct cucap_replay_observer;
cucap_status cucap_cli_verify_attach(struct cucap_replay_options *ro,
                                     const struct cucap_verify_options *vo,
                                     const struct cucap_replay_observer **obs,
                                     struct cucap_verify **v);
/* --verify=launch on a capture without LaunchHash records: one warning
 * line (the run itself checked the copies and succeeds). */
void cucap_cli_replay_warn(const char *path, const struct cucap_verify_options *vo,
                           const struct cucap_replay_report *rep,
                           const struct cucap_verify_report *vr);
/* The report of a run that could not start for want of memory (the
 * verifier could not be created): as cucap_replay_run fills it. */
void cucap_cli_replay_nomem(struct cucap_replay_report *rep, struct cucap_verify_report *vr,
                            const struct cucap_verify_options *vo);

/* trim / extract: one line on the module images the derived capture holds
 * (how many were reduced to the recorded GPU's code, sizes before/after). */
struct cucap_derive_report;
void cucap_cli_print_images(const struct cucap_derive_report *rep);

/* Prints "cucap <cmd>: <file>: <message>\n" to stderr (file may be NULL). */
void cucap_cli_error(const char *cmd, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Opens a capture for a read-only command. Checks the preamble itself first so
 * that the common errors read the same from every command (empty file, bad
 * magic, unknown major version), then calls cucap_reader_open. On failure
 * prints one error line and returns the exit code (3 or 4) with *out NULL;
 * returns 0 with *out set on success (the capture may still be incomplete:
 * see cucap_cli_report_recovery). */
int cucap_cli_open(const char *cmd, const char *path, cucap_reader **out);
/* The preamble check of cucap_cli_open alone, for the commands whose library
 * opens the capture itself (replay): one error line and 3 or 4, else 0. */
int cucap_cli_check_input(const char *cmd, const char *path);

/* export --profile, diff --profile-a/-b: reads GPU timings from a profile
 * file (replay --profile-out, told by its magic) or a CSV timings table
 * (cucap_profile_table.h). On failure prints one error line and returns 3
 * (damaged or not such a file) or 4 (I/O) with *out NULL; 0 on success. */
struct cucap_profile_table;
int cucap_cli_load_timings(const char *cmd, const char *path, struct cucap_profile_table **out);

/* CUresult name ("CUDA_ERROR_INVALID_VALUE") of a recorded result, or NULL
 * for a code this cucap does not know (cli_results.c). Static strings. */
const char *cucap_cli_result_name(int code);

/* If the reader found damage, prints one error line describing what was
 * recovered and why reading stopped, and returns CUCAP_EXIT_BAD_INPUT;
 * returns CUCAP_EXIT_OK for a complete capture. */
int cucap_cli_report_recovery(const char *cmd, const char *path,
                              const cucap_reader *r);

/* ---- output files (tools/cli_output.c) ---- */

/* Refuses an output that is one of the inputs (same name, same inode through
 * a symlink or a hard link, or the same realpath) or a directory: prints one
 * error line and returns CUCAP_EXIT_USAGE; CUCAP_EXIT_OK otherwise. Called
 * before anything is opened for writing. NULL inputs are skipped. */
int cucap_cli_output_check(const char *cmd, const char *out, const char *const *inputs,
                           size_t ninputs);
/* 1 when the directory of extract --emit-c is neither in nor out. */
int cucap_cli_output_emit_ok(const char *dir, const char *in, const char *out);
/* An output being written: tmp, a file next to final (the output with its
 * symlinks resolved), is renamed over final by commit. */
typedef struct cucap_cli_output {
  char final[4096], tmp[4096];
  int fd; /* open on tmp until commit / abort */
} cucap_cli_output;
/* Creates o->tmp; on failure prints one error line and returns
 * CUCAP_EXIT_IO. */
int cucap_cli_output_begin(const char *cmd, const char *out, cucap_cli_output *o);
/* Syncs and closes o->tmp and renames it to o->final; on failure prints one
 * error line, removes o->tmp and returns CUCAP_EXIT_IO. */
int cucap_cli_output_commit(const char *cmd, const char *out, cucap_cli_output *o);
/* In a library's message about the output, the temporary file's name
 * replaced with the one the user gave (out). Call before abort. */
void cucap_cli_output_rename_in(const cucap_cli_output *o, const char *out, char *msg,
                                size_t size);
/* Removes o->tmp (the old output, if any, stays as it was). */
void cucap_cli_output_abort(cucap_cli_output *o);

/* CUPTI driver callback id -> API name ("cuLaunchKernel"); NULL if unknown.
 * Static strings. Generated: tools/cbid_names.c (tools/gen_cbid_names.py). */
const char *cucap_cli_cbid_name(unsigned cbid);

/* ---- readable names (tools/cli_names.c) ---- */

/* The demangled form of a C++ name into buf (size bytes), or `mangled`
 * itself when it is not mangled or cannot be demangled. The result is buf
 * or mangled (valid as long as they are). */
const char *cucap_cli_demangle(const char *mangled, char *buf, size_t size);
/* 1 when a kernel's mangled name matches what a user typed: the mangled
 * name, the demangled name, or its bare identifier ("saxpy" matches
 * "_Z5saxpyifPfS_" and "void ns::saxpy<4>(...)"). For
 * cucap_launch_select.match. */
int cucap_cli_kernel_match(void *user, const char *mangled, const char *pattern);

/* Host frames as "function (file:line)" through the objects' DWARF (libdw),
 * "function+0x1a (libfoo.so+0x11a3a, no debug info)" without it,
 * "libfoo.so+0x11a3a (no debug info)" without a symbol,
 * "obj+0x.. (build-id mismatch, no debug info)" when the file on this
 * machine is not the recorded one, "0x..." outside every object. Objects are
 * those of the latest ModuleMap (clear, then add each). The frames object
 * owns everything; destroy accepts NULL. */
typedef struct cucap_cli_frames cucap_cli_frames;
cucap_cli_frames *cucap_cli_frames_create(int demangle);
void cucap_cli_frames_destroy(cucap_cli_frames *f);
void cucap_cli_frames_clear(cucap_cli_frames *f);
void cucap_cli_frames_add(cucap_cli_frames *f, const char *path, const uint8_t *build_id,
                          size_t build_id_len, uint64_t base, uint64_t start, uint64_t end);
/* snprintf semantics (returns the full length). */
int cucap_cli_frames_format(cucap_cli_frames *f, uint64_t addr, char *buf, size_t size);

/* Kernel names by function handle, fed with the capture's Function records
 * in file order (a CUfunction of a CUkernel gets the kernel's name).
 * Returned names are mangled, owned by the table, valid until destroy. */
typedef struct cucap_cli_fnames cucap_cli_fnames;
cucap_cli_fnames *cucap_cli_fnames_create(void);
void cucap_cli_fnames_destroy(cucap_cli_fnames *t);
void cucap_cli_fnames_feed(cucap_cli_fnames *t, const void *record /* cucap_fb_record */);
const char *cucap_cli_fnames_get(const cucap_cli_fnames *t, uint64_t handle);

/* Parses a non-negative decimal integer option value; 0 on success. */
int cucap_cli_parse_u64(const char *s, uint64_t *out);

/* A two-word option value (--cache=flush|keep, --clock-control=base|none):
 * 0 for `first`, 1 for `second`; else prints "cucap CMD: --OPT=ARG: expected
 * FIRST or SECOND" and returns -1 (the caller exits with CUCAP_EXIT_USAGE). */
int cucap_cli_parse_pair(const char *cmd, const char *opt, const char *arg,
                         const char *first, const char *second);

/* ---- the progress line (tools/cli_progress.c) ---- */

/* One line on stderr, "cucap CMD: ...", redrawn in place (\r) at most ~10
 * times a second, first after CUCAP_PROGRESS_DELAY_MS (short runs print
 * nothing), erased by clear/destroy. create returns NULL (no progress)
 * with quiet set or when stderr is not a terminal; every function accepts
 * NULL and does nothing then. Never touches stdout. */
typedef struct cucap_cli_progress cucap_cli_progress;
cucap_cli_progress *cucap_cli_progress_create(const char *cmd, int quiet);
void cucap_cli_progress_destroy(cucap_cli_progress *p);
void cucap_cli_progress_clear(cucap_cli_progress *p);
/* 1 when a redraw is due (callers skip formatting until then). */
int cucap_cli_progress_due(const cucap_cli_progress *p);
void cucap_cli_progress_print(cucap_cli_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "PREFIXWHAT done/total (pct%), rate/s" (total 0: unknown); the rate is
 * over the time since create or the last rebase, left out for its first
 * quarter second. */
void cucap_cli_progress_count(cucap_cli_progress *p, const char *prefix, const char *what,
                              uint64_t done, uint64_t total);
void cucap_cli_progress_rebase(cucap_cli_progress *p);
/* A replay observer drawing "pass k/n, records done/total (pct%), rate/s"
 * (n: the passes the command line asked for, 0 or 1: not shown); owned by
 * p, NULL when p is. It clears the line at the run's end. Put it after the
 * verifier, which must come first (cucap_cli_verify_attach), and leave it
 * out of what the verifier counts as other observers: it perturbs nothing. */
struct cucap_replay_observer;
const struct cucap_replay_observer *cucap_cli_progress_observer(cucap_cli_progress *p,
                                                                unsigned passes);

/* Writes s as a JSON string literal (quotes included) to f. */
void cucap_cli_json_str(FILE *f, const char *s, size_t len);

#ifdef __cplusplus
}
#endif
/* tools/crash_report.c: on a fatal signal, print object+offset of every
 * frame to stderr and re-raise (the exit status stays a crash's). Installed
 * first thing in main (ASan builds keep their own reports: not installed). */
void cucap_cli_crash_report_install(void);

#endif
