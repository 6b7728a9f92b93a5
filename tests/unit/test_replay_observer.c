/* test_replay_observer.c - replay/replay_observer.c: the observer interface
 * (cucap_replay_observer.h) on the mock libcuda: callback order and counts,
 * launch details, extra passes asked by an observer, session queries,
 * findings observers keep, failures they report. Skips (77) without the
 * mock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_log.h"
#include "cucap_replay.h"
#include "cucap_cli.h"
#include "cucap_verify.h"
#include "cucap_replay_observer.h"
#include "cucap_schema.h"
#include "replay_testcaps.h"
#include "testutil.h"

/* --verify of the runs below, their verdicts and the exit code `cucap
 * replay` gives for each (tools/ maps the status) */
static cucap_verify_options vo;
static cucap_verify_report vr;
static int exit_code;
static cucap_status vrun(const char *path, const cucap_replay_options *o,
                         cucap_replay_report *rep) {
  cucap_status st = cucap_verify_replay_run(path, o, &vo, rep, &vr);
  exit_code = cucap_cli_exit_code(st);
  return st;
}

static int checks;

typedef struct watch {
  int attach, begin, end, passes_begun, passes_ended;
  int before, after, launches_before, launches_after, graph_ops;
  int order_ok;             /* every op_after follows its op_before */
  int in_op;
  unsigned want_passes;     /* ask for passes up to this many */
  uint64_t last_launch;
  char kernel[64];
  int function_set, stream_known, ctx_set;
  int read_ok;
  cucap_status begin_status;
  int report_mismatch, found;
  int end_at_launch;        /* pass 0: end the pass after launch 0 */
  int launches_pass[4];     /* launches seen per pass */
} watch;

static cucap_status w_attach(void *u, cucap_replay_session *s) {
  watch *w = u;
  w->attach++;
  /* the driver is loaded but no context exists yet */
  if (!cucap_replay_session_driver(s) || cucap_replay_session_context(s))
    w->order_ok = 0;
  if (!cucap_replay_session_proc(s, "cuCtxGetCurrent", 4000))
    w->order_ok = 0;
  return CUCAP_OK;
}

static cucap_status w_begin(void *u, cucap_replay_session *s) {
  watch *w = u;
  w->begin++;
  if (!cucap_replay_session_context(s) || !cucap_replay_session_reader(s))
    w->order_ok = 0;
  return w->begin_status;
}

static void w_pass_begin(void *u, cucap_replay_session *s, unsigned pass) {
  watch *w = u;
  if (pass != (unsigned)w->passes_begun || cucap_replay_session_pass(s) != pass)
    w->order_ok = 0;
  w->passes_begun++;
}

static void w_before(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  watch *w = u;
  (void)s;
  if (w->in_op || !op->record)
    w->order_ok = 0;
  w->in_op = 1;
  w->before++;
  if (op->launch_index != CUCAP_REPLAY_NO_LAUNCH) {
    w->launches_before++;
    w->last_launch = op->launch_index;
    snprintf(w->kernel, sizeof w->kernel, "%s", op->kernel ? op->kernel : "");
    w->function_set += op->function != 0;
    w->ctx_set += op->context != 0;
    if (op->body_type != CUCAP_FB_BODY_LAUNCH)
      w->order_ok = 0;
  }
  if (op->body_type == CUCAP_FB_BODY_GRAPH)
    w->graph_ops++;
}

static void w_after(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  watch *w = u;
  if (!w->in_op)
    w->order_ok = 0;
  w->in_op = 0;
  w->after++;
  if (op->launch_index != CUCAP_REPLAY_NO_LAUNCH && op->status == 0) {
    w->launches_after++;
    if (op->pass < 4)
      w->launches_pass[op->pass]++;
    if (w->end_at_launch && op->pass == 0 && op->launch_index == 0)
      cucap_replay_session_end_pass(s);
  }
}

static int w_pass_end(void *u, cucap_replay_session *s, unsigned pass) {
  watch *w = u;
  w->passes_ended++;
  /* the output buffer of vec_add (recorded address, live translation) */
  uint32_t c[4] = {0};
  if (cucap_replay_session_read(s, 0x7e1200400000ULL, c, sizeof c) == CUCAP_OK)
    w->read_ok++;
  if (w->report_mismatch && pass == 0)
    w->found++; /* its own finding: the replay API has no verdicts */
  return pass + 1 < w->want_passes;
}

static void w_end(void *u, cucap_replay_session *s, cucap_replay_report *rep) {
  watch *w = u;
  if (rep != cucap_replay_session_report(s))
    w->order_ok = 0;
  w->end++;
}

static void w_init(watch *w, cucap_replay_observer *ob) {
  memset(w, 0, sizeof *w);
  w->order_ok = 1;
  memset(ob, 0, sizeof *ob);
  ob->name = "test";
  ob->user = w;
  ob->attach = w_attach;
  ob->begin = w_begin;
  ob->pass_begin = w_pass_begin;
  ob->op_before = w_before;
  ob->op_after = w_after;
  ob->pass_end = w_pass_end;
  ob->end = w_end;
}

int main(void) {
  const char *bd = getenv("CUCAP_BUILD_DIR");
  char mock[4096];
  struct stat sb;
  snprintf(mock, sizeof mock, "%s/tests/mock/libcuda.so.1", bd ? bd : ".");
  if (!bd || stat(mock, &sb) != 0) {
    printf("test_replay_observer: mock libcuda not built (%s); skipping\n", mock);
    return 77;
  }
  cucap_log_set_level(CUCAP_LOG_ERROR);
  char *good = tu_tmp_path("obs_good"), *gp = tu_tmp_path("obs_graph");
  NLAUNCH = 3;
  write_capture(good, 0);
  NLAUNCH = 1;
  write_capture(gp, CAP_GRAPH);

  cucap_replay_options o;
  cucap_replay_report rep;
  watch w, w2;
  cucap_replay_observer ob, ob2;

  /* 1: one pass asked by --loop, two more by the observer; two observers
   * see the same events */
  w_init(&w, &ob);
  w_init(&w2, &ob2);
  w.want_passes = 3;
  const cucap_replay_observer *obs[2] = {&ob, &ob2};
  cucap_replay_options_init(&o);
  cucap_verify_options_init(&vo);
  o.libcuda = mock;
  vo.mode = CUCAP_VERIFY_COPIES;
  o.observers = obs;
  o.nobservers = 2;
  checks += 10;
  TU_CHECK(vrun(good, &o, &rep) == CUCAP_OK);
  TU_CHECK(rep.loops == 3 && vr.mismatches == 0);
  TU_CHECK(w.attach == 1 && w.begin == 1 && w.end == 1);
  TU_CHECK(w.passes_begun == 3 && w.passes_ended == 3);
  TU_CHECK(w.order_ok && w.before == w.after && w.before > 0);
  TU_CHECK(w.launches_before == 9 && w.launches_after == 9);
  TU_CHECK(w.last_launch == 2 && strcmp(w.kernel, "vec_add") == 0);
  TU_CHECK(w.function_set == 9 && w.ctx_set == 9);
  TU_CHECK(w.read_ok == 3);
  TU_CHECK(w2.passes_begun == 3 && w2.launches_before == 9 && w2.before == w.before);
  if (rep.error[0])
    fprintf(stderr, "error: %s\n", rep.error);

  /* 2: a graph capture: the captured launch is seen with capturing set,
   * graph ops are seen */
  w_init(&w, &ob);
  o.observers = obs;
  o.nobservers = 1;
  checks += 3;
  TU_CHECK(vrun(gp, &o, &rep) == CUCAP_OK);
  TU_CHECK(w.order_ok && w.graph_ops >= 2);
  TU_CHECK(w.launches_before == 1);

  /* 3: an observer finds a difference: it is the observer's (verify
   * keeps its verdict in its own report); the replay completes, its status
   * and exit code untouched */
  w_init(&w, &ob);
  w.report_mismatch = 1;
  checks += 3;
  TU_CHECK(vrun(good, &o, &rep) == CUCAP_OK);
  TU_CHECK(exit_code == 0 && vr.mismatches == 0 && w.found == 1);
  TU_CHECK(rep.status == CUCAP_OK && !rep.error[0] && w.end == 1);

  /* 4: an observer refuses to start (e.g. no CUPTI): exit 3, end called */
  w_init(&w, &ob);
  w.begin_status = CUCAP_ERR_ENV;
  checks += 3;
  TU_CHECK(vrun(good, &o, &rep) == CUCAP_ERR_ENV);
  TU_CHECK(exit_code == CUCAP_EXIT_BAD_INPUT && strstr(rep.error, "test"));
  TU_CHECK(w.end == 1 && w.before == 0);

  /* 5: an observer ends pass 0 after the first launch: pass 0 runs one
   * launch (and still ends with pass_end), pass 1 starts over and runs all */
  w_init(&w, &ob);
  w.want_passes = 2;
  w.end_at_launch = 1;
  vo.mode = CUCAP_VERIFY_NONE;
  checks += 4;
  TU_CHECK(vrun(good, &o, &rep) == CUCAP_OK);
  TU_CHECK(rep.loops == 2 && w.passes_ended == 2);
  TU_CHECK(w.launches_pass[0] == 1 && w.launches_pass[1] == 3);
  TU_CHECK(w.order_ok && w.before == w.after);

  unlink(good);
  unlink(gp);
  free(good);
  free(gp);
  return tu_finish("test_replay_observer", checks);
}
