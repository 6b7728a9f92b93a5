/* cucap_knobs.h - the one registry of the CUCAP_* environment variables
 * ("knobs") that cucap's libraries, libcucap.so and the CLI read: each is
 * declared once in CUCAP_KNOBS (name, type, default, one-line doc) and read
 * from the environment once per process, all together at the first use of
 * any, into one process-wide table. README.md's knob table is checked against this list
 * (tests/unit/test_knobs.c), and `cucap doctor` names the ones set.
 *
 * Types, and how a value is read (the default stands in when the variable
 * is unset or empty):
 *   STR   the text as it is;
 *   FLAG  "0..." off, "1..." on, anything else the default;
 *   U64   strtoull base 10;  INT  strtol base 10 (long).
 * A NULL default means the code computes one (the doc says how) or, for
 * STR, that there is none.
 *
 * Reading is safe from any thread and from inside the app (libcucap.so's
 * constructor, a hooked call): the first caller fills the table with
 * getenv and nothing else (no allocation, no output, no CUDA); a caller
 * that arrives while another one fills it (or a signal handler that
 * interrupted the filler) reads its own knob with getenv directly.
 * A variable set after the first read is not seen (cucap record sets the
 * recorder's for the child it starts, which reads them at its own start);
 * cucap_knobs_reload re-reads the environment (tests).
 *
 * Ownership: every string returned is static (names, docs, defaults) or the
 * environment's own (values): never freed, valid for the life of the
 * process (glibc never frees environment strings, even when the variable
 * is set again or unset). */
#ifndef CUCAP_KNOBS_H
#define CUCAP_KNOBS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, TYPE, DEFAULT, DOC): sorted by name. */
#define CUCAP_KNOBS(X)                                                                   \
  X(CUCAP_CUPTI, STR, NULL,                                                              \
    "libcupti for replay --profile and cucap doctor (as --cupti); unset: searched "      \
    "under $CUDA_HOME and /usr/local/cuda")                                              \
  X(CUCAP_CUPTI_API_SCOPE, STR, "work",                                                  \
    "all: the profiler's CUPTI callbacks and API records cover every driver call, not "  \
    "only the calls that launch or move work")                                           \
  X(CUCAP_CUPTI_LIB, STR, NULL,                                                          \
    "libcupti for record --audit (the profiler's when CUCAP_CUPTI is unset); unset: "    \
    "searched under $CUDA_HOME and /usr/local/cuda")                                     \
  X(CUCAP_CUPTI_NO_API_RECORDS, STR, "0",                                                \
    "any value but 0: the profiler's timeline asks CUPTI for no driver-API activity "    \
    "records, only callbacks (a diagnostic)")                                            \
  X(CUCAP_CUPTI_RP_PER_WINDOW, FLAG, "0",                                                \
    "1: a new CUPTI range profiler object for every profiling window instead of one "    \
    "shared per range mode (a diagnostic)")                                              \
  X(CUCAP_LIB, STR, NULL,                                                                \
    "the libcucap.so that cucap record preloads; unset: the one next to the cucap "      \
    "binary (../interpose/, ../lib/cucap/)")                                             \
  X(CUCAP_LOG_FILE, STR, NULL,                                                           \
    "append log messages to this file instead of stderr")                                \
  X(CUCAP_LOG_LEVEL, STR, "warn",                                                        \
    "log level: off|error|warn|info|debug|trace or 0-5 (the read-only CLI commands "     \
    "default to off)")                                                                   \
  X(CUCAP_LOG_TIME, STR, "0",                                                            \
    "1: seconds since the start in front of every log message; 2: wall-clock seconds "   \
    "since the epoch")                                                                   \
  X(CUCAP_OPTIONS, STR, NULL,                                                            \
    "libcucap.so's recorder options, comma-separated (snapshot=, stack=, stack_depth=, " \
    "level=, workers=, flush_ms=, hash_launches, audit, stats, ...); cucap record sets " \
    "it from its flags")                                                                 \
  X(CUCAP_OUTPUT, STR, NULL,                                                             \
    "capture path of libcucap.so (%p pid, %q{VAR} a variable, %% a %); unset: "          \
    "nothing is recorded; cucap record sets it from -o")                                 \
  X(CUCAP_PROFILE_DURATION_PASSES, INT, "3",                                             \
    "duration passes per profiling window, the median kept (at most 9; 0: the main "     \
    "passes' duration)")                                                                 \
  X(CUCAP_PROFILE_DURATION_WITH, STR, "sm__cycles_elapsed.max",                          \
    "metrics measured beside gpu__time_duration.sum in the duration pass, "              \
    "comma-separated (none or empty: the duration alone)")                               \
  X(CUCAP_PROFILE_EARLY_DISASM, FLAG, "1",                                               \
    "0: nvdisasm of the profiled kernels is not started before the SASS pass needs it")  \
  X(CUCAP_PROFILE_FLUSH_CTX, STR, "side",                                                \
    "--cache=flush: side (duration passes flush L2 from a context of their own), green " \
    "(from a green context), all (every counter pass from its own), own (none does)")    \
  X(CUCAP_PROFILE_FLUSH_SYNC, FLAG, "1",                                                 \
    "0: --cache=flush does not wait for the context to go idle after the L2 flush")      \
  X(CUCAP_PROFILE_PC_HWBUF_MB, U64, NULL,                                                \
    "PC sampling hardware buffer in MiB; unset: sized from the longest kernel "          \
    "(16-512 MiB, else CUPTI's default)")                                                \
  X(CUCAP_PROFILE_SASS_HOLD, FLAG, "1",                                                  \
    "0: SASS metrics do not keep modules loaded until the end of the run (a "            \
    "diagnostic)")                                                                       \
  X(CUCAP_PROGRESS_DELAY_MS, U64, "1000",                                                \
    "milliseconds before the CLI's progress line appears on a terminal (tests set 0)")  \
  X(CUCAP_REAL_LIBCUDA, STR, "libcuda.so.1",                                             \
    "the driver library libcucap.so forwards the app's CUDA calls to (dlopen name or "   \
    "path)")                                                                             \
  X(CUCAP_REPLAY_DEVICE_UPLOADS, FLAG, "0",                                              \
    "1 (tests): every replay pass after the first uploads cached copy payloads from "    \
    "their device copies, as profiler passes do")                                        \
  X(CUCAP_REPLAY_HOST_GUARD, STR, "0",                                                   \
    "1 or init: PROT_NONE guards over the capture's device ranges in the host address "  \
    "space, held across cuInit; dlopen: only while libcuda loads; else none")            \
  X(CUCAP_REPLAY_KEEP_MODULES, FLAG, "1",                                                \
    "0: a multi-pass replay unloads and reloads its modules every pass instead of "      \
    "keeping them")                                                                      \
  X(CUCAP_REPLAY_OPTIME, STR, "0",                                                       \
    "1: log (info) where a replay's time goes, per record body type; 2: also every "     \
    "record that took more than 2 ms")                                                   \
  X(CUCAP_REPLAY_PAYLOAD_CACHE_MB, U64, NULL,                                            \
    "budget in MiB of the page-locked cache of patched copy payloads across passes; "    \
    "unset: a quarter of RAM, at most 8 GiB")                                            \
  X(CUCAP_REPLAY_PAYLOAD_CACHE_MIN, U64, "1048576",                                      \
    "smallest copy in bytes that the payload cache keeps (smaller ones decompress in "   \
    "microseconds; tests set 1)")                                                        \
  X(CUCAP_REPLAY_PAYLOAD_DEVICE_MB, U64, NULL,                                           \
    "budget in MiB of the device copies of cached payloads; unset: a quarter of the "    \
    "free device memory, at most 8 GiB")                                                 \
  X(CUCAP_REPLAY_PIN_PREMAP, FLAG, "1",                                                  \
    "0: the capture's pinned host ranges are not mapped before libcuda loads")           \
  X(CUCAP_REPLAY_PLAIN_ELF, FLAG, "1",                                                   \
    "0: the replay hands the driver every module image as recorded, not the one ELF "    \
    "the GPU runs from a compressed fatbin")                                             \
  X(CUCAP_REPLAY_SERIALIZE, FLAG, "0",                                                   \
    "1: the context is synchronised after every record, so no two GPU operations of "    \
    "the replay overlap (a diagnostic)")                                                 \
  X(CUCAP_REPLAY_VERIFY_ORDER, FLAG, "1",                                                \
    "0: --verify no longer reports words that differ from the recording only in order "  \
    "as nondeterministic")                                                               \
  X(CUCAP_REPLAY_VERIFY_PERTURB, STR, "1",                                               \
    "0: --verify's extra passes run without the spin kernels that perturb block "        \
    "scheduling")                                                                        \
  X(CUCAP_ROOT_PID, INT, "0",                                                            \
    "pid of the process cucap record started; any other process that uses CUDA adds "    \
    ".PID to the capture name (cucap record sets it)")                                   \
  X(CUCAP_SLOW_RECORDS, FLAG, "0",                                                       \
    "1: libcucap.so builds every record with the generic builder, not the launch and "   \
    "body-less fast paths (to compare both)")                                            \
  X(CUCAP_STATS, FLAG, "0",                                                              \
    "1: libcucap.so logs per-entry-point cost counters at exit (as cucap record "        \
    "--stats)")                                                                          \
  X(CUCAP_TEST_KILL_AT, STR, NULL,                                                       \
    "tests: POINT[:N] makes the capture writer kill itself at POINT (header, seal, "     \
    "chunk_write, blob_write, chunk_done, index_write, trailer, trailer_write), the "    \
    "Nth time")

typedef enum cucap_knob_type {
  CUCAP_KNOB_T_STR,
  CUCAP_KNOB_T_FLAG,
  CUCAP_KNOB_T_U64,
  CUCAP_KNOB_T_INT
} cucap_knob_type;

#define CUCAP_KNOB_ENUM_(name, type, def, doc) CUCAP_KNOB_ID_##name,
/* One id per knob: CUCAP_KNOB(CUCAP_LOG_LEVEL), so that the variable's own
 * name is what a grep finds at every use. */
typedef enum cucap_knob { CUCAP_KNOBS(CUCAP_KNOB_ENUM_) CUCAP_KNOB_COUNT } cucap_knob;
#undef CUCAP_KNOB_ENUM_
#define CUCAP_KNOB(name) CUCAP_KNOB_ID_##name

typedef struct cucap_knob_info {
  const char *name;     /* "CUCAP_..." */
  cucap_knob_type type;
  const char *def;      /* the default as text; NULL: computed or none */
  const char *doc;      /* one line: what it does, its values */
} cucap_knob_info;

/* The registry entry of k (NULL when k is out of range): static. */
const cucap_knob_info *cucap_knob_info_of(cucap_knob k);
/* The entry named name[0..len) exactly, NULL when no knob has that name
 * (a typo, or a variable only tests read): static. */
const cucap_knob_info *cucap_knob_find(const char *name, size_t len);
/* "str", "flag", "u64", "int": static. */
const char *cucap_knob_type_name(cucap_knob_type t);

/* The value as the environment held it at the first read; NULL when unset
 * (for the few places where set-but-empty differs from unset). */
const char *cucap_knob_raw(cucap_knob k);
/* 1 when the variable is set and not empty (the default does not apply). */
int cucap_knob_given(cucap_knob k);
/* The value, or the default when unset or empty (NULL when there is none). */
const char *cucap_knob_str(cucap_knob k);
/* The value read as the header says (FLAG: 0 or 1); 0 when neither value
 * nor default is there. */
int cucap_knob_flag(cucap_knob k);
uint64_t cucap_knob_u64(cucap_knob k);
long cucap_knob_long(cucap_knob k);

/* Re-reads every knob from the environment (tests that setenv after the
 * first read). Not safe against threads reading knobs at the same time. */
void cucap_knobs_reload(void);

#ifdef __cplusplus
}
#endif
#endif
