/* replay_testcaps.c - builds the captures of replay_testcaps.h. */
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
#include "replay_testcaps.h"
#include "testutil.h"

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

static void emit(uint8_t type, cucap_fb_ref body) {
  cucap_fb_record_start(B);
  cucap_fb_record_add_seq(B, ++SEQ);
  cucap_fb_record_add_t_enter(B, SEQ * 1000);
  cucap_fb_record_add_t_exit(B, SEQ * 1000 + 500);
  cucap_fb_record_add_context(B, CTX);
  cucap_fb_record_add_body(B, type, body);
  tc_record_append(B, W);
}

/* A call recorded without a body: Record.call and Record.args only. */
static void emit_call(uint32_t cbid, const uint64_t *args, size_t n) {
  cucap_fb_ref av = cucap_fbb_vector(B, args, n, 8, 8);
  cucap_fb_record_start(B);
  cucap_fb_record_add_seq(B, ++SEQ);
  cucap_fb_record_add_call(B, cbid);
  cucap_fb_record_add_args(B, av);
  cucap_fb_record_add_context(B, CTX);
  tc_record_append(B, W);
}

static cucap_fb_hash128 blob(const void *p, size_t n) { return tc_blob_put(W, p, n); }

long NLAUNCH = 1; /* launches of vec_add in write_capture */
const void *TC_IMAGE;
size_t TC_IMAGE_SIZE;
/* CAP_PINNED: a HostAlloc(DEVICEMAP) at a free address (placed by replay)
 * and a HostRegister over memory this process already uses (not placed:
 * the replay warns and goes on) */
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

void write_capture(const char *path, int flags) {
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
  W = tc_capture_create(path, B, cucap_fb_file_header_end(B));
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

  cucap_fb_hash128 img = TC_IMAGE               ? blob(TC_IMAGE, TC_IMAGE_SIZE)
                         : (flags & CAP_SM100) ? blob(ptx_sm100, sizeof ptx_sm100)
                                               : blob(ptx, sizeof ptx);
  cucap_fb_module_start(B);
  cucap_fb_module_add_op(B, CUCAP_FB_MODULEOP_LOAD);
  cucap_fb_module_add_kind(B, CUCAP_FB_MODULEKIND_MODULE);
  cucap_fb_module_add_handle(B, MOD);
  cucap_fb_module_add_image(B, &img);
  cucap_fb_module_add_image_size(B, TC_IMAGE ? TC_IMAGE_SIZE : sizeof ptx);
  cucap_fb_module_add_format(B, TC_IMAGE ? CUCAP_FB_IMAGEFORMAT_FATBIN
                                         : CUCAP_FB_IMAGEFORMAT_PTX);
  emit(CUCAP_FB_BODY_MODULE, cucap_fb_module_end(B));

  if (flags & CAP_ATTR_LATE) {
    uint64_t at[3] = {FN, 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */, SMEM_BIG};
    emit_call(481 /* CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute */, at, 3);
  }
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
    if (flags & CAP_ATTR_LATE)
      cucap_fb_launch_add_shared_mem(B, SMEM_BIG);
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
  tc_capture_close(&B, &W);
}

/* Capture 2: a library (cuLibraryLoadData) kernel launched with
 * cuLaunchKernelEx on a created stream, the per-thread default stream
 * (Ptsz), an event dependency, async memset, and 2D copies with pitch. */
#define LIB 0x11B0000ULL
#define KER 0x4E40000ULL
#define S1 0x5150000ULL
#define S2 0x5250000ULL
#define E1 0xE1E0000ULL
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
  tc_record_append(B, W);
}

void write_capture2(const char *path) {
  B = cucap_fbb_create(0);
  TU_REQUIRE(B);
  cucap_fb_file_header_start(B);
  cucap_fb_file_header_add_format_major(B, CUCAP_FORMAT_MAJOR);
  W = tc_capture_create(path, B, cucap_fb_file_header_end(B));
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
  tc_capture_close(&B, &W);
}


/* Capture 3 (write_capture_nondet): a PTX module with vec_add and stamp;
 * c = a + b (launch 0), a Manual snapshot of b (checked there, before stamp
 * overwrites b), stamp into b (launch 1: clock-like, different in every
 * replay), DtoH of b (nondeterministic), DtoH of c, an AfterLaunch snapshot
 * of c naming launch 2 that the file holds BEFORE launch 2 (as the recorder
 * emits them from the launch's post hook): c = a + a there, not a + b;
 * LaunchHash records of launches 0 (c) and 1 (b); exit snapshot of a. */
#define FN2 0xF0F1000ULL
static const char ptx3[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry vec_add(\n .param .u64 a,\n .param .u64 b,\n"
    " .param .u64 c,\n .param .u32 n\n)\n{\n ret;\n}\n"
    ".visible .entry stamp(\n .param .u64 out,\n .param .u32 n\n)\n{\n ret;\n}\n";

static void nd_region_snapshot(int reason, uint64_t li, uint64_t addr,
                               const void *data, size_t n) {
  cucap_fb_hash128 h = blob(data, n);
  cucap_fb_mem_region_start(B);
  cucap_fb_mem_region_add_address(B, addr);
  cucap_fb_mem_region_add_size(B, n);
  cucap_fb_mem_region_add_data(B, &h);
  cucap_fb_ref reg = cucap_fb_mem_region_end(B);
  cucap_fb_ref regs = cucap_fbb_vector_refs(B, &reg, 1);
  cucap_fb_snapshot_start(B);
  cucap_fb_snapshot_add_reason(B, (uint8_t)reason);
  cucap_fb_snapshot_add_launch_index(B, li);
  cucap_fb_snapshot_add_regions(B, regs);
  emit(CUCAP_FB_BODY_SNAPSHOT, cucap_fb_snapshot_end(B));
}

static void nd_launch_hash(uint64_t li, uint64_t addr, const void *data, size_t n) {
  cucap_hash128 hh = cucap_hash128_of(data, n);
  cucap_fb_hash128 fh = {hh.lo, hh.hi};
  cucap_fb_mem_region_start(B);
  cucap_fb_mem_region_add_address(B, addr);
  cucap_fb_mem_region_add_size(B, n);
  cucap_fb_mem_region_add_hash(B, &fh);
  cucap_fb_ref lr = cucap_fb_mem_region_end(B);
  cucap_fb_ref lrs = cucap_fbb_vector_refs(B, &lr, 1);
  cucap_fb_launch_hash_start(B);
  cucap_fb_launch_hash_add_launch_index(B, li);
  cucap_fb_launch_hash_add_launch_seq(B, SEQ);
  cucap_fb_launch_hash_add_regions(B, lrs);
  emit(CUCAP_FB_BODY_LAUNCHHASH, cucap_fb_launch_hash_end(B));
}

static void nd_launch(uint64_t fn, uint64_t li, const void *args, size_t n) {
  cucap_fb_ref av = cucap_fbb_vector(B, args, n, 1, 1);
  cucap_fb_dim3 grid = {N / 64, 1, 1}, block = {64, 1, 1};
  cucap_fb_launch_start(B);
  cucap_fb_launch_add_kind(B, CUCAP_FB_LAUNCHKIND_KERNEL);
  cucap_fb_launch_add_function(B, fn);
  cucap_fb_launch_add_grid(B, &grid);
  cucap_fb_launch_add_block(B, &block);
  cucap_fb_launch_add_args(B, av);
  cucap_fb_launch_add_launch_index(B, li);
  emit(CUCAP_FB_BODY_LAUNCH, cucap_fb_launch_end(B));
}

static void nd_function(uint64_t h, const char *name, const cucap_fb_param_info *pi,
                        size_t np, uint32_t bytes) {
  cucap_fb_ref pv = cucap_fbb_vector(B, pi, np, sizeof pi[0], 4);
  cucap_fb_ref fname = cucap_fbb_string(B, name, strlen(name));
  cucap_fb_function_start(B);
  cucap_fb_function_add_kind(B, CUCAP_FB_FUNCTIONKIND_FUNCTION);
  cucap_fb_function_add_handle(B, h);
  cucap_fb_function_add_module(B, MOD);
  cucap_fb_function_add_name(B, fname);
  cucap_fb_function_add_params(B, pv);
  cucap_fb_function_add_param_bytes(B, bytes);
  emit(CUCAP_FB_BODY_FUNCTION, cucap_fb_function_end(B));
}

static void nd_dtoh(uint64_t src, const void *data, size_t n) {
  cucap_fb_hash128 h = blob(data, n);
  cucap_fb_memcpy_start(B);
  cucap_fb_memcpy_add_kind(B, CUCAP_FB_MEMCPYKIND_DTOH);
  cucap_fb_memcpy_add_dst(B, 0x2000);
  cucap_fb_memcpy_add_src(B, src);
  cucap_fb_memcpy_add_size(B, n);
  cucap_fb_memcpy_add_payload(B, &h);
  cucap_fb_memcpy_add_has_payload(B, 1);
  emit(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B));
}

void write_capture_nondet(const char *path, int flags) {
  B = cucap_fbb_create(0);
  TU_REQUIRE(B);
  cucap_fb_file_header_start(B);
  cucap_fb_file_header_add_format_major(B, CUCAP_FORMAT_MAJOR);
  W = tc_capture_create(path, B, cucap_fb_file_header_end(B));
  SEQ = 0;

  static float a[N], b[N], c[N], c2[N];
  static uint32_t st[N];
  for (int i = 0; i < N; i++) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
    c[i] = a[i] + b[i];
    c2[i] = a[i] + a[i];
    st[i] = 0x5eed0000u ^ (uint32_t)i; /* what "the recorded run's clock" gave */
  }
  cucap_fb_context_start(B);
  cucap_fb_context_add_op(B, CUCAP_FB_CONTEXTOP_PRIMARYRETAIN);
  cucap_fb_context_add_handle(B, CTX);
  emit(CUCAP_FB_BODY_CONTEXT, cucap_fb_context_end(B));
  cucap_fb_hash128 img = blob(ptx3, sizeof ptx3);
  cucap_fb_module_start(B);
  cucap_fb_module_add_op(B, CUCAP_FB_MODULEOP_LOAD);
  cucap_fb_module_add_kind(B, CUCAP_FB_MODULEKIND_MODULE);
  cucap_fb_module_add_handle(B, MOD);
  cucap_fb_module_add_image(B, &img);
  cucap_fb_module_add_format(B, CUCAP_FB_IMAGEFORMAT_PTX);
  emit(CUCAP_FB_BODY_MODULE, cucap_fb_module_end(B));
  cucap_fb_param_info pi[4] = {{0, 8}, {8, 8}, {16, 8}, {24, 4}};
  nd_function(FN, "vec_add", pi, 4, 28);
  cucap_fb_param_info pi2[2] = {{0, 8}, {8, 4}};
  nd_function(FN2, "stamp", pi2, 2, 12);
  for (int i = 0; i < 3; i++) {
    cucap_fb_alloc_start(B);
    cucap_fb_alloc_add_kind(B, CUCAP_FB_ALLOCKIND_DEVICE);
    cucap_fb_alloc_add_address(B, ADDR[i]);
    cucap_fb_alloc_add_size(B, N * sizeof(float));
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
  int n = N;
  uint8_t args[28];
  memcpy(args, &ADDR[0], 8);
  memcpy(args + 8, &ADDR[1], 8);
  memcpy(args + 16, &ADDR[2], 8);
  memcpy(args + 24, &n, 4);
  nd_launch(FN, 0, args, sizeof args);                 /* c = a + b */
  nd_launch_hash(0, ADDR[2], c, sizeof c);
  nd_region_snapshot(CUCAP_FB_SNAPSHOTREASON_MANUAL, 0, ADDR[1], b, sizeof b);
  uint8_t sargs[12];
  memcpy(sargs, &ADDR[1], 8);
  memcpy(sargs + 8, &n, 4);
  nd_launch(FN2, 1, sargs, sizeof sargs);              /* b = clock stamps */
  nd_launch_hash(1, ADDR[1], st, sizeof st);
  nd_dtoh(ADDR[1], st, sizeof st);
  if (flags & NONDET_FLIP)
    ((uint8_t *)c)[1234] ^= 0x40;
  nd_dtoh(ADDR[2], c, sizeof c);
  nd_region_snapshot(CUCAP_FB_SNAPSHOTREASON_AFTERLAUNCH, 2, ADDR[2], c2, sizeof c2);
  memcpy(args + 8, &ADDR[0], 8);
  nd_launch(FN, 2, args, sizeof args);                 /* c = a + a */
  nd_region_snapshot(CUCAP_FB_SNAPSHOTREASON_EXIT, 0, ADDR[0], a, sizeof a);
  tc_capture_close(&B, &W);
}

/* ---------------------------------------------------- writing by hand */

cucap_writer *tc_capture_create(const char *path, cucap_fbb *b, cucap_fb_ref hdr) {
  size_t hsz = 0;
  const uint8_t *hb = cucap_fbb_finish(b, hdr, 1, &hsz);
  cucap_writer *w = NULL;
  TU_REQUIRE(hb && cucap_writer_create(path, NULL, hb, hsz, &w) == CUCAP_OK);
  cucap_fbb_reset(b);
  return w;
}

cucap_writer *tc_capture_open(const char *path, cucap_fbb **b) {
  *b = cucap_fbb_create(0);
  TU_REQUIRE(*b);
  cucap_fb_file_header_start(*b);
  cucap_fb_file_header_add_format_major(*b, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_format_minor(*b, CUCAP_FORMAT_MINOR);
  return tc_capture_create(path, *b, cucap_fb_file_header_end(*b));
}

void tc_record_append(cucap_fbb *b, cucap_writer *w) {
  cucap_fb_ref r = cucap_fb_record_end(b);
  size_t sz = 0;
  const uint8_t *buf = cucap_fbb_finish(b, r, 1, &sz);
  TU_REQUIRE(buf && cucap_writer_append(w, buf, sz, NULL) == CUCAP_OK);
  cucap_fbb_reset(b);
}

cucap_fb_hash128 tc_blob_put(cucap_writer *w, const void *p, size_t n) {
  cucap_hash128 h;
  TU_REQUIRE(cucap_writer_put_blob(w, p, n, &h) == CUCAP_OK);
  cucap_fb_hash128 x = {h.lo, h.hi};
  return x;
}

void tc_capture_close(cucap_fbb **b, cucap_writer **w) {
  TU_REQUIRE(cucap_writer_close(*w) == CUCAP_OK);
  cucap_writer_destroy(*w);
  *w = NULL;
  cucap_fbb_destroy(*b);
  *b = NULL;
}
