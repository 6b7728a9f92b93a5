#include "testutil.h"
#include <string.h>
#include <unistd.h>

int tu_failures;

int tu_finish(const char *name, int checks_run) {
  printf("%s: %s (%d failed checks)\n", name, tu_failures ? "FAIL" : "ok",
         tu_failures);
  (void)checks_run;
  return tu_failures ? 1 : 0;
}

char *tu_tmp_path(const char *stem) {
  const char *d = getenv("TMPDIR");
  if (!d || !*d)
    d = "/tmp";
  size_t n = strlen(d) + strlen(stem) + 64;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/cucap-test-%d-%s", d, (int)getpid(), stem);
  return p;
}
