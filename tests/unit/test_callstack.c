/* test_callstack.c - capture/callstack.c walks:
 * both modes find the return addresses of a known call chain, innermost
 * first, and the cost of each is printed (the recorder's default mode is
 * chosen from these figures); the frame-pointer walk stops at a "frame"
 * whose return address is no code (what code built without frame pointers
 * leaves in %rbp) instead of recording data words. cucap_rec_stack_id() is
 * 0 when not recording. The address-space reader of ModuleMap records
 * (capture/addrspace.c) merges and classifies /proc/PID/maps lines. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <link.h>
#include <unistd.h>

#include "cucap_addrspace.h"
#include "cucap_callstack.h"
#include "cucap_schema.h"
#include "cucap_symbolize.h"
#include "cucap_knobs.h"
#include "cucap_recorder.h"
#include "testutil.h"

static int checks;
#define CHECK(c) do { checks++; TU_CHECK(c); } while (0)

typedef struct res {
  uint64_t frames[64];
  size_t n;
} res;

/* symbol ranges: each function's address and the next one's (approximate) */
__attribute__((noinline)) static void leaf(int mode, res *r) {
  r->n = cucap_callstack_walk(mode, r->frames, 64);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void mid(int mode, res *r) {
  leaf(mode, r);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void top(int mode, res *r) {
  mid(mode, r);
  __asm__ volatile("" ::: "memory");
}

static int in_fn(uint64_t pc, void *fn) {
  /* a return address lies a little after the start of its function */
  uintptr_t s = (uintptr_t)fn;
  return pc > s && pc < s + 256;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int add_obj(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uint64_t a = info->dlpi_addr + ph->p_vaddr;
    if (a < lo) lo = a;
    if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
  }
  char exe[4096];
  const char *path = info->dlpi_name;
  if (!path || !path[0]) {
    ssize_t r = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[r > 0 ? r : 0] = 0;
    path = exe;
  }
  if (hi)
    cucap_symbolizer_add_object(arg, path, NULL, 0, info->dlpi_addr, lo, hi);
  return 0;
}

static void test_symbolize(void) {
  res r;
  top(CUCAP_REC_STACK_FP, &r);
  cucap_symbolizer *s = NULL;
  TU_REQUIRE(cucap_symbolizer_create(&s) == CUCAP_OK);
  dl_iterate_phdr(add_obj, s);
  int found_mid = 0, found_top = 0;
  for (size_t i = 0; i < r.n; i++) {
    char buf[512];
    cucap_symbolizer_format(s, r.frames[i], buf, sizeof buf);
    printf("  #%zu %s\n", i, buf);
    cucap_symbol sy;
    if (cucap_symbolizer_lookup(s, r.frames[i], &sy) == CUCAP_OK && sy.function) {
      found_mid |= strcmp(sy.function, "mid") == 0;
      found_top |= strcmp(sy.function, "top") == 0;
    }
  }
  CHECK(found_mid && found_top);
  cucap_symbol sy;
  CHECK(cucap_symbolizer_lookup(s, 8, &sy) == CUCAP_ERR_NOT_FOUND);
  char buf[8];
  CHECK(cucap_symbolizer_format(s, 0x1234, buf, sizeof buf) == 6 && strcmp(buf, "0x1234") == 0);
  /* a wrong build-id: object+offset only */
  cucap_symbolizer_clear(s);
  static const uint8_t bogus[20] = {1, 2, 3};
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  uint64_t lo = r.frames[0] - 0x100000 < r.frames[0] ? r.frames[0] - 0x100000 : 0;
  cucap_symbolizer_add_object(s, exe, bogus, sizeof bogus, 0, lo, r.frames[0] + 0x100000);
  CHECK(cucap_symbolizer_lookup(s, r.frames[0], &sy) == CUCAP_OK && !sy.function &&
        sy.build_id_mismatch);
  /* a file that is not ELF */
  cucap_symbolizer_clear(s);
  cucap_symbolizer_add_object(s, "/proc/self/status", NULL, 0, 0, 0, 1 << 20);
  CHECK(cucap_symbolizer_lookup(s, 4096, &sy) == CUCAP_OK && !sy.function);
  cucap_symbolizer_destroy(s);
  cucap_symbolizer_destroy(NULL);
}

#if defined(__x86_64__)
/* Calls fn(arg) with %rbp pointing at a fake frame {next, return address}. */
extern void tcs_call_with_rbp(void *rbp, void (*fn)(void *), void *arg);
__asm__(".text\n"
        ".globl tcs_call_with_rbp\n"
        ".type tcs_call_with_rbp, @function\n"
        "tcs_call_with_rbp:\n"
        "  pushq %rbp\n"
        "  movq %rdi, %rbp\n"
        "  movq %rsi, %rax\n"
        "  movq %rdx, %rdi\n"
        "  callq *%rax\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size tcs_call_with_rbp, .-tcs_call_with_rbp\n");

static void walk_into(void *arg) { top(CUCAP_REC_STACK_FP, arg); }

static void test_junk_frame(void) {
  /* fake[0]: next frame (above, then 0: the end); fake[1]: a data word
   * where a return address would be */
  volatile uint64_t fake[4];
  fake[0] = (uint64_t)(uintptr_t)&fake[2];
  fake[1] = 0x123456789a0ull;
  fake[2] = 0;
  fake[3] = 0;
  res r;
  tcs_call_with_rbp((void *)fake, walk_into, &r);
  int junk = 0, has_top = 0;
  for (size_t i = 0; i < r.n; i++) {
    junk |= r.frames[i] == 0x123456789a0ull;
    has_top |= in_fn(r.frames[i], (void *)top);
  }
  CHECK(has_top);  /* the real frames below the fake one are kept */
  CHECK(!junk);    /* the data word is not a frame */
}
#endif

/* ---- stack ids while recording: the chain cache (capture/callstack.c)
 * must give exactly what a walk gives. Call sites below differ at chosen
 * depths with identical frame sizes (same code), so their chains share the
 * first frames and the stack positions: only a verified chain tells them
 * apart. */
static uint32_t g_ids[8];

__attribute__((noinline)) static uint32_t id_here(void) {
  uint32_t id = cucap_rec_stack_id();
  __asm__ volatile("" ::: "memory");
  return id;
}
__attribute__((noinline)) static uint32_t shared_mid(void) {
  uint32_t id = id_here();
  __asm__ volatile("" ::: "memory");
  return id;
}
/* two callers of shared_mid with the same frame layout */
__attribute__((noinline)) static uint32_t site_a(void) {
  uint32_t id = shared_mid();
  __asm__ volatile("" ::: "memory");
  return id;
}
__attribute__((noinline)) static uint32_t site_b(void) {
  uint32_t id = shared_mid();
  __asm__ volatile("" ::: "memory");
  return id;
}
/* a recursion n deep, then the same leaf: root_a/root_b differ only below
 * the n recursive frames */
__attribute__((noinline)) static uint32_t rec_n(int n) {
  uint32_t id = n ? rec_n(n - 1) : id_here();
  __asm__ volatile("" ::: "memory");
  return id;
}
__attribute__((noinline)) static uint32_t root_a(int n) {
  uint32_t id = rec_n(n);
  __asm__ volatile("" ::: "memory");
  return id;
}
__attribute__((noinline)) static uint32_t root_b(int n) {
  uint32_t id = rec_n(n);
  __asm__ volatile("" ::: "memory");
  return id;
}
#if defined(__x86_64__)
static void id_into(void *arg) { *(uint32_t *)arg = shared_mid(); }
#endif

static void test_stack_ids(void) {
  char dir[] = "/tmp/cucap-test-callstack-XXXXXX";
  TU_REQUIRE(mkdtemp(dir) != NULL);
  char path[128];
  snprintf(path, sizeof path, "%s/cap.fb", dir);
  setenv("CUCAP_OUTPUT", path, 1);
  setenv("CUCAP_OPTIONS", "stack_depth=32", 1);
  unsetenv("CUCAP_ROOT_PID");
  cucap_knobs_reload(); /* knobs are read once per process */
  cucap_rec_start("cucap-test", 13000);
  TU_REQUIRE(cucap_rec_activate() == 1);
  for (int rep = 0; rep < 4; rep++) { /* first: walks; then: cache hits */
    uint32_t a = site_a(), b = site_b();
    uint32_t ra = root_a(12), rb = root_b(12); /* differ 15 frames up */
    uint32_t da = root_a(40), db = root_b(40); /* differ past the 32-frame limit */
    CHECK(a && b && a != b);
    CHECK(ra && rb && ra != rb && ra != a && rb != b);
    CHECK(da && da == db); /* the walk stops at 32 frames: the same stack */
    uint32_t now[6] = {a, b, ra, rb, da, db};
    if (rep == 0)
      memcpy(g_ids, now, sizeof now);
    else
      CHECK(memcmp(g_ids, now, sizeof now) == 0);
  }
  /* deeper and shallower stacks through the same sites: other positions
   * (each call site of this function is a frame of its own: loop) */
  uint32_t r[3][3];
  for (int rep = 0; rep < 3; rep++)
    for (int k = 0; k < 3; k++)
      r[rep][k] = root_a(5 + k);
  CHECK(r[0][0] && r[0][1] && r[0][2] && r[0][0] != r[0][1] && r[0][1] != r[0][2]);
  CHECK(memcmp(r[0], r[1], sizeof r[0]) == 0 && memcmp(r[0], r[2], sizeof r[0]) == 0);
#if defined(__x86_64__)
  /* a frame-pointer-less caller: %rbp at a fake frame whose "return
   * address" is a data word that changes every call; the walk stops there,
   * so every call is the same stack (and the data word is not in it) */
  volatile uint64_t fake[4];
  uint32_t first = 0;
  for (int i = 0; i < 50; i++) {
    fake[0] = (uint64_t)(uintptr_t)&fake[2];
    fake[1] = 0x100000ull + (uint64_t)i * 64;
    fake[2] = 0;
    fake[3] = 0;
    uint32_t id = 0;
    tcs_call_with_rbp((void *)fake, id_into, &id);
    if (i == 0)
      first = id;
    CHECK(id && id == first);
  }
  CHECK(first != g_ids[0] && first != g_ids[1]);
  /* the same fake frame holding a real return address (inside top) is a
   * frame: a different stack */
  fake[0] = (uint64_t)(uintptr_t)&fake[2];
  fake[1] = (uint64_t)(uintptr_t)top + 16;
  uint32_t id2 = 0;
  tcs_call_with_rbp((void *)fake, id_into, &id2);
  CHECK(id2 && id2 != first);
#endif
  /* other threads: their own caches, the same ids for the same stacks */
  cucap_rec_shutdown();
  CHECK(cucap_rec_stack_id() == 0);
  unlink(path);
  rmdir(dir);
  unsetenv("CUCAP_OUTPUT");
  unsetenv("CUCAP_OPTIONS");
  cucap_knobs_reload();
}

/* capture/addrspace.c: /proc/PID/maps text -> merged AddressRange vector
 * (ModuleMap.ranges, format 1.4). */
static const cucap_fb_module_map *map_of(cucap_fbb *b, cucap_fb_ref ranges) {
  cucap_fb_module_map_start(b);
  if (ranges)
    cucap_fb_module_map_add_ranges(b, ranges);
  size_t len = 0;
  const uint8_t *buf = cucap_fbb_finish(b, cucap_fb_module_map_end(b), 0, &len);
  if (!buf || cucap_fb_module_map_verify(buf, len, 0) != CUCAP_OK)
    return NULL;
  return cucap_fb_module_map_root(buf);
}

static void test_addrspace(void) {
  static const char maps[] =
      "55d0a0000000-55d0a0001000 r--p 00000000 08:01 123   /usr/bin/app\n"
      "55d0a0001000-55d0a0003000 r-xp 00001000 08:01 123   /usr/bin/app\n"
      "55d0a0100000-55d0a0200000 rw-p 00000000 00:00 0     [heap]\n"
      "7f0000000000-7f0000200000 rw-s 00000000 00:05 77    /dev/nvidia-uvm\n"
      "7f1000000000-7f1000001000 ---p 00000000 00:00 0 \n"
      "7f1000001000-7f1000800000 rw-p 00000000 00:00 0     [anon:glibc arena]\n"
      "7f1000800000-7f1000900000 r-xp 00000000 08:01 9     /lib/libc.so.6\n"
      "garbage line\n"
      "7f1000900000-7f1000800000 r-xp 00000000 08:01 9     /lib/backwards.so\n"
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0     [stack]\n"
      "7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0     [vdso]\n"
      "7ffd00200000-7ffd0020"; /* cut short */
  cucap_fbb *b = cucap_fbb_create(4096);
  TU_REQUIRE(b);
  const cucap_fb_module_map *mm = map_of(b, cucap_addrspace_build_from(b, maps, sizeof maps - 1));
  TU_REQUIRE(mm);
  struct { uint64_t s, e; int k; const char *path; } want[] = {
      {0x55d0a0000000, 0x55d0a0003000, CUCAP_FB_ADDRESSKIND_FILE, "/usr/bin/app"},
      {0x55d0a0100000, 0x55d0a0200000, CUCAP_FB_ADDRESSKIND_HEAP, NULL},
      {0x7f0000000000, 0x7f0000200000, CUCAP_FB_ADDRESSKIND_DEVICE, "/dev/nvidia-uvm"},
      {0x7f1000000000, 0x7f1000800000, CUCAP_FB_ADDRESSKIND_ANON, NULL}, /* merged */
      {0x7f1000800000, 0x7f1000900000, CUCAP_FB_ADDRESSKIND_FILE, "/lib/libc.so.6"},
      {0x7ffd00000000, 0x7ffd00021000, CUCAP_FB_ADDRESSKIND_STACK, NULL},
      {0x7ffd00100000, 0x7ffd00102000, CUCAP_FB_ADDRESSKIND_OTHER, NULL}};
  size_t n = cucap_fb_module_map_ranges_len(mm), nw = sizeof want / sizeof *want;
  CHECK(n == nw);
  for (size_t i = 0; i < n && i < nw; i++) {
    const cucap_fb_address_range *r = cucap_fb_module_map_ranges_at(mm, i);
    CHECK(cucap_fb_address_range_start_get(r) == want[i].s &&
          cucap_fb_address_range_end_get(r) == want[i].e &&
          cucap_fb_address_range_kind(r) == want[i].k);
    const char *p = cucap_fb_address_range_path(r);
    CHECK(want[i].path ? p && !strcmp(p, want[i].path) : !p);
  }
  /* this process: the stack holds a local, the executable a function */
  cucap_fbb_reset(b);
  mm = map_of(b, cucap_addrspace_build(b));
  TU_REQUIRE(mm);
  int local = 0, stack_ok = 0, code_ok = 0;
  uint64_t prev_end = 0;
  for (size_t i = 0; i < cucap_fb_module_map_ranges_len(mm); i++) {
    const cucap_fb_address_range *r = cucap_fb_module_map_ranges_at(mm, i);
    uint64_t s = cucap_fb_address_range_start_get(r), e = cucap_fb_address_range_end_get(r);
    CHECK(s >= prev_end && e > s); /* sorted, not overlapping */
    prev_end = e;
    if ((uintptr_t)&local - s < e - s)
      stack_ok = cucap_fb_address_range_kind(r) == CUCAP_FB_ADDRESSKIND_STACK;
    if ((uintptr_t)&test_addrspace - s < e - s)
      code_ok = cucap_fb_address_range_kind(r) == CUCAP_FB_ADDRESSKIND_FILE;
  }
  CHECK(stack_ok && code_ok);
  cucap_fbb_reset(b);
  CHECK(cucap_addrspace_build_from(b, "", 0) != 0); /* an empty vector */
  cucap_fbb_destroy(b);
}

int main(void) {
  test_addrspace();
  test_symbolize();
#if defined(__x86_64__)
  test_junk_frame();
#endif
  int modes[2] = {CUCAP_REC_STACK_FP, CUCAP_REC_STACK_UNWIND};
  const char *names[2] = {"fp", "unwind"};
  for (int m = 0; m < 2; m++) {
    res r;
    top(modes[m], &r);
    CHECK(r.n >= 4);
    /* find leaf's caller chain: mid, top, main in order */
    size_t i = 0;
    while (i < r.n && !in_fn(r.frames[i], (void *)mid))
      i++;
    CHECK(i + 2 < r.n);
    if (i + 2 < r.n) {
      CHECK(in_fn(r.frames[i + 1], (void *)top));
      CHECK(r.frames[i + 2] > (uintptr_t)main);
    }
    res r2;
    top(modes[m], &r2);
    CHECK(r2.n == r.n);
    int reps = 200000;
    double t0 = now_ns();
    for (int k = 0; k < reps; k++)
      top(modes[m], &r2);
    double t1 = now_ns();
    printf("walk %s: %zu frames, %.0f ns/walk\n", names[m], r.n, (t1 - t0) / reps);
    CHECK(cucap_callstack_walk(modes[m], r.frames, 2) <= 2);
  }
  CHECK(cucap_callstack_walk(CUCAP_REC_STACK_OFF, NULL, 0) == 0);
  CHECK(cucap_rec_stack_id() == 0); /* not recording */
  test_stack_ids();
  return tu_finish("test_callstack", checks);
}
