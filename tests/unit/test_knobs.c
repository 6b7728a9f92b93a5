/* test_knobs.c - the CUCAP_* knob registry (common/cucap_knobs.h): its
 * entries; how values and defaults are read, once per process, by threads
 * that race to the first read, and again after cucap_knobs_reload; and,
 * over the source tree ($CUCAP_SOURCE_DIR), that no library or tool calls
 * getenv for a CUCAP_ variable itself, that every knob is used somewhere,
 * that every `CUCAP_X=` in README.md and docs/design.md is a knob (or a
 * variable only tests/ or bench/ read), and that README.md's knob table is
 * the registry's. `test_knobs --table` prints that table. */
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_knobs.h"
#include "testutil.h"

#define CHECK TU_CHECK
#define K CUCAP_KNOB

static int checks;

/* ------------------------------------------------------------ the table */

static void print_table(FILE *f) {
  fputs("| Variable | Type | Default | What it does |\n|---|---|---|---|\n", f);
  for (int k = 0; k < CUCAP_KNOB_COUNT; k++) {
    const cucap_knob_info *in = cucap_knob_info_of((cucap_knob)k);
    fprintf(f, "| `%s` | %s | ", in->name, cucap_knob_type_name(in->type));
    if (in->def)
      fprintf(f, "`%s`", in->def);
    else
      fputs("-", f); /* computed, or none: the doc says */
    fputs(" | ", f);
    for (const char *p = in->doc; *p; p++) /* a | would end the cell */
      fputs(*p == '|' ? "\\|" : (char[2]){*p, 0}, f);
    fputs(" |\n", f);
  }
}

/* ------------------------------------------------------------ entries */

static void test_entries(void) {
  for (int k = 0; k < CUCAP_KNOB_COUNT; k++) {
    const cucap_knob_info *in = cucap_knob_info_of((cucap_knob)k);
    TU_REQUIRE(in && in->name && in->doc);
    checks++;
    CHECK(!strncmp(in->name, "CUCAP_", 6) && in->doc[0]);
    CHECK(cucap_knob_find(in->name, strlen(in->name)) == in);
    if (k > 0) /* sorted, hence unique */
      CHECK(strcmp(cucap_knob_info_of((cucap_knob)(k - 1))->name, in->name) < 0);
    if (in->type == CUCAP_KNOB_T_FLAG)
      CHECK(in->def && (!strcmp(in->def, "0") || !strcmp(in->def, "1")));
    if (in->def && (in->type == CUCAP_KNOB_T_U64 || in->type == CUCAP_KNOB_T_INT))
      CHECK(in->def[0] && strspn(in->def, "0123456789") == strlen(in->def));
  }
  checks++;
  CHECK(cucap_knob_find("CUCAP_LOG_LEVE", 14) == NULL);
  CHECK(cucap_knob_find("CUCAP_LOG_LEVEL=x", 15) != NULL);
  CHECK(cucap_knob_info_of(CUCAP_KNOB_COUNT) == NULL);
  CHECK(cucap_knob_str(CUCAP_KNOB_COUNT) == NULL && cucap_knob_u64(CUCAP_KNOB_COUNT) == 0);
}

/* ------------------------------------------------------------ values */

static void set_env(void) {
  setenv("CUCAP_REPLAY_PAYLOAD_CACHE_MIN", "7", 1);
  unsetenv("CUCAP_REPLAY_PAYLOAD_CACHE_MB");
  setenv("CUCAP_REPLAY_SERIALIZE", "yes", 1);     /* neither 0 nor 1: default off */
  setenv("CUCAP_PROFILE_EARLY_DISASM", "yes", 1); /* default on */
  setenv("CUCAP_REPLAY_KEEP_MODULES", "0", 1);
  setenv("CUCAP_STATS", "1", 1);
  setenv("CUCAP_PROFILE_DURATION_WITH", "", 1);
  unsetenv("CUCAP_PROFILE_DURATION_PASSES");
  unsetenv("CUCAP_REAL_LIBCUDA");
  setenv("CUCAP_ROOT_PID", "123", 1);
}

/* the values set_env gives; 0 when one differs */
static int values_ok(void) {
  return cucap_knob_u64(K(CUCAP_REPLAY_PAYLOAD_CACHE_MIN)) == 7 &&
         !cucap_knob_given(K(CUCAP_REPLAY_PAYLOAD_CACHE_MB)) &&
         cucap_knob_u64(K(CUCAP_REPLAY_PAYLOAD_CACHE_MB)) == 0 &&
         cucap_knob_flag(K(CUCAP_REPLAY_SERIALIZE)) == 0 &&
         cucap_knob_flag(K(CUCAP_PROFILE_EARLY_DISASM)) == 1 &&
         cucap_knob_flag(K(CUCAP_REPLAY_KEEP_MODULES)) == 0 &&
         cucap_knob_flag(K(CUCAP_STATS)) == 1 &&
         cucap_knob_raw(K(CUCAP_PROFILE_DURATION_WITH)) &&
         !*cucap_knob_raw(K(CUCAP_PROFILE_DURATION_WITH)) &&
         !cucap_knob_given(K(CUCAP_PROFILE_DURATION_WITH)) &&
         !strcmp(cucap_knob_str(K(CUCAP_PROFILE_DURATION_WITH)), "sm__cycles_elapsed.max") &&
         cucap_knob_long(K(CUCAP_PROFILE_DURATION_PASSES)) == 3 &&
         !cucap_knob_raw(K(CUCAP_REAL_LIBCUDA)) &&
         !strcmp(cucap_knob_str(K(CUCAP_REAL_LIBCUDA)), "libcuda.so.1") &&
         cucap_knob_long(K(CUCAP_ROOT_PID)) == 123;
}

static pthread_barrier_t g_bar;

static void *reader(void *arg) {
  int *bad = arg;
  pthread_barrier_wait(&g_bar);
  for (int i = 0; i < 2000; i++)
    *bad += !values_ok();
  return NULL;
}

static void test_values(void) {
  /* the first read of this process happens here, by 8 threads at once */
  enum { N = 8 };
  pthread_t th[N];
  int bad[N] = {0};
  TU_REQUIRE(pthread_barrier_init(&g_bar, NULL, N) == 0);
  for (int i = 0; i < N; i++)
    TU_REQUIRE(pthread_create(&th[i], NULL, reader, &bad[i]) == 0);
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    checks++;
    CHECK(bad[i] == 0);
  }
  pthread_barrier_destroy(&g_bar);
  checks++;
  setenv("CUCAP_ROOT_PID", "456", 1); /* read once: not seen */
  CHECK(cucap_knob_long(K(CUCAP_ROOT_PID)) == 123);
  cucap_knobs_reload();
  CHECK(cucap_knob_long(K(CUCAP_ROOT_PID)) == 456);
  setenv("CUCAP_ROOT_PID", "123", 1);
  cucap_knobs_reload();
  CHECK(values_ok());
}

/* ------------------------------------------------------------ the tree */

typedef struct text {
  char *p;
  size_t n;
} text;

static text slurp(const char *path) {
  text t = {NULL, 0};
  FILE *f = fopen(path, "rb");
  if (!f)
    return t;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  t.p = malloc((size_t)(n > 0 ? n : 0) + 1);
  if (t.p) {
    t.n = fread(t.p, 1, (size_t)(n > 0 ? n : 0), f);
    t.p[t.n] = 0;
  }
  fclose(f);
  return t;
}

/* the files one walk collects: product sources, or tests/ and bench/ text */
static struct {
  char **path;
  size_t n, cap;
  int harness;
} g_walk;

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (type != FTW_F)
    return 0;
  int want = ends_with(path, ".c") || ends_with(path, ".h");
  if (g_walk.harness)
    want = want || ends_with(path, ".sh") || ends_with(path, ".py") || ends_with(path, ".txt") ||
           ends_with(path, ".cu") || ends_with(path, ".cpp") || ends_with(path, ".inc");
  if (!want)
    return 0;
  if (g_walk.n == g_walk.cap) {
    g_walk.cap = g_walk.cap ? 2 * g_walk.cap : 256;
    g_walk.path = realloc(g_walk.path, g_walk.cap * sizeof *g_walk.path);
    TU_REQUIRE(g_walk.path);
  }
  g_walk.path[g_walk.n++] = strdup(path);
  return 0;
}

static void walk(const char *root, const char *const *dirs, int harness) {
  g_walk.harness = harness;
  for (size_t i = 0; dirs[i]; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
    nftw(p, walk_one, 16, FTW_PHYS);
  }
}

static void walk_free(void) {
  for (size_t i = 0; i < g_walk.n; i++)
    free(g_walk.path[i]);
  free(g_walk.path);
  memset(&g_walk, 0, sizeof g_walk);
}

static const char *const k_product[] = {"common", "schema", "reader", "capture", "interpose",
                                        "symbols", "analyze", "replay", "verify", "profile",
                                        "share", "tools", NULL};

static void test_sources(const char *root) {
  walk(root, k_product, 0);
  TU_REQUIRE(g_walk.n > 50); /* the tree is there */
  int used[CUCAP_KNOB_COUNT] = {0};
  for (size_t i = 0; i < g_walk.n; i++) {
    text t = slurp(g_walk.path[i]);
    if (!t.p)
      continue;
    /* the registry is the only reader */
    for (const char *p = t.p; (p = strstr(p, "getenv(\"CUCAP_")); p++) {
      const char *nl = strchr(p, '\n');
      fprintf(stderr, "%s: reads %.*s itself: go through cucap_knobs.h\n", g_walk.path[i],
              (int)(nl ? nl - p : 40), p);
      checks++;
      tu_failures++;
    }
    if (!ends_with(g_walk.path[i], "common/cucap_knobs.h"))
      for (int k = 0; k < CUCAP_KNOB_COUNT; k++) {
        char use[128];
        snprintf(use, sizeof use, "CUCAP_KNOB(%s)", cucap_knob_info_of((cucap_knob)k)->name);
        used[k] |= strstr(t.p, use) != NULL;
      }
    free(t.p);
  }
  walk_free();
  for (int k = 0; k < CUCAP_KNOB_COUNT; k++) {
    checks++;
    if (!used[k]) {
      fprintf(stderr, "%s: declared but read nowhere (a dead knob: remove it)\n",
              cucap_knob_info_of((cucap_knob)k)->name);
      tu_failures++;
    }
  }
}

/* 1 when name appears in a text file under tests/ or bench/ */
static int harness_reads(const char *root, const char *name) {
  static const char *const dirs[] = {"tests", "bench", NULL};
  if (!g_walk.n)
    walk(root, dirs, 1);
  for (size_t i = 0; i < g_walk.n; i++) {
    text t = slurp(g_walk.path[i]);
    int hit = t.p && strstr(t.p, name);
    free(t.p);
    if (hit)
      return 1;
  }
  return 0;
}

static void test_docs(const char *root) {
  static const char *const docs[] = {"README.md", "docs/design.md"};
  for (size_t d = 0; d < 2; d++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, docs[d]);
    text t = slurp(path);
    TU_REQUIRE(t.p);
    /* CUCAP_X= gives a variable a value; -DCUCAP_X= is a CMake option */
    for (const char *p = t.p; (p = strstr(p, "CUCAP_")); p++) {
      size_t n = 6 + strspn(p + 6, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
      if (p[n] != '=' || (p - t.p >= 2 && !strncmp(p - 2, "-D", 2)) ||
          (p > t.p && (p[-1] == '_' || (p[-1] >= 'A' && p[-1] <= 'Z'))))
        continue;
      char name[128];
      snprintf(name, sizeof name, "%.*s", (int)n, p);
      checks++;
      if (!cucap_knob_find(name, n) && !harness_reads(root, name)) {
        fprintf(stderr, "%s: %s= is neither a knob of cucap_knobs.h nor read by tests/ or "
                        "bench/\n", docs[d], name);
        tu_failures++;
      }
    }
    if (d == 0) { /* README's table is the registry's */
      static const char beg[] = "<!-- knobs: begin (tests/unit/test_knobs --table) -->\n";
      static const char end[] = "<!-- knobs: end -->";
      const char *b = strstr(t.p, beg), *e = b ? strstr(b, end) : NULL;
      char *want = NULL;
      size_t wn = 0;
      FILE *m = open_memstream(&want, &wn);
      TU_REQUIRE(m);
      print_table(m);
      fclose(m);
      checks++;
      if (!b || !e || (size_t)(e - b) - (sizeof beg - 1) != wn ||
          memcmp(b + sizeof beg - 1, want, wn)) {
        fprintf(stderr, "README.md: the knob table between '%.*s' and '%s' is not the "
                        "registry's; it should read:\n%s", (int)(sizeof beg - 2), beg, end, want);
        tu_failures++;
      }
      free(want);
    }
    free(t.p);
  }
  walk_free();
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--table")) {
    print_table(stdout);
    return 0;
  }
  set_env();
  test_values();
  test_entries();
  const char *root = getenv("CUCAP_SOURCE_DIR");
  if (!root) {
    printf("test_knobs: CUCAP_SOURCE_DIR not set; the source tree checks are skipped\n");
  } else {
    test_sources(root);
    test_docs(root);
  }
  return tu_finish("test_knobs", checks);
}
