/* test_recorder.c - unit tests of the in-app recorder runtime's pure parts
 * (owner: helper "interpose"): CUCAP_OPTIONS parsing and output-path
 * expansion (%p, %q{VAR}, %%). The recording path itself is exercised by
 * tests/integration/test_record_basic.sh. */
#include <stdlib.h>
#include <string.h>

#include "cucap_recorder.h"
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
                                "no_dtoh_payload,sync_writes",
                                &o) == CUCAP_OK);
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
  return tu_finish("test_recorder", checks);
}
