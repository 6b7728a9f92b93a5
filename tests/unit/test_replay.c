/* test_replay.c - unit tests of replay/ (cucap_replay.h).
 *
 * Builds small captures with the writer and the generated builders (a PTX
 * vec_add module, three device buffers at chosen addresses, HtoD, launch,
 * DtoH, exit snapshot) and replays them on the mock libcuda
 * ($CUCAP_BUILD_DIR/tests/mock/libcuda.so.1, which runs vec_add on the host
 * and honours fixed VMM addresses). Skips (77) when the mock is not built. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_reader.h"
#include "cucap_replay.h"
#include "cucap_schema.h"
#include "cucap_writer.h"
#include "testutil.h"

#define N 1024
#define CTX 0xC7C7000ULL
#define MOD 0x3D3D000ULL
#define FN 0xF0F0000ULL
#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer maps applications only from 0x7e8000000000 up */
#define ADDR0 0x7e9200000000ULL
#else
#define ADDR0 0x7e1200000000ULL
#endif
static const uint64_t ADDR[3] = {ADDR0, ADDR0 + 0x200000ULL, ADDR0 + 0x400000ULL};

static const char ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry vec_add(\n .param .u64 a,\n .param .u64 b,\n"
    " .param .u64 c,\n .param .u32 n\n)\n{\n ret;\n}\n";

static cucap_fbb *B;
static cucap_writer *W;
static uint64_t SEQ;
static int checks;

static void emit(uint8_t type, cucap_fb_ref body) {
  cucap_fb_record_start(B);
  cucap_fb_record_add_seq(B, ++SEQ);
  cucap_fb_record_add_t_enter(B, SEQ * 1000);
  cucap_fb_record_add_t_exit(B, SEQ * 1000 + 500);
  cucap_fb_record_add_context(B, CTX);
  cucap_fb_record_add_body(B, type, body);
  cucap_fb_ref r = cucap_fb_record_end(B);
  size_t sz = 0;
  const uint8_t *buf = cucap_fbb_finish(B, r, 1, &sz);
  TU_REQUIRE(buf && cucap_writer_append(W, buf, sz, NULL) == CUCAP_OK);
  cucap_fbb_reset(B);
}

static cucap_fb_hash128 blob(const void *p, size_t n) {
  cucap_hash128 h;
  TU_REQUIRE(cucap_writer_put_blob(W, p, n, &h) == CUCAP_OK);
  cucap_fb_hash128 x = {h.lo, h.hi};
  return x;
}

static long NLAUNCH = 1; /* launches of vec_add in write_capture */
enum { CAP_CORRUPT_DTOH = 1, CAP_HOSTFUNC = 2, CAP_SM100 = 4, CAP_GRAPH = 8,
       CAP_PINNED = 16 };
/* CAP_PINNED: a HostAlloc(DEVICEMAP) at a free address (placed by replay)
 * and a HostRegister over memory this process already uses (not placed:
 * the replay warns and goes on) */
#if defined(__SANITIZE_THREAD__)
#define PIN_FREE 0x7f1200001000ULL /* inside ThreadSanitizer's application window */
#else
#define PIN_FREE 0x6e1200001000ULL
#endif
static char pin_busy[8192];
#define GS 0x6160000ULL  /* CAP_GRAPH: the capturing stream */
#define GG 0x6170000ULL  /* its CUgraph */
#define GX 0x6180000ULL  /* the CUgraphExec */

static void emit_stream(uint8_t op, uint64_t graph) {
  cucap_fb_stream_start(B);
  cucap_fb_stream_add_op(B, op);
  cucap_fb_stream_add_handle(B, GS);
  if (graph)
    cucap_fb_stream_add_graph(B, graph);
  if (op == CUCAP_FB_STREAMOP_BEGINCAPTURE)
    cucap_fb_stream_add_capture_mode(B, 0); /* CU_STREAM_CAPTURE_MODE_GLOBAL */
  emit(CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(B));
}

static void emit_graph(uint8_t op, uint64_t graph, uint64_t exec, uint64_t st) {
  cucap_fb_graph_start(B);
  cucap_fb_graph_add_op(B, op);
  cucap_fb_graph_add_graph(B, graph);
  cucap_fb_graph_add_exec(B, exec);
  cucap_fb_graph_add_stream(B, st);
  emit(CUCAP_FB_BODY_GRAPH, cucap_fb_graph_end(B));
}
static const char ptx_sm100[] =
    ".version 8.0\n.target sm_100\n.address_size 64\n"
    ".visible .entry vec_add(\n .param .u64 a,\n .param .u64 b,\n"
    " .param .u64 c,\n .param .u32 n\n)\n{\n ret;\n}\n";

static void write_capture(const char *path, int flags) {
  B = cucap_fbb_create(0);
  TU_REQUIRE(B);
  cucap_fb_ref name = cucap_fbb_string(B, "Mock GPU", 8);
  cucap_fb_device_props_start(B);
  cucap_fb_device_props_add_ordinal(B, 0);
  cucap_fb_device_props_add_name(B, name);
  cucap_fb_device_props_add_cc_major(B, 9);
  cucap_fb_device_props_add_cc_minor(B, 0);
  cucap_fb_ref dev = cucap_fb_device_props_end(B);
  cucap_fb_ref devs = cucap_fbb_vector_refs(B, &dev, 1);
  cucap_fb_file_header_start(B);
  cucap_fb_file_header_add_format_major(B, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_format_minor(B, CUCAP_FORMAT_MINOR);
  cucap_fb_file_header_add_start_mono_ns(B, 1000000);
  cucap_fb_file_header_add_devices(B, devs);
  cucap_fb_ref hdr = cucap_fb_file_header_end(B);
  size_t hsz = 0;
  const uint8_t *hb = cucap_fbb_finish(B, hdr, 1, &hsz);
  TU_REQUIRE(hb);
  TU_REQUIRE(cucap_writer_create(path, NULL, hb, hsz, &W) == CUCAP_OK);
  cucap_fbb_reset(B);
  SEQ = 0;

  static float a[N], b[N], c[N];
  for (int i = 0; i < N; i++) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
    c[i] = a[i] + b[i];
  }
  if (flags & CAP_CORRUPT_DTOH)
    ((uint8_t *)c)[1234] ^= 0x40;

  cucap_fb_context_start(B);
  cucap_fb_context_add_op(B, CUCAP_FB_CONTEXTOP_PRIMARYRETAIN);
  cucap_fb_context_add_handle(B, CTX);
  emit(CUCAP_FB_BODY_CONTEXT, cucap_fb_context_end(B));

  cucap_fb_hash128 img = (flags & CAP_SM100) ? blob(ptx_sm100, sizeof ptx_sm100)
                                             : blob(ptx, sizeof ptx);
  cucap_fb_module_start(B);
  cucap_fb_module_add_op(B, CUCAP_FB_MODULEOP_LOAD);
  cucap_fb_module_add_kind(B, CUCAP_FB_MODULEKIND_MODULE);
  cucap_fb_module_add_handle(B, MOD);
  cucap_fb_module_add_image(B, &img);
  cucap_fb_module_add_image_size(B, sizeof ptx);
  cucap_fb_module_add_format(B, CUCAP_FB_IMAGEFORMAT_PTX);
  emit(CUCAP_FB_BODY_MODULE, cucap_fb_module_end(B));

  cucap_fb_param_info pi[4] = {{0, 8}, {8, 8}, {16, 8}, {24, 4}};
  cucap_fb_ref pv = cucap_fbb_vector(B, pi, 4, sizeof pi[0], 4);
  cucap_fb_ref fname = cucap_fbb_string(B, "vec_add", 7);
  cucap_fb_function_start(B);
  cucap_fb_function_add_kind(B, CUCAP_FB_FUNCTIONKIND_FUNCTION);
  cucap_fb_function_add_handle(B, FN);
  cucap_fb_function_add_module(B, MOD);
  cucap_fb_function_add_name(B, fname);
  cucap_fb_function_add_params(B, pv);
  cucap_fb_function_add_param_bytes(B, 28);
  emit(CUCAP_FB_BODY_FUNCTION, cucap_fb_function_end(B));

  for (int i = 0; i < 3; i++) {
    cucap_fb_alloc_start(B);
    cucap_fb_alloc_add_kind(B, CUCAP_FB_ALLOCKIND_DEVICE);
    cucap_fb_alloc_add_address(B, ADDR[i]);
    cucap_fb_alloc_add_size(B, N * sizeof(float));
    emit(CUCAP_FB_BODY_ALLOC, cucap_fb_alloc_end(B));
  }
  if (flags & CAP_PINNED) {
    cucap_fb_alloc_start(B);
    cucap_fb_alloc_add_kind(B, CUCAP_FB_ALLOCKIND_HOSTALLOC);
    cucap_fb_alloc_add_address(B, PIN_FREE);
    cucap_fb_alloc_add_host_address(B, PIN_FREE);
    cucap_fb_alloc_add_size(B, 3 * 4096 + 100);
    cucap_fb_alloc_add_flags(B, 0x02); /* CU_MEMHOSTALLOC_DEVICEMAP */
    emit(CUCAP_FB_BODY_ALLOC, cucap_fb_alloc_end(B));
    cucap_fb_alloc_start(B);
    cucap_fb_alloc_add_kind(B, CUCAP_FB_ALLOCKIND_HOSTREGISTER);
    cucap_fb_alloc_add_address(B, (uint64_t)(uintptr_t)pin_busy);
    cucap_fb_alloc_add_host_address(B, (uint64_t)(uintptr_t)pin_busy);
    cucap_fb_alloc_add_size(B, sizeof pin_busy);
    emit(CUCAP_FB_BODY_ALLOC, cucap_fb_alloc_end(B));
  }
  const float *src[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    cucap_fb_hash128 h = blob(src[i], sizeof a);
    cucap_fb_memcpy_start(B);
    cucap_fb_memcpy_add_kind(B, CUCAP_FB_MEMCPYKIND_HTOD);
    cucap_fb_memcpy_add_dst(B, ADDR[i]);
    cucap_fb_memcpy_add_src(B, 0x1000);
    cucap_fb_memcpy_add_size(B, sizeof a);
    cucap_fb_memcpy_add_payload(B, &h);
    cucap_fb_memcpy_add_has_payload(B, 1);
    emit(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B));
  }
  uint8_t args[28];
  memcpy(args, &ADDR[0], 8);
  memcpy(args + 8, &ADDR[1], 8);
  memcpy(args + 16, &ADDR[2], 8);
  int n = N;
  memcpy(args + 24, &n, 4);
  if (flags & CAP_GRAPH) { /* the launch is captured, then run as a graph */
    emit_stream(CUCAP_FB_STREAMOP_CREATE, 0);
    emit_stream(CUCAP_FB_STREAMOP_BEGINCAPTURE, 0);
  }
  for (long li = 0; li < NLAUNCH; li++) { /* --write-launches: speed runs */
    cucap_fb_ref av = cucap_fbb_vector(B, args, sizeof args, 1, 1);
    cucap_fb_dim3 grid = {N / 64, 1, 1}, block = {64, 1, 1};
    cucap_fb_launch_start(B);
    cucap_fb_launch_add_kind(B, CUCAP_FB_LAUNCHKIND_KERNEL);
    cucap_fb_launch_add_function(B, FN);
    cucap_fb_launch_add_grid(B, &grid);
    cucap_fb_launch_add_block(B, &block);
    cucap_fb_launch_add_args(B, av);
    cucap_fb_launch_add_launch_index(B, (uint64_t)li);
    if (flags & CAP_GRAPH)
      cucap_fb_launch_add_stream(B, GS);
    emit(CUCAP_FB_BODY_LAUNCH, cucap_fb_launch_end(B));
  }
  if (flags & CAP_GRAPH) {
    /* a DtoH copy inside the capture: runs at graph launch, unverifiable */
    cucap_fb_hash128 hz = blob(a, sizeof a);
    cucap_fb_memcpy_start(B);
    cucap_fb_memcpy_add_kind(B, CUCAP_FB_MEMCPYKIND_DTOH);
    cucap_fb_memcpy_add_dst(B, 0x3000);
    cucap_fb_memcpy_add_src(B, ADDR[0]);
    cucap_fb_memcpy_add_size(B, sizeof a);
    cucap_fb_memcpy_add_payload(B, &hz);
    cucap_fb_memcpy_add_has_payload(B, 1);
    cucap_fb_memcpy_add_async(B, 1);
    cucap_fb_memcpy_add_stream(B, GS);
    emit(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B));
    emit_stream(CUCAP_FB_STREAMOP_ENDCAPTURE, GG);
    emit_graph(CUCAP_FB_GRAPHOP_INSTANTIATE, GG, GX, 0);
    for (int i = 0; i < 3; i++)
      emit_graph(CUCAP_FB_GRAPHOP_LAUNCH, 0, GX, GS);
    cucap_fb_stream_start(B);
    cucap_fb_stream_add_op(B, CUCAP_FB_STREAMOP_SYNCHRONIZE);
    cucap_fb_stream_add_handle(B, GS);
    emit(CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(B));
    emit_graph(CUCAP_FB_GRAPHOP_EXECDESTROY, 0, GX, 0);
    emit_graph(CUCAP_FB_GRAPHOP_DESTROY, GG, 0, 0);
  }
  {
    /* --hash-launches record: content hash of c after launch 0 */
    cucap_hash128 hh = cucap_hash128_of(c, sizeof c);
    cucap_fb_hash128 fh = {hh.lo, hh.hi};
    cucap_fb_mem_region_start(B);
    cucap_fb_mem_region_add_address(B, ADDR[2]);
    cucap_fb_mem_region_add_size(B, sizeof c);
    cucap_fb_mem_region_add_hash(B, &fh);
    cucap_fb_ref lr = cucap_fb_mem_region_end(B);
    cucap_fb_ref lrs = cucap_fbb_vector_refs(B, &lr, 1);
    cucap_fb_launch_hash_start(B);
    cucap_fb_launch_hash_add_launch_index(B, 0);
    cucap_fb_launch_hash_add_launch_seq(B, SEQ);
    cucap_fb_launch_hash_add_regions(B, lrs);
    emit(CUCAP_FB_BODY_LAUNCHHASH, cucap_fb_launch_hash_end(B));
  }
  if (flags & CAP_HOSTFUNC) {
    cucap_fb_launch_start(B);
    cucap_fb_launch_add_kind(B, CUCAP_FB_LAUNCHKIND_HOSTFUNC);
    cucap_fb_launch_add_host_fn(B, 0x401000);
    emit(CUCAP_FB_BODY_LAUNCH, cucap_fb_launch_end(B));
  }
  cucap_fb_hash128 hc = blob(c, sizeof c);
  cucap_fb_memcpy_start(B);
  cucap_fb_memcpy_add_kind(B, CUCAP_FB_MEMCPYKIND_DTOH);
  cucap_fb_memcpy_add_dst(B, 0x2000);
  cucap_fb_memcpy_add_src(B, ADDR[2]);
  cucap_fb_memcpy_add_size(B, sizeof c);
  cucap_fb_memcpy_add_payload(B, &hc);
  cucap_fb_memcpy_add_has_payload(B, 1);
  emit(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B));

  /* exit snapshot of buffer a (unchanged by the kernel) */
  cucap_fb_hash128 ha = blob(a, sizeof a);
  cucap_fb_mem_region_start(B);
  cucap_fb_mem_region_add_address(B, ADDR[0]);
  cucap_fb_mem_region_add_size(B, sizeof a);
  cucap_fb_mem_region_add_data(B, &ha);
  cucap_fb_ref reg = cucap_fb_mem_region_end(B);
  cucap_fb_ref regs = cucap_fbb_vector_refs(B, &reg, 1);
  cucap_fb_snapshot_start(B);
  cucap_fb_snapshot_add_reason(B, CUCAP_FB_SNAPSHOTREASON_EXIT);
  cucap_fb_snapshot_add_regions(B, regs);
  emit(CUCAP_FB_BODY_SNAPSHOT, cucap_fb_snapshot_end(B));

  for (int i = 0; i < 3; i++) {
    cucap_fb_free_start(B);
    cucap_fb_free_add_kind(B, CUCAP_FB_ALLOCKIND_DEVICE);
    cucap_fb_free_add_address(B, ADDR[i]);
    emit(CUCAP_FB_BODY_FREE, cucap_fb_free_end(B));
  }
  TU_REQUIRE(cucap_writer_close(W) == CUCAP_OK);
  cucap_writer_destroy(W);
  W = NULL;
  cucap_fbb_destroy(B);
  B = NULL;
}

/* Capture 2: a library (cuLibraryLoadData) kernel launched with
 * cuLaunchKernelEx on a created stream, the per-thread default stream
 * (Ptsz), an event dependency, async memset, and 2D copies with pitch. */
#define LIB 0x11B0000ULL
#define KER 0x4E40000ULL
#define S1 0x5150000ULL
#define S2 0x5250000ULL
#define E1 0xE1E0000ULL
#define W2 256   /* bytes per row */
#define H2 4
#define P2 512   /* pitch */
static const char ptx2[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry scale(\n .param .u64 x,\n .param .f32 s,\n .param .u32 n\n)\n"
    "{\n ret;\n}\n";

static void emit_v(uint8_t type, cucap_fb_ref body, int variant) {
  cucap_fb_record_start(B);
  cucap_fb_record_add_seq(B, ++SEQ);
  cucap_fb_record_add_t_exit(B, SEQ * 1000 + 500);
  cucap_fb_record_add_variant(B, (uint8_t)variant);
  cucap_fb_record_add_body(B, type, body);
  cucap_fb_ref r = cucap_fb_record_end(B);
  size_t sz = 0;
  const uint8_t *buf = cucap_fbb_finish(B, r, 1, &sz);
  TU_REQUIRE(buf && cucap_writer_append(W, buf, sz, NULL) == CUCAP_OK);
  cucap_fbb_reset(B);
}

static void write_capture2(const char *path) {
  B = cucap_fbb_create(0);
  cucap_fb_file_header_start(B);
  cucap_fb_file_header_add_format_major(B, CUCAP_FORMAT_MAJOR);
  cucap_fb_ref hdr = cucap_fb_file_header_end(B);
  size_t hsz = 0;
  const uint8_t *hb = cucap_fbb_finish(B, hdr, 1, &hsz);
  TU_REQUIRE(hb && cucap_writer_create(path, NULL, hb, hsz, &W) == CUCAP_OK);
  cucap_fbb_reset(B);
  SEQ = 0;
  cucap_fb_context_start(B);
  cucap_fb_context_add_op(B, CUCAP_FB_CONTEXTOP_PRIMARYRETAIN);
  cucap_fb_context_add_handle(B, CTX);
  emit_v(CUCAP_FB_BODY_CONTEXT, cucap_fb_context_end(B), 0);
  cucap_fb_context_start(B);
  cucap_fb_context_add_op(B, CUCAP_FB_CONTEXTOP_SETCURRENT);
  cucap_fb_context_add_handle(B, CTX);
  emit_v(CUCAP_FB_BODY_CONTEXT, cucap_fb_context_end(B), 0);

  cucap_fb_hash128 img = blob(ptx2, sizeof ptx2);
  cucap_fb_module_start(B);
  cucap_fb_module_add_op(B, CUCAP_FB_MODULEOP_LOAD);
  cucap_fb_module_add_kind(B, CUCAP_FB_MODULEKIND_LIBRARY);
  cucap_fb_module_add_handle(B, LIB);
  cucap_fb_module_add_image(B, &img);
  cucap_fb_module_add_format(B, CUCAP_FB_IMAGEFORMAT_PTX);
  emit_v(CUCAP_FB_BODY_MODULE, cucap_fb_module_end(B), 0);
  cucap_fb_param_info pi[3] = {{0, 8}, {8, 4}, {12, 4}};
  cucap_fb_ref pv = cucap_fbb_vector(B, pi, 3, sizeof pi[0], 4);
  cucap_fb_ref fname = cucap_fbb_string(B, "scale", 5);
  cucap_fb_function_start(B);
  cucap_fb_function_add_kind(B, CUCAP_FB_FUNCTIONKIND_KERNEL);
  cucap_fb_function_add_handle(B, KER);
  cucap_fb_function_add_module(B, LIB);
  cucap_fb_function_add_name(B, fname);
  cucap_fb_function_add_params(B, pv);
  cucap_fb_function_add_param_bytes(B, 16);
  emit_v(CUCAP_FB_BODY_FUNCTION, cucap_fb_function_end(B), 0);

  uint64_t sh[2] = {S1, S2};
  for (int i = 0; i < 2; i++) {
    cucap_fb_stream_start(B);
    cucap_fb_stream_add_op(B, CUCAP_FB_STREAMOP_CREATE);
    cucap_fb_stream_add_handle(B, sh[i]);
    cucap_fb_stream_add_flags(B, 1);
    emit_v(CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(B), 0);
  }
  cucap_fb_event_start(B);
  cucap_fb_event_add_op(B, CUCAP_FB_EVENTOP_CREATE);
  cucap_fb_event_add_handle(B, E1);
  emit_v(CUCAP_FB_BODY_EVENT, cucap_fb_event_end(B), 0);
  for (int i = 0; i < 2; i++) {
    cucap_fb_alloc_start(B);
    cucap_fb_alloc_add_kind(B, i ? CUCAP_FB_ALLOCKIND_PITCH : CUCAP_FB_ALLOCKIND_ASYNC);
    cucap_fb_alloc_add_address(B, ADDR[i]);
    cucap_fb_alloc_add_size(B, i ? P2 * H2 : N * 4);
    cucap_fb_alloc_add_pitch(B, i ? P2 : 0);
    cucap_fb_alloc_add_height(B, i ? H2 : 0);
    emit_v(CUCAP_FB_BODY_ALLOC, cucap_fb_alloc_end(B), 0);
  }
  /* a = 1.0f (memset on S1), event, S2 waits, scale by 3 on S2 (KernelEx) */
  cucap_fb_memset_start(B);
  cucap_fb_memset_add_dst(B, ADDR[0]);
  cucap_fb_memset_add_value(B, 0x3f800000u);
  cucap_fb_memset_add_elem_size(B, 4);
  cucap_fb_memset_add_count(B, N);
  cucap_fb_memset_add_height(B, 1);
  cucap_fb_memset_add_async(B, 1);
  cucap_fb_memset_add_stream(B, S1);
  emit_v(CUCAP_FB_BODY_MEMSET, cucap_fb_memset_end(B), 0);
  cucap_fb_event_start(B);
  cucap_fb_event_add_op(B, CUCAP_FB_EVENTOP_RECORD);
  cucap_fb_event_add_handle(B, E1);
  cucap_fb_event_add_stream(B, S1);
  emit_v(CUCAP_FB_BODY_EVENT, cucap_fb_event_end(B), 0);
  cucap_fb_stream_start(B);
  cucap_fb_stream_add_op(B, CUCAP_FB_STREAMOP_WAITEVENT);
  cucap_fb_stream_add_handle(B, S2);
  cucap_fb_stream_add_event(B, E1);
  emit_v(CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(B), 0);
  uint8_t args[16];
  float f = 3.0f;
  int n = N;
  memcpy(args, &ADDR[0], 8);
  memcpy(args + 8, &f, 4);
  memcpy(args + 12, &n, 4);
  cucap_fb_ref av = cucap_fbb_vector(B, args, sizeof args, 1, 1);
  cucap_fb_dim3 grid = {N / 128, 1, 1}, block = {128, 1, 1};
  cucap_fb_launch_start(B);
  cucap_fb_launch_add_kind(B, CUCAP_FB_LAUNCHKIND_KERNELEX);
  cucap_fb_launch_add_function(B, KER);
  cucap_fb_launch_add_grid(B, &grid);
  cucap_fb_launch_add_block(B, &block);
  cucap_fb_launch_add_stream(B, S2);
  cucap_fb_launch_add_args(B, av);
  emit_v(CUCAP_FB_BODY_LAUNCH, cucap_fb_launch_end(B), 0);
  /* 2D HtoD into the pitched buffer on the per-thread stream, 2D DtoH back */
  static uint8_t rows[W2 * H2];
  for (int i = 0; i < W2 * H2; i++)
    rows[i] = (uint8_t)(i * 7 + 1);
  for (int dir = 0; dir < 2; dir++) {
    cucap_fb_hash128 h = blob(rows, sizeof rows);
    cucap_fb_copy_geometry_start(B);
    cucap_fb_copy_geometry_add_width_bytes(B, W2);
    cucap_fb_copy_geometry_add_height(B, H2);
    cucap_fb_copy_geometry_add_depth(B, 1);
    if (dir == 0) {
      cucap_fb_copy_geometry_add_dst_pitch(B, P2);
      cucap_fb_copy_geometry_add_src_pitch(B, W2);
    } else {
      cucap_fb_copy_geometry_add_src_pitch(B, P2);
      cucap_fb_copy_geometry_add_dst_pitch(B, W2);
    }
    cucap_fb_ref geo = cucap_fb_copy_geometry_end(B);
    cucap_fb_memcpy_start(B);
    cucap_fb_memcpy_add_kind(B, dir ? CUCAP_FB_MEMCPYKIND_DTOH : CUCAP_FB_MEMCPYKIND_HTOD);
    cucap_fb_memcpy_add_dst(B, dir ? 0x3000 : ADDR[1]);
    cucap_fb_memcpy_add_src(B, dir ? ADDR[1] : 0x3000);
    cucap_fb_memcpy_add_size(B, sizeof rows);
    cucap_fb_memcpy_add_async(B, 1);
    cucap_fb_memcpy_add_payload(B, &h);
    cucap_fb_memcpy_add_has_payload(B, 1);
    cucap_fb_memcpy_add_geometry(B, geo);
    emit_v(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B), CUCAP_FB_CALLVARIANT_PTSZ);
  }
  /* DtoH of a (3.0f each) on S2, Unified kind (direction from addresses) */
  static float a[N];
  for (int i = 0; i < N; i++)
    a[i] = 3.0f;
  cucap_fb_hash128 ha = blob(a, sizeof a);
  cucap_fb_memcpy_start(B);
  cucap_fb_memcpy_add_kind(B, CUCAP_FB_MEMCPYKIND_UNIFIED);
  cucap_fb_memcpy_add_dst(B, 0x4000);
  cucap_fb_memcpy_add_src(B, ADDR[0]);
  cucap_fb_memcpy_add_size(B, sizeof a);
  cucap_fb_memcpy_add_async(B, 1);
  cucap_fb_memcpy_add_stream(B, S2);
  cucap_fb_memcpy_add_payload(B, &ha);
  cucap_fb_memcpy_add_has_payload(B, 1);
  emit_v(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B), 0);
  for (int i = 0; i < 2; i++) {
    cucap_fb_stream_start(B);
    cucap_fb_stream_add_op(B, CUCAP_FB_STREAMOP_DESTROY);
    cucap_fb_stream_add_handle(B, sh[i]);
    emit_v(CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(B), 0);
  }
  TU_REQUIRE(cucap_writer_close(W) == CUCAP_OK);
  cucap_writer_destroy(W);
  W = NULL;
  cucap_fbb_destroy(B);
  B = NULL;
}

static char mock[4096];

/* log sink of the CAP_PINNED case: keeps the pinned-host summary line and
 * counts the warnings about pinned host memory */
static char pin_line[512];
static int pin_warns;
static void pin_sink(cucap_log_level level, const char *msg, void *user) {
  (void)user;
  if (level == CUCAP_LOG_WARN && strstr(msg, "pinned host memory"))
    pin_warns++;
  if (strstr(msg, "pinned host range(s)"))
    snprintf(pin_line, sizeof pin_line, "%s", msg);
}

static void opts(cucap_replay_options *o) {
  cucap_replay_options_init(o);
  o->libcuda = mock;
  o->verify = CUCAP_REPLAY_VERIFY_COPIES;
}

/* Helper mode for tests/integration/test_replay_mock.sh:
 *   test_replay --flip-dtoh IN OUT OFFSET
 * copies capture IN to OUT, flipping one byte (at OFFSET, clamped) of the
 * payload blob of the first DtoH copy that has one. The blob keeps its hash
 * (the reader does not re-hash blobs), so only --verify can notice. Prints
 * "flipped <offset> seq <seq>". */
static int flip_dtoh(const char *in, const char *out, uint64_t off) {
  cucap_reader *r = NULL;
  char msg[256];
  if (cucap_reader_open(in, NULL, &r, msg, sizeof msg) != CUCAP_OK) {
    fprintf(stderr, "flip: %s\n", msg);
    return 2;
  }
  const void *rec, *buf;
  size_t sz;
  cucap_hash128 target = {0, 0};
  uint64_t seq = 0;
  int found = 0;
  while (!found && cucap_reader_next(r, &rec, &buf, &sz) == CUCAP_OK) {
    const cucap_fb_memcpy *c = cucap_fb_record_body_as_memcpy(rec);
    if (c && cucap_fb_memcpy_kind(c) == CUCAP_FB_MEMCPYKIND_DTOH &&
        cucap_fb_memcpy_has_payload(c) && cucap_fb_memcpy_payload(c) &&
        cucap_fb_memcpy_size(c) > 0) {
      target.lo = cucap_fb_memcpy_payload(c)->lo;
      target.hi = cucap_fb_memcpy_payload(c)->hi;
      seq = cucap_fb_record_seq(rec);
      found = 1;
    }
  }
  if (!found) {
    fprintf(stderr, "flip: no DtoH copy with a payload in %s\n", in);
    cucap_reader_destroy(r);
    return 2;
  }
  size_t hsz = 0;
  const void *hdr = cucap_reader_header_buffer(r, &hsz);
  cucap_writer *w = NULL;
  if (cucap_writer_create(out, NULL, hdr, hsz, &w) != CUCAP_OK) {
    cucap_reader_destroy(r);
    return 2;
  }
  int rc = 0;
  for (size_t i = 0; i < cucap_reader_blob_count(r) && !rc; i++) {
    cucap_hash128 h;
    uint64_t bs = 0;
    if (cucap_reader_blob_get(r, i, &h, &bs) != CUCAP_OK)
      continue;
    uint8_t *d = malloc(bs ? bs : 1);
    if (!d || cucap_reader_blob_read(r, h, d, bs) != CUCAP_OK) {
      free(d);
      rc = 2;
      break;
    }
    if (cucap_hash128_eq(h, target) && bs) {
      if (off >= bs)
        off = bs - 1;
      d[off] ^= 0x01;
      printf("flipped %llu seq %llu\n", (unsigned long long)off,
             (unsigned long long)seq);
    }
    if (cucap_writer_put_blob_hashed(w, d, bs, h) != CUCAP_OK)
      rc = 2;
    free(d);
  }
  cucap_reader_rewind(r);
  while (!rc && cucap_reader_next(r, &rec, &buf, &sz) == CUCAP_OK)
    if (cucap_writer_append(w, buf, sz, NULL) != CUCAP_OK)
      rc = 2;
  if (cucap_writer_close(w) != CUCAP_OK)
    rc = 2;
  cucap_writer_destroy(w);
  cucap_reader_destroy(r);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--write-capture")) { /* fuzz seeds */
    write_capture(argv[2], CAP_HOSTFUNC);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "--write-launches")) { /* profiling */
    NLAUNCH = atol(argv[3]);
    write_capture(argv[2], 0);
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "--write-capture2")) {
    write_capture2(argv[2]);
    return 0;
  }
  if (argc == 5 && !strcmp(argv[1], "--flip-dtoh"))
    return flip_dtoh(argv[2], argv[3], strtoull(argv[4], NULL, 0));
  const char *bd = getenv("CUCAP_BUILD_DIR");
  struct stat sb;
  snprintf(mock, sizeof mock, "%s/tests/mock/libcuda.so.1", bd ? bd : ".");
  if (!bd || stat(mock, &sb) != 0) {
    printf("test_replay: mock libcuda not built (%s); skipping\n", mock);
    return 77;
  }
  cucap_log_set_level(CUCAP_LOG_ERROR);
  char *good = tu_tmp_path("replay_good"), *bad = tu_tmp_path("replay_bad");
  char *hf = tu_tmp_path("replay_hostfunc"), *tr = tu_tmp_path("replay_trunc");
  write_capture(good, 0);
  write_capture(bad, CAP_CORRUPT_DTOH);
  write_capture(hf, CAP_HOSTFUNC);
  cucap_replay_options o;
  cucap_replay_report rep;

  /* 1: fixed-address replay, verified */
  opts(&o);
  TU_CHECK(cucap_replay_run(good, &o, &rep) == CUCAP_OK);
  cucap_replay_report_print(&rep, stderr, 0);
  checks += 7;
  TU_CHECK(rep.exit_code == 0);
  TU_CHECK(rep.fixed_address == 1);
  TU_CHECK(rep.launches == 1);
  TU_CHECK(rep.copies_checked == 1 && rep.snapshot_regions_checked == 1);
  TU_CHECK(rep.bytes_checked == 2 * N * 4 && rep.bytes_matched == rep.bytes_checked);
  TU_CHECK(rep.mismatches == 0 && rep.skipped == 0);
  if (rep.error[0])
    fprintf(stderr, "error: %s\n", rep.error);

  /* 1b: stream capture -> graph -> 3 graph launches, with the mock ignoring
   * hints that are not 32 MiB-aligned like the real driver (placement from
   * a base that is not 32 MiB-aligned: tests/integration/test_replay_mock.sh) */
  {
    char *gp = tu_tmp_path("replay_graph");
    write_capture(gp, CAP_GRAPH);
    setenv("CUCAP_MOCK_STRICT_VA", "1", 1);
    opts(&o);
    TU_CHECK(cucap_replay_run(gp, &o, &rep) == CUCAP_OK);
    unsetenv("CUCAP_MOCK_STRICT_VA");
    checks += 5;
    TU_CHECK(rep.exit_code == 0);
    TU_CHECK(rep.fixed_address == 1 && rep.fixed_ranges == 1);
    TU_CHECK(rep.launches == 3); /* graph launches; the captured one is not run */
    TU_CHECK(rep.copies_checked == 1 && rep.copies_unverifiable >= 1);
    TU_CHECK(rep.mismatches == 0 && rep.skipped == 0);
    if (rep.error[0])
      fprintf(stderr, "error: %s\n", rep.error);
    remove(gp);
    free(gp);
  }

  /* 2: forced relocation: pointer parameters get patched */
  opts(&o);
  o.relocate = 1;
  o.loops = 2;
  TU_CHECK(cucap_replay_run(good, &o, &rep) == CUCAP_OK);
  checks += 5;
  TU_CHECK(rep.fixed_address == 0 && rep.relocated_allocs == 6);
  TU_CHECK(rep.patched_params == 6);
  TU_CHECK(rep.loops == 2 && rep.launches == 2);
  TU_CHECK(rep.mismatches == 0);
  if (rep.error[0])
    fprintf(stderr, "error: %s\n", rep.error);

  /* 3: a flipped payload byte is found, with its offset */
  opts(&o);
  TU_CHECK(cucap_replay_run(bad, &o, &rep) == CUCAP_ERR_MISMATCH);
  checks += 3;
  TU_CHECK(rep.exit_code == CUCAP_REPLAY_EXIT_MISMATCH);
  TU_CHECK(strstr(rep.first_mismatch, "offset 1234") != NULL);
  /* --verify=launch names the first divergent kernel */
  o.verify = CUCAP_REPLAY_VERIFY_LAUNCH;
  checks += 3;
  TU_CHECK(cucap_replay_run(bad, &o, &rep) == CUCAP_ERR_MISMATCH);
  TU_CHECK(rep.launch_hashes_checked == 1);
  TU_CHECK(strstr(rep.first_mismatch, "launch 0 (vec_add)") != NULL);
  o.verify = CUCAP_REPLAY_VERIFY_LAUNCH;
  checks += 2;
  TU_CHECK(cucap_replay_run(good, &o, &rep) == CUCAP_OK);
  TU_CHECK(rep.launch_hashes_checked == 1 && rep.mismatches == 0);
  /* without --verify the same capture replays fine */
  o.verify = CUCAP_REPLAY_VERIFY_NONE;
  checks++;
  TU_CHECK(cucap_replay_run(bad, &o, &rep) == CUCAP_OK);

  /* 4: host functions are skipped and named, refused with --strict */
  opts(&o);
  checks += 4;
  TU_CHECK(cucap_replay_run(hf, &o, &rep) == CUCAP_OK);
  TU_CHECK(rep.skipped == 1 && rep.skip_kinds == 1 &&
           strcmp(rep.skip_name[0], "cuLaunchHostFunc") == 0);
  o.strict = 1;
  TU_CHECK(cucap_replay_run(hf, &o, &rep) != CUCAP_OK);
  TU_CHECK(rep.exit_code == CUCAP_REPLAY_EXIT_INPUT && rep.launches == 0);

  /* 5: truncated capture: clear error, exit 3; --allow-partial runs */
  {
    FILE *in = fopen(good, "rb"), *out = fopen(tr, "wb");
    TU_REQUIRE(in && out);
    fseek(in, 0, SEEK_END);
    long sz = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = malloc((size_t)sz);
    TU_REQUIRE(buf && fread(buf, 1, (size_t)sz, in) == (size_t)sz);
    fwrite(buf, 1, (size_t)sz * 2 / 3, out);
    free(buf);
    fclose(in);
    fclose(out);
  }
  opts(&o);
  checks += 3;
  TU_CHECK(cucap_replay_run(tr, &o, &rep) != CUCAP_OK);
  TU_CHECK(rep.exit_code == CUCAP_REPLAY_EXIT_INPUT && rep.error[0]);
  fprintf(stderr, "truncated: %s\n", rep.error);
  o.allow_partial = 1;
  cucap_replay_run(tr, &o, &rep); /* must not crash */
  TU_CHECK(rep.partial == 1 || rep.exit_code == CUCAP_REPLAY_EXIT_INPUT);

  /* 5b: no code for this GPU (PTX for sm_100 only; the mock is sm_90) */
  {
    char *sm = tu_tmp_path("replay_sm100");
    write_capture(sm, CAP_SM100);
    opts(&o);
    checks += 2;
    TU_CHECK(cucap_replay_run(sm, &o, &rep) == CUCAP_ERR_ENV);
    TU_CHECK(rep.exit_code == CUCAP_REPLAY_EXIT_INPUT &&
             strstr(rep.error, "no code for this GPU (sm_90)") && rep.launches == 0);
    fprintf(stderr, "sm_100 image: %s\n", rep.error);
    unlink(sm);
    free(sm);
  }

  /* 5b: pinned host allocations re-created at their recorded addresses:
   * one placed, one whose address is taken here (warned once, replay goes
   * on and still verifies) */
  {
    char *pp = tu_tmp_path("replay_pinned");
    write_capture(pp, CAP_PINNED);
    pin_line[0] = 0;
    pin_warns = 0;
    cucap_log_set_level(CUCAP_LOG_INFO);
    cucap_log_sink old_sink = cucap_log_set_sink(pin_sink, NULL);
    opts(&o);
    cucap_status pst = cucap_replay_run(pp, &o, &rep);
    cucap_log_set_sink(old_sink, NULL);
    cucap_log_set_level(CUCAP_LOG_ERROR);
    checks += 4;
    TU_CHECK(pst == CUCAP_OK && rep.mismatches == 0);
    TU_CHECK(strstr(pin_line, "1 pinned host range(s) at recorded addresses, "
                              "1 not placed") != NULL);
    TU_CHECK(pin_warns == 1);
    /* released at the end: the address is free again */
    void *m = mmap((void *)(uintptr_t)(PIN_FREE & ~0xfffULL), 4096,
                   PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                   -1, 0);
    TU_CHECK(m == (void *)(uintptr_t)(PIN_FREE & ~0xfffULL));
    if (m != MAP_FAILED)
      munmap(m, 4096);
    if (!strstr(pin_line, "1 not placed"))
      fprintf(stderr, "pinned: \"%s\", %d warning(s)\n", pin_line, pin_warns);
    unlink(pp);
    free(pp);
  }

  /* 6: missing file / no driver */
  opts(&o);
  checks += 2;
  TU_CHECK(cucap_replay_run("/nonexistent/x.fb", &o, &rep) != CUCAP_OK && rep.error[0]);
  o.libcuda = "/nonexistent/libcuda.so.1";
  TU_CHECK(cucap_replay_run(good, &o, &rep) == CUCAP_ERR_ENV &&
           rep.exit_code == CUCAP_REPLAY_EXIT_INPUT);

  /* 7: library kernel via cuLaunchKernelEx, streams/events, memset, 2D
   * copies on the per-thread stream, Unified DtoH */
  {
    char *c2 = tu_tmp_path("replay_cap2");
    write_capture2(c2);
    opts(&o);
    checks += 4;
    TU_CHECK(cucap_replay_run(c2, &o, &rep) == CUCAP_OK);
    TU_CHECK(rep.launches == 1 && rep.skipped == 0);
    TU_CHECK(rep.copies_checked == 2 && rep.mismatches == 0);
    TU_CHECK(rep.bytes_matched == W2 * H2 + N * 4);
    if (rep.error[0] || rep.mismatches || rep.skipped)
      cucap_replay_report_print(&rep, stderr, 0);
    opts(&o);
    o.relocate = 1;
    o.sync_each = 1;
    checks += 2;
    TU_CHECK(cucap_replay_run(c2, &o, &rep) == CUCAP_OK);
    TU_CHECK(rep.patched_params == 1 && rep.mismatches == 0);
    unlink(c2);
    free(c2);
  }

  /* report printers */
  FILE *dn = fopen("/dev/null", "w");
  if (dn) {
    cucap_replay_report_print(&rep, dn, 0);
    cucap_replay_report_print(&rep, dn, 1);
    fclose(dn);
  }
  unlink(good);
  unlink(bad);
  unlink(hf);
  unlink(tr);
  free(good);
  free(bad);
  free(hf);
  free(tr);
  return tu_finish("test_replay", checks);
}
