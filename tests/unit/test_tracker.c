/* test_tracker.c - capture/tracker.c: interval
 * lookups, handle maps with replace/remove/grow, module-driven removal, and
 * lock-free readers racing a writer (run under TSan/ASan to be meaningful). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucap_tracker.h"
#include "testutil.h"

static int checks;
#define CHECK(c) do { checks++; TU_CHECK(c); } while (0)

static void test_allocs(void) {
  cucap_tracker *t = cucap_tracker_create();
  TU_REQUIRE(t);
  for (uint64_t i = 0; i < 1000; i++) {
    cucap_tracked_alloc a = {0x10000 + i * 0x1000, 0x800, 0, 0, (uint8_t)(i & 1), 1 + (i >= 990)};
    CHECK(cucap_tracker_alloc_add(t, &a) == CUCAP_OK);
  }
  cucap_tracked_alloc o;
  CHECK(cucap_tracker_alloc_find(t, 0x10000, &o) && o.address == 0x10000);
  CHECK(cucap_tracker_alloc_find(t, 0x10000 + 5 * 0x1000 + 0x7ff, &o) &&
        o.address == 0x15000);
  CHECK(!cucap_tracker_alloc_find(t, 0x15800, &o)); /* gap */
  CHECK(!cucap_tracker_alloc_find(t, 0xffff, &o));
  CHECK(cucap_tracker_alloc_remove(t, 0x15000, &o) && o.size == 0x800);
  CHECK(!cucap_tracker_alloc_find(t, 0x15010, &o));
  CHECK(!cucap_tracker_alloc_remove(t, 0x15000, NULL));
  cucap_tracked_alloc *v;
  size_t n;
  CHECK(cucap_tracker_alloc_list_device(t, &v, &n) == CUCAP_OK);
  CHECK(n == 499); /* odd i are device_memory, 0x15000 (i=5) removed */
  for (size_t i = 1; i < n; i++)
    CHECK(v[i - 1].address < v[i].address);
  free(v);
  /* replace at the same address */
  cucap_tracked_alloc b = {0x10000, 0x10, 7, 3, 1, 1};
  CHECK(cucap_tracker_alloc_add(t, &b) == CUCAP_OK);
  CHECK(cucap_tracker_alloc_find(t, 0x10005, &o) && o.size == 0x10 && o.kind == 3);
  CHECK(!cucap_tracker_alloc_find(t, 0x10010, &o));
  CHECK(cucap_tracker_alloc_remove_context(t, 2) == 10);
  CHECK(!cucap_tracker_alloc_find(t, 0x10000 + 995 * 0x1000, &o));
  CHECK(cucap_tracker_alloc_find(t, 0x10000 + 989 * 0x1000, &o));
  cucap_tracker_destroy(t);
}

static void test_maps(void) {
  cucap_tracker *t = cucap_tracker_create();
  cucap_param_layout p[2] = {{0, 4}, {8, 8}};
  for (uint64_t h = 1; h <= 5000; h++)
    CHECK(cucap_tracker_fn_add(t, h * 16, h % 3 + 100, 0, "kern", p, 2, 16, 1) == CUCAP_OK);
  const cucap_tracked_fn *f = cucap_tracker_fn_find(t, 16 * 77);
  CHECK(f && f->nparams == 2 && f->params[1].offset == 8 && strcmp(f->name, "kern") == 0);
  CHECK(cucap_tracker_fn_find(t, 17) == NULL);
  CHECK(cucap_tracker_fn_add(t, 16 * 77, 5, 1, "other", NULL, 0, 0, 0) == CUCAP_OK);
  const cucap_tracked_fn *g = cucap_tracker_fn_find(t, 16 * 77);
  CHECK(g && g != f && strcmp(g->name, "other") == 0);
  CHECK(strcmp(f->name, "kern") == 0); /* retired, still readable */
  cucap_tracker_fn_remove_module(t, 101);
  int left = 0;
  for (uint64_t h = 1; h <= 5000; h++)
    left += cucap_tracker_fn_find(t, h * 16) != NULL;
  CHECK(left == 5000 - 1667 + (77 % 3 + 100 == 101));

  CHECK(cucap_tracker_stream_add(t, 0x55, 0) == CUCAP_OK);
  uint32_t fl = 9;
  CHECK(cucap_tracker_stream_find(t, 0x55, &fl) && fl == 0);
  cucap_tracker_stream_remove(t, 0x55);
  CHECK(!cucap_tracker_stream_find(t, 0x55, &fl));
  CHECK(cucap_tracker_event_add(t, 0x66, 2) == CUCAP_OK);
  CHECK(cucap_tracker_event_find(t, 0x66, &fl) && fl == 2);
  CHECK(cucap_tracker_stream_add(t, 0, 0) == CUCAP_ERR_INVALID_ARG);

  /* module with an image that is not a cubin: params not found */
  cucap_tracked_module m = {0x900, 0, 3, {1, 2}, 6};
  CHECK(cucap_tracker_module_add(t, &m, ".ver\n") == CUCAP_OK);
  cucap_tracked_module mo;
  CHECK(cucap_tracker_module_find(t, 0x900, &mo) && mo.format == 3 && mo.hash.hi == 2);
  size_t cnt;
  uint32_t tot;
  cucap_param_layout out[4];
  CHECK(cucap_tracker_module_params(t, 0x900, "k", out, 4, &cnt, &tot) != CUCAP_OK);
  CHECK(cucap_tracker_fn_add(t, 0x901, 0x900, 0, "k", NULL, 0, 0, 0) == CUCAP_OK);
  cucap_tracker_module_remove(t, 0x900);
  CHECK(!cucap_tracker_module_find(t, 0x900, NULL));
  CHECK(cucap_tracker_fn_find(t, 0x901) == NULL);
  cucap_tracker_destroy(t);
  cucap_tracker_destroy(NULL);
}

static cucap_tracker *g_t;
static atomic_int g_stop;
static atomic_long g_seen;

static void *reader(void *arg) {
  (void)arg;
  long seen = 0;
  while (!atomic_load(&g_stop)) {
    for (uint64_t h = 1; h <= 2000; h++) {
      const cucap_tracked_fn *f = cucap_tracker_fn_find(g_t, h);
      if (f) {
        if (f->handle != h || f->nparams != 1 || f->params[0].size != h)
          abort(); /* torn entry */
        if (seen++ == 0)
          atomic_fetch_add(&g_seen, 1); /* tell the writer we are in */
      }
    }
  }
  atomic_fetch_add(&g_seen, seen);
  return NULL;
}

static void test_concurrent(void) {
  g_t = cucap_tracker_create();
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, reader, NULL);
  /* At least 20 rounds, and on until every reader has seen entries while
   * the writer was still adding and removing them (on a loaded machine the
   * readers may not be scheduled before 20 rounds are over). */
  for (int round = 0; round < 20 || (atomic_load(&g_seen) < 2 && round < 2000000); round++) {
    for (uint64_t h = 1; h <= 2000; h++) {
      cucap_param_layout p = {0, (uint32_t)h};
      cucap_tracker_fn_add(g_t, h, round, 0, "x", &p, 1, 8, 1);
    }
    cucap_tracker_fn_remove_module(g_t, round);
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  CHECK(atomic_load(&g_seen) > 0);
  cucap_tracker_destroy(g_t);
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(void) {
  test_allocs();
  test_maps();
  test_concurrent();
  /* lookup cost (informational) */
  cucap_tracker *t = cucap_tracker_create();
  for (uint64_t h = 1; h <= 1000; h++)
    cucap_tracker_fn_add(t, h * 0x1000, 1, 0, "k", NULL, 0, 0, 0);
  double t0 = now_ns();
  uint64_t acc = 0;
  for (int i = 0; i < 1000000; i++)
    acc += (uintptr_t)cucap_tracker_fn_find(t, (uint64_t)(i % 1000 + 1) * 0x1000);
  double t1 = now_ns();
  printf("fn_find: %.1f ns/lookup (%d)\n", (t1 - t0) / 1e6, (int)(acc & 1));
  cucap_tracker_destroy(t);
  CHECK(cucap_tracker_global() == cucap_tracker_global());
  return tu_finish("test_tracker", checks);
}
