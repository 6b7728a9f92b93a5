/* test_replay_robust.c - the replayer never crashes on a valid capture.
 *
 * Builds "hollow" captures that pass the reader's verification but carry
 * the least a record can carry: every Body member as an empty table, every
 * Body type without its table, a Graph{Instantiate} whose nodes are empty
 * tables of every node type, references to handles, functions, blobs and
 * executables that were never created, and replays them on the mock
 * libcuda in every mode (default, --verify, --verify=launch, --relocate,
 * --strict, --sync, 2 loops). Each run must return a report (a skip, an
 * error, exit 3 for --strict) - a crash fails the test (and ASan/UBSan in the
 * sanitizer build name the line). A capture that destroys a context still
 * holding a CUDA array, a mipmapped array and a texture object, and one
 * destroyed after a stream capture in it took a copy to the host (whose
 * page-locked buffer the replay keeps to the end of the pass): the mock
 * aborts if the replay touches any of them afterwards (its end-of-run
 * teardown included). The replayer's handle map is iterated with its
 * out-of-band keys 0 and 1 (cucap_map_next: a context created under a
 * recorded handle 0 was leaked by the teardown). Skips (77) without the
 * mock. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_log.h"
#include "cucap_replay.h"
#include "cucap_cli.h"
#include "cucap_verify.h"
#include "cucap_schema.h"
#include "cucap_writer.h"
#include "replay_internal.h"
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

static void emit(uint8_t type, cucap_fb_ref body) {
  cucap_fb_record_start(B);
  cucap_fb_record_add_seq(B, ++SEQ);
  cucap_fb_record_add_t_exit(B, SEQ * 1000);
  cucap_fb_record_add_body(B, type, body); /* body 0: the type without a table */
  tc_record_append(B, W);
}

/* An empty table (no fields) usable as any Body member. */
static cucap_fb_ref empty_table(void) {
  cucap_fb_note_start(B); /* any table type: the layout of an empty one is the same */
  return cucap_fb_note_end(B);
}

static void open_capture(const char *path) {
  W = tc_capture_open(path, &B);
  SEQ = 0;
}

static void close_capture(void) { tc_capture_close(&B, &W); }

/* Every body type empty, then every body type without a table. */
static void write_hollow(const char *path) {
  open_capture(path);
  for (int pass = 0; pass < 2; pass++)
    for (uint8_t t = 1; t <= CUCAP_FB_BODY_NVTX + 1; t++) /* +1: a newer member */
      emit(t, pass ? 0 : empty_table());
  close_capture();
}

/* Records that name things that were never created, and a graph whose
 * recorded nodes are hollow. */
#define NSECTIONS 6
static void write_dangling(const char *path, int section) {
  open_capture(path);
  /* device memory the copies may legally touch */
  cucap_fb_alloc_start(B);
  cucap_fb_alloc_add_address(B, 0x7e5500000000ull);
  cucap_fb_alloc_add_size(B, 1 << 20);
  emit(CUCAP_FB_BODY_ALLOC, cucap_fb_alloc_end(B));
  const uint64_t F = 0xF00, S = 0x5100, E = 0xE100, GX = 0x6100, G = 0x6200;
  cucap_fb_hash128 nohash = {0x1234, 0x5678}; /* a blob that is not stored */
  if (section == 0) {
  /* module load whose image blob is missing, PTX format */
  cucap_fb_module_start(B);
  cucap_fb_module_add_op(B, CUCAP_FB_MODULEOP_LOAD);
  cucap_fb_module_add_handle(B, 0xD00);
  cucap_fb_module_add_image(B, &nohash);
  cucap_fb_module_add_format(B, CUCAP_FB_IMAGEFORMAT_PTX);
  emit(CUCAP_FB_BODY_MODULE, cucap_fb_module_end(B));
  /* a function of that module, a global of it */
  cucap_fb_ref fname = cucap_fbb_string(B, "k", 1);
  cucap_fb_function_start(B);
  cucap_fb_function_add_handle(B, F);
  cucap_fb_function_add_module(B, 0xD00);
  cucap_fb_function_add_name(B, fname);
  emit(CUCAP_FB_BODY_FUNCTION, cucap_fb_function_end(B));
  cucap_fb_function_start(B); /* a KernelFunction of an unknown kernel, no name */
  cucap_fb_function_add_kind(B, CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION);
  cucap_fb_function_add_handle(B, F + 1);
  cucap_fb_function_add_module(B, 0xBAD);
  emit(CUCAP_FB_BODY_FUNCTION, cucap_fb_function_end(B));
  cucap_fb_global_start(B);
  cucap_fb_global_add_module(B, 0xD00);
  emit(CUCAP_FB_BODY_GLOBAL, cucap_fb_global_end(B));
  }
  if (section == 1)
  /* launches: unknown function, every kind, args blob missing, attrs */
  for (uint8_t k = 0; k <= CUCAP_FB_LAUNCHKIND_COOPERATIVEMULTIDEVICE; k++) {
    cucap_fb_ref at = 0;
    if (k == CUCAP_FB_LAUNCHKIND_KERNELEX) {
      uint8_t ev[64] = {0};
      uint64_t bogus = 0xdead0000; /* a CUevent of the recorded process */
      memcpy(ev, &bogus, 8);
      cucap_fb_ref v = cucap_fbb_vector(B, ev, sizeof ev, 1, 1);
      cucap_fb_launch_attr_start(B);
      cucap_fb_launch_attr_add_id(B, 7); /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT */
      cucap_fb_launch_attr_add_value(B, v);
      cucap_fb_ref a = cucap_fb_launch_attr_end(B);
      at = cucap_fbb_vector_refs(B, &a, 1);
    }
    cucap_fb_launch_start(B);
    cucap_fb_launch_add_kind(B, k);
    cucap_fb_launch_add_function(B, k & 1 ? F : 0x777);
    cucap_fb_launch_add_stream(B, S);
    cucap_fb_launch_add_args_blob(B, &nohash);
    cucap_fb_launch_add_has_args_blob(B, (uint8_t)(k & 1));
    if (at)
      cucap_fb_launch_add_attrs(B, at);
    emit(CUCAP_FB_BODY_LAUNCH, cucap_fb_launch_end(B));
  }
  if (section == 2)
  /* copies: missing payloads, unknown stream, every kind, geometry w/o sizes */
  for (uint8_t k = 0; k <= CUCAP_FB_MEMCPYKIND_PREFETCH; k++) {
    cucap_fb_ref geo = 0;
    if (k & 1) {
      cucap_fb_copy_geometry_start(B);
      cucap_fb_copy_geometry_add_depth(B, 1);
      geo = cucap_fb_copy_geometry_end(B);
    }
    cucap_fb_memcpy_start(B);
    cucap_fb_memcpy_add_kind(B, k);
    cucap_fb_memcpy_add_dst(B, 0x7e5500000000ull);
    cucap_fb_memcpy_add_src(B, 0x7e5500000000ull);
    cucap_fb_memcpy_add_size(B, 4096);
    cucap_fb_memcpy_add_stream(B, S);
    cucap_fb_memcpy_add_payload(B, &nohash);
    cucap_fb_memcpy_add_has_payload(B, 1);
    if (geo)
      cucap_fb_memcpy_add_geometry(B, geo);
    emit(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B));
  }
  if (section == 3) {
  /* stream / event ops on handles never created */
  for (uint8_t op = 0; op <= CUCAP_FB_STREAMOP_WRITEVALUE; op++) {
    if (op == CUCAP_FB_STREAMOP_CREATE || op == CUCAP_FB_STREAMOP_BEGINCAPTURE)
      continue; /* these would create or start something real */
    cucap_fb_stream_start(B);
    cucap_fb_stream_add_op(B, op);
    cucap_fb_stream_add_handle(B, S);
    cucap_fb_stream_add_event(B, E);
    emit(CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(B));
  }
  for (uint8_t op = 1; op <= CUCAP_FB_EVENTOP_ELAPSEDTIME; op++) {
    cucap_fb_event_start(B);
    cucap_fb_event_add_op(B, op);
    cucap_fb_event_add_handle(B, E);
    cucap_fb_event_add_stream(B, S);
    emit(CUCAP_FB_BODY_EVENT, cucap_fb_event_end(B));
  }
  }
  if (section == 4) {
  /* explicit graphs whose one node is a hollow table of each type (the
   * replayer rebuilds each at its Instantiate) */
  for (unsigned t = 0; t <= 14; t++) {
    cucap_fb_graph_node_start(B);
    cucap_fb_graph_node_add_handle(B, 0x9000 + t);
    cucap_fb_graph_node_add_type(B, t < 14 ? (uint8_t)t : CUCAP_FB_GRAPHNODETYPE_UNKNOWN);
    cucap_fb_ref node = cucap_fb_graph_node_end(B);
    cucap_fb_ref nv = cucap_fbb_vector_refs(B, &node, 1);
    cucap_fb_graph_start(B);
    cucap_fb_graph_add_op(B, CUCAP_FB_GRAPHOP_INSTANTIATE);
    cucap_fb_graph_add_graph(B, G + t);
    cucap_fb_graph_add_exec(B, GX + t);
    cucap_fb_graph_add_nodes(B, nv);
    emit(CUCAP_FB_BODY_GRAPH, cucap_fb_graph_end(B));
    cucap_fb_graph_start(B);
    cucap_fb_graph_add_op(B, CUCAP_FB_GRAPHOP_LAUNCH);
    cucap_fb_graph_add_exec(B, GX + t);
    emit(CUCAP_FB_BODY_GRAPH, cucap_fb_graph_end(B));
  }
  for (uint8_t op = 0; op <= CUCAP_FB_GRAPHOP_CLONE + 4; op++) { /* +: newer ops */
    cucap_fb_graph_start(B);
    cucap_fb_graph_add_op(B, op);
    cucap_fb_graph_add_graph(B, G);
    cucap_fb_graph_add_exec(B, GX);
    cucap_fb_graph_add_stream(B, S);
    emit(CUCAP_FB_BODY_GRAPH, cucap_fb_graph_end(B));
  }
  }
  if (section == 5) {
  /* a context destroyed that was never created; frees of unknown memory */
  cucap_fb_context_start(B);
  cucap_fb_context_add_op(B, CUCAP_FB_CONTEXTOP_DESTROY);
  cucap_fb_context_add_handle(B, 0xC0C0);
  emit(CUCAP_FB_BODY_CONTEXT, cucap_fb_context_end(B));
  cucap_fb_free_start(B);
  cucap_fb_free_add_address(B, 0x7e5500000000ull);
  emit(CUCAP_FB_BODY_FREE, cucap_fb_free_end(B));
  /* snapshots and launch hashes whose regions carry no data */
  cucap_fb_mem_region_start(B);
  cucap_fb_mem_region_add_address(B, 0x7e5500000000ull);
  cucap_fb_mem_region_add_size(B, 64);
  cucap_fb_ref rg = cucap_fb_mem_region_end(B);
  cucap_fb_ref rv = cucap_fbb_vector_refs(B, &rg, 1);
  cucap_fb_snapshot_start(B);
  cucap_fb_snapshot_add_regions(B, rv);
  emit(CUCAP_FB_BODY_SNAPSHOT, cucap_fb_snapshot_end(B));
  cucap_fb_mem_region_start(B);
  cucap_fb_mem_region_add_size(B, 64);
  rg = cucap_fb_mem_region_end(B);
  rv = cucap_fbb_vector_refs(B, &rg, 1);
  cucap_fb_launch_hash_start(B);
  cucap_fb_launch_hash_add_regions(B, rv);
  emit(CUCAP_FB_BODY_LAUNCHHASH, cucap_fb_launch_hash_end(B));
  }
  close_capture();
}

static void emit_object(uint8_t kind, uint64_t handle, uint64_t parent, uint32_t level,
                        const void *res, size_t nres, const void *tex, size_t ntex) {
  cucap_fb_ref r = res ? cucap_fbb_vector(B, res, nres, 1, 1) : 0;
  cucap_fb_ref t = tex ? cucap_fbb_vector(B, tex, ntex, 1, 1) : 0;
  cucap_fb_object_start(B);
  cucap_fb_object_add_kind(B, kind);
  cucap_fb_object_add_handle(B, handle);
  if (parent)
    cucap_fb_object_add_parent(B, parent);
  cucap_fb_object_add_level(B, level);
  if (r)
    cucap_fb_object_add_resource(B, r);
  if (t)
    cucap_fb_object_add_texture(B, t);
  emit(CUCAP_FB_BODY_OBJECT, cucap_fb_object_end(B));
}

/* A created context with an array, a texture object on it and a mipmapped
 * array (and one of its levels) in it, destroyed with them still alive (the
 * driver frees them with the context). */
static void write_ctx_objects(const char *path) {
  open_capture(path);
  const uint64_t C = 0xC100, A = 0xA100, T = 0x100, M = 0xB100, L = 0xA200;
  cucap_fb_context_start(B);
  cucap_fb_context_add_op(B, CUCAP_FB_CONTEXTOP_CREATE);
  cucap_fb_context_add_handle(B, C);
  emit(CUCAP_FB_BODY_CONTEXT, cucap_fb_context_end(B));
  cucap_fb_alloc_start(B); /* cuArrayCreate: 16 x UNSIGNED_INT8 x 1 */
  cucap_fb_alloc_add_kind(B, CUCAP_FB_ALLOCKIND_ARRAY);
  cucap_fb_alloc_add_address(B, A);
  cucap_fb_alloc_add_width(B, 16);
  cucap_fb_alloc_add_flags(B, (uint64_t)CU_AD_FORMAT_UNSIGNED_INT8 << 8 | 1);
  emit(CUCAP_FB_BODY_ALLOC, cucap_fb_alloc_end(B));
  CUDA_RESOURCE_DESC rd;
  memset(&rd, 0, sizeof rd);
  rd.resType = CU_RESOURCE_TYPE_ARRAY;
  rd.res.array.hArray = (CUarray)(uintptr_t)A;
  CUDA_TEXTURE_DESC td;
  memset(&td, 0, sizeof td);
  emit_object(CUCAP_FB_OBJECTKIND_TEXOBJECT, T, 0, 0, &rd, sizeof rd, &td, sizeof td);
  CUDA_ARRAY3D_DESCRIPTOR ad;
  memset(&ad, 0, sizeof ad);
  ad.Width = ad.Height = 16;
  ad.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  ad.NumChannels = 1;
  emit_object(CUCAP_FB_OBJECTKIND_MIPMAPPEDARRAY, M, 0, 2, &ad, sizeof ad, NULL, 0);
  emit_object(CUCAP_FB_OBJECTKIND_MIPMAPPEDLEVEL, L, M, 1, NULL, 0, NULL, 0);
  /* a capture in it with a copy to the host, its graph instantiated and
   * launched */
  const uint64_t S = 0x5100, G = 0x6200, GX = 0x6100, D = 0x7e5500000000ull;
  cucap_fb_alloc_start(B);
  cucap_fb_alloc_add_address(B, D);
  cucap_fb_alloc_add_size(B, 1 << 20);
  emit(CUCAP_FB_BODY_ALLOC, cucap_fb_alloc_end(B));
  cucap_fb_stream_start(B);
  cucap_fb_stream_add_op(B, CUCAP_FB_STREAMOP_CREATE);
  cucap_fb_stream_add_handle(B, S);
  emit(CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(B));
  cucap_fb_stream_start(B);
  cucap_fb_stream_add_op(B, CUCAP_FB_STREAMOP_BEGINCAPTURE);
  cucap_fb_stream_add_handle(B, S);
  cucap_fb_stream_add_capture_mode(B, CU_STREAM_CAPTURE_MODE_GLOBAL);
  emit(CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(B));
  cucap_fb_memcpy_start(B);
  cucap_fb_memcpy_add_kind(B, CUCAP_FB_MEMCPYKIND_DTOH);
  cucap_fb_memcpy_add_dst(B, 0x10000); /* the program's host buffer */
  cucap_fb_memcpy_add_src(B, D);
  cucap_fb_memcpy_add_size(B, 4096);
  cucap_fb_memcpy_add_async(B, 1);
  cucap_fb_memcpy_add_stream(B, S);
  emit(CUCAP_FB_BODY_MEMCPY, cucap_fb_memcpy_end(B));
  cucap_fb_stream_start(B);
  cucap_fb_stream_add_op(B, CUCAP_FB_STREAMOP_ENDCAPTURE);
  cucap_fb_stream_add_handle(B, S);
  cucap_fb_stream_add_graph(B, G);
  emit(CUCAP_FB_BODY_STREAM, cucap_fb_stream_end(B));
  cucap_fb_graph_start(B);
  cucap_fb_graph_add_op(B, CUCAP_FB_GRAPHOP_INSTANTIATE);
  cucap_fb_graph_add_graph(B, G);
  cucap_fb_graph_add_exec(B, GX);
  emit(CUCAP_FB_BODY_GRAPH, cucap_fb_graph_end(B));
  cucap_fb_graph_start(B);
  cucap_fb_graph_add_op(B, CUCAP_FB_GRAPHOP_LAUNCH);
  cucap_fb_graph_add_exec(B, GX);
  cucap_fb_graph_add_stream(B, S);
  emit(CUCAP_FB_BODY_GRAPH, cucap_fb_graph_end(B));
  cucap_fb_context_start(B);
  cucap_fb_context_add_op(B, CUCAP_FB_CONTEXTOP_DESTROY);
  cucap_fb_context_add_handle(B, C);
  emit(CUCAP_FB_BODY_CONTEXT, cucap_fb_context_end(B));
  close_capture();
}

/* The replayer's handle map keeps keys 0 and 1 out of band; every loop
 * that tears down what a map holds goes through cucap_map_next, which must see
 * them (a context created under a recorded handle 0, by a damaged capture,
 * was leaked: LeakSanitizer in the --strict run of the hollow capture). */
static void map_iteration(void) {
  cucap_map m = {0};
  const uint64_t keys[] = {0, 1, 5, (uint64_t)1 << 40, 77};
  for (size_t i = 0; i < 5; i++)
    cucap_map_put(&m, keys[i], 100 + i);
  for (uint64_t k = 1000; k < 1100; k++) /* grow it */
    cucap_map_put(&m, k, k);
  for (uint64_t k = 1000; k < 1100; k++)
    cucap_map_del(&m, k, NULL);
  cucap_map_del(&m, 5, NULL);
  size_t pos = 0, n = 0;
  uint64_t k, v, seen = 0;
  while (cucap_map_next(&m, &pos, &k, &v)) {
    n++;
    for (size_t i = 0; i < 5; i++)
      if (keys[i] == k && v == 100 + i)
        seen |= 1u << i;
    if (k == 0) /* deleting the entry just returned is allowed */
      cucap_map_del(&m, 0, NULL);
  }
  checks++;
  TU_CHECK(n == 4 && seen == (1u << 0 | 1u << 1 | 1u << 3 | 1u << 4));
  pos = n = 0;
  while (cucap_map_next(&m, &pos, &k, NULL))
    n++;
  checks++;
  TU_CHECK(n == 3 && !cucap_map_get(&m, 0, NULL) && cucap_map_get(&m, 1, NULL));
  cucap_map_free(&m);
  pos = 0;
  checks++;
  TU_CHECK(!cucap_map_next(&m, &pos, &k, &v)); /* empty map */
}

static void run_all(const char *path, const char *what) {
  for (int mode = 0; mode < 7; mode++) {
    cucap_replay_options o;
    cucap_replay_report rep;
    cucap_replay_options_init(&o);
    cucap_verify_options_init(&vo);
    o.libcuda = mock;
    switch (mode) {
    case 1: vo.mode = CUCAP_VERIFY_COPIES; break;
    case 2: vo.mode = CUCAP_VERIFY_LAUNCH; break;
    case 3: o.relocate = 1; break;
    case 4: o.strict = 1; break;
    case 5: o.sync_each = 1; break;
    case 6: o.loops = 2; vo.mode = CUCAP_VERIFY_COPIES; break;
    default: break;
    }
    cucap_status st = vrun(path, &o, &rep);
    checks++;
    /* a report came back: that is the point (no crash); --strict refuses */
    if (mode == 4) { /* anything skipped is refused, by name */
      TU_CHECK(st == CUCAP_OK ? exit_code == 0 && rep.skipped == 0
                              : exit_code == CUCAP_EXIT_BAD_INPUT &&
                                    strstr(rep.error, "--strict: record") &&
                                    strstr(rep.error, "cannot be replayed: "));
    } else {
      TU_CHECK(exit_code == 0 || exit_code == CUCAP_EXIT_MISMATCH ||
               exit_code == CUCAP_EXIT_IO);
    }
    fprintf(stderr, "%s mode %d: exit %d, %llu skipped%s%s\n", what, mode,
            exit_code, (unsigned long long)rep.skipped, rep.error[0] ? ": " : "",
            rep.error);
  }
}

int main(void) {
  map_iteration();
  const char *bd = getenv("CUCAP_BUILD_DIR");
  struct stat sb;
  snprintf(mock, sizeof mock, "%s/tests/mock/libcuda.so.1", bd ? bd : ".");
  if (!bd || stat(mock, &sb) != 0) {
    printf("test_replay_robust: mock libcuda not built (%s); skipping\n", mock);
    return tu_finish("test_replay_robust", checks) ? 1 : 77;
  }
  cucap_log_set_level(CUCAP_LOG_ERROR);
  char *h = tu_tmp_path("replay_hollow"), *d = tu_tmp_path("replay_dangling");
  write_hollow(h);
  run_all(h, "hollow");
  for (int sec = 0; sec < NSECTIONS; sec++) {
    char what[32];
    snprintf(what, sizeof what, "dangling %d", sec);
    write_dangling(d, sec);
    run_all(d, what);
  }
  /* objects that die with their context; the replay of this capture is
   * exact, so it must succeed in every mode */
  write_ctx_objects(d);
  run_all(d, "context objects");
  cucap_replay_options o;
  cucap_replay_report rep;
  cucap_replay_options_init(&o);
  cucap_verify_options_init(&vo);
  o.libcuda = mock;
  o.strict = 1;
  o.loops = 2;
  checks++;
  TU_CHECK(vrun(d, &o, &rep) == CUCAP_OK && exit_code == 0 &&
           rep.skipped == 0 && rep.executed >= 2 * 12);
  unlink(h);
  unlink(d);
  free(h);
  free(d);
  return tu_finish("test_replay_robust", checks);
}
