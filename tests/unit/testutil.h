/* testutil.h - minimal assertion helpers for tests/unit (no framework). */
#ifndef CUCAP_TESTUTIL_H
#define CUCAP_TESTUTIL_H
#include <stdio.h>
#include <stdlib.h>

extern int tu_failures;
#define TU_CHECK(cond)                                                         \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      tu_failures++;                                                           \
    }                                                                          \
  } while (0)
#define TU_REQUIRE(cond)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: required: %s\n", __FILE__, __LINE__, #cond);    \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
/* Returns the process exit status: prints "N passed, M failed". */
int tu_finish(const char *name, int checks_run);
/* Temporary path under $TMPDIR unique to this process; caller frees. */
char *tu_tmp_path(const char *stem);
/* $CUDA_HOME/bin/nvcc (default /usr/local/cuda) into buf; 1 when it can be
 * run, else 0 (tests that build images skip). */
int tu_nvcc(char *buf, size_t n);
/* A new directory tu_tmp_path(stem) holding one file `name` with `text`
 * (for the image tests' nvcc input); exits on failure; caller frees. */
char *tu_tmp_dir_with(const char *stem, const char *name, const char *text);
#endif
