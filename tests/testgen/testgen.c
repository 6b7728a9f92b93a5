/* testgen.c - cucap-testgen: writes a synthetic, deterministic capture that
 * contains every Body type with plausible values, using the stream writer and
 * the generated FlatBuffers builder..
 *
 * usage: cucap-testgen OUT [--records N] [--kill-at BYTES] [--seed S]
 *                          [--level L] [--chunk-size BYTES] [--fixed-clock]
 *   --records N      about N records (at least one of each type; default 300)
 *   --kill-at BYTES  simulate a killed app: once the file holds >= BYTES,
 *                    SIGKILL ourselves (no index, no trailer). Exit 137.
 *   --chunk-size B   raw bytes per record chunk (default 16 KiB, so even small
 *                    captures have several chunks to corrupt/truncate)
 *   --fixed-clock    FileHeader.start_mono_ns = 0 instead of the real
 *                    CLOCK_MONOTONIC (byte-identical headers for golden tests;
 *                    `info` then shows a meaningless duration)
 * Everything except the writer's own end time is a function of the options,
 * so dumps are reproducible (golden tests). Exit 0 ok, 1 error, 2 usage. */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cupti_driver_cbid.h"
#include "cucap_format.h"
#include "cucap_writer.h"
#include "cucap_fb_builder.h"
#include "cucap_schema.h"

#define CB(name) CUPTI_DRIVER_TRACE_CBID_##name

typedef struct gen {
  cucap_writer *w;
  cucap_fbb *b;
  uint64_t seq;
  uint64_t t;          /* ns since start */
  uint64_t records;
  uint64_t launches;
  uint64_t rng;
  uint64_t kill_at;
  uint64_t ctx;
  uint64_t start_mono; /* real CLOCK_MONOTONIC (writer's end time uses it) */
} gen;

static uint64_t rnd(gen *g) { /* xorshift64*: deterministic per seed */
  g->rng ^= g->rng >> 12;
  g->rng ^= g->rng << 25;
  g->rng ^= g->rng >> 27;
  return g->rng * 2685821657736338717ull;
}

static void die(const char *what, cucap_status s) {
  fprintf(stderr, "cucap-testgen: %s: %s\n", what, cucap_status_str(s));
  exit(1);
}

static void check_kill(gen *g) {
  if (!g->kill_at)
    return;
  cucap_writer_stats st;
  cucap_writer_get_stats(g->w, &st);
  if (st.file_bytes >= g->kill_at) {
    fflush(NULL);
    raise(SIGKILL);
  }
}

/* Finishes the Record around `body` and appends it. */
static void emit(gen *g, uint32_t call, int result, uint8_t body_type,
                 cucap_fb_ref body, const uint64_t *args, size_t nargs,
                 uint32_t stack) {
  cucap_fbb *b = g->b;
  cucap_fb_ref av = nargs ? cucap_fbb_vector(b, args, nargs, 8, 8) : 0;
  uint64_t dt = 200 + rnd(g) % 5000;
  cucap_fb_record_start(b);
  if (call) {
    cucap_fb_record_add_seq(b, ++g->seq);
    cucap_fb_record_add_call(b, call);
    cucap_fb_record_add_result(b, result);
    cucap_fb_record_add_context(b, g->ctx);
  }
  cucap_fb_record_add_tid(b, 31337 + (uint32_t)(g->seq % 3 == 0));
  cucap_fb_record_add_t_enter(b, g->t);
  cucap_fb_record_add_t_exit(b, g->t + dt);
  g->t += dt + 1000;
  if (av)
    cucap_fb_record_add_args(b, av);
  if (stack)
    cucap_fb_record_add_stack(b, stack);
  if (body)
    cucap_fb_record_add_body(b, body_type, body);
  cucap_fb_ref root = cucap_fb_record_end(b);
  size_t size = 0;
  const uint8_t *buf = cucap_fbb_finish(b, root, 1, &size);
  if (!buf)
    die("builder", CUCAP_ERR_NOMEM);
  cucap_status s = cucap_writer_append(g->w, buf, size, NULL);
  if (s != CUCAP_OK)
    die("append", s);
  cucap_fbb_reset(b);
  g->records++;
  if (g->kill_at && g->records % 8 == 0) {
    s = cucap_writer_flush(g->w);
    if (s != CUCAP_OK)
      die("flush", s);
    check_kill(g);
  }
}

static cucap_fb_hash128 put_blob(gen *g, size_t size, int compressible) {
  uint8_t *p = malloc(size ? size : 1);
  if (!p)
    die("malloc", CUCAP_ERR_NOMEM);
  for (size_t i = 0; i < size; i++)
    p[i] = compressible ? (uint8_t)((i * 7) ^ (i >> 5)) : (uint8_t)rnd(g);
  cucap_hash128 h;
  cucap_status s = cucap_writer_put_blob(g->w, p, size, &h);
  free(p);
  if (s != CUCAP_OK)
    die("put_blob", s);
  cucap_fb_hash128 fh;
  fh.lo = h.lo;
  fh.hi = h.hi;
  return fh;
}

static cucap_fb_ref str(gen *g, const char *s) {
  return cucap_fbb_string(g->b, s, strlen(s));
}

/* ------------------------------------------------------------ bodies */

static void rec_context(gen *g, uint8_t op, uint32_t call) {
  cucap_fb_context_start(g->b);
  cucap_fb_context_add_op(g->b, op);
  cucap_fb_context_add_handle(g->b, g->ctx);
  cucap_fb_context_add_device(g->b, 0);
  cucap_fb_context_add_flags(g->b, 0);
  cucap_fb_ref r = cucap_fb_context_end(g->b);
  uint64_t a[] = {0x7ffd0000a000ull, 0, 0};
  emit(g, call, 0, CUCAP_FB_BODY_CONTEXT, r, a, 3, 0);
}

static const uint64_t MODULE = 0x55aa00001000ull;
static const uint64_t FUNC = 0x55aa00002000ull;

static void rec_module(gen *g) {
  cucap_fb_hash128 img = put_blob(g, 24 * 1024, 1);
  cucap_fb_ref path = str(g, "synthetic_kernels.fatbin");
  cucap_fb_module_start(g->b);
  cucap_fb_module_add_op(g->b, CUCAP_FB_MODULEOP_LOAD);
  cucap_fb_module_add_kind(g->b, CUCAP_FB_MODULEKIND_MODULE);
  cucap_fb_module_add_handle(g->b, MODULE);
  cucap_fb_module_add_image(g->b, &img);
  cucap_fb_module_add_image_size(g->b, 24 * 1024);
  cucap_fb_module_add_format(g->b, CUCAP_FB_IMAGEFORMAT_FATBIN);
  cucap_fb_module_add_path(g->b, path);
  cucap_fb_ref r = cucap_fb_module_end(g->b);
  uint64_t a[] = {0x7ffd0000a010ull, 0x7f0000100000ull};
  emit(g, CB(cuModuleLoadData), 0, CUCAP_FB_BODY_MODULE, r, a, 2, 0);
}

static void rec_global(gen *g) {
  cucap_fb_ref name = str(g, "d_table");
  cucap_fb_global_start(g->b);
  cucap_fb_global_add_module(g->b, MODULE);
  cucap_fb_global_add_name(g->b, name);
  cucap_fb_global_add_address(g->b, 0x7f4400000000ull);
  cucap_fb_global_add_size(g->b, 1024);
  cucap_fb_global_add_kind(g->b, CUCAP_FB_MODULEKIND_MODULE);
  cucap_fb_ref r = cucap_fb_global_end(g->b);
  emit(g, CB(cuModuleGetGlobal_v2), 0, CUCAP_FB_BODY_GLOBAL, r, NULL, 0, 0);
}

static void rec_function(gen *g) {
  cucap_fb_param_info params[3] = {{0, 8}, {8, 8}, {16, 4}};
  cucap_fb_ref name = str(g, "_Z6saxpyPfS_f");
  cucap_fb_ref pv = cucap_fbb_vector(g->b, params, 3, sizeof params[0], 4);
  cucap_fb_function_start(g->b);
  cucap_fb_function_add_kind(g->b, CUCAP_FB_FUNCTIONKIND_FUNCTION);
  cucap_fb_function_add_handle(g->b, FUNC);
  cucap_fb_function_add_module(g->b, MODULE);
  cucap_fb_function_add_name(g->b, name);
  cucap_fb_function_add_params(g->b, pv);
  cucap_fb_function_add_param_source(g->b, CUCAP_FB_PARAMSOURCE_DRIVER);
  cucap_fb_function_add_param_bytes(g->b, 20);
  cucap_fb_ref r = cucap_fb_function_end(g->b);
  emit(g, CB(cuModuleGetFunction), 0, CUCAP_FB_BODY_FUNCTION, r, NULL, 0, 0);
}

static uint64_t dev_addr(int i) { return 0x7f4500000000ull + (uint64_t)i * 0x100000ull; }

static void rec_alloc(gen *g, int i, uint64_t size) {
  cucap_fb_alloc_start(g->b);
  cucap_fb_alloc_add_kind(g->b, CUCAP_FB_ALLOCKIND_DEVICE);
  cucap_fb_alloc_add_address(g->b, dev_addr(i));
  cucap_fb_alloc_add_size(g->b, size);
  cucap_fb_alloc_add_device(g->b, 0);
  cucap_fb_ref r = cucap_fb_alloc_end(g->b);
  uint64_t a[] = {0x7ffd0000a020ull, size};
  emit(g, CB(cuMemAlloc_v2), 0, CUCAP_FB_BODY_ALLOC, r, a, 2, 0);
}

static void rec_free(gen *g, int i) {
  cucap_fb_free_start(g->b);
  cucap_fb_free_add_kind(g->b, CUCAP_FB_ALLOCKIND_DEVICE);
  cucap_fb_free_add_address(g->b, dev_addr(i));
  cucap_fb_ref r = cucap_fb_free_end(g->b);
  uint64_t a[] = {dev_addr(i)};
  emit(g, CB(cuMemFree_v2), 0, CUCAP_FB_BODY_FREE, r, a, 1, 0);
}

static void rec_memcpy(gen *g, int htod, uint64_t size, uint32_t stack) {
  cucap_fb_hash128 h = put_blob(g, (size_t)size, htod);
  cucap_fb_memcpy_start(g->b);
  cucap_fb_memcpy_add_kind(g->b, htod ? CUCAP_FB_MEMCPYKIND_HTOD
                                      : CUCAP_FB_MEMCPYKIND_DTOH);
  cucap_fb_memcpy_add_dst(g->b, htod ? dev_addr(0) : 0x7f0000200000ull);
  cucap_fb_memcpy_add_src(g->b, htod ? 0x7f0000200000ull : dev_addr(1));
  cucap_fb_memcpy_add_size(g->b, size);
  cucap_fb_memcpy_add_async(g->b, 0);
  cucap_fb_memcpy_add_payload(g->b, &h);
  cucap_fb_memcpy_add_has_payload(g->b, 1);
  cucap_fb_ref r = cucap_fb_memcpy_end(g->b);
  uint64_t a[] = {htod ? dev_addr(0) : 0x7f0000200000ull,
                  htod ? 0x7f0000200000ull : dev_addr(1), size};
  emit(g, htod ? CB(cuMemcpyHtoD_v2) : CB(cuMemcpyDtoH_v2), 0,
       CUCAP_FB_BODY_MEMCPY, r, a, 3, stack);
}

static void rec_memcpy_2d_dtod(gen *g) {
  cucap_fb_copy_geometry_start(g->b);
  cucap_fb_copy_geometry_add_width_bytes(g->b, 256);
  cucap_fb_copy_geometry_add_height(g->b, 4);
  cucap_fb_copy_geometry_add_depth(g->b, 1);
  cucap_fb_copy_geometry_add_src_pitch(g->b, 512);
  cucap_fb_copy_geometry_add_dst_pitch(g->b, 512);
  cucap_fb_copy_geometry_add_src_memory_type(g->b, 2);
  cucap_fb_copy_geometry_add_dst_memory_type(g->b, 2);
  cucap_fb_ref geo = cucap_fb_copy_geometry_end(g->b);
  cucap_fb_memcpy_start(g->b);
  cucap_fb_memcpy_add_kind(g->b, CUCAP_FB_MEMCPYKIND_DTOD);
  cucap_fb_memcpy_add_dst(g->b, dev_addr(2));
  cucap_fb_memcpy_add_src(g->b, dev_addr(0));
  cucap_fb_memcpy_add_size(g->b, 1024);
  cucap_fb_memcpy_add_async(g->b, 1);
  cucap_fb_memcpy_add_stream(g->b, 0x55aa00003000ull);
  cucap_fb_memcpy_add_geometry(g->b, geo);
  cucap_fb_ref r = cucap_fb_memcpy_end(g->b);
  emit(g, CB(cuMemcpy2DAsync_v2), 0, CUCAP_FB_BODY_MEMCPY, r, NULL, 0, 0);
}

static void rec_memset(gen *g) {
  cucap_fb_memset_start(g->b);
  cucap_fb_memset_add_dst(g->b, dev_addr(1));
  cucap_fb_memset_add_value(g->b, 0xdeadbeef);
  cucap_fb_memset_add_elem_size(g->b, 4);
  cucap_fb_memset_add_count(g->b, 4096);
  cucap_fb_memset_add_height(g->b, 1);
  cucap_fb_ref r = cucap_fb_memset_end(g->b);
  uint64_t a[] = {dev_addr(1), 0xdeadbeef, 4096};
  emit(g, CB(cuMemsetD32_v2), 0, CUCAP_FB_BODY_MEMSET, r, a, 3, 0);
}

static cucap_fb_ref build_launch(gen *g, int with_attr) {
  uint8_t args[24];
  uint64_t p0 = dev_addr(0), p1 = dev_addr(1);
  float alpha = 2.5f;
  memset(args, 0, sizeof args);
  memcpy(args, &p0, 8);
  memcpy(args + 8, &p1, 8);
  memcpy(args + 16, &alpha, 4);
  cucap_fb_ref av = cucap_fbb_vector(g->b, args, 20, 1, 1);
  cucap_fb_ref attrs = 0;
  if (with_attr) {
    uint8_t val[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    cucap_fb_ref vv = cucap_fbb_vector(g->b, val, sizeof val, 1, 1);
    cucap_fb_launch_attr_start(g->b);
    cucap_fb_launch_attr_add_id(g->b, 2);
    cucap_fb_launch_attr_add_value(g->b, vv);
    cucap_fb_ref a = cucap_fb_launch_attr_end(g->b);
    attrs = cucap_fbb_vector_refs(g->b, &a, 1);
  }
  cucap_fb_dim3 grid = {(uint32_t)(64 + g->launches % 4), 1, 1};
  cucap_fb_dim3 block = {256, 1, 1};
  cucap_fb_launch_start(g->b);
  cucap_fb_launch_add_kind(g->b, with_attr ? CUCAP_FB_LAUNCHKIND_KERNELEX
                                           : CUCAP_FB_LAUNCHKIND_KERNEL);
  cucap_fb_launch_add_function(g->b, FUNC);
  cucap_fb_launch_add_grid(g->b, &grid);
  cucap_fb_launch_add_block(g->b, &block);
  cucap_fb_launch_add_shared_mem(g->b, 0);
  cucap_fb_launch_add_stream(g->b, 0x55aa00003000ull);
  cucap_fb_launch_add_args(g->b, av);
  if (attrs)
    cucap_fb_launch_add_attrs(g->b, attrs);
  cucap_fb_launch_add_launch_index(g->b, g->launches);
  return cucap_fb_launch_end(g->b);
}

static void rec_launch(gen *g, uint32_t stack) {
  int ex = (g->launches % 5) == 4;
  cucap_fb_ref r = build_launch(g, ex);
  uint64_t a[] = {FUNC, 64, 1, 1, 256, 1, 1, 0, 0x55aa00003000ull};
  emit(g, ex ? CB(cuLaunchKernelEx) : CB(cuLaunchKernel), 0,
       CUCAP_FB_BODY_LAUNCH, r, a, 9, stack);
  g->launches++;
}

static void rec_stream(gen *g, uint8_t op, uint32_t call) {
  cucap_fb_stream_start(g->b);
  cucap_fb_stream_add_op(g->b, op);
  cucap_fb_stream_add_handle(g->b, 0x55aa00003000ull);
  cucap_fb_stream_add_flags(g->b, 1);
  cucap_fb_ref r = cucap_fb_stream_end(g->b);
  emit(g, call, 0, CUCAP_FB_BODY_STREAM, r, NULL, 0, 0);
}

static void rec_event(gen *g, uint8_t op, uint32_t call) {
  cucap_fb_event_start(g->b);
  cucap_fb_event_add_op(g->b, op);
  cucap_fb_event_add_handle(g->b, 0x55aa00004000ull);
  if (op == CUCAP_FB_EVENTOP_RECORD)
    cucap_fb_event_add_stream(g->b, 0x55aa00003000ull);
  cucap_fb_ref r = cucap_fb_event_end(g->b);
  emit(g, call, 0, CUCAP_FB_BODY_EVENT, r, NULL, 0, 0);
}

static void rec_graph(gen *g) {
  cucap_fb_ref kl = build_launch(g, 0);
  cucap_fb_graph_node_start(g->b);
  cucap_fb_graph_node_add_handle(g->b, 0x55aa00005100ull);
  cucap_fb_graph_node_add_type(g->b, CUCAP_FB_GRAPHNODETYPE_KERNEL);
  cucap_fb_graph_node_add_launch(g->b, kl);
  cucap_fb_ref n0 = cucap_fb_graph_node_end(g->b);
  uint64_t deps[] = {0x55aa00005100ull};
  cucap_fb_ref dv = cucap_fbb_vector(g->b, deps, 1, 8, 8);
  cucap_fb_graph_node_start(g->b);
  cucap_fb_graph_node_add_handle(g->b, 0x55aa00005200ull);
  cucap_fb_graph_node_add_type(g->b, CUCAP_FB_GRAPHNODETYPE_EMPTY);
  cucap_fb_graph_node_add_dependencies(g->b, dv);
  cucap_fb_ref n1 = cucap_fb_graph_node_end(g->b);
  cucap_fb_ref nodes[] = {n0, n1};
  cucap_fb_ref nv = cucap_fbb_vector_refs(g->b, nodes, 2);
  cucap_fb_graph_start(g->b);
  cucap_fb_graph_add_op(g->b, CUCAP_FB_GRAPHOP_INSTANTIATE);
  cucap_fb_graph_add_graph(g->b, 0x55aa00005000ull);
  cucap_fb_graph_add_exec(g->b, 0x55aa00006000ull);
  cucap_fb_graph_add_nodes(g->b, nv);
  cucap_fb_ref r = cucap_fb_graph_end(g->b);
  emit(g, CB(cuGraphInstantiateWithFlags), 0, CUCAP_FB_BODY_GRAPH, r, NULL, 0, 0);
  cucap_fb_graph_start(g->b);
  cucap_fb_graph_add_op(g->b, CUCAP_FB_GRAPHOP_LAUNCH);
  cucap_fb_graph_add_exec(g->b, 0x55aa00006000ull);
  cucap_fb_graph_add_stream(g->b, 0x55aa00003000ull);
  r = cucap_fb_graph_end(g->b);
  emit(g, CB(cuGraphLaunch), 0, CUCAP_FB_BODY_GRAPH, r, NULL, 0, 0);
}

static void rec_callstack(gen *g, uint32_t id) {
  uint64_t frames[4] = {0x555555554000ull + id * 0x40, 0x555555556123ull,
                        0x7ffff7a2d083ull, 0x55555555501eull};
  cucap_fb_ref fv = cucap_fbb_vector(g->b, frames, 4, 8, 8);
  cucap_fb_callstack_start(g->b);
  cucap_fb_callstack_add_id(g->b, id);
  cucap_fb_callstack_add_frames(g->b, fv);
  cucap_fb_ref r = cucap_fb_callstack_end(g->b);
  emit(g, 0, 0, CUCAP_FB_BODY_CALLSTACK, r, NULL, 0, 0);
}

static void rec_module_map(gen *g) {
  uint8_t bid[20];
  for (int i = 0; i < 20; i++)
    bid[i] = (uint8_t)(0xa0 + i);
  cucap_fb_ref path = str(g, "/opt/synthetic/bin/synthetic_app");
  cucap_fb_ref bv = cucap_fbb_vector(g->b, bid, 20, 1, 1);
  cucap_fb_loaded_object_start(g->b);
  cucap_fb_loaded_object_add_path(g->b, path);
  cucap_fb_loaded_object_add_build_id(g->b, bv);
  cucap_fb_loaded_object_add_base(g->b, 0x555555554000ull);
  cucap_fb_loaded_object_add_start(g->b, 0x555555554000ull);
  cucap_fb_loaded_object_add_end(g->b, 0x555555560000ull);
  cucap_fb_ref o = cucap_fb_loaded_object_end(g->b);
  cucap_fb_ref ov = cucap_fbb_vector_refs(g->b, &o, 1);
  cucap_fb_module_map_start(g->b);
  cucap_fb_module_map_add_objects(g->b, ov);
  cucap_fb_ref r = cucap_fb_module_map_end(g->b);
  emit(g, 0, 0, CUCAP_FB_BODY_MODULEMAP, r, NULL, 0, 0);
}

static cucap_fb_ref region(gen *g, int with_blob) {
  cucap_fb_hash128 h = put_blob(g, 4096, 0);
  cucap_fb_mem_region_start(g->b);
  cucap_fb_mem_region_add_address(g->b, dev_addr(1));
  cucap_fb_mem_region_add_size(g->b, 4096);
  if (with_blob)
    cucap_fb_mem_region_add_data(g->b, &h);
  cucap_fb_mem_region_add_hash(g->b, &h);
  return cucap_fb_mem_region_end(g->b);
}

static void rec_snapshot(gen *g) {
  cucap_fb_ref rg = region(g, 1);
  cucap_fb_ref rv = cucap_fbb_vector_refs(g->b, &rg, 1);
  cucap_fb_snapshot_start(g->b);
  cucap_fb_snapshot_add_reason(g->b, CUCAP_FB_SNAPSHOTREASON_EXIT);
  cucap_fb_snapshot_add_launch_index(g->b, g->launches);
  cucap_fb_snapshot_add_regions(g->b, rv);
  cucap_fb_ref r = cucap_fb_snapshot_end(g->b);
  emit(g, 0, 0, CUCAP_FB_BODY_SNAPSHOT, r, NULL, 0, 0);
}

static void rec_launch_hash(gen *g) {
  cucap_fb_ref rg = region(g, 0);
  cucap_fb_ref rv = cucap_fbb_vector_refs(g->b, &rg, 1);
  cucap_fb_launch_hash_start(g->b);
  cucap_fb_launch_hash_add_launch_index(g->b, g->launches - 1);
  cucap_fb_launch_hash_add_launch_seq(g->b, g->seq);
  cucap_fb_launch_hash_add_regions(g->b, rv);
  cucap_fb_ref r = cucap_fb_launch_hash_end(g->b);
  emit(g, 0, 0, CUCAP_FB_BODY_LAUNCHHASH, r, NULL, 0, 0);
}

static void rec_kernel_timing(gen *g) {
  cucap_fb_ref name = str(g, "_Z6saxpyPfS_f");
  cucap_fb_kernel_timing_start(g->b);
  cucap_fb_kernel_timing_add_launch_index(g->b, g->launches - 1);
  cucap_fb_kernel_timing_add_function(g->b, FUNC);
  cucap_fb_kernel_timing_add_name(g->b, name);
  cucap_fb_kernel_timing_add_start_ns(g->b, 1700000000000000000ull + g->t);
  cucap_fb_kernel_timing_add_end_ns(g->b, 1700000000000000000ull + g->t + 12345);
  cucap_fb_kernel_timing_add_correlation_id(g->b, (uint32_t)g->launches);
  cucap_fb_ref r = cucap_fb_kernel_timing_end(g->b);
  emit(g, 0, 0, CUCAP_FB_BODY_KERNELTIMING, r, NULL, 0, 0);
}

static void rec_pc_sample(gen *g) {
  cucap_fb_stall_count_start(g->b);
  cucap_fb_stall_count_add_reason(g->b, 7);
  cucap_fb_stall_count_add_samples(g->b, 42);
  cucap_fb_ref s0 = cucap_fb_stall_count_end(g->b);
  cucap_fb_ref sv = cucap_fbb_vector_refs(g->b, &s0, 1);
  cucap_fb_ref fn = str(g, "_Z6saxpyPfS_f");
  cucap_fb_ref sf = str(g, "saxpy.cu");
  cucap_fb_pc_sample_start(g->b);
  cucap_fb_pc_sample_add_launch_index(g->b, g->launches - 1);
  cucap_fb_pc_sample_add_function(g->b, fn);
  cucap_fb_pc_sample_add_cubin_crc(g->b, 0x1234abcdull);
  cucap_fb_pc_sample_add_pc_offset(g->b, 0x1f0);
  cucap_fb_pc_sample_add_stalls(g->b, sv);
  cucap_fb_pc_sample_add_callstack(g->b, 1);
  cucap_fb_pc_sample_add_source_file(g->b, sf);
  cucap_fb_pc_sample_add_source_line(g->b, 12);
  cucap_fb_ref r = cucap_fb_pc_sample_end(g->b);
  emit(g, 0, 0, CUCAP_FB_BODY_PCSAMPLE, r, NULL, 0, 0);
}

static void rec_note(gen *g) {
  uint8_t data[4] = {0xde, 0xad, 0xbe, 0xef};
  cucap_fb_ref k = str(g, "unsupported");
  cucap_fb_ref t = str(g, "cuIpcGetMemHandle is not recorded (synthetic \"note\")");
  cucap_fb_ref dv = cucap_fbb_vector(g->b, data, 4, 1, 1);
  cucap_fb_note_start(g->b);
  cucap_fb_note_add_kind(g->b, k);
  cucap_fb_note_add_text(g->b, t);
  cucap_fb_note_add_value(g->b, 7);
  cucap_fb_note_add_data(g->b, dv);
  cucap_fb_ref r = cucap_fb_note_end(g->b);
  emit(g, CB(cuIpcGetMemHandle), 1, CUCAP_FB_BODY_NOTE, r, NULL, 0, 0);
}

static void rec_audit(gen *g) {
  cucap_fb_ref n = str(g, "cuLaunchKernel");
  cucap_fb_audit_entry_start(g->b);
  cucap_fb_audit_entry_add_cbid(g->b, CB(cuLaunchKernel));
  cucap_fb_audit_entry_add_name(g->b, n);
  cucap_fb_audit_entry_add_driver_seen(g->b, g->launches);
  cucap_fb_audit_entry_add_recorded(g->b, g->launches);
  cucap_fb_ref e = cucap_fb_audit_entry_end(g->b);
  cucap_fb_ref ev = cucap_fbb_vector_refs(g->b, &e, 1);
  cucap_fb_audit_start(g->b);
  cucap_fb_audit_add_entries(g->b, ev);
  cucap_fb_ref r = cucap_fb_audit_end(g->b);
  emit(g, 0, 0, CUCAP_FB_BODY_AUDIT, r, NULL, 0, 0);
}

/* BlobPiece normally lives only in blob chunks (written by put_blob). One
 * small inline piece in a record chunk keeps "every Body type" true for the
 * record-level tools (dump/info/golden/fuzz). */
static void rec_blob_piece(gen *g) {
  uint8_t data[16];
  for (int i = 0; i < 16; i++)
    data[i] = (uint8_t)i;
  cucap_fb_hash128 h = {0x0123456789abcdefull, 0xfedcba9876543210ull};
  cucap_fb_ref dv = cucap_fbb_vector(g->b, data, 16, 1, 1);
  cucap_fb_blob_piece_start(g->b);
  cucap_fb_blob_piece_add_hash(g->b, &h);
  cucap_fb_blob_piece_add_total_size(g->b, 16);
  cucap_fb_blob_piece_add_offset(g->b, 0);
  cucap_fb_blob_piece_add_data(g->b, dv);
  cucap_fb_ref r = cucap_fb_blob_piece_end(g->b);
  emit(g, 0, 0, CUCAP_FB_BODY_BLOBPIECE, r, NULL, 0, 0);
}

/* ------------------------------------------------------------ header */

static cucap_fb_ref device(gen *g, int ordinal);

/* Devices (format 1.1): what libcucap emits after the first cuInit, since
 * its FileHeader is written before the driver is up. */
static void rec_devices(gen *g) {
  cucap_fb_ref devs[2] = {device(g, 0), device(g, 1)};
  cucap_fb_ref dv = cucap_fbb_vector_refs(g->b, devs, 2);
  cucap_fb_devices_start(g->b);
  cucap_fb_devices_add_driver_version(g->b, 13000);
  cucap_fb_devices_add_devices(g->b, dv);
  cucap_fb_ref r = cucap_fb_devices_end(g->b);
  emit(g, 0, 0, CUCAP_FB_BODY_DEVICES, r, NULL, 0, 0);
}

static cucap_fb_ref device(gen *g, int ordinal) {
  uint8_t uuid[16];
  for (int i = 0; i < 16; i++)
    uuid[i] = (uint8_t)(0x10 * ordinal + i);
  cucap_fb_ref name = str(g, "NVIDIA H100 80GB HBM3 (synthetic)");
  cucap_fb_ref pci = str(g, ordinal ? "0000:19:00.0" : "0000:18:00.0");
  cucap_fb_ref uv = cucap_fbb_vector(g->b, uuid, 16, 1, 1);
  cucap_fb_device_props_start(g->b);
  cucap_fb_device_props_add_ordinal(g->b, ordinal);
  cucap_fb_device_props_add_name(g->b, name);
  cucap_fb_device_props_add_uuid(g->b, uv);
  cucap_fb_device_props_add_cc_major(g->b, 9);
  cucap_fb_device_props_add_cc_minor(g->b, 0);
  cucap_fb_device_props_add_total_mem(g->b, 85029158912ull);
  cucap_fb_device_props_add_sm_count(g->b, 132);
  cucap_fb_device_props_add_pci_bus_id(g->b, pci);
  cucap_fb_device_props_add_va_granularity(g->b, 2u << 20);
  return cucap_fb_device_props_end(g->b);
}

static const uint8_t *build_header(gen *g, size_t *size) {
  cucap_fb_ref devs[2] = {device(g, 0), device(g, 1)};
  cucap_fb_ref dv = cucap_fbb_vector_refs(g->b, devs, 2);
  cucap_fb_ref argv[3] = {str(g, "./synthetic_app"), str(g, "--iters"),
                          str(g, "3")};
  cucap_fb_ref av = cucap_fbb_vector_refs(g->b, argv, 3);
  cucap_fb_ref k = str(g, "CUDA_VISIBLE_DEVICES"), v = str(g, "0,1");
  cucap_fb_env_var_start(g->b);
  cucap_fb_env_var_add_key(g->b, k);
  cucap_fb_env_var_add_value(g->b, v);
  cucap_fb_ref e = cucap_fb_env_var_end(g->b);
  cucap_fb_ref ev = cucap_fbb_vector_refs(g->b, &e, 1);
  cucap_fb_ref ver = str(g, CUCAP_VERSION_STRING);
  cucap_fb_ref host = str(g, "testgen-host");
  cucap_fb_ref opts = str(g, "--synthetic");
  cucap_fb_ref prod = str(g, "cucap-testgen");
  cucap_fb_file_header_start(g->b);
  cucap_fb_file_header_add_format_major(g->b, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_format_minor(g->b, CUCAP_FORMAT_MINOR);
  cucap_fb_file_header_add_cucap_version(g->b, ver);
  cucap_fb_file_header_add_hostname(g->b, host);
  cucap_fb_file_header_add_pid(g->b, 4242);
  cucap_fb_file_header_add_start_time_ns(g->b, 1700000000123456789ull);
  cucap_fb_file_header_add_start_mono_ns(g->b, g->start_mono);
  cucap_fb_file_header_add_driver_version(g->b, 13000);
  cucap_fb_file_header_add_toolkit_version(g->b, 13000);
  cucap_fb_file_header_add_devices(g->b, dv);
  cucap_fb_file_header_add_argv(g->b, av);
  cucap_fb_file_header_add_env(g->b, ev);
  cucap_fb_file_header_add_options(g->b, opts);
  cucap_fb_file_header_add_producer(g->b, prod);
  cucap_fb_ref root = cucap_fb_file_header_end(g->b);
  return cucap_fbb_finish(g->b, root, 1, size);
}

static void usage(FILE *f) {
  fputs("usage: cucap-testgen OUT [--records N] [--kill-at BYTES] [--seed S]\n"
        "                         [--level L] [--chunk-size BYTES] [--fixed-clock]\n",
        f);
}

int main(int argc, char **argv) {
  static const struct option lo[] = {
      {"records", required_argument, NULL, 'n'},
      {"kill-at", required_argument, NULL, 'k'},
      {"seed", required_argument, NULL, 's'},
      {"level", required_argument, NULL, 'l'},
      {"chunk-size", required_argument, NULL, 'c'},
      {"fixed-clock", no_argument, NULL, 'f'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  uint64_t nrec = 300, seed = 1;
  size_t chunk = 16 * 1024;
  int level = 1, fixed_clock = 0, c;
  gen g;
  memset(&g, 0, sizeof g);
  while ((c = getopt_long(argc, argv, "n:k:s:l:c:fh", lo, NULL)) != -1) {
    switch (c) {
    case 'n': nrec = strtoull(optarg, NULL, 10); break;
    case 'k': g.kill_at = strtoull(optarg, NULL, 10); break;
    case 's': seed = strtoull(optarg, NULL, 10); break;
    case 'l': level = atoi(optarg); break;
    case 'c': chunk = (size_t)strtoull(optarg, NULL, 10); break;
    case 'f': fixed_clock = 1; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (optind + 1 != argc) {
    usage(stderr);
    return 2;
  }
  g.rng = seed * 0x9e3779b97f4a7c15ull + 1;
  g.ctx = 0x55aa00000100ull;
  if (!fixed_clock) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    g.start_mono = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  }
  g.b = cucap_fbb_create(0);
  if (!g.b)
    die("builder", CUCAP_ERR_NOMEM);
  size_t hsize = 0;
  const uint8_t *hdr = build_header(&g, &hsize);
  if (!hdr)
    die("header", CUCAP_ERR_NOMEM);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.level = level;
  o.chunk_size = chunk;
  o.blob_chunk_size = 64 * 1024;
  cucap_status s = cucap_writer_create(argv[optind], &o, hdr, hsize, &g.w);
  if (s != CUCAP_OK)
    die(argv[optind], s);
  cucap_fbb_reset(g.b);

  /* setup */
  rec_devices(&g);
  rec_context(&g, CUCAP_FB_CONTEXTOP_CREATE, CB(cuCtxCreate_v2));
  rec_module_map(&g);
  rec_callstack(&g, 1);
  rec_callstack(&g, 2);
  rec_module(&g);
  rec_global(&g);
  rec_function(&g);
  for (int i = 0; i < 3; i++)
    rec_alloc(&g, i, (uint64_t)1 << (16 + i));
  rec_stream(&g, CUCAP_FB_STREAMOP_CREATE, CB(cuStreamCreate));
  rec_event(&g, CUCAP_FB_EVENTOP_CREATE, CB(cuEventCreate));
  rec_blob_piece(&g);
  rec_note(&g);
  /* main loop: copies, launches, per-launch extras */
  const uint64_t teardown = 9;
  uint64_t iter = 0;
  do {
    rec_memcpy(&g, 1, 4096 + (iter % 4) * 1024, 1);
    rec_memset(&g);
    rec_launch(&g, 2);
    rec_event(&g, CUCAP_FB_EVENTOP_RECORD, CB(cuEventRecord));
    rec_launch_hash(&g);
    rec_kernel_timing(&g);
    if (iter % 4 == 0) {
      rec_pc_sample(&g);
      rec_memcpy_2d_dtod(&g);
      rec_graph(&g);
    }
    rec_stream(&g, CUCAP_FB_STREAMOP_SYNCHRONIZE, CB(cuStreamSynchronize));
    rec_memcpy(&g, 0, 2048, 1);
    iter++;
  } while (g.records + teardown < nrec);
  /* teardown */
  rec_audit(&g);
  rec_snapshot(&g);
  rec_event(&g, CUCAP_FB_EVENTOP_DESTROY, CB(cuEventDestroy_v2));
  rec_stream(&g, CUCAP_FB_STREAMOP_DESTROY, CB(cuStreamDestroy_v2));
  for (int i = 0; i < 3; i++)
    rec_free(&g, i);
  rec_context(&g, CUCAP_FB_CONTEXTOP_DESTROY, CB(cuCtxDestroy_v2));

  s = cucap_writer_close(g.w);
  if (s != CUCAP_OK)
    die("close", s);
  cucap_writer_stats st;
  cucap_writer_get_stats(g.w, &st);
  cucap_writer_destroy(g.w);
  cucap_fbb_destroy(g.b);
  fprintf(stderr,
          "cucap-testgen: %s: %" PRIu64 " records, %" PRIu64 " chunks, %" PRIu64
          " blobs, %" PRIu64 " bytes\n",
          argv[optind], st.records, st.chunks, st.blobs, st.file_bytes);
  return 0;
}
