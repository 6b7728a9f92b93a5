#include "testutil.h"
#include <string.h>
#include <sys/stat.h>
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

int tu_nvcc(char *buf, size_t n) {
  const char *home = getenv("CUDA_HOME");
  snprintf(buf, n, "%s/bin/nvcc", home && *home ? home : "/usr/local/cuda");
  return access(buf, X_OK) == 0;
}

char *tu_tmp_dir_with(const char *stem, const char *name, const char *text) {
  char *dir = tu_tmp_path(stem);
  TU_REQUIRE(dir && mkdir(dir, 0700) == 0);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  TU_REQUIRE(f);
  fputs(text, f);
  TU_REQUIRE(fclose(f) == 0);
  return dir;
}
