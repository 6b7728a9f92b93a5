/* log.c - the log sink (see cucap_log.h). Runs inside recorded apps: only
 * async-signal-unsafe-but-reentrant-enough libc calls (vsnprintf, write). */
#include "cucap_clock.h"
#include "cucap_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>

#include "cucap_knobs.h"

static cucap_log_sink g_sink;
static void *g_sink_user;
static int g_level = -1;
static int g_fd = 2;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_time;      /* CUCAP_LOG_TIME=1 or 2 */
static double g_time0;  /* log_now() at the sink's set-up; 0 with 2 */

static double log_now(void) {
  return cucap_clock_read_s(g_time == 2 ? CLOCK_REALTIME : CLOCK_MONOTONIC);
}

static const char *const k_level_names[] = {"off",  "error", "warn",
                                            "info", "debug", "trace"};

static void log_init(void) {
  const char *v = cucap_knob_str(CUCAP_KNOB(CUCAP_LOG_LEVEL));
  int lvl = CUCAP_LOG_WARN;
  if (v && *v) {
    if (v[0] >= '0' && v[0] <= '5' && v[1] == 0) {
      lvl = v[0] - '0';
    } else {
      for (int i = 0; i < 6; i++)
        if (strcasecmp(v, k_level_names[i]) == 0)
          lvl = i;
    }
  }
  if (g_level < 0)
    __atomic_store_n(&g_level, lvl, __ATOMIC_RELAXED);
  const char *t = cucap_knob_str(CUCAP_KNOB(CUCAP_LOG_TIME));
  if (t && (t[0] == '1' || t[0] == '2') && !t[1]) {
    g_time = t[0] - '0';
    g_time0 = g_time == 1 ? log_now() : 0;
  }
  const char *f = cucap_knob_str(CUCAP_KNOB(CUCAP_LOG_FILE));
  if (f && *f) {
    int fd = open(f, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0)
      g_fd = fd;
  }
}

cucap_log_level cucap_log_get_level(void) {
  pthread_once(&g_once, log_init);
  return (cucap_log_level)__atomic_load_n(&g_level, __ATOMIC_RELAXED);
}

void cucap_log_set_level(cucap_log_level level) {
  pthread_once(&g_once, log_init);
  __atomic_store_n(&g_level, (int)level, __ATOMIC_RELAXED);
}

cucap_log_sink cucap_log_set_sink(cucap_log_sink sink, void *user) {
  cucap_log_sink old = g_sink;
  g_sink_user = user;
  g_sink = sink;
  return old;
}

void cucap_vlog(cucap_log_level level, const char *fmt, va_list ap) {
  if (level == CUCAP_LOG_OFF || level > cucap_log_get_level())
    return;
  char buf[1024];
  int k = g_time ? snprintf(buf, sizeof buf, "[%.6f] ", log_now() - g_time0) : 0;
  if (k < 0 || k >= (int)sizeof buf)
    k = 0;
  int n = vsnprintf(buf + k, sizeof buf - (size_t)k, fmt, ap);
  if (n < 0)
    return;
  if (g_sink) {
    g_sink(level, buf, g_sink_user);
    return;
  }
  char line[1100];
  int m = snprintf(line, sizeof line, "cucap: %s%s%s\n",
                   level <= CUCAP_LOG_WARN ? k_level_names[level] : "",
                   level <= CUCAP_LOG_WARN ? ": " : "", buf);
  if (m > (int)sizeof line - 1)
    m = (int)sizeof line - 1;
  ssize_t w = write(g_fd, line, (size_t)m);
  (void)w;
}

void cucap_log(cucap_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cucap_vlog(level, fmt, ap);
  va_end(ap);
}
