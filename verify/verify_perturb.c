/* verify_perturb.c - perturbed passes of --verify (verify_internal.h): the
 * extra passes verify asks for run with the GPU's scheduling disturbed, so
 * that a result that depends on scheduling is seen to vary.
 *
 * Why. A byte is called nondeterministic only if it was seen to differ
 * between passes. Replays in one process tend to schedule alike: the order
 * in which threads win atomics (simpleAtomicIntrinsics' atomicCAS chain,
 * newdelete's push/pop) came out the same in 7 replays on the H100 while the
 * recording had another one - a mismatch "same in all 7 passes". rr's chaos
 * mode answers the same problem on the CPU by perturbing the scheduler.
 *
 * How. Before a kernel or graph launch of a perturbed pass, a cucap-owned
 * spin kernel (a tiny PTX module JIT-compiled for the device, loaded in the
 * primary context through the session's entry points) is launched on a
 * cucap-owned non-blocking stream of that context: it writes no memory and
 * busy-waits on %globaltimer, each block for its own time (2-50 us, drawn
 * per block, so SMs come free in a random order rather than all at once),
 * in one of three shapes: light (1-4 warps a block on up to every SM: it
 * shares SMs with the program's blocks, whose warps then interleave
 * differently), heavy (1024 threads a block, up to two per SM: the program's
 * blocks start later and on other SMs) or everywhere (one 1024-thread block
 * per SM: every block of the program shares its SM with a spinner that
 * ends at another time, so its blocks run at unequal speeds - the one that
 * changes which block wins a race among blocks started together, as in
 * newdelete's push/pop, where the other two left block 0 first in all 6
 * replays on the H100).
 * What and how much is drawn per (pass, record) from a fixed seed: a
 * perturbed pass is reproducible. About one launch in eight stays
 * unperturbed; at most ~4096 launches a pass are (a program with more gets
 * a random sample of them).
 *
 * Never: in the first pass (it stays the plain replay), in a pass the user
 * asked for (--loop N: timing passes are not disturbed), in the diagnostic
 * pass, while a stream of the replay is capturing (op->capturing), for a
 * launch in another context than the primary one (contexts do not run
 * kernels concurrently: there it would only delay), or with other observers
 * (a profiler measures those passes). CUCAP_REPLAY_VERIFY_PERTURB=0 turns it
 * off. If the module cannot be made (no JIT for this target), the pass runs
 * unperturbed and the report says why.
 *
 * Why it cannot hide a corruption. The spin kernel only takes SM time: it
 * writes nothing and ends on its own, so a program's result can change
 * under it only if that result depends on timing - which is what
 * nondeterministic means. A byte of a deterministic program is the same in
 * every pass, perturbed or not, and a recorded byte it flips still differs
 * in every pass: a mismatch (tests/unit/test_replay_verify.c, drv_sched in
 * tests/integration/test_replay_nondet.sh). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_knobs.h"
#include "cucap_log.h"
#include "verify_internal.h"

#define VP_MAX_PER_PASS 4096   /* perturbed launches a pass, about */
#define VP_MIN_NS 2000ull
#define VP_SPAN_NS 48000ull

struct vo_perturb {
  int state;                   /* 0 not tried, 1 ready, -1 unavailable */
  CUcontext ctx;               /* the primary context */
  CUmodule mod;
  CUfunction spin;
  CUstream stream;
  int nsm;
  uint64_t seed;
  uint64_t launches_pass0;     /* kernel + graph launches of the first pass */
  uint64_t this_pass;          /* launches seen in the current pass */
  uint64_t perturbed_pass;     /* perturbed in the current pass */
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, unsigned, CUstream, void **, void **);
  CUresult (*get_current)(CUcontext *);
};

static uint64_t vp_mix(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The PTX ISA version a driver JIT takes: its own (CUDA 12.x -> 8.x). */
static const char *vp_isa(int drv) {
  static const struct { int drv; const char *isa; } t[] = {
      {13000, "9.0"}, {12090, "8.8"}, {12080, "8.7"}, {12050, "8.5"}, {12040, "8.4"},
      {12030, "8.3"}, {12020, "8.2"}, {12010, "8.1"}, {12000, "8.0"}, {11080, "7.8"},
      {11000, "7.0"}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (drv >= t[i].drv)
      return t[i].isa;
  return "6.0";
}

/* cucap_perturb_spin(min_ns, span_ns, seed): block b spins
 * min_ns + mix(seed, b) % span_ns nanoseconds of %globaltimer. */
static const char vp_ptx_body[] =
    ".address_size 64\n"
    ".visible .entry cucap_perturb_spin(.param .u64 cucap_perturb_spin_param_0,\n"
    "    .param .u64 cucap_perturb_spin_param_1, .param .u64 cucap_perturb_spin_param_2)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b32 %r<2>;\n"
    "  .reg .b64 %rd<12>;\n"
    "  ld.param.u64 %rd1, [cucap_perturb_spin_param_0];\n"
    "  ld.param.u64 %rd5, [cucap_perturb_spin_param_1];\n"
    "  ld.param.u64 %rd6, [cucap_perturb_spin_param_2];\n"
    "  mov.u32 %r1, %ctaid.x;\n"
    "  cvt.u64.u32 %rd7, %r1;\n"
    "  add.u64 %rd7, %rd7, 1;\n"
    "  mul.lo.u64 %rd8, %rd7, 0x9E3779B97F4A7C15;\n"
    "  xor.b64 %rd8, %rd8, %rd6;\n"
    "  shr.u64 %rd9, %rd8, 29;\n"
    "  xor.b64 %rd8, %rd8, %rd9;\n"
    "  mul.lo.u64 %rd8, %rd8, 0xBF58476D1CE4E5B9;\n"
    "  shr.u64 %rd9, %rd8, 32;\n"
    "  rem.u64 %rd10, %rd9, %rd5;\n"
    "  add.u64 %rd1, %rd1, %rd10;\n"
    "  mov.u64 %rd2, %globaltimer;\n"
    "$L__spin:\n"
    "  mov.u64 %rd3, %globaltimer;\n"
    "  sub.s64 %rd4, %rd3, %rd2;\n"
    "  setp.lt.u64 %p1, %rd4, %rd1;\n"
    "  @%p1 bra $L__spin;\n"
    "  ret;\n"
    "}\n";

static void vp_unavailable(vo_verifier *v, const char *why) {
  struct vo_perturb *p = v->pt;
  p->state = -1;
  snprintf(v->rep->perturb_note, sizeof v->rep->perturb_note, "%s", why);
  CUCAP_INFO("replay: verify: perturbed passes unavailable: %s", why);
}

/* Loads the spin kernel and makes the stream, in the primary context. */
static void vp_setup(vo_verifier *v) {
  struct vo_perturb *p = v->pt;
  cucap_replay_session *s = v->s;
  p->state = -1;
  CUresult (*drv_version)(int *) = cucap_replay_session_proc(s, "cuDriverGetVersion", 2020);
  CUresult (*dev_attr)(int *, CUdevice_attribute, CUdevice) =
      cucap_replay_session_proc(s, "cuDeviceGetAttribute", 2000);
  CUresult (*load)(CUmodule *, const void *) = cucap_replay_session_proc(s, "cuModuleLoadData", 2000);
  CUresult (*getfn)(CUfunction *, CUmodule, const char *) =
      cucap_replay_session_proc(s, "cuModuleGetFunction", 2000);
  CUresult (*mkstream)(CUstream *, unsigned) = cucap_replay_session_proc(s, "cuStreamCreate", 2000);
  CUresult (*setcur)(CUcontext) = cucap_replay_session_proc(s, "cuCtxSetCurrent", 4000);
  p->launch = cucap_replay_session_proc(s, "cuLaunchKernel", 4000);
  p->get_current = cucap_replay_session_proc(s, "cuCtxGetCurrent", 4000);
  p->ctx = cucap_replay_session_context(s);
  if (!drv_version || !dev_attr || !load || !getfn || !mkstream || !setcur || !p->launch ||
      !p->get_current || !p->ctx) {
    vp_unavailable(v, "driver entry points missing");
    return;
  }
  int drv = 0, major = 0, minor = 0, dev = cucap_replay_session_device(s);
  (void)drv_version(&drv);
  if (dev_attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
      dev_attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS ||
      dev_attr(&p->nsm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS ||
      p->nsm <= 0) {
    vp_unavailable(v, "device attributes not readable");
    return;
  }
  char ptx[1024];
  snprintf(ptx, sizeof ptx, ".version %s\n.target sm_%d%d\n%s", vp_isa(drv), major, minor,
           vp_ptx_body);
  CUcontext prev = NULL;
  p->get_current(&prev);
  if (prev != p->ctx && setcur(p->ctx) != CUDA_SUCCESS) {
    vp_unavailable(v, "primary context not current-able");
    return;
  }
  char why[128] = "";
  CUresult r = load(&p->mod, ptx);
  if (r != CUDA_SUCCESS)
    snprintf(why, sizeof why, "spin kernel (PTX %s, sm_%d%d) not loaded: CUresult %d",
             vp_isa(drv), major, minor, (int)r);
  else if ((r = getfn(&p->spin, p->mod, "cucap_perturb_spin")) != CUDA_SUCCESS)
    snprintf(why, sizeof why, "spin kernel not found: CUresult %d", (int)r);
  else if ((r = mkstream(&p->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
    snprintf(why, sizeof why, "stream not created: CUresult %d", (int)r);
  if (prev != p->ctx)
    setcur(prev);
  if (why[0]) {
    vp_unavailable(v, why);
    return;
  }
  p->state = 1;
  CUCAP_DEBUG("replay: verify: perturbation ready (PTX %s, sm_%d%d, %d SMs)", vp_isa(drv),
              major, minor, p->nsm);
}

static int vp_counts(const cucap_replay_op *op) {
  if (op->body_type == CUCAP_FB_BODY_LAUNCH)
    return op->launch_index != CUCAP_REPLAY_NO_LAUNCH;
  if (op->body_type != CUCAP_FB_BODY_GRAPH)
    return 0;
  const cucap_fb_graph *g = cucap_fb_record_body_as_graph(op->record);
  return g && cucap_fb_graph_op(g) == CUCAP_FB_GRAPHOP_LAUNCH;
}

void vo_perturb_pass_begin(vo_verifier *v, unsigned pass) {
  if (!v->pt && !(v->pt = calloc(1, sizeof *v->pt)))
    return;
  struct vo_perturb *p = v->pt;
  if (pass == 1)
    p->launches_pass0 = p->this_pass;
  p->this_pass = p->perturbed_pass = 0;
  const char *env = cucap_knob_str(CUCAP_KNOB(CUCAP_REPLAY_VERIFY_PERTURB));
  unsigned loops = v->o->loops ? v->o->loops : 1;
  v->perturbing = pass >= 1 && pass >= loops && !v->in_diag && !v->o->shared &&
                  v->o->passes != 1 && !(env && !strcmp(env, "0"));
  if (!v->perturbing)
    return;
  if (p->state == 0) {
    p->seed = vp_mix(0x63756361705f7665ull); /* fixed: passes are reproducible */
    vp_setup(v);
  }
  if (p->state < 0)
    v->perturbing = 0;
}

void vo_perturb_op(vo_verifier *v, const cucap_replay_op *op) {
  struct vo_perturb *p = v->pt;
  if (!p || !vp_counts(op))
    return;
  p->this_pass++;
  if (!v->perturbing || op->capturing || p->state != 1)
    return;
  CUcontext cur = NULL;
  if (p->get_current(&cur) != CUDA_SUCCESS || cur != p->ctx)
    return; /* another context: kernels of two contexts never run together */
  uint64_t r = vp_mix(p->seed ^ vp_mix(((uint64_t)v->pass << 40) ^ op->rec_index));
  uint64_t total = p->launches_pass0 ? p->launches_pass0 : 1;
  /* a sample of ~VP_MAX_PER_PASS launches, and about 1 in 8 left alone */
  if ((r & 7) == 0 || (total > VP_MAX_PER_PASS && (r >> 3) % total >= VP_MAX_PER_PASS))
    return;
  /* shape: light, heavy or everywhere (see the top of this file) */
  unsigned shape = (unsigned)((r >> 24) % 3);
  unsigned blocks, threads;
  if (shape == 0) {
    blocks = 1 + (unsigned)((r >> 26) % (uint64_t)p->nsm);
    threads = 32u * (1 + (unsigned)((r >> 40) & 3));
  } else if (shape == 1) {
    blocks = 1 + (unsigned)((r >> 26) % (uint64_t)(2 * p->nsm));
    threads = 1024;
  } else {
    blocks = (unsigned)p->nsm;
    threads = 1024;
  }
  unsigned long long min_ns = VP_MIN_NS, span_ns = VP_SPAN_NS, seed = vp_mix(r);
  void *args[] = {&min_ns, &span_ns, &seed};
  CUresult res = p->launch(p->spin, blocks, 1, 1, threads, 1, 1, 0, p->stream, args, NULL);
  if (res != CUDA_SUCCESS) {
    char why[96];
    snprintf(why, sizeof why, "spin kernel launch failed: CUresult %d", (int)res);
    vp_unavailable(v, why);
    v->perturbing = 0;
    return;
  }
  if (!p->perturbed_pass++)
    v->rep->perturbed_passes++;
  v->rep->perturbed_launches++;
}

void vo_perturb_destroy(vo_verifier *v) {
  struct vo_perturb *p = v->pt;
  if (!p)
    return;
  if (p->state == 1 && v->s) {
    CUresult (*unload)(CUmodule) = cucap_replay_session_proc(v->s, "cuModuleUnload", 2000);
    CUresult (*sdestroy)(CUstream) = cucap_replay_session_proc(v->s, "cuStreamDestroy", 4000);
    CUresult (*ssync)(CUstream) = cucap_replay_session_proc(v->s, "cuStreamSynchronize", 2000);
    CUresult (*setcur)(CUcontext) = cucap_replay_session_proc(v->s, "cuCtxSetCurrent", 4000);
    CUcontext prev = NULL;
    p->get_current(&prev);
    if (setcur && (prev == p->ctx || setcur(p->ctx) == CUDA_SUCCESS)) {
      if (ssync)
        ssync(p->stream);
      if (sdestroy)
        sdestroy(p->stream);
      if (unload)
        unload(p->mod);
      if (prev != p->ctx)
        setcur(prev);
    }
  }
  free(p);
  v->pt = NULL;
}
