/* audit.c - `cucap record --audit`.
 *
 * An independent observer of the driver: CUPTI's driver-API callbacks
 * (libcupti.so is dlopen'ed, never linked) count every call the driver sees
 * per cbid; at exit an Audit record lists driver_seen vs recorded for every
 * cbid seen by either side. A call that CUPTI saw but cucap did not record
 * reveals an entry path we miss (e.g. an unwrapped cuGetProcAddress pointer).
 *
 * Calls made by our own hooks through cucap_real are excluded: inside a
 * wrapper (guard held) only the first callback whose cbid is the wrapper's
 * own (its real call) counts; any other callback on that thread meanwhile
 * comes from a hook.
 *
 * Set-up and failure modes (all logged; recording continues without audit):
 *  - cucap_audit_start runs from cucap_rec_activate (registered with
 *    cucap_rec_on_activate by libcucap's constructor), i.e. at the process's
 *    first intercepted CUDA call and before that call reaches the driver, on
 *    a thread marked "activating": any driver call CUPTI makes meanwhile
 *    passes through. CUPTI's own cu* lookups get the real entry points
 *    (hooks.c: dlsym from libcupti* is not redirected), so its internal
 *    calls are neither recorded nor able to re-enter the recorder.
 *  - libcupti.so not found: CUCAP_CUPTI_LIB, $CUDA_HOME, /usr/local/cuda,
 *    then the loader path are tried.
 *  - CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: another CUPTI client
 *    (a profiler/tool injected with CUDA_INJECTION64_PATH, Nsight) got there
 *    first. Conversely, an app that subscribes to CUPTI itself *after* us
 *    (PyTorch profiler/Kineto) gets that error from its own cuptiSubscribe:
 *    do not use --audit with such apps.
 *  - CUPTI_ERROR_INSUFFICIENT_PRIVILEGES / NOT_INITIALIZED / other: logged
 *    with CUPTI's own message.
 * The callback takes no lock and calls no driver function (only the
 * recorder's per-thread state, which may allocate it on first use), so it
 * cannot deadlock against the driver or re-enter a wrapper. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_callbacks.h>

#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cucap_rec_query.h"
#include "interpose_internal.h"

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*enable_domain_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
typedef CUptiResult (*unsubscribe_fn)(CUpti_SubscriberHandle);
typedef CUptiResult (*result_string_fn)(CUptiResult, const char **);
typedef CUptiResult (*callback_name_fn)(CUpti_CallbackDomain, uint32_t, const char **);

static atomic_uint_fast64_t g_seen[CUCAP_REC_MAX_CBID];
static CUpti_SubscriberHandle g_sub;
static unsubscribe_fn g_unsubscribe;
static callback_name_fn g_cb_name;

static void CUPTIAPI audit_cb(void *user, CUpti_CallbackDomain domain,
                             CUpti_CallbackId cbid, const void *data) {
  (void)user;
  const CUpti_CallbackData *cd = data;
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !cd || cd->callbackSite != CUPTI_API_ENTER ||
      cbid >= CUCAP_REC_MAX_CBID)
    return;
  cucap_rec_thread *th = cucap_rec_thread_get();
  if (th && th->depth) {
    if (th->audit_expect != cbid)
      return; /* a hook's own driver call */
    th->audit_expect = 0;
  }
  atomic_fetch_add_explicit(&g_seen[cbid], 1, memory_order_relaxed);
}

/* Our wrapper's symbol for cbid, else CUPTI's name for it (cbids we have no
 * wrapper for are the interesting ones), else NULL. */
static const char *cbid_name(uint32_t cbid) {
  for (size_t i = 0; i < CUCAP_API_COUNT; i++)
    if (cucap_api_table[i].cbid == cbid)
      return cucap_api_table[i].symbol;
  const char *n = NULL;
  if (g_cb_name && g_cb_name(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &n) == CUPTI_SUCCESS)
    return n;
  return NULL;
}

/* At exit (cucap_rec_at_exit: guard held, so CUPTI's unsubscribe may call
 * the driver freely). Counts are frozen first, then compared. */
static void audit_write(void) {
  if (g_unsubscribe && g_sub)
    g_unsubscribe(g_sub);
  g_sub = NULL;
  /* queries other threads made since the shutdown's flush */
  cucap_rec_query_flush_all(0);
  cucap_fbb *b = cucap_fbb_create(64 * 1024);
  if (!b)
    return;
  static cucap_fb_ref refs[CUCAP_REC_MAX_CBID];
  size_t n = 0;
  uint64_t missed = 0;
  for (uint32_t id = 1; id < CUCAP_REC_MAX_CBID; id++) {
    uint64_t seen = atomic_load(&g_seen[id]), rec = cucap_rec_recorded_count(id);
    if (!seen && !rec)
      continue;
    if (seen > rec)
      missed += seen - rec;
    const char *nm = cbid_name(id);
    cucap_fb_ref name = nm ? cucap_fbb_string(b, nm, strlen(nm)) : 0;
    cucap_fb_audit_entry_start(b);
    cucap_fb_audit_entry_add_cbid(b, id);
    if (name)
      cucap_fb_audit_entry_add_name(b, name);
    cucap_fb_audit_entry_add_driver_seen(b, seen);
    cucap_fb_audit_entry_add_recorded(b, rec);
    refs[n++] = cucap_fb_audit_entry_end(b);
  }
  cucap_fb_ref v = cucap_fbb_vector_refs(b, refs, n);
  cucap_fb_audit_start(b);
  cucap_fb_audit_add_entries(b, v);
  cucap_fb_ref a = cucap_fb_audit_end(b);
  cucap_status st = cucap_rec_emit(b, CUCAP_FB_BODY_AUDIT, a, 0);
  if (st != CUCAP_OK && st != CUCAP_ERR_STATE) /* STATE: reported by the recorder */
    CUCAP_ERROR("--audit: writing the Audit record: %s", cucap_status_str(st));
  else if (missed)
    CUCAP_WARN("--audit: the driver saw %llu calls that were not recorded",
               (unsigned long long)missed);
  cucap_fbb_destroy(b);
}

static void *open_cupti(void) {
  const char *env = cucap_knob_str(CUCAP_KNOB(CUCAP_CUPTI_LIB));
  if (env && *env)
    return dlopen(env, RTLD_NOW | RTLD_LOCAL);
  const char *home = getenv("CUDA_HOME");
  const char *homes[] = {home, "/usr/local/cuda"};
  const char *rels[] = {"extras/CUPTI/lib64/libcupti.so", "lib64/libcupti.so"};
  char path[4096];
  for (size_t i = 0; i < 2; i++) {
    if (!homes[i] || !*homes[i])
      continue;
    for (size_t j = 0; j < 2; j++) {
      snprintf(path, sizeof path, "%s/%s", homes[i], rels[j]);
      void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (h)
        return h;
    }
  }
  return dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
}

void cucap_audit_start(void) {
  void *h = open_cupti();
  if (!h) {
    CUCAP_ERROR("--audit: cannot load libcupti.so (set CUCAP_CUPTI_LIB); no audit");
    return;
  }
  subscribe_fn sub = (subscribe_fn)cucap_real_dlsym(h, "cuptiSubscribe");
  enable_domain_fn en = (enable_domain_fn)cucap_real_dlsym(h, "cuptiEnableDomain");
  g_unsubscribe = (unsubscribe_fn)cucap_real_dlsym(h, "cuptiUnsubscribe");
  result_string_fn rs = (result_string_fn)cucap_real_dlsym(h, "cuptiGetResultString");
  g_cb_name = (callback_name_fn)cucap_real_dlsym(h, "cuptiGetCallbackName");
  if (!sub || !en) {
    CUCAP_ERROR("--audit: libcupti lacks cuptiSubscribe/cuptiEnableDomain; no audit");
    return;
  }
  CUptiResult r = sub(&g_sub, (CUpti_CallbackFunc)audit_cb, NULL);
  int subscribed = r == CUPTI_SUCCESS;
  if (!subscribed)
    g_sub = NULL;
  else
    r = en(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API);
  if (r != CUPTI_SUCCESS) {
    const char *msg = NULL;
    if (!rs || rs(r, &msg) != CUPTI_SUCCESS)
      msg = NULL;
    const char *why = "";
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      why = " - another CUPTI client (profiler, injected tool, the app itself) "
            "is subscribed";
    else if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
      why = " - insufficient privileges for CUPTI";
    CUCAP_ERROR("--audit: CUPTI subscription failed: error %d (%s)%s; recording "
                "continues without audit", (int)r, msg ? msg : "?", why);
    if (subscribed && g_unsubscribe)
      g_unsubscribe(g_sub);
    g_sub = NULL;
    return;
  }
  cucap_rec_at_exit(audit_write);
  CUCAP_INFO("--audit: counting driver calls with CUPTI (an app that uses "
             "CUPTI itself cannot subscribe while --audit is on)");
}
