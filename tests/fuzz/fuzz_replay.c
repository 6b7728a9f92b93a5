/* fuzz_replay.c - structure-aware libFuzzer target for the replayer's record
 * handling: every input is a program that a generator turns into a capture
 * that passes verification (built with the generated FlatBuffers builder and
 * written by the stream writer), which is then replayed with
 * cucap_replay_run against the mock libcuda (tests/mock, loaded from next to
 * this binary or LD_LIBRARY_PATH).
 *
 * The generator draws every field from the input: body types, enum values
 * (in and out of range), handles from a small shared pool (so records refer
 * to each other, across kinds too), device addresses around a few 32 MiB
 * super-ranges or anywhere, sizes small or absurd, payload blobs present,
 * missing or of the wrong size, copy geometries, kernel images as PTX made up
 * from the input (kernel names, parameter lists) or raw bytes, argument
 * blocks, launch attributes, explicit-graph topologies, snapshots and launch
 * hashes, and the replay options (verify modes, relocation, --strict, --sync,
 * loops). Whatever it builds, the replayer must not crash, hang or trip ASan/
 * UBSan, and every run must leave the driver clean: after each replay the
 * mock is asked how many driver objects are still alive
 * (cuMockLiveObjects), and anything left is reported as a bug.
 *
 * The mock runs with CUCAP_MOCK_NO_KERNELS=1 (a capture may hand any pointer
 * to a kernel; on a GPU that is an illegal-address error, not a replayer
 * crash) and 256 MiB of device memory (absurd sizes fail as they would on a
 * GPU, with CUDA_ERROR_OUT_OF_MEMORY).
 *
 * Speed: an input costs about a millisecond of CPU, so a fuzzing job
 * covers many inputs (libFuzzer's exec/s line shows it). The capture is
 * written to a memfd; the mock zeroes whole pages of device memory by
 * dropping them (mock_fill) rather than writing them; the replayer zeroes
 * only resident pages of registered host ranges; the writer's blob buffers
 * match its blob chunk size. What is generated and checked is unchanged.
 *
 * Debugging a finding: CUCAP_FUZZ_REPLAY_KEEP=path.fb ./fuzz_replay crash-...
 * keeps the generated capture there (for cucap dump / cucap replay), logs at
 * info level and prints the replay report. */
#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cucap_cli.h"
#include "cucap_log.h"
#include "cucap_replay.h"
#include "cucap_verify.h"
#include "cucap_schema.h"
#include "cucap_writer.h"
#include "cucap_fb_builder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

typedef struct fz {
  const uint8_t *p;
  size_t n;
  cucap_fbb *b;
  cucap_writer *w;
  uint64_t seq, t;
} fz;

static uint64_t take(fz *z, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes && z->n; i++, z->n--)
    v |= (uint64_t)*z->p++ << (8 * i);
  return v;
}
static unsigned pick(fz *z, unsigned n) { return n ? (unsigned)(take(z, 1) % n) : 0; }
static int chance(fz *z, unsigned one_in) { return pick(z, one_in) == 0; }

/* A handle from a pool shared by every kind (0 and stray values included). */
static uint64_t handle(fz *z) {
  unsigned k = pick(z, 10);
  if (k == 0)
    return 0;
  if (k == 9)
    return take(z, 8);
  return 0x5000 + (uint64_t)k * 0x100;
}

/* Device addresses: inside one of four 32 MiB super-ranges well away from
 * the mock's own allocations, or anything. */
#define FZ_VA 0x7d0000000000ull
static uint64_t dev_addr(fz *z) {
  unsigned k = pick(z, 16);
  if (k == 0)
    return 0;
  if (k == 1)
    return take(z, 8);
  return FZ_VA + (uint64_t)pick(z, 4) * (32ull << 20) + (uint64_t)pick(z, 16) * (1ull << 20) +
         (take(z, 1) << 4);
}

static uint64_t size_of(fz *z) {
  switch (pick(z, 8)) {
  case 0: return 0;
  case 1: return take(z, 8);                       /* anything */
  case 2: return 1ull << pick(z, 34);              /* up to 8 GiB */
  default: return take(z, 2) + 1;                  /* small */
  }
}

static cucap_fb_hash128 fh(cucap_hash128 h) {
  cucap_fb_hash128 f = {h.lo, h.hi};
  return f;
}

/* A blob of n bytes (pattern from the input), stored; or an unknown hash. */
static cucap_fb_hash128 blob(fz *z, uint64_t n) {
  if (chance(z, 12)) {
    cucap_hash128 h = {take(z, 8), take(z, 8)};
    return fh(h); /* a blob that is not in the capture */
  }
  if (n > (64u << 10)) /* larger recorded sizes then disagree with the blob */
    n = 64u << 10;
  static uint8_t p[64u << 10];
  memset(p, (int)take(z, 1), n);
  for (uint64_t i = 0; i < n && i < 16; i++)
    p[i] = (uint8_t)take(z, 1);
  cucap_hash128 h = {0, 0};
  cucap_writer_put_blob(z->w, p, n, &h);
  return fh(h);
}

static cucap_fb_ref str(fz *z, const char *s) {
  return cucap_fbb_string(z->b, s, strlen(s));
}

static const char *const k_names[] = {"vec_add", "scale", "fill", "k0", "k1", "saxpy", ""};
#define NK (sizeof k_names / sizeof k_names[0])

/* PTX text with up to 3 kernels whose parameter lists come from the input;
 * the mock derives the layouts from it. */
static cucap_fb_hash128 ptx_image(fz *z, uint64_t *size) {
  char buf[2048];
  size_t o = (size_t)snprintf(buf, sizeof buf,
                              ".version 8.0\n.target sm_%u\n.address_size 64\n",
                              chance(z, 8) ? 100u : 90u);
  unsigned nk = 1 + pick(z, 3);
  for (unsigned k = 0; k < nk && o < sizeof buf - 256; k++) {
    o += (size_t)snprintf(buf + o, sizeof buf - o, ".visible .entry %s(", k_names[pick(z, NK)]);
    unsigned np = pick(z, 5);
    for (unsigned i = 0; i < np && o < sizeof buf - 128; i++) {
      static const char *const ty[] = {".u64", ".u32", ".f32", ".u8"};
      unsigned t = pick(z, 5);
      if (t == 4)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s.param .align 8 .b8 p%u[%u]",
                              i ? ", " : "", i, 1 + pick(z, 64));
      else
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s.param %s p%u", i ? ", " : "", ty[t], i);
    }
    o += (size_t)snprintf(buf + o, sizeof buf - o, ")\n{\nret;\n}\n");
  }
  *size = o + (chance(z, 4) ? 0 : 1); /* with or without the NUL */
  cucap_hash128 h = {0, 0};
  cucap_writer_put_blob(z->w, buf, *size, &h);
  return fh(h);
}

/* ---------------------------------------------------------------- bodies */

static cucap_fb_ref b_context(fz *z) {
  cucap_fb_context_start(z->b);
  cucap_fb_context_add_op(z->b, (uint8_t)pick(z, 12));
  cucap_fb_context_add_handle(z->b, handle(z));
  cucap_fb_context_add_device(z->b, chance(z, 8) ? (int)take(z, 4) : 0);
  cucap_fb_context_add_flags(z->b, (uint32_t)(chance(z, 4) ? take(z, 4) : 0));
  return cucap_fb_context_end(z->b);
}

static cucap_fb_ref b_module(fz *z) {
  uint8_t op = (uint8_t)pick(z, 7);
  uint64_t isz = 0;
  cucap_fb_hash128 img = {0, 0};
  unsigned src = pick(z, 4);
  uint8_t format = CUCAP_FB_IMAGEFORMAT_PTX;
  if (src <= 1) {
    img = ptx_image(z, &isz);
  } else if (src == 2) {
    isz = size_of(z);
    img = blob(z, isz); /* raw bytes: not an image */
    format = (uint8_t)pick(z, 9);
  }
  cucap_fb_ref jit = 0;
  if (chance(z, 3)) {
    cucap_fb_ref o[4];
    unsigned n = pick(z, 4);
    for (unsigned i = 0; i < n; i++) {
      cucap_fb_jit_option_start(z->b);
      cucap_fb_jit_option_add_option(z->b, (int32_t)pick(z, 40) - 2);
      cucap_fb_jit_option_add_value(z->b, take(z, 2));
      o[i] = cucap_fb_jit_option_end(z->b);
    }
    jit = cucap_fbb_vector_refs(z->b, o, n);
  }
  cucap_fb_module_start(z->b);
  cucap_fb_module_add_op(z->b, op);
  cucap_fb_module_add_kind(z->b, (uint8_t)pick(z, 4));
  cucap_fb_module_add_handle(z->b, handle(z));
  if (src <= 2) {
    cucap_fb_module_add_image(z->b, &img);
    cucap_fb_module_add_image_size(z->b, isz);
  }
  cucap_fb_module_add_format(z->b, format);
  if (jit)
    cucap_fb_module_add_jit_options(z->b, jit);
  return cucap_fb_module_end(z->b);
}

static cucap_fb_ref b_global(fz *z) {
  cucap_fb_ref name = chance(z, 8) ? 0 : str(z, chance(z, 2) ? "g" : "d_table");
  cucap_fb_global_start(z->b);
  cucap_fb_global_add_module(z->b, handle(z));
  if (name)
    cucap_fb_global_add_name(z->b, name);
  cucap_fb_global_add_address(z->b, dev_addr(z));
  cucap_fb_global_add_size(z->b, size_of(z));
  cucap_fb_global_add_kind(z->b, (uint8_t)pick(z, 3));
  return cucap_fb_global_end(z->b);
}

static cucap_fb_ref b_function(fz *z) {
  cucap_fb_param_info pi[12];
  unsigned np = pick(z, 13);
  uint32_t off = 0;
  for (unsigned i = 0; i < np; i++) {
    uint32_t sz = chance(z, 6) ? (uint32_t)take(z, 4) : (uint32_t)(1u << pick(z, 4));
    if (chance(z, 6))
      off = (uint32_t)take(z, 4);
    pi[i].offset = off;
    pi[i].size = sz;
    off += sz;
  }
  cucap_fb_ref params = np || chance(z, 2) ? cucap_fbb_vector(z->b, pi, np, sizeof pi[0], 4) : 0;
  cucap_fb_ref name = chance(z, 10) ? 0 : str(z, k_names[pick(z, NK)]);
  cucap_fb_function_start(z->b);
  cucap_fb_function_add_kind(z->b, (uint8_t)pick(z, 4));
  cucap_fb_function_add_handle(z->b, handle(z));
  cucap_fb_function_add_module(z->b, handle(z));
  if (name)
    cucap_fb_function_add_name(z->b, name);
  if (params)
    cucap_fb_function_add_params(z->b, params);
  cucap_fb_function_add_param_source(z->b, (uint8_t)pick(z, 3));
  cucap_fb_function_add_param_bytes(z->b, chance(z, 4) ? (uint32_t)take(z, 4) : off);
  return cucap_fb_function_end(z->b);
}

static cucap_fb_ref b_alloc(fz *z) {
  uint8_t kind = (uint8_t)pick(z, 15);
  uint64_t a = dev_addr(z);
  cucap_fb_alloc_start(z->b);
  cucap_fb_alloc_add_kind(z->b, kind);
  cucap_fb_alloc_add_address(z->b, a);
  cucap_fb_alloc_add_size(z->b, size_of(z));
  if (chance(z, 3)) {
    cucap_fb_alloc_add_pitch(z->b, size_of(z));
    cucap_fb_alloc_add_width(z->b, size_of(z));
    cucap_fb_alloc_add_height(z->b, take(z, 2));
    cucap_fb_alloc_add_elem_size(z->b, 1u << pick(z, 5));
  }
  if (chance(z, 3))
    cucap_fb_alloc_add_host_address(z->b, chance(z, 2) ? 0x7c0000000000ull + (take(z, 2) << 12)
                                                        : take(z, 8));
  cucap_fb_alloc_add_stream(z->b, handle(z));
  cucap_fb_alloc_add_handle(z->b, handle(z));
  return cucap_fb_alloc_end(z->b);
}

static cucap_fb_ref b_free(fz *z) {
  cucap_fb_free_start(z->b);
  cucap_fb_free_add_kind(z->b, (uint8_t)pick(z, 15));
  cucap_fb_free_add_address(z->b, dev_addr(z));
  cucap_fb_free_add_stream(z->b, handle(z));
  cucap_fb_free_add_size(z->b, size_of(z));
  return cucap_fb_free_end(z->b);
}

static cucap_fb_ref geometry(fz *z) {
  cucap_fb_copy_geometry_start(z->b);
  cucap_fb_copy_geometry_add_width_bytes(z->b, size_of(z));
  cucap_fb_copy_geometry_add_height(z->b, pick(z, 4) ? pick(z, 9) : take(z, 4));
  if (chance(z, 3))
    cucap_fb_copy_geometry_add_depth(z->b, pick(z, 4));
  cucap_fb_copy_geometry_add_src_x_bytes(z->b, chance(z, 3) ? take(z, 2) : 0);
  cucap_fb_copy_geometry_add_src_y(z->b, chance(z, 3) ? pick(z, 8) : 0);
  cucap_fb_copy_geometry_add_src_pitch(z->b, size_of(z));
  cucap_fb_copy_geometry_add_dst_x_bytes(z->b, chance(z, 3) ? take(z, 2) : 0);
  cucap_fb_copy_geometry_add_dst_y(z->b, chance(z, 3) ? pick(z, 8) : 0);
  cucap_fb_copy_geometry_add_dst_pitch(z->b, size_of(z));
  if (chance(z, 4)) {
    cucap_fb_copy_geometry_add_src_z(z->b, pick(z, 3));
    cucap_fb_copy_geometry_add_dst_z(z->b, pick(z, 3));
    cucap_fb_copy_geometry_add_src_height(z->b, pick(z, 9));
    cucap_fb_copy_geometry_add_dst_height(z->b, pick(z, 9));
  }
  cucap_fb_copy_geometry_add_src_memory_type(z->b, pick(z, 6));
  cucap_fb_copy_geometry_add_dst_memory_type(z->b, pick(z, 6));
  return cucap_fb_copy_geometry_end(z->b);
}

static cucap_fb_ref b_memcpy(fz *z) {
  uint64_t sz = size_of(z);
  int has = !chance(z, 6);
  cucap_fb_hash128 pl = has ? blob(z, chance(z, 4) ? size_of(z) : sz) : (cucap_fb_hash128){0, 0};
  cucap_fb_ref geo = chance(z, 4) ? geometry(z) : 0;
  cucap_fb_memcpy_start(z->b);
  cucap_fb_memcpy_add_kind(z->b, (uint8_t)pick(z, 13));
  cucap_fb_memcpy_add_dst(z->b, dev_addr(z));
  cucap_fb_memcpy_add_src(z->b, dev_addr(z));
  cucap_fb_memcpy_add_size(z->b, sz);
  cucap_fb_memcpy_add_async(z->b, (uint8_t)pick(z, 2));
  cucap_fb_memcpy_add_stream(z->b, handle(z));
  if (has) {
    cucap_fb_memcpy_add_payload(z->b, &pl);
    cucap_fb_memcpy_add_has_payload(z->b, 1);
  }
  if (geo)
    cucap_fb_memcpy_add_geometry(z->b, geo);
  return cucap_fb_memcpy_end(z->b);
}

static cucap_fb_ref b_memset(fz *z) {
  cucap_fb_memset_start(z->b);
  cucap_fb_memset_add_dst(z->b, dev_addr(z));
  cucap_fb_memset_add_value(z->b, (uint32_t)take(z, 4));
  cucap_fb_memset_add_elem_size(z->b, (uint8_t)(chance(z, 8) ? take(z, 1) : 1u << pick(z, 3)));
  cucap_fb_memset_add_count(z->b, size_of(z));
  cucap_fb_memset_add_height(z->b, pick(z, 3) ? 1 : take(z, 2));
  cucap_fb_memset_add_pitch(z->b, size_of(z));
  cucap_fb_memset_add_async(z->b, (uint8_t)pick(z, 2));
  cucap_fb_memset_add_stream(z->b, handle(z));
  return cucap_fb_memset_end(z->b);
}

static cucap_fb_ref b_launch(fz *z) {
  uint8_t args[512];
  size_t na = pick(z, 4) ? pick(z, 64) : take(z, 2) % sizeof args;
  for (size_t i = 0; i < na; i++)
    args[i] = chance(z, 2) ? (uint8_t)take(z, 1) : 0;
  if (na >= 8 && chance(z, 2)) { /* a pointer into a recorded range */
    uint64_t a = dev_addr(z);
    memcpy(args, &a, 8);
  }
  int use_blob = chance(z, 8);
  cucap_fb_hash128 ab = use_blob ? blob(z, chance(z, 2) ? na : size_of(z)) : (cucap_fb_hash128){0, 0};
  cucap_fb_ref av = !use_blob && (na || chance(z, 2)) ? cucap_fbb_vector(z->b, args, na, 1, 1) : 0;
  cucap_fb_ref attrs = 0;
  if (chance(z, 4)) {
    cucap_fb_ref at[4];
    unsigned n = pick(z, 5);
    for (unsigned i = 0; i < n; i++) {
      uint8_t v[80];
      size_t vl = pick(z, 4) ? 8 : pick(z, sizeof v);
      for (size_t k = 0; k < vl; k++)
        v[k] = (uint8_t)take(z, 1);
      cucap_fb_ref vv = cucap_fbb_vector(z->b, v, vl, 1, 1);
      cucap_fb_launch_attr_start(z->b);
      cucap_fb_launch_attr_add_id(z->b, (int32_t)pick(z, 24));
      cucap_fb_launch_attr_add_value(z->b, vv);
      at[i] = cucap_fb_launch_attr_end(z->b);
    }
    attrs = cucap_fbb_vector_refs(z->b, at, n);
  }
  cucap_fb_dim3 g = {1 + pick(z, 4), 1, 1}, bl = {1 + pick(z, 64), 1, 1};
  if (chance(z, 8)) {
    g.x = (uint32_t)take(z, 4);
    g.y = (uint32_t)take(z, 4);
    bl.y = (uint32_t)take(z, 2);
  }
  cucap_fb_launch_start(z->b);
  cucap_fb_launch_add_kind(z->b, (uint8_t)pick(z, 7));
  cucap_fb_launch_add_function(z->b, handle(z));
  if (!chance(z, 10)) {
    cucap_fb_launch_add_grid(z->b, &g);
    cucap_fb_launch_add_block(z->b, &bl);
  }
  cucap_fb_launch_add_shared_mem(z->b, chance(z, 8) ? (uint32_t)take(z, 4) : 0);
  cucap_fb_launch_add_stream(z->b, handle(z));
  if (av)
    cucap_fb_launch_add_args(z->b, av);
  if (use_blob) {
    cucap_fb_launch_add_args_blob(z->b, &ab);
    cucap_fb_launch_add_has_args_blob(z->b, 1);
  }
  if (attrs)
    cucap_fb_launch_add_attrs(z->b, attrs);
  cucap_fb_launch_add_launch_index(z->b, pick(z, 8));
  cucap_fb_launch_add_from_extra(z->b, (uint8_t)pick(z, 2));
  return cucap_fb_launch_end(z->b);
}

static cucap_fb_ref b_stream(fz *z) {
  cucap_fb_stream_start(z->b);
  cucap_fb_stream_add_op(z->b, (uint8_t)pick(z, 12));
  cucap_fb_stream_add_handle(z->b, handle(z));
  cucap_fb_stream_add_flags(z->b, (uint32_t)(chance(z, 4) ? take(z, 4) : pick(z, 2)));
  cucap_fb_stream_add_priority(z->b, (int32_t)pick(z, 8) - 6);
  cucap_fb_stream_add_event(z->b, handle(z));
  cucap_fb_stream_add_graph(z->b, handle(z));
  cucap_fb_stream_add_capture_mode(z->b, (int32_t)pick(z, 4));
  return cucap_fb_stream_end(z->b);
}

static cucap_fb_ref b_event(fz *z) {
  cucap_fb_event_start(z->b);
  cucap_fb_event_add_op(z->b, (uint8_t)pick(z, 7));
  cucap_fb_event_add_handle(z->b, handle(z));
  cucap_fb_event_add_flags(z->b, (uint32_t)(chance(z, 4) ? take(z, 4) : pick(z, 3)));
  cucap_fb_event_add_stream(z->b, handle(z));
  return cucap_fb_event_end(z->b);
}

static cucap_fb_ref b_graph(fz *z) {
  cucap_fb_ref nodes = 0;
  if (chance(z, 2)) {
    cucap_fb_ref nv[8];
    unsigned nn = pick(z, 9);
    for (unsigned i = 0; i < nn; i++) {
      uint8_t type = chance(z, 10) ? (uint8_t)take(z, 1) : (uint8_t)pick(z, 8);
      uint64_t deps[4];
      unsigned nd = pick(z, 4);
      for (unsigned k = 0; k < nd; k++)
        deps[k] = 0x9000 + pick(z, 10);
      cucap_fb_ref dv = nd ? cucap_fbb_vector(z->b, deps, nd, 8, 8) : 0;
      /* edge data (format 1.6): usually parallel to the dependencies,
       * sometimes of another length; values programmatic or anything */
      cucap_fb_ref ev = 0;
      if (nd && chance(z, 3)) {
        uint32_t edges[5];
        unsigned ne = chance(z, 5) ? pick(z, 5) : nd;
        for (unsigned k = 0; k < ne; k++)
          edges[k] = chance(z, 2) ? (uint32_t)take(z, 4) : 1u | 1u << 16;
        ev = ne ? cucap_fbb_vector(z->b, edges, ne, 4, 4) : 0;
      }
      cucap_fb_ref body = 0;
      if (type == CUCAP_FB_GRAPHNODETYPE_KERNEL && !chance(z, 6))
        body = b_launch(z);
      else if (type == CUCAP_FB_GRAPHNODETYPE_MEMCPY && !chance(z, 6))
        body = b_memcpy(z);
      else if (type == CUCAP_FB_GRAPHNODETYPE_MEMSET && !chance(z, 6))
        body = b_memset(z);
      cucap_fb_graph_node_start(z->b);
      cucap_fb_graph_node_add_handle(z->b, 0x9000 + pick(z, 10));
      cucap_fb_graph_node_add_type(z->b, type);
      if (dv)
        cucap_fb_graph_node_add_dependencies(z->b, dv);
      if (ev)
        cucap_fb_graph_node_add_dependency_edges(z->b, ev);
      if (body && type == CUCAP_FB_GRAPHNODETYPE_KERNEL)
        cucap_fb_graph_node_add_launch(z->b, body);
      if (body && type == CUCAP_FB_GRAPHNODETYPE_MEMCPY)
        cucap_fb_graph_node_add_memcpy(z->b, body);
      if (body && type == CUCAP_FB_GRAPHNODETYPE_MEMSET)
        cucap_fb_graph_node_add_memset(z->b, body);
      nv[i] = cucap_fb_graph_node_end(z->b);
    }
    nodes = cucap_fbb_vector_refs(z->b, nv, nn);
  }
  cucap_fb_graph_start(z->b);
  cucap_fb_graph_add_op(z->b, (uint8_t)pick(z, 10));
  cucap_fb_graph_add_graph(z->b, handle(z));
  cucap_fb_graph_add_exec(z->b, handle(z));
  cucap_fb_graph_add_stream(z->b, handle(z));
  cucap_fb_graph_add_flags(z->b, chance(z, 4) ? take(z, 8) : 0);
  if (nodes)
    cucap_fb_graph_add_nodes(z->b, nodes);
  return cucap_fb_graph_end(z->b);
}

static cucap_fb_ref regions(fz *z, int with_data) {
  cucap_fb_ref rv[4];
  unsigned n = pick(z, 5);
  for (unsigned i = 0; i < n; i++) {
    uint64_t sz = size_of(z);
    cucap_fb_hash128 d = with_data ? blob(z, chance(z, 3) ? size_of(z) : sz)
                                   : (cucap_fb_hash128){take(z, 8), take(z, 8)};
    cucap_fb_mem_region_start(z->b);
    cucap_fb_mem_region_add_address(z->b, dev_addr(z));
    cucap_fb_mem_region_add_size(z->b, sz);
    if (with_data)
      cucap_fb_mem_region_add_data(z->b, &d);
    else
      cucap_fb_mem_region_add_hash(z->b, &d);
    rv[i] = cucap_fb_mem_region_end(z->b);
  }
  return cucap_fbb_vector_refs(z->b, rv, n);
}

static cucap_fb_ref b_snapshot(fz *z) {
  cucap_fb_ref r = regions(z, 1);
  cucap_fb_snapshot_start(z->b);
  cucap_fb_snapshot_add_reason(z->b, (uint8_t)pick(z, 5));
  cucap_fb_snapshot_add_launch_index(z->b, pick(z, 8));
  cucap_fb_snapshot_add_regions(z->b, r);
  return cucap_fb_snapshot_end(z->b);
}

static cucap_fb_ref b_launch_hash(fz *z) {
  cucap_fb_ref r = regions(z, 0);
  cucap_fb_launch_hash_start(z->b);
  cucap_fb_launch_hash_add_launch_index(z->b, pick(z, 8));
  cucap_fb_launch_hash_add_launch_seq(z->b, pick(z, 64));
  cucap_fb_launch_hash_add_regions(z->b, r);
  return cucap_fb_launch_hash_end(z->b);
}

static cucap_fb_ref b_note(fz *z) {
  static const char *const kinds[] = {"unsupported", "driver_version", "unwrapped", "x"};
  cucap_fb_ref k = str(z, kinds[pick(z, 4)]);
  cucap_fb_ref t = chance(z, 2) ? str(z, "cuSomething") : 0;
  cucap_fb_note_start(z->b);
  cucap_fb_note_add_kind(z->b, k);
  if (t)
    cucap_fb_note_add_text(z->b, t);
  cucap_fb_note_add_value(z->b, chance(z, 2) ? 13000 : take(z, 8));
  return cucap_fb_note_end(z->b);
}

static cucap_fb_ref b_devices(fz *z) {
  cucap_fb_ref name = str(z, chance(z, 2) ? "cucap mock GPU" : "NVIDIA H100");
  cucap_fb_device_props_start(z->b);
  cucap_fb_device_props_add_name(z->b, name);
  cucap_fb_device_props_add_cc_major(z->b, (int32_t)pick(z, 12));
  cucap_fb_device_props_add_cc_minor(z->b, (int32_t)pick(z, 3));
  cucap_fb_device_props_add_total_mem(z->b, size_of(z));
  cucap_fb_ref d = cucap_fb_device_props_end(z->b);
  cucap_fb_ref dv = cucap_fbb_vector_refs(z->b, &d, 1);
  cucap_fb_devices_start(z->b);
  cucap_fb_devices_add_driver_version(z->b, (int32_t)(chance(z, 2) ? 13000 : take(z, 4)));
  cucap_fb_devices_add_devices(z->b, dv);
  return cucap_fb_devices_end(z->b);
}

/* Driver calls the recorder keeps without a body (some change GPU state). */
static const uint32_t k_bodyless[] = {0, 1, 17, 64, 100, 200, 300, 400, 500, 600, 700, 800};

static void one_record(fz *z) {
  unsigned kind = pick(z, 18);
  uint8_t bt = 0;
  cucap_fb_ref body = 0;
  switch (kind) {
  case 0: bt = CUCAP_FB_BODY_CONTEXT; body = b_context(z); break;
  case 1: bt = CUCAP_FB_BODY_MODULE; body = b_module(z); break;
  case 2: bt = CUCAP_FB_BODY_GLOBAL; body = b_global(z); break;
  case 3: bt = CUCAP_FB_BODY_FUNCTION; body = b_function(z); break;
  case 4: bt = CUCAP_FB_BODY_ALLOC; body = b_alloc(z); break;
  case 5: bt = CUCAP_FB_BODY_FREE; body = b_free(z); break;
  case 6: bt = CUCAP_FB_BODY_MEMCPY; body = b_memcpy(z); break;
  case 7: bt = CUCAP_FB_BODY_MEMSET; body = b_memset(z); break;
  case 8: case 9: bt = CUCAP_FB_BODY_LAUNCH; body = b_launch(z); break;
  case 10: bt = CUCAP_FB_BODY_STREAM; body = b_stream(z); break;
  case 11: bt = CUCAP_FB_BODY_EVENT; body = b_event(z); break;
  case 12: bt = CUCAP_FB_BODY_GRAPH; body = b_graph(z); break;
  case 13: bt = CUCAP_FB_BODY_SNAPSHOT; body = b_snapshot(z); break;
  case 14: bt = CUCAP_FB_BODY_LAUNCHHASH; body = b_launch_hash(z); break;
  case 15: bt = CUCAP_FB_BODY_NOTE; body = b_note(z); break;
  case 16: bt = CUCAP_FB_BODY_DEVICES; body = b_devices(z); break;
  default: break; /* a call without a body */
  }
  cucap_fb_record_start(z->b);
  cucap_fb_record_add_seq(z->b, chance(z, 16) ? 0 : ++z->seq);
  cucap_fb_record_add_tid(z->b, 100 + pick(z, 3));
  cucap_fb_record_add_t_enter(z->b, z->t);
  cucap_fb_record_add_t_exit(z->b, z->t + 100);
  z->t += 1000;
  cucap_fb_record_add_call(z->b, kind == 17 ? k_bodyless[pick(z, 12)] + pick(z, 4)
                                            : (uint32_t)pick(z, 200));
  cucap_fb_record_add_variant(z->b, (uint8_t)(chance(z, 4) ? pick(z, 4) : 0));
  cucap_fb_record_add_result(z->b, chance(z, 16) ? (int32_t)take(z, 2) : 0);
  if (chance(z, 3))
    cucap_fb_record_add_context(z->b, handle(z));
  if (body)
    cucap_fb_record_add_body(z->b, bt, body);
  cucap_fb_ref root = cucap_fb_record_end(z->b);
  size_t sz = 0;
  const uint8_t *buf = cucap_fbb_finish(z->b, root, 1, &sz);
  if (buf)
    cucap_writer_append(z->w, buf, sz, NULL);
  cucap_fbb_reset(z->b);
}

/* ---------------------------------------------------------------- run */

static char g_path[PATH_MAX];
static int g_verbose;
static char g_libcuda[PATH_MAX];
typedef int (*live_fn)(unsigned long long *, char *, size_t); /* CUresult */
static live_fn g_live;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("CUCAP_MOCK_NO_KERNELS", "1", 1);
  setenv("CUCAP_MOCK_MEM_LIMIT", "268435456", 1);
  const char *keep = getenv("CUCAP_FUZZ_REPLAY_KEEP");
  g_verbose = keep && *keep;
  cucap_log_set_level(g_verbose ? CUCAP_LOG_INFO : CUCAP_LOG_OFF);
  const char *tmp = getenv("TMPDIR");
  /* The capture lives in memory: a memfd, written and read through its
   * /proc/self/fd path (the writer truncates it per input). A file on disk
   * cost a create, a truncate and block frees per input. */
  int mfd = g_verbose ? -1 : memfd_create("cucap-fuzz-replay", 0);
  if (g_verbose)
    snprintf(g_path, sizeof g_path, "%s", keep);
  else if (mfd >= 0)
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", mfd);
  else
    snprintf(g_path, sizeof g_path, "%s/cucap-fuzz-replay-%ld.fb", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
  /* the mock next to this binary, else the dynamic loader's search */
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  snprintf(g_libcuda, sizeof g_libcuda, "libcuda.so.1");
  if (n > 0) {
    exe[n] = 0;
    char *s = strrchr(exe, '/');
    if (s) {
      *s = 0;
      char cand[PATH_MAX];
      if ((size_t)snprintf(cand, sizeof cand, "%s/libcuda.so.1", exe) < sizeof cand &&
          access(cand, R_OK) == 0)
        snprintf(g_libcuda, sizeof g_libcuda, "%s", cand);
    }
  }
  void *lib = dlopen(g_libcuda, RTLD_NOW | RTLD_LOCAL);
  g_live = lib ? (live_fn)dlsym(lib, "cuMockLiveObjects") : NULL;
  if (!g_live) {
    fprintf(stderr, "fuzz_replay: %s is not the cucap mock driver (no cuMockLiveObjects)\n",
            g_libcuda);
    exit(1);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz z = {data, size, NULL, NULL, 0, 0};
  cucap_replay_options o;
  cucap_replay_options_init(&o);
  cucap_verify_options vo;
  cucap_verify_options_init(&vo);
  unsigned fl = (unsigned)take(&z, 1);
  vo.mode = (cucap_verify_mode)(fl % 3);
  o.relocate = (fl >> 2) & 1;
  o.strict = (fl >> 3) & 1;
  o.sync_each = (fl >> 4) & 1;
  o.loops = 1 + ((fl >> 5) & 1);
  o.allow_partial = 1;
  o.libcuda = g_libcuda;

  z.b = cucap_fbb_create(4096);
  cucap_fbb *hb = cucap_fbb_create(1024);
  if (!z.b || !hb)
    abort();
  cucap_fb_ref prod = cucap_fbb_string(hb, "fuzz_replay", 11);
  cucap_fb_file_header_start(hb);
  cucap_fb_file_header_add_format_major(hb, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_format_minor(hb, CUCAP_FORMAT_MINOR);
  cucap_fb_file_header_add_producer(hb, prod);
  cucap_fb_file_header_add_start_mono_ns(hb, 1000);
  cucap_fb_ref h = cucap_fb_file_header_end(hb);
  size_t hsz = 0;
  const uint8_t *hdr = cucap_fbb_finish(hb, h, 1, &hsz);
  cucap_writer_options wo;
  cucap_writer_options_init(&wo);
  wo.chunk_size = 4096 << pick(&z, 4); /* several record chunks, sometimes */
  wo.blob_chunk_size = 65536;
  wo.flush_interval_ms = 60000;
  if (!hdr || cucap_writer_create(g_path, &wo, hdr, hsz, &z.w) != CUCAP_OK)
    abort();
  cucap_fbb_destroy(hb);
  for (int i = 0; i < 96 && z.n; i++)
    one_record(&z);
  if (cucap_writer_close(z.w) != CUCAP_OK)
    abort(); /* the generator must always produce a capture */
  cucap_writer_destroy(z.w);
  cucap_fbb_destroy(z.b);

  cucap_replay_report rep;
  cucap_verify_report vr;
  int exit_code = cucap_cli_exit_code(cucap_verify_replay_run(g_path, &o, &vo, &rep, &vr));
  if (g_verbose) {
    cucap_replay_report_print(&rep, stderr, 0);
    cucap_verify_report_print(&vr, stderr, 0);
    fprintf(stderr, "exit %d: %s\n", exit_code, rep.error);
  }
  if (exit_code < 0 || exit_code > CUCAP_EXIT_IO) {
    fprintf(stderr, "fuzz_replay: undocumented exit code %d (%s)\n", exit_code, rep.error);
    abort();
  }
  unsigned long long live = 0;
  char desc[512] = "";
  if (g_live(&live, desc, sizeof desc) != 0 || live) {
    fprintf(stderr, "fuzz_replay: the replay (exit %d: %s) left driver objects alive: %s\n",
            exit_code, rep.error, desc);
    abort();
  }
  return 0;
}
