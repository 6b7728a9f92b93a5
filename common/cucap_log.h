/* cucap_log.h - the one log sink of cucap.
 *
 * Code that runs inside a recorded application must never print to stdout,
 * exit or abort: it logs through cucap_log(), which by default writes one line
 * to stderr (with a "cucap: " prefix) when the message's level is at or below
 * the level taken from CUCAP_LOG_LEVEL (error|warn|info|debug|trace or 0..5;
 * default warn). A program may install its own sink (libbpf_set_print style),
 * e.g. the CLI, tests or the interposer redirecting to a file
 * (CUCAP_LOG_FILE=path). CUCAP_LOG_TIME=1 starts every message with the
 * seconds since the log was first used ("[0.123456] replay: ..."), for any
 * sink, to see where a run's time goes between its log lines;
 * CUCAP_LOG_TIME=2 the wall clock (seconds since the epoch), to place the
 * lines against times taken outside the process (its start and exit).
 *
 * Thread-safe. The sink is called with a formatted, NUL-terminated message
 * that is valid only during the call. */
#ifndef CUCAP_LOG_H
#define CUCAP_LOG_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cucap_log_level {
  CUCAP_LOG_OFF = 0,
  CUCAP_LOG_ERROR = 1,
  CUCAP_LOG_WARN = 2,
  CUCAP_LOG_INFO = 3,
  CUCAP_LOG_DEBUG = 4,
  CUCAP_LOG_TRACE = 5
} cucap_log_level;

typedef void (*cucap_log_sink)(cucap_log_level level, const char *msg,
                               void *user);

/* Replaces the sink; NULL restores the default stderr sink. Returns the old. */
cucap_log_sink cucap_log_set_sink(cucap_log_sink sink, void *user);

/* Current threshold (read once from CUCAP_LOG_LEVEL, then cached). */
cucap_log_level cucap_log_get_level(void);
void cucap_log_set_level(cucap_log_level level);

void cucap_log(cucap_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cucap_vlog(cucap_log_level level, const char *fmt, va_list ap);

#define CUCAP_LOG_ENABLED(lvl) ((lvl) <= cucap_log_get_level())
#define CUCAP_ERROR(...) cucap_log(CUCAP_LOG_ERROR, __VA_ARGS__)
#define CUCAP_WARN(...) cucap_log(CUCAP_LOG_WARN, __VA_ARGS__)
#define CUCAP_INFO(...) cucap_log(CUCAP_LOG_INFO, __VA_ARGS__)
#define CUCAP_DEBUG(...)                                                       \
  do {                                                                         \
    if (CUCAP_LOG_ENABLED(CUCAP_LOG_DEBUG))                                    \
      cucap_log(CUCAP_LOG_DEBUG, __VA_ARGS__);                                 \
  } while (0)
#define CUCAP_TRACE(...)                                                       \
  do {                                                                         \
    if (CUCAP_LOG_ENABLED(CUCAP_LOG_TRACE))                                    \
      cucap_log(CUCAP_LOG_TRACE, __VA_ARGS__);                                 \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
