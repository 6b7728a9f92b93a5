/* test_recorder.c - unit tests of the in-app recorder runtime's pure parts: CUCAP_OPTIONS parsing and output-path
 * expansion (%p, %q{VAR}, %%), the per-process output path (.<pid> for
 * processes other than CUCAP_ROOT_PID) and the lazy start (armed, no file
 * before the first CUDA call) and the --stats counters (capture/rec_stats.c:
 * table kept as a Note). The recording path itself is exercised by
 * tests/integration/test_record_basic.sh and test_record_fork.sh. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_knobs.h"
#include "cucap_reader.h"
#include "cucap_rec_query.h"
#include "cucap_rec_stats.h"
#include "cucap_recorder.h"
#include "cucap_schema.h"
#include "testutil.h"

static int checks;
#define CHECK(c)                                                               \
  do {                                                                         \
    checks++;                                                                  \
    TU_CHECK(c);                                                               \
  } while (0)

static void test_options(void) {
  cucap_rec_options o;
  cucap_rec_options_init(&o);
  CHECK(o.snapshot == CUCAP_REC_SNAPSHOT_NONE);
  CHECK(o.stack == CUCAP_REC_STACK_FP && o.stack_depth == 32);
  CHECK(cucap_rec_options_parse(NULL, &o) == CUCAP_OK);
  CHECK(cucap_rec_options_parse("", &o) == CUCAP_OK);

  cucap_rec_options_init(&o);
  CHECK(cucap_rec_options_parse("snapshot=exit,hash_launches,audit,stack=unwind,"
                                "stack_depth=16,level=3,workers=2,flush_ms=50,"
                                "no_dtoh_payload,sync_writes,stats",
                                &o) == CUCAP_OK);
  CHECK(o.stats == 1);
  CHECK(o.snapshot == CUCAP_REC_SNAPSHOT_EXIT);
  CHECK(o.hash_launches == 1 && o.audit == 1 && o.no_dtoh_payload == 1);
  CHECK(o.stack == CUCAP_REC_STACK_UNWIND && o.stack_depth == 16);
  CHECK(o.level == 3 && o.workers == 2 && o.flush_ms == 50 && o.sync_writes == 1);

  cucap_rec_options_init(&o);
  CHECK(cucap_rec_options_parse("snapshot=launch:42,stack=off,,", &o) == CUCAP_OK);
  CHECK(o.snapshot == CUCAP_REC_SNAPSHOT_LAUNCH && o.snapshot_launch == 42);
  CHECK(o.stack == CUCAP_REC_STACK_OFF);

  /* unknown keys are ignored (warned), bad values are errors */
  cucap_rec_options_init(&o);
  CHECK(cucap_rec_options_parse("frobnicate=1,audit", &o) == CUCAP_OK && o.audit);
  const char *bad[] = {"snapshot=sometimes", "snapshot", "snapshot=launch:",
                       "snapshot=launch:x", "stack=deep", "stack", "level=abc",
                       "level=99", "stack_depth=0", "workers=", "level=-1",
                       "flush_ms=99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cucap_rec_options_init(&o);
    CHECK(cucap_rec_options_parse(bad[i], &o) == CUCAP_ERR_INVALID_ARG);
  }
  CHECK(cucap_rec_options_parse("audit", NULL) == CUCAP_ERR_INVALID_ARG);
}

static void test_expand(void) {
  char out[64];
  CHECK(cucap_rec_expand_path("capture.fb", 12, out, sizeof out) == CUCAP_OK &&
        strcmp(out, "capture.fb") == 0);
  CHECK(cucap_rec_expand_path("cap-%p.fb", 1234, out, sizeof out) == CUCAP_OK &&
        strcmp(out, "cap-1234.fb") == 0);
  CHECK(cucap_rec_expand_path("%p%p", 7, out, sizeof out) == CUCAP_OK &&
        strcmp(out, "77") == 0);
  CHECK(cucap_rec_expand_path("100%%", 7, out, sizeof out) == CUCAP_OK &&
        strcmp(out, "100%") == 0);
  setenv("CUCAP_TEST_RANK", "3", 1);
  unsetenv("CUCAP_TEST_UNSET");
  CHECK(cucap_rec_expand_path("r%q{CUCAP_TEST_RANK}-%p.fb", 9, out, sizeof out) == CUCAP_OK &&
        strcmp(out, "r3-9.fb") == 0);
  CHECK(cucap_rec_expand_path("r%q{CUCAP_TEST_UNSET}.fb", 9, out, sizeof out) == CUCAP_OK &&
        strcmp(out, "r.fb") == 0);
  /* malformed patterns */
  CHECK(cucap_rec_expand_path("x%", 1, out, sizeof out) == CUCAP_ERR_INVALID_ARG);
  CHECK(cucap_rec_expand_path("x%d", 1, out, sizeof out) == CUCAP_ERR_INVALID_ARG);
  CHECK(cucap_rec_expand_path("%q", 1, out, sizeof out) == CUCAP_ERR_INVALID_ARG);
  CHECK(cucap_rec_expand_path("%q{", 1, out, sizeof out) == CUCAP_ERR_INVALID_ARG);
  CHECK(cucap_rec_expand_path("%q{}", 1, out, sizeof out) == CUCAP_ERR_INVALID_ARG);
  CHECK(cucap_rec_expand_path("%qX", 1, out, sizeof out) == CUCAP_ERR_INVALID_ARG);
  /* too long: exactly-fitting vs one byte over */
  char small[6];
  CHECK(cucap_rec_expand_path("abcde", 1, small, sizeof small) == CUCAP_OK);
  CHECK(cucap_rec_expand_path("abcdef", 1, small, sizeof small) == CUCAP_ERR_TOO_LARGE);
  CHECK(cucap_rec_expand_path("ab%p", 12345, small, sizeof small) == CUCAP_ERR_TOO_LARGE);
  CHECK(cucap_rec_expand_path(NULL, 1, out, sizeof out) == CUCAP_ERR_INVALID_ARG);
  CHECK(cucap_rec_expand_path("x", 1, out, 0) == CUCAP_ERR_INVALID_ARG);
}

static void test_output_path(void) {
  char out[64];
#define OP(pat, pid, root, want)                                               \
  CHECK(cucap_rec_output_path(pat, pid, root, out, sizeof out) == CUCAP_OK &&  \
        strcmp(out, want) == 0)
  OP("cap.fb", 7, 7, "cap.fb");          /* the root process itself */
  OP("cap.fb", 7, 0, "cap.fb");          /* no CUCAP_ROOT_PID */
  OP("cap.fb", 8, 7, "cap.8.fb");
  OP("run.d/cap.x.fb", 8, 7, "run.d/cap.x.8.fb");
  OP("run.d/cap", 8, 7, "run.d/cap.8");  /* no extension: the dir's dot is not one */
  OP("dir/.hidden", 8, 7, "dir/.hidden.8");
  OP("cap-%p.fb", 8, 7, "cap-8.fb");     /* %p: already distinct */
  OP("cap-%%p.fb", 8, 7, "cap-%p.8.fb"); /* %%p is a literal "%p" */
#undef OP
  char small[9];
  CHECK(cucap_rec_output_path("cap.fb", 1, 7, small, sizeof small) == CUCAP_OK &&
        strcmp(small, "cap.1.fb") == 0); /* 8 chars + NUL: fits exactly */
  CHECK(cucap_rec_output_path("cap.fb", 12, 7, small, sizeof small) == CUCAP_ERR_TOO_LARGE);
  CHECK(cucap_rec_output_path("x%", 8, 7, out, sizeof out) == CUCAP_ERR_INVALID_ARG);
}

static const char *stat_name(size_t i) {
  static const char *const n[] = {"cuAlpha", "cuBeta", "cuGamma"};
  return i < 3 ? n[i] : NULL;
}

/* The stats Note of the capture at path (malloc'ed text, NULL if none). */
static char *stats_note(const char *path) {
  cucap_reader *r = NULL;
  char msg[128];
  if (cucap_reader_open(path, NULL, &r, msg, sizeof msg) != CUCAP_OK)
    return NULL;
  const void *t, *b;
  size_t sz;
  char *out = NULL;
  while (!out && cucap_reader_next(r, &t, &b, &sz) == CUCAP_OK) {
    const cucap_fb_record *rec = t;
    if (cucap_fb_record_body_type(rec) != CUCAP_FB_BODY_NOTE)
      continue;
    const cucap_fb_note *n = cucap_fb_record_body_as_note(rec);
    const char *k = cucap_fb_note_kind(n), *x = cucap_fb_note_text(n);
    if (k && x && !strcmp(k, "stats"))
      out = strdup(x);
  }
  cucap_reader_destroy(r);
  return out;
}

/* Sums the QueryCounts entries of the capture at path: ok[api cbid] (result
 * 0) and err (any other result); records: how many QueryCounts records. */
static void query_counts(const char *path, uint64_t ok[8], uint64_t *err, int *records,
                         int *other_tid) {
  memset(ok, 0, 8 * sizeof ok[0]);
  *err = 0;
  *records = 0;
  *other_tid = 0;
  cucap_reader *r = NULL;
  char msg[128];
  if (cucap_reader_open(path, NULL, &r, msg, sizeof msg) != CUCAP_OK)
    return;
  const void *t, *b;
  size_t sz;
  uint32_t first_tid = 0;
  while (cucap_reader_next(r, &t, &b, &sz) == CUCAP_OK) {
    const cucap_fb_record *rec = t;
    if (cucap_fb_record_body_type(rec) != CUCAP_FB_BODY_QUERYCOUNTS)
      continue;
    (*records)++;
    if (!first_tid)
      first_tid = cucap_fb_record_tid(rec);
    else if (cucap_fb_record_tid(rec) != first_tid)
      *other_tid = 1;
    const cucap_fb_query_counts *q = cucap_fb_record_body_as_query_counts(rec);
    for (size_t i = 0; i < cucap_fb_query_counts_entries_len(q); i++) {
      const cucap_fb_query_count *e = cucap_fb_query_counts_entries_at(q, i);
      uint32_t c = cucap_fb_query_count_call(e);
      if (cucap_fb_query_count_result(e))
        *err += cucap_fb_query_count_count(e);
      else if (c >= 100 && c < 108)
        ok[c - 100] += cucap_fb_query_count_count(e);
    }
  }
  cucap_reader_destroy(r);
}

static void *query_thread(void *arg) {
  (void)arg;
  cucap_rec_thread *th = cucap_rec_thread_get();
  for (int i = 0; th && i < 1000; i++)
    CHECK(cucap_rec_query_count(th, 2, 0) == 1);
  return NULL; /* thread exit: its counts are written, its table freed */
}

static void test_lazy(void) {
  /* Armed with CUCAP_OUTPUT set: no file until cucap_rec_activate. */
  char dir[] = "/tmp/cucap-test-recorder-XXXXXX";
  TU_REQUIRE(mkdtemp(dir) != NULL);
  char path[128];
  snprintf(path, sizeof path, "%s/cap.fb", dir);
  setenv("CUCAP_OUTPUT", path, 1);
  unsetenv("CUCAP_ROOT_PID");
  cucap_knobs_reload(); /* knobs are read once per process */
  cucap_rec_start("cucap-test", 13000);
  CHECK(cucap_rec_active() == 0);
  CHECK(access(path, F_OK) != 0);
  CHECK(cucap_rec_activate() == 1);
  CHECK(cucap_rec_active() == 1 && access(path, F_OK) == 0);
  CHECK(cucap_rec_activate() == 1); /* idempotent */
  CHECK(cucap_rec_is_forked_child() == 0);
  /* --stats: counters per entry point, the table written as a Note */
  CHECK(cucap_rec_stats_on == 0);
  cucap_rec_stats_init(1, 3, stat_name);
  CHECK(cucap_rec_stats_on == 1);
  for (int i = 0; i < 5; i++)
    cucap_rec_stats_call(1, 1000, i < 2);
  cucap_rec_stats_call(2, 10, 0);
  cucap_rec_stats_call(7, 10, 0); /* out of range: ignored */
  cucap_rec_stats_add(CUCAP_STATS_STACK_WALK, 50);
  cucap_rec_stats_report();
  cucap_rec_stats_report(); /* once */
  /* pure queries: per-thread counts, QueryCounts records at flushes, at
   * thread exit and at shutdown */
  static const uint32_t qcbid[3] = {100, 101, 102};
  static const uint8_t qvar[3] = {0, 0, 0};
  cucap_rec_query_init(3, qcbid, qvar);
  cucap_rec_thread *th = cucap_rec_thread_get();
  TU_REQUIRE(th != NULL);
  for (int i = 0; i < 10; i++)
    CHECK(cucap_rec_query_count(th, 0, 0) == 1);
  CHECK(cucap_rec_query_count(th, 1, 0) == 1);
  CHECK(cucap_rec_query_count(th, 1, 500) == 1); /* an error result */
  CHECK(cucap_rec_query_count(th, 1, 500) == 1);
  int nerr = 0;
  for (int e = 1; e <= 70; e++) /* more (api, error) pairs than slots */
    nerr += cucap_rec_query_count(th, 0, 1000 + e) == 1;
  CHECK(nerr == CUCAP_REC_QUERY_ERRS - 1); /* one slot holds (1, 500) */
  cucap_rec_query_flush_self();
  cucap_rec_query_flush_self(); /* nothing new: no record */
  for (int i = 0; i < 5; i++)
    CHECK(cucap_rec_query_count(th, 0, 0) == 1);
  pthread_t qt;
  TU_REQUIRE(pthread_create(&qt, NULL, query_thread, NULL) == 0);
  pthread_join(qt, NULL);
  cucap_rec_shutdown(); /* flushes the main thread's 5 */
  uint64_t ok[8], err = 0;
  int nrec = 0, other_tid = 0;
  query_counts(path, ok, &err, &nrec, &other_tid);
  CHECK(ok[0] == 15 && ok[1] == 1 && ok[2] == 1000);
  CHECK(err == 2 + (uint64_t)(CUCAP_REC_QUERY_ERRS - 1));
  CHECK(nrec == 3);     /* the flush, the thread's exit, the shutdown */
  CHECK(other_tid == 1); /* the thread's own record carries its tid */
  char *note = stats_note(path);
  CHECK(note != NULL);
  if (note) {
    char *beta = strstr(note, "cuBeta"), *gamma = strstr(note, "cuGamma");
    CHECK(beta && gamma && beta < gamma); /* most expensive first */
    CHECK(!strstr(note, "cuAlpha"));      /* never called: not listed */
    unsigned long calls = 0, slow = 0;
    double ms = 0, avg = 0;
    CHECK(beta && sscanf(beta, "cuBeta %lu %lf %lf %lu", &calls, &ms, &avg, &slow) == 4 &&
          calls == 5 && slow == 2);
    CHECK(strstr(note, "callstack walks") != NULL);
    free(note);
  }
  CHECK(cucap_rec_active() == 0);
  CHECK(cucap_rec_activate() == 0); /* never reopened after shutdown */
  unlink(path);
  rmdir(dir);
  unsetenv("CUCAP_OUTPUT");
  cucap_knobs_reload();
}

static void test_inactive(void) {
  /* Without cucap_rec_start the runtime is inert and safe to call. */
  CHECK(cucap_rec_active() == 0);
  CHECK(cucap_rec_opts() != NULL);
  CHECK(cucap_rec_thread_get() == NULL);
  CHECK(cucap_rec_builder() == NULL);
  CHECK(cucap_rec_note("x", "y", 1, NULL, 0) == CUCAP_ERR_STATE);
  CHECK(cucap_rec_blob("abc", 3, NULL) == CUCAP_ERR_STATE);
  uint64_t a = cucap_rec_next_launch_index();
  CHECK(cucap_rec_next_launch_index() == a + 1);
  cucap_rec_shutdown(); /* no-op */
}

int main(void) {
  test_options();
  test_expand();
  test_inactive();
  test_output_path();
  test_lazy();
  return tu_finish("test_recorder", checks);
}
