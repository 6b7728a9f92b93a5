/* test_replay_reloc.c - placement and complete relocation in replay.
 *
 *  1. A linked structure: device buffer P holds pointers into buffer B (both
 *     uploaded with HtoD copies), a kernel follows them (gather_ptr). With
 *     B relocated - forced (--relocate), or because the address is taken in
 *     this process so its recorded range cannot be reserved - the pointers
 *     inside P's upload must be rewritten, else the kernel reads the old
 *     address (and the mock, which runs kernels on the host, faults).
 *  2. Page-locked host memory recorded inside the 32 MiB super-range of a
 *     device allocation (where the driver puts it): device memory backs it
 *     at its address, no "address already in use" warning; a kernel writes
 *     it through its recorded pointer and a copy reads it back.
 *  3. A super-range (two used 32 MiB blocks) whose second block is taken:
 *     the first block is still reserved at its address, only the allocation
 *     in the second is relocated.
 *  4. Pointers inside a struct parameter passed by value (copy_struct: one
 *     24-byte parameter {src, dst, n}, like cuBLAS's cublasSplitKParams with
 *     its alpha/beta pointers): relocated, both words are rewritten.
 * Runs on the mock libcuda; skips (77) without it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_log.h"
#include "cucap_replay.h"
#include "cucap_cli.h"
#include "cucap_verify.h"
#include "cucap_schema.h"
#include "cucap_writer.h"
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
static char mock[4096];
static cucap_fbb *B;
static cucap_writer *W;
static uint64_t SEQ;

#define NE 256 /* elements */
#define CTX 0xC7C7000ULL
#define MOD 0x3D3D000ULL
#define FG 0xF0F0000ULL /* gather_ptr */
#define FF 0xF0F1000ULL /* fill */
#define FS 0xF0F2000ULL /* copy_struct */

static void emit(uint8_t type, cucap_fb_ref body) {
  cucap_fb_record_start(B);
  cucap_fb_record_add_seq(B, ++SEQ);
  cucap_fb_record_add_t_exit(B, SEQ * 1000);
  cucap_fb_record_add_context(B, CTX);
  cucap_fb_record_add_body(B, type, body);
  tc_record_append(B, W);
}

static const char ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry gather_ptr(\n .param .u64 p,\n .param .u64 o,\n .param .u32 n\n)\n{\n ret;\n}\n"
    ".visible .entry fill(\n .param .u64 x,\n .param .f32 v,\n .param .u32 n\n)\n{\n ret;\n}\n"
    ".visible .entry copy_struct(\n .param .align 8 .b8 s[24]\n)\n{\n ret;\n}\n";

static void open_capture(const char *path) {
  W = tc_capture_open(path, &B);
  SEQ = 0;
  cucap_fb_context_start(B);
  cucap_fb_context_add_op(B, CUCAP_FB_CONTEXTOP_PRIMARYRETAIN);
  cucap_fb_context_add_handle(B, CTX);
  emit(CUCAP_FB_BODY_CONTEXT, cucap_fb_context_end(B));
  cucap_fb_hash128 img = tc_blob_put(W, ptx, sizeof ptx);
  cucap_fb_module_start(B);
  cucap_fb_module_add_op(B, CUCAP_FB_MODULEOP_LOAD);
  cucap_fb_module_add_handle(B, MOD);
  cucap_fb_module_add_image(B, &img);
  cucap_fb_module_add_format(B, CUCAP_FB_IMAGEFORMAT_PTX);
  emit(CUCAP_FB_BODY_MODULE, cucap_fb_module_end(B));
  const char *names[3] = {"gather_ptr", "fill", "copy_struct"};
  const uint64_t fh[3] = {FG, FF, FS};
  for (int i = 0; i < 3; i++) {
    cucap_fb_param_info pi[3] = {{0, 8}, {8, 8}, {16, 4}};
    if (i == 1)
      pi[1].size = 4, pi[2].offset = 12;
    if (i == 2)
      pi[0].size = 24;
    cucap_fb_ref pv = cucap_fbb_vector(B, pi, i == 2 ? 1 : 3, sizeof pi[0], 4);
    cucap_fb_ref nm = cucap_fbb_string(B, names[i], strlen(names[i]));
    cucap_fb_function_start(B);
    cucap_fb_function_add_handle(B, fh[i]);
    cucap_fb_function_add_module(B, MOD);
    cucap_fb_function_add_name(B, nm);
    cucap_fb_function_add_params(B, pv);
    cucap_fb_function_add_param_bytes(B, i == 2 ? 24 : i ? 16 : 20);
    emit(CUCAP_FB_BODY_FUNCTION, cucap_fb_function_end(B));
  }
}

static void close_capture(void) { tc_capture_close(&B, &W); }

static void alloc(int kind, uint64_t addr, uint64_t size) {
  cucap_fb_alloc_start(B);
  cucap_fb_alloc_add_kind(B, (uint8_t)kind);
  cucap_fb_alloc_add_address(B, addr);
  if (kind == CUCAP_FB_ALLOCKIND_HOSTALLOC)
    cucap_fb_alloc_add_host_address(B, addr);
  cucap_fb_alloc_add_size(B, size);
  emit(CUCAP_FB_BODY_ALLOC, cucap_fb_alloc_end(B));
}

static void copy(int kind, uint64_t dst, uint64_t src, const void *data, uint64_t n) {
  cucap_fb_hash128 h = tc_blob_put(W, data, n);
  cucap_fb_memcpy_start(B);
  cucap_fb_memcpy_add_kind(B, (uint8_t)kind);
  cucap_fb_memcpy_add_dst(B, dst);
  cucap_fb_memcpy_add_src(B, src);
  cucap_fb_memcpy_add_size(B, n);
  cucap_fb_memcpy_add_payload(B, &h);
  cucap_fb_memcpy_add_has_payload(B, 1);
  emit(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B));
}

static void launch(uint64_t fn, const void *args, size_t n) {
  cucap_fb_ref av = cucap_fbb_vector(B, args, n, 1, 1);
  cucap_fb_dim3 grid = {NE / 64, 1, 1}, block = {64, 1, 1};
  cucap_fb_launch_start(B);
  cucap_fb_launch_add_function(B, fn);
  cucap_fb_launch_add_grid(B, &grid);
  cucap_fb_launch_add_block(B, &block);
  cucap_fb_launch_add_args(B, av);
  emit(CUCAP_FB_BODY_LAUNCH, cucap_fb_launch_end(B));
}

/* 1: P (pointers) at pa, B (values) at ba, out at oa. */
static void write_linked(const char *path, uint64_t pa, uint64_t ba, uint64_t oa) {
  open_capture(path);
  alloc(CUCAP_FB_ALLOCKIND_DEVICE, ba, NE * 4);
  alloc(CUCAP_FB_ALLOCKIND_DEVICE, pa, NE * 8);
  alloc(CUCAP_FB_ALLOCKIND_DEVICE, oa, NE * 4);
  static float vals[NE], want[NE];
  static uint64_t ptrs[NE];
  for (int i = 0; i < NE; i++)
    vals[i] = (float)(i * 3 + 1);
  for (int i = 0; i < NE; i++) {
    int j = (i * 37 + 11) % NE; /* a permutation: each points elsewhere */
    ptrs[i] = ba + (uint64_t)j * 4;
    want[i] = vals[j];
  }
  copy(CUCAP_FB_MEMCPYKIND_HTOD, ba, 0x1000, vals, sizeof vals);
  copy(CUCAP_FB_MEMCPYKIND_HTOD, pa, 0x2000, ptrs, sizeof ptrs);
  uint8_t args[20];
  int n = NE;
  memcpy(args, &pa, 8);
  memcpy(args + 8, &oa, 8);
  memcpy(args + 16, &n, 4);
  launch(FG, args, sizeof args);
  copy(CUCAP_FB_MEMCPYKIND_DTOH, 0x3000, oa, want, sizeof want);
  close_capture();
}

/* 4: copy_struct({src, dst, NE}) from src to dst */
static void write_struct(const char *path, uint64_t src, uint64_t dst) {
  open_capture(path);
  alloc(CUCAP_FB_ALLOCKIND_DEVICE, src, NE * 4);
  alloc(CUCAP_FB_ALLOCKIND_DEVICE, dst, NE * 4);
  static float vals[NE];
  for (int i = 0; i < NE; i++)
    vals[i] = (float)(i * 5 + 2);
  copy(CUCAP_FB_MEMCPYKIND_HTOD, src, 0x1000, vals, sizeof vals);
  uint8_t args[24] = {0};
  int n = NE;
  memcpy(args, &src, 8);
  memcpy(args + 8, &dst, 8);
  memcpy(args + 16, &n, 4);
  launch(FS, args, sizeof args);
  copy(CUCAP_FB_MEMCPYKIND_DTOH, 0x3000, dst, vals, sizeof vals);
  close_capture();
}

/* 2: device buffer d and pinned host h in the same 32 MiB block; fill(h, 7)
 * through the recorded pointer, DtoD h -> d, DtoH d. */
static void write_pinned(const char *path, uint64_t d, uint64_t h) {
  open_capture(path);
  alloc(CUCAP_FB_ALLOCKIND_DEVICE, d, NE * 4);
  alloc(CUCAP_FB_ALLOCKIND_HOSTALLOC, h, NE * 4);
  uint8_t args[16];
  float v = 7.0f;
  int n = NE;
  memcpy(args, &h, 8);
  memcpy(args + 8, &v, 4);
  memcpy(args + 12, &n, 4);
  launch(FF, args, sizeof args);
  cucap_fb_memcpy_start(B);
  cucap_fb_memcpy_add_kind(B, CUCAP_FB_MEMCPYKIND_DTOD);
  cucap_fb_memcpy_add_dst(B, d);
  cucap_fb_memcpy_add_src(B, h);
  cucap_fb_memcpy_add_size(B, NE * 4);
  emit(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B));
  static float want[NE];
  for (int i = 0; i < NE; i++)
    want[i] = 7.0f;
  copy(CUCAP_FB_MEMCPYKIND_DTOH, 0x3000, d, want, sizeof want);
  close_capture();
}

static void opts(cucap_replay_options *o) {
  cucap_replay_options_init(o);
  cucap_verify_options_init(&vo);
  o->libcuda = mock;
  vo.mode = CUCAP_VERIFY_COPIES;
}

static int warned_in_use;
static void sink(cucap_log_level level, const char *msg, void *user) {
  (void)user;
  if (level == CUCAP_LOG_WARN && strstr(msg, "address already in use"))
    warned_in_use++;
}

int main(void) {
  const char *bd = getenv("CUCAP_BUILD_DIR");
  struct stat sb;
  snprintf(mock, sizeof mock, "%s/tests/mock/libcuda.so.1", bd ? bd : ".");
  if (!bd || stat(mock, &sb) != 0) {
    printf("test_replay_reloc: mock libcuda not built (%s); skipping\n", mock);
    return 77;
  }
  cucap_log_set_level(CUCAP_LOG_ERROR);
  cucap_replay_options o;
  cucap_replay_report rep;
  char *p = tu_tmp_path("replay_reloc");

  /* 1a: linked structure, everything relocated */
  const uint64_t PA = 0x7e3000000000ULL, BA = 0x7e3000200000ULL, OA = 0x7e3000400000ULL;
  write_linked(p, PA, BA, OA);
  opts(&o);
  o.relocate = 1;
  TU_CHECK(vrun(p, &o, &rep) == CUCAP_OK);
  checks += 4;
  TU_CHECK(rep.relocated_allocs == 3 && rep.patched_params == 2);
  TU_CHECK(rep.patched_pointers == NE);
  TU_CHECK(vr.copies_checked == 1 && vr.mismatches == 0 && vr.bytes_matched == NE * 4);
  TU_CHECK(exit_code == 0);
  if (rep.error[0] || vr.mismatches)
    cucap_replay_report_print(&rep, stderr, 0);

  /* 1b: only B relocated: its recorded super-range is taken in this process
   * (P and out stay at their addresses) */
  const uint64_t BB = 0x7e3100000000ULL;
  write_linked(p, PA, BB, OA);
  void *taken = mmap((void *)(uintptr_t)(BB + 0x100000), 4096, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  TU_REQUIRE(taken == (void *)(uintptr_t)(BB + 0x100000));
  opts(&o);
  TU_CHECK(vrun(p, &o, &rep) == CUCAP_OK);
  munmap(taken, 4096);
  checks += 3;
  TU_CHECK(rep.relocated_allocs == 1 && rep.fixed_ranges == 1);
  TU_CHECK(rep.patched_pointers == NE && rep.patched_params == 0);
  TU_CHECK(vr.mismatches == 0 && vr.bytes_matched == NE * 4 && exit_code == 0);
  if (rep.error[0] || vr.mismatches)
    cucap_replay_report_print(&rep, stderr, 0);

  /* 2: pinned host memory inside a device super-range */
  const uint64_t PD = 0x7e3200000000ULL, PH = 0x7e3200400000ULL;
  write_pinned(p, PD, PH);
  opts(&o);
  cucap_log_set_sink(sink, NULL);
  cucap_log_set_level(CUCAP_LOG_WARN);
  TU_CHECK(vrun(p, &o, &rep) == CUCAP_OK);
  cucap_log_set_sink(NULL, NULL);
  cucap_log_set_level(CUCAP_LOG_ERROR);
  checks += 3;
  TU_CHECK(rep.pinned_host_device_backed == 1 && rep.pinned_host_failed == 0);
  TU_CHECK(warned_in_use == 0);
  TU_CHECK(vr.mismatches == 0 && vr.bytes_matched == NE * 4 && exit_code == 0);
  if (rep.error[0] || vr.mismatches || warned_in_use)
    cucap_replay_report_print(&rep, stderr, 0);

  /* 3: one super-range of two used 32 MiB blocks; the second is taken */
  const uint64_t S0 = 0x7e3400000000ULL, S1 = S0 + (32ULL << 20);
  write_linked(p, S0, S1, S0 + 0x200000);
  taken = mmap((void *)(uintptr_t)(S1 + 0x800000), 4096, PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  TU_REQUIRE(taken == (void *)(uintptr_t)(S1 + 0x800000));
  opts(&o);
  TU_CHECK(vrun(p, &o, &rep) == CUCAP_OK);
  munmap(taken, 4096);
  checks += 3;
  TU_CHECK(rep.fixed_ranges == 1 && rep.relocated_allocs == 1); /* block 0 kept */
  TU_CHECK(rep.patched_pointers == NE);
  TU_CHECK(vr.mismatches == 0 && exit_code == 0);
  if (rep.error[0] || vr.mismatches)
    cucap_replay_report_print(&rep, stderr, 0);

  /* 4: pointers inside a struct parameter, everything relocated */
  write_struct(p, 0x7e3600000000ULL, 0x7e3600200000ULL);
  opts(&o);
  o.relocate = 1;
  TU_CHECK(vrun(p, &o, &rep) == CUCAP_OK);
  checks += 2;
  TU_CHECK(rep.relocated_allocs == 2 && rep.patched_params == 2);
  TU_CHECK(vr.mismatches == 0 && vr.bytes_matched == NE * 4 && exit_code == 0);
  if (rep.error[0] || vr.mismatches)
    cucap_replay_report_print(&rep, stderr, 0);

  unlink(p);
  free(p);
  return tu_finish("test_replay_reloc", checks);
}
