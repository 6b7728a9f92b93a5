/* cli_progress.c - the progress line of the cucap CLI (cucap_cli.h): one
 * line on stderr, redrawn in place, for commands that can run for seconds
 * (replay loops and passes, profile passes, trim/extract replays,
 * compress), and the replay observer that feeds it.
 *
 * Only on a terminal: stdout stays what it is, and a stderr that goes to a
 * pipe or a file (scripts, logs, tests) never sees a \r. The line appears
 * after CUCAP_PROGRESS_DELAY_MS, so that a run that ends sooner prints
 * nothing, is redrawn at most every 100 ms (cucap_clock.h), and is erased
 * when the progress is destroyed, before the command prints its report. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_cli.h"
#include "cucap_clock.h"
#include "cucap_knobs.h"
#include "cucap_reader.h"
#include "cucap_replay_observer.h"

#define PROGRESS_PERIOD_NS 100000000ull /* at most ~10 redraws a second */

struct cucap_cli_progress {
  char cmd[32];
  uint64_t next_ns;    /* no redraw before this */
  uint64_t base_ns;    /* start of what the rate is measured over */
  int shown;           /* a line is on the terminal */
  /* replay observer */
  cucap_replay_observer obs;
  unsigned passes;     /* passes asked for by the command line (--loop) */
  unsigned pass;
  uint64_t total;      /* records in the capture (0: unknown) */
  uint64_t ops;        /* records executed, all passes: the rate */
};

cucap_cli_progress *cucap_cli_progress_create(const char *cmd, int quiet) {
  if (quiet || !isatty(STDERR_FILENO))
    return NULL;
  cucap_cli_progress *p = calloc(1, sizeof *p);
  if (!p)
    return NULL; /* progress is a courtesy: the command runs without it */
  snprintf(p->cmd, sizeof p->cmd, "%s", cmd);
  p->base_ns = cucap_clock_now_ns();
  p->next_ns = p->base_ns + cucap_knob_u64(CUCAP_KNOB(CUCAP_PROGRESS_DELAY_MS)) * 1000000ull;
  return p;
}

void cucap_cli_progress_destroy(cucap_cli_progress *p) {
  if (!p)
    return;
  cucap_cli_progress_clear(p);
  free(p);
}

void cucap_cli_progress_clear(cucap_cli_progress *p) {
  if (!p || !p->shown)
    return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  p->shown = 0;
}

int cucap_cli_progress_due(const cucap_cli_progress *p) {
  return p && cucap_clock_now_ns() >= p->next_ns;
}

void cucap_cli_progress_print(cucap_cli_progress *p, const char *fmt, ...) {
  uint64_t now = p ? cucap_clock_now_ns() : 0;
  if (!p || now < p->next_ns)
    return;
  p->next_ns = now + PROGRESS_PERIOD_NS;
  char line[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* \033[K: what a longer previous line left beyond this one goes */
  fprintf(stderr, "\r\033[Kcucap %s: %s", p->cmd, line);
  fflush(stderr);
  p->shown = 1;
}

void cucap_cli_progress_rebase(cucap_cli_progress *p) {
  if (p)
    p->base_ns = cucap_clock_now_ns();
}

/* "12.3k" */
static void progress_si(char *buf, size_t size, double v) {
  if (v >= 1e9)
    snprintf(buf, size, "%.1fG", v / 1e9);
  else if (v >= 1e6)
    snprintf(buf, size, "%.1fM", v / 1e6);
  else if (v >= 1e4)
    snprintf(buf, size, "%.1fk", v / 1e3);
  else
    snprintf(buf, size, "%.0f", v);
}

void cucap_cli_progress_count(cucap_cli_progress *p, const char *prefix, const char *what,
                              uint64_t done, uint64_t total) {
  if (!cucap_cli_progress_due(p))
    return;
  double dt = (double)(cucap_clock_now_ns() - p->base_ns) * 1e-9;
  /* a rate over the first moments of a pass says nothing yet */
  char rate[40] = "";
  if (dt >= 0.25) {
    char n[32];
    progress_si(n, sizeof n, (double)done / dt);
    snprintf(rate, sizeof rate, ", %s/s", n);
  }
  if (total && done <= total)
    cucap_cli_progress_print(p, "%s%s %" PRIu64 "/%" PRIu64 " (%.0f%%)%s", prefix, what,
                             done, total, 100.0 * (double)done / (double)total, rate);
  else
    cucap_cli_progress_print(p, "%s%s %" PRIu64 "%s", prefix, what, done, rate);
}

/* ---------------------------------------------------- the replay observer */

static cucap_status progress_begin(void *user, cucap_replay_session *s) {
  cucap_cli_progress *p = user;
  cucap_reader_recovery rec;
  cucap_reader_recovery_get(cucap_replay_session_reader(s), &rec);
  p->total = rec.records;
  cucap_cli_progress_rebase(p); /* the rate counts from the first record */
  return CUCAP_OK;
}

static void progress_pass_begin(void *user, cucap_replay_session *s, unsigned pass) {
  (void)s;
  cucap_cli_progress *p = user;
  p->pass = pass;
}

static void progress_op_after(void *user, cucap_replay_session *s, const cucap_replay_op *op) {
  (void)s;
  cucap_cli_progress *p = user;
  p->ops++;
  if (!cucap_cli_progress_due(p))
    return;
  char prefix[48];
  /* observers (the verifier, the profiler) may ask for passes beyond
   * --loop: their number is known only when they end */
  if (p->passes > 1 && p->pass < p->passes)
    snprintf(prefix, sizeof prefix, "pass %u/%u, ", p->pass + 1, p->passes);
  else
    snprintf(prefix, sizeof prefix, "pass %u, ", p->pass + 1);
  /* the rate over the whole run: passes of a --loop may each be shorter
   * than a redraw */
  double dt = (double)(cucap_clock_now_ns() - p->base_ns) * 1e-9;
  char rate[48] = "";
  if (dt >= 0.25) {
    char n[24];
    progress_si(n, sizeof n, (double)p->ops / dt);
    snprintf(rate, sizeof rate, ", %s records/s", n);
  }
  uint64_t done = op->rec_index + 1;
  if (p->total && done <= p->total)
    cucap_cli_progress_print(p, "%srecords %" PRIu64 "/%" PRIu64 " (%.0f%%)%s", prefix, done,
                             p->total, 100.0 * (double)done / (double)p->total, rate);
  else
    cucap_cli_progress_print(p, "%srecords %" PRIu64 "%s", prefix, done, rate);
}

static void progress_end(void *user, cucap_replay_session *s, cucap_replay_report *rep) {
  (void)s;
  (void)rep;
  cucap_cli_progress_clear(user); /* the report follows */
}

const cucap_replay_observer *cucap_cli_progress_observer(cucap_cli_progress *p,
                                                         unsigned passes) {
  if (!p)
    return NULL;
  /* the replayer runs no more than this, whatever --loop says */
  p->passes = passes < CUCAP_REPLAY_MAX_PASSES ? passes : CUCAP_REPLAY_MAX_PASSES;
  memset(&p->obs, 0, sizeof p->obs);
  p->obs.name = "progress";
  p->obs.user = p;
  p->obs.begin = progress_begin;
  p->obs.pass_begin = progress_pass_begin;
  p->obs.op_after = progress_op_after;
  p->obs.end = progress_end;
  return &p->obs;
}
