/* workload.c - the synthetic workloads of workload.h, written with the
 * stream writer and the generated builders. Host times are explicit: each
 * call takes the duration given, gaps are host work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_format.h"
#include "cucap_schema.h"
#include "cucap_writer.h"
#include "cupti_driver_cbid.h"
#include "cucap_fb_builder.h"
#include "workload.h"

#define CB(name) CUPTI_DRIVER_TRACE_CBID_##name
#define US 1000ull

const char *const wl_scenarios[] = {"train", "oneshot", "graph", NULL};

typedef struct wl {
  cucap_fbb *b;
  cucap_writer *w;
  uint64_t seq, t;
  int failed;
} wl;

static const uint64_t CTX = 0xC0C0000ull, S1 = 0x5100000ull, S2 = 0x5200000ull;
static const uint64_t PINNED = 0x7f7000000000ull, PAGEABLE = 0x7ffc00001000ull;
static const uint64_t DEV = 0x7e0000000000ull;
static const uint64_t APP_BASE = 0x400000ull, LIBCUDA_BASE = 0x7f0000000000ull;

static void rec(wl *g, uint32_t call, uint64_t dur, uint32_t stack, uint8_t bt,
                cucap_fb_ref body) {
  cucap_fbb *b = g->b;
  cucap_fb_record_start(b);
  if (call) {
    cucap_fb_record_add_seq(b, ++g->seq);
    cucap_fb_record_add_call(b, call);
    cucap_fb_record_add_context(b, CTX);
  }
  cucap_fb_record_add_tid(b, 4242);
  cucap_fb_record_add_t_enter(b, g->t);
  cucap_fb_record_add_t_exit(b, g->t + dur);
  g->t += dur;
  if (stack)
    cucap_fb_record_add_stack(b, stack);
  if (body)
    cucap_fb_record_add_body(b, bt, body);
  cucap_fb_ref root = cucap_fb_record_end(b);
  size_t size = 0;
  const uint8_t *buf = cucap_fbb_finish(b, root, 1, &size);
  if (!buf || cucap_writer_append(g->w, buf, size, NULL) != CUCAP_OK)
    g->failed = 1;
  cucap_fbb_reset(b);
}

static void gap(wl *g, uint64_t ns) { g->t += ns; }

static cucap_fb_ref str(wl *g, const char *s) { return cucap_fbb_string(g->b, s, strlen(s)); }

/* ------------------------------------------------------------ bodies */

static void module_map(wl *g) {
  static const char *const paths[2] = {"/opt/cucap-test/trainer",
                                       "/usr/lib/x86_64-linux-gnu/libcuda.so.1"};
  const uint64_t base[2] = {APP_BASE, LIBCUDA_BASE};
  cucap_fb_ref objs[2];
  for (int i = 0; i < 2; i++) {
    cucap_fb_ref p = str(g, paths[i]);
    cucap_fb_loaded_object_start(g->b);
    cucap_fb_loaded_object_add_path(g->b, p);
    cucap_fb_loaded_object_add_base(g->b, base[i]);
    cucap_fb_loaded_object_add_start(g->b, base[i]);
    cucap_fb_loaded_object_add_end(g->b, base[i] + 0x100000);
    objs[i] = cucap_fb_loaded_object_end(g->b);
  }
  cucap_fb_ref v = cucap_fbb_vector_refs(g->b, objs, 2);
  cucap_fb_module_map_start(g->b);
  cucap_fb_module_map_add_objects(g->b, v);
  rec(g, 0, 0, 0, CUCAP_FB_BODY_MODULEMAP, cucap_fb_module_map_end(g->b));
}

/* stack id: libcuda frame, then app frames that depend on the id */
static void callstack(wl *g, uint32_t id) {
  uint64_t fr[3] = {LIBCUDA_BASE + 0x1000 + id, APP_BASE + 0x1000 + id * 0x40,
                    APP_BASE + 0x8000};
  cucap_fb_ref v = cucap_fbb_vector(g->b, fr, 3, 8, 8);
  cucap_fb_callstack_start(g->b);
  cucap_fb_callstack_add_id(g->b, id);
  cucap_fb_callstack_add_frames(g->b, v);
  rec(g, 0, 0, 0, CUCAP_FB_BODY_CALLSTACK, cucap_fb_callstack_end(g->b));
}

static void devices(wl *g) {
  cucap_fb_ref name = str(g, "Synthetic H100");
  cucap_fb_device_props_start(g->b);
  cucap_fb_device_props_add_ordinal(g->b, 0);
  cucap_fb_device_props_add_name(g->b, name);
  cucap_fb_device_props_add_cc_major(g->b, 9);
  cucap_fb_device_props_add_cc_minor(g->b, 0);
  cucap_fb_device_props_add_sm_count(g->b, 132);
  cucap_fb_device_props_add_total_mem(g->b, 80ull << 30);
  cucap_fb_ref d = cucap_fb_device_props_end(g->b);
  cucap_fb_ref v = cucap_fbb_vector_refs(g->b, &d, 1);
  cucap_fb_devices_start(g->b);
  cucap_fb_devices_add_driver_version(g->b, 13000);
  cucap_fb_devices_add_devices(g->b, v);
  rec(g, 0, 0, 0, CUCAP_FB_BODY_DEVICES, cucap_fb_devices_end(g->b));
}

static void context(wl *g, uint8_t op, uint32_t call, uint64_t dur, uint32_t stack) {
  cucap_fb_context_start(g->b);
  cucap_fb_context_add_op(g->b, op);
  cucap_fb_context_add_handle(g->b, CTX);
  rec(g, call, dur, stack, CUCAP_FB_BODY_CONTEXT, cucap_fb_context_end(g->b));
}

static uint64_t fn_handle(int i) { return 0xF000000ull + (uint64_t)i * 0x100; }

static void function(wl *g, int i, const char *name) {
  cucap_fb_ref n = str(g, name);
  cucap_fb_function_start(g->b);
  cucap_fb_function_add_kind(g->b, CUCAP_FB_FUNCTIONKIND_FUNCTION);
  cucap_fb_function_add_handle(g->b, fn_handle(i));
  cucap_fb_function_add_name(g->b, n);
  rec(g, CB(cuModuleGetFunction), 1 * US, 0, CUCAP_FB_BODY_FUNCTION,
      cucap_fb_function_end(g->b));
}

static uint64_t g_launch;

static void launch(wl *g, int fn, uint64_t stream, uint32_t blocks, uint64_t dur,
                   uint32_t stack) {
  cucap_fb_dim3 grid = {blocks, 1, 1}, block = {256, 1, 1};
  cucap_fb_launch_start(g->b);
  cucap_fb_launch_add_kind(g->b, CUCAP_FB_LAUNCHKIND_KERNEL);
  cucap_fb_launch_add_function(g->b, fn_handle(fn));
  cucap_fb_launch_add_grid(g->b, &grid);
  cucap_fb_launch_add_block(g->b, &block);
  cucap_fb_launch_add_stream(g->b, stream);
  cucap_fb_launch_add_launch_index(g->b, g_launch++);
  rec(g, CB(cuLaunchKernel), dur, stack, CUCAP_FB_BODY_LAUNCH, cucap_fb_launch_end(g->b));
}

static void copy(wl *g, uint8_t kind, uint64_t dst, uint64_t src, uint64_t size, int async,
                 uint64_t stream, uint64_t dur, uint32_t stack) {
  cucap_fb_memcpy_start(g->b);
  cucap_fb_memcpy_add_kind(g->b, kind);
  cucap_fb_memcpy_add_dst(g->b, dst);
  cucap_fb_memcpy_add_src(g->b, src);
  cucap_fb_memcpy_add_size(g->b, size);
  if (async) {
    cucap_fb_memcpy_add_async(g->b, 1);
    cucap_fb_memcpy_add_stream(g->b, stream);
  }
  uint32_t call = kind == CUCAP_FB_MEMCPYKIND_HTOD
                      ? (async ? CB(cuMemcpyHtoDAsync_v2) : CB(cuMemcpyHtoD_v2))
                      : (async ? CB(cuMemcpyDtoHAsync_v2) : CB(cuMemcpyDtoH_v2));
  rec(g, call, dur, stack, CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(g->b));
}

static void alloc(wl *g, uint8_t kind, uint64_t addr, uint64_t size, uint64_t dur,
                  uint32_t stack) {
  cucap_fb_alloc_start(g->b);
  cucap_fb_alloc_add_kind(g->b, kind);
  cucap_fb_alloc_add_address(g->b, addr);
  cucap_fb_alloc_add_size(g->b, size);
  if (kind == CUCAP_FB_ALLOCKIND_HOSTALLOC)
    cucap_fb_alloc_add_host_address(g->b, addr);
  rec(g, kind == CUCAP_FB_ALLOCKIND_HOSTALLOC ? CB(cuMemHostAlloc) : CB(cuMemAlloc_v2), dur,
      stack, CUCAP_FB_BODY_ALLOC, cucap_fb_alloc_end(g->b));
}

static void dfree(wl *g, uint64_t addr, uint64_t dur, uint32_t stack) {
  cucap_fb_free_start(g->b);
  cucap_fb_free_add_kind(g->b, CUCAP_FB_ALLOCKIND_DEVICE);
  cucap_fb_free_add_address(g->b, addr);
  rec(g, CB(cuMemFree_v2), dur, stack, CUCAP_FB_BODY_FREE, cucap_fb_free_end(g->b));
}

static void stream(wl *g, uint8_t op, uint64_t h, uint64_t graph, uint64_t dur, uint32_t stack) {
  uint32_t call = op == CUCAP_FB_STREAMOP_CREATE          ? CB(cuStreamCreate)
                  : op == CUCAP_FB_STREAMOP_SYNCHRONIZE   ? CB(cuStreamSynchronize)
                  : op == CUCAP_FB_STREAMOP_BEGINCAPTURE  ? CB(cuStreamBeginCapture_v2)
                                                          : CB(cuStreamEndCapture);
  cucap_fb_stream_start(g->b);
  cucap_fb_stream_add_op(g->b, op);
  cucap_fb_stream_add_handle(g->b, h);
  if (graph)
    cucap_fb_stream_add_graph(g->b, graph);
  rec(g, call, dur, stack, CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(g->b));
}

static void graph(wl *g, uint8_t op, uint64_t graph, uint64_t exec, uint64_t st, uint64_t dur,
                  uint32_t stack) {
  cucap_fb_graph_start(g->b);
  cucap_fb_graph_add_op(g->b, op);
  cucap_fb_graph_add_graph(g->b, graph);
  cucap_fb_graph_add_exec(g->b, exec);
  cucap_fb_graph_add_stream(g->b, st);
  rec(g, op == CUCAP_FB_GRAPHOP_LAUNCH ? CB(cuGraphLaunch) : CB(cuGraphInstantiateWithFlags),
      dur, stack, CUCAP_FB_BODY_GRAPH, cucap_fb_graph_end(g->b));
}

/* ------------------------------------------------------------ scenarios */

static void setup(wl *g) {
  module_map(g);
  for (uint32_t id = 1; id <= 12; id++)
    callstack(g, id);
  context(g, CUCAP_FB_CONTEXTOP_PRIMARYRETAIN, CB(cuDevicePrimaryCtxRetain), 50 * US, 0);
  devices(g);
}

static void train(wl *g) {
  setup(g);
  char name[32];
  for (int i = 0; i < WL_WARMUP_KERNELS; i++) {
    snprintf(name, sizeof name, "_Z7warmup%dv", i);
    function(g, i, name);
  }
  static const char *const step[WL_STEP_LAUNCHES] = {"_Z5gemm0v", "_Z5gemm1v", "_Z5gemm2v",
                                                     "_Z5gemm3v", "_Z5gemm4v", "_Z5gemm5v",
                                                     "_Z4copyv",  "_Z4tinyv"};
  for (int i = 0; i < WL_STEP_LAUNCHES; i++)
    function(g, WL_WARMUP_KERNELS + i, step[i]);
  stream(g, CUCAP_FB_STREAMOP_CREATE, S1, 0, 3 * US, 0);
  stream(g, CUCAP_FB_STREAMOP_CREATE, S2, 0, 3 * US, 0);
  alloc(g, CUCAP_FB_ALLOCKIND_HOSTALLOC, PINNED, 8 << 20, 500 * US, 9);
  for (int i = 0; i < WL_WARMUP_KERNELS; i++) {
    launch(g, i, S1, 132, 6 * US, 10);
    gap(g, 2 * US);
  }
  context(g, CUCAP_FB_CONTEXTOP_SYNCHRONIZE, CB(cuCtxSynchronize), 1000 * US, 11);
  for (int s = 0; s < WL_STEPS; s++) {
    gap(g, 200 * US); /* host work: data loading */
    alloc(g, CUCAP_FB_ALLOCKIND_DEVICE, DEV, 1 << 20, 20 * US, 1);
    gap(g, 1 * US);
    copy(g, CUCAP_FB_MEMCPYKIND_HTOD, DEV, PAGEABLE, 256, 0, 0, 12 * US, 2);
    gap(g, 1 * US);
    copy(g, CUCAP_FB_MEMCPYKIND_HTOD, DEV + 4096, PINNED, 4 << 20, 0, 0, 100 * US, 3);
    for (int k = 0; k < WL_STEP_LAUNCHES; k++) {
      gap(g, 1 * US);
      uint64_t st = k < 6 ? S1 : k == 6 ? S2 : 0;
      launch(g, WL_WARMUP_KERNELS + k, st, k < 6 ? 528 : k == 6 ? 264 : 1, 4 * US,
             4 + (uint32_t)(k >= 6 ? k - 5 : 0));
    }
    gap(g, 1 * US);
    copy(g, CUCAP_FB_MEMCPYKIND_DTOH, PINNED, DEV, 4096, 1, S1, 5 * US, 7);
    gap(g, 1 * US);
    stream(g, CUCAP_FB_STREAMOP_SYNCHRONIZE, S1, 0, 300 * US, 8);
    context(g, CUCAP_FB_CONTEXTOP_SYNCHRONIZE, CB(cuCtxSynchronize), 5 * US, 11);
    dfree(g, DEV, 30 * US, 12);
  }
}

static void oneshot(wl *g) {
  setup(g);
  char name[32];
  for (int i = 0; i < 5; i++) {
    snprintf(name, sizeof name, "_Z6stage%dPf", i);
    function(g, i, name);
  }
  alloc(g, CUCAP_FB_ALLOCKIND_DEVICE, DEV, 8 << 20, 300 * US, 1);
  copy(g, CUCAP_FB_MEMCPYKIND_HTOD, DEV, PAGEABLE, 8 << 20, 0, 0, 2000 * US, 2);
  for (int i = 0; i < 5; i++) {
    gap(g, 3 * US);
    launch(g, i, 0, 1024, 5 * US, 4);
  }
  copy(g, CUCAP_FB_MEMCPYKIND_DTOH, PAGEABLE, DEV, 8 << 20, 0, 0, 2500 * US, 7);
  dfree(g, DEV, 40 * US, 12);
}

static void graphs(wl *g) {
  setup(g);
  function(g, 0, "_Z6layer0v");
  function(g, 1, "_Z6layer1v");
  function(g, 2, "_Z6layer2v");
  stream(g, CUCAP_FB_STREAMOP_CREATE, S1, 0, 3 * US, 0);
  stream(g, CUCAP_FB_STREAMOP_BEGINCAPTURE, S1, 0, 2 * US, 0);
  for (int i = 0; i < 3; i++)
    launch(g, i, S1, 256, 3 * US, 4);
  stream(g, CUCAP_FB_STREAMOP_ENDCAPTURE, S1, 0x6A00000ull, 10 * US, 0);
  graph(g, CUCAP_FB_GRAPHOP_INSTANTIATE, 0x6A00000ull, 0x6B00000ull, 0, 80 * US, 0);
  for (int s = 0; s < WL_STEPS; s++) {
    gap(g, 50 * US);
    graph(g, CUCAP_FB_GRAPHOP_LAUNCH, 0, 0x6B00000ull, S1, 8 * US, 5);
    stream(g, CUCAP_FB_STREAMOP_SYNCHRONIZE, S1, 0, 120 * US, 8);
  }
}

int wl_write(const char *path, const char *name, char *err, size_t err_size) {
  void (*fn)(wl *) = !strcmp(name, "train")     ? train
                     : !strcmp(name, "oneshot") ? oneshot
                     : !strcmp(name, "graph")   ? graphs
                                                : NULL;
  if (!fn) {
    snprintf(err, err_size, "unknown scenario '%s'", name);
    return -1;
  }
  wl g;
  memset(&g, 0, sizeof g);
  g_launch = 0;
  g.t = 1000;
  g.b = cucap_fbb_create(0);
  if (!g.b) {
    snprintf(err, err_size, "out of memory");
    return -1;
  }
  cucap_fb_ref prod = str(&g, "cucap-workgen");
  cucap_fb_file_header_start(g.b);
  cucap_fb_file_header_add_format_major(g.b, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_format_minor(g.b, CUCAP_FORMAT_MINOR);
  cucap_fb_file_header_add_start_mono_ns(g.b, 1000000);
  cucap_fb_file_header_add_start_time_ns(g.b, 1700000000000000000ull);
  cucap_fb_file_header_add_producer(g.b, prod);
  cucap_fb_ref h = cucap_fb_file_header_end(g.b);
  size_t hsz = 0;
  const uint8_t *hb = cucap_fbb_finish(g.b, h, 1, &hsz);
  cucap_status st = hb ? cucap_writer_create(path, NULL, hb, hsz, &g.w) : CUCAP_ERR_NOMEM;
  if (st != CUCAP_OK) {
    snprintf(err, err_size, "cannot create %s: %s", path, cucap_status_str(st));
    cucap_fbb_destroy(g.b);
    return -1;
  }
  cucap_fbb_reset(g.b);
  fn(&g);
  st = cucap_writer_close(g.w);
  cucap_writer_destroy(g.w);
  cucap_fbb_destroy(g.b);
  if (st != CUCAP_OK || g.failed) {
    snprintf(err, err_size, "writing %s failed: %s", path,
             cucap_status_str(st != CUCAP_OK ? st : CUCAP_ERR_IO));
    return -1;
  }
  return 0;
}
