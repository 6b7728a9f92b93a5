/* custom_nvtx.c - NVTX ranges, marks and domains, and profiler ranges.
 *
 * NVTX (header-only nvtx3, or libnvToolsExt) loads the library named by
 * NVTX_INJECTION64_PATH at the process's first NVTX call and calls its
 * InitializeInjectionNvtx2 with a function that hands out the NVTX function
 * tables; `cucap record` points that variable at libcucap.so itself (unless
 * the program set one). We fill the CORE (nvtxRangePushA, ...) and CORE2
 * (nvtxDomain*) slots with the functions below, each of which appends one
 * Nvtx record {op, domain, message, range id, category, color, level} with
 * the calling thread and time (Record.tid, Record.t_enter; seq 0).
 *
 * cuProfilerStart is recorded as a call by the generated wrapper; its pre
 * hook here only serves snapshot=range:cuProfilerStart.
 *
 * Rules of code inside the app apply: no exit, no stdout, return values as
 * NVTX specifies them (push/pop: the nesting level, start: a unique id).
 * Annotations made before the capture exists (the process has not called
 * CUDA yet) are not recorded; their levels are still counted. Strings from
 * nvtxDomainRegisterString and domain handles are ours: they live until the
 * process exits. Unicode messages are converted with wcstombs. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "custom_internal.h"

#define CUCAP_EXPORT __attribute__((visibility("default")))

/* A domain handle: its name, kept for the process lifetime. */
typedef struct nvtx_domain {
  char name[1]; /* NUL-terminated, allocated to fit */
} nvtx_domain;

static atomic_uint_fast64_t g_range_ids; /* nvtxRangeStart ids, from 1 */

/* Push/pop levels: the default domain and a few named ones per thread. */
#define NVTX_TLS_DOMAINS 8
static __thread struct {
  uint64_t domain;
  int depth;
} t_levels[NVTX_TLS_DOMAINS];
static __thread int t_default_depth;
static __thread cucap_fbb *t_builder; /* freed at thread exit by the key */
static pthread_key_t g_builder_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void builder_free(void *p) { cucap_fbb_destroy(p); }
static void key_init(void) { (void)pthread_key_create(&g_builder_key, builder_free); }

static int *level_of(uint64_t domain) {
  if (!domain)
    return &t_default_depth;
  for (int i = 0; i < NVTX_TLS_DOMAINS; i++)
    if (t_levels[i].domain == domain)
      return &t_levels[i].depth;
  for (int i = 0; i < NVTX_TLS_DOMAINS; i++)
    if (!t_levels[i].domain) {
      t_levels[i].domain = domain;
      return &t_levels[i].depth;
    }
  return &t_levels[NVTX_TLS_DOMAINS - 1].depth; /* many domains: shared */
}

/* A thread-local builder of our own: an NVTX call may come from a host
 * callback running while this thread's recorder builders are in use. */
static cucap_fbb *builder(void) {
  if (!t_builder) {
    pthread_once(&g_key_once, key_init);
    t_builder = cucap_fbb_create(512);
    if (t_builder)
      (void)pthread_setspecific(g_builder_key, t_builder);
  }
  return t_builder;
}

typedef struct nvtx_ev {
  uint8_t op;
  uint64_t domain, range_id, value;
  const char *message; /* may be NULL */
  uint32_t category, color;
  int level;
} nvtx_ev;

static void emit(const nvtx_ev *e) {
  if (!cucap_rec_active())
    return;
  cucap_rec_thread *th = cucap_rec_thread_get();
  cucap_fbb *b = builder();
  if (!th || !b)
    return;
  cucap_fbb_reset(b);
  cucap_fb_ref msg = e->message ? cucap_fbb_string(b, e->message, strlen(e->message)) : 0;
  cucap_fb_nvtx_start(b);
  cucap_fb_nvtx_add_op(b, e->op);
  if (e->domain)
    cucap_fb_nvtx_add_domain(b, e->domain);
  if (msg)
    cucap_fb_nvtx_add_message(b, msg);
  if (e->range_id)
    cucap_fb_nvtx_add_range_id(b, e->range_id);
  if (e->category)
    cucap_fb_nvtx_add_category(b, e->category);
  if (e->color)
    cucap_fb_nvtx_add_color(b, e->color);
  if (e->op == CUCAP_FB_NVTXOP_PUSH || e->op == CUCAP_FB_NVTXOP_POP)
    cucap_fb_nvtx_add_level(b, e->level);
  if (e->value)
    cucap_fb_nvtx_add_value(b, e->value);
  cucap_fb_ref body = cucap_fb_nvtx_end(b);
  (void)cucap_rec_emit(b, CUCAP_FB_BODY_NVTX, body, 0);
}

/* snapshot=range: the snapshot's driver calls run with this thread's
 * re-entrancy guard held, as from a hook (NVTX calls come from app code). */
static void range_snapshot(const char *message) {
  if (cucap_rec_opts()->snapshot != CUCAP_REC_SNAPSHOT_RANGE || !cucap_rec_active())
    return;
  cucap_rec_thread *th = cucap_rec_thread_get();
  if (th)
    th->depth++;
  cx_snapshot_range_start(message);
  if (th)
    th->depth--;
}

/* The text of a message of the given type; wide strings are converted into
 * buf. NULL when there is none. */
static const char *message_text(int type, const void *msg, char *buf, size_t cap) {
  if (!msg)
    return NULL;
  switch (type) {
  case NVTX_MESSAGE_TYPE_ASCII:
    return msg;
  case NVTX_MESSAGE_TYPE_UNICODE: {
    size_t n = wcstombs(buf, msg, cap - 1);
    if (n == (size_t)-1)
      return NULL;
    buf[n < cap ? n : cap - 1] = 0;
    return buf;
  }
  case NVTX_MESSAGE_TYPE_REGISTERED:
    return msg; /* our own nvtxDomainRegisterString copy */
  default:
    return NULL;
  }
}

static void from_attribs(nvtx_ev *e, const nvtxEventAttributes_t *a, char *buf, size_t cap) {
  if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof a->message)
    return;
  e->category = a->category;
  if (a->colorType == NVTX_COLOR_ARGB)
    e->color = a->color;
  const void *m = a->messageType == NVTX_MESSAGE_TYPE_UNICODE ? (const void *)a->message.unicode
                  : a->messageType == NVTX_MESSAGE_TYPE_REGISTERED
                      ? (const void *)a->message.registered
                      : (const void *)a->message.ascii;
  e->message = message_text(a->messageType, m, buf, cap);
}

#define MSGBUF 1024

/* ---- ranges ---- */

static int push(uint64_t domain, nvtx_ev *e) {
  int *lv = level_of(domain);
  e->op = CUCAP_FB_NVTXOP_PUSH;
  e->domain = domain;
  e->level = (*lv)++;
  range_snapshot(e->message);
  emit(e);
  return e->level;
}

static int pop(uint64_t domain) {
  int *lv = level_of(domain);
  if (*lv <= 0)
    return -1; /* NVTX: a pop without a push is an error (negative) */
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_POP, .domain = domain, .level = --(*lv)};
  emit(&e);
  return e.level;
}

static nvtxRangeId_t start(uint64_t domain, nvtx_ev *e) {
  e->op = CUCAP_FB_NVTXOP_RANGESTART;
  e->domain = domain;
  e->range_id = atomic_fetch_add(&g_range_ids, 1) + 1;
  range_snapshot(e->message);
  emit(e);
  return e->range_id;
}

static void end(uint64_t domain, nvtxRangeId_t id) {
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_RANGEEND, .domain = domain, .range_id = id};
  emit(&e);
}

static int NVTX_API c_push_a(const char *m) {
  nvtx_ev e = {.message = m};
  return push(0, &e);
}
static int NVTX_API c_push_w(const wchar_t *m) {
  char buf[MSGBUF];
  nvtx_ev e = {.message = message_text(NVTX_MESSAGE_TYPE_UNICODE, m, buf, sizeof buf)};
  return push(0, &e);
}
static int NVTX_API c_push_ex(const nvtxEventAttributes_t *a) {
  char buf[MSGBUF];
  nvtx_ev e = {0};
  from_attribs(&e, a, buf, sizeof buf);
  return push(0, &e);
}
static int NVTX_API c_pop(void) { return pop(0); }

static nvtxRangeId_t NVTX_API c_start_a(const char *m) {
  nvtx_ev e = {.message = m};
  return start(0, &e);
}
static nvtxRangeId_t NVTX_API c_start_w(const wchar_t *m) {
  char buf[MSGBUF];
  nvtx_ev e = {.message = message_text(NVTX_MESSAGE_TYPE_UNICODE, m, buf, sizeof buf)};
  return start(0, &e);
}
static nvtxRangeId_t NVTX_API c_start_ex(const nvtxEventAttributes_t *a) {
  char buf[MSGBUF];
  nvtx_ev e = {0};
  from_attribs(&e, a, buf, sizeof buf);
  return start(0, &e);
}
static void NVTX_API c_end(nvtxRangeId_t id) { end(0, id); }

/* ---- marks and names ---- */

static void NVTX_API c_mark_a(const char *m) {
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_MARK, .message = m};
  emit(&e);
}
static void NVTX_API c_mark_w(const wchar_t *m) {
  char buf[MSGBUF];
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_MARK,
               .message = message_text(NVTX_MESSAGE_TYPE_UNICODE, m, buf, sizeof buf)};
  emit(&e);
}
static void NVTX_API c_mark_ex(const nvtxEventAttributes_t *a) {
  char buf[MSGBUF];
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_MARK};
  from_attribs(&e, a, buf, sizeof buf);
  emit(&e);
}
static void NVTX_API c_name_category_a(uint32_t cat, const char *name) {
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_NAMECATEGORY, .message = name, .value = cat,
               .category = cat};
  emit(&e);
}
static void NVTX_API c_name_category_w(uint32_t cat, const wchar_t *name) {
  char buf[MSGBUF];
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_NAMECATEGORY, .value = cat, .category = cat,
               .message = message_text(NVTX_MESSAGE_TYPE_UNICODE, name, buf, sizeof buf)};
  emit(&e);
}
static void NVTX_API c_name_thread_a(uint32_t tid, const char *name) {
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_NAMETHREAD, .message = name, .value = tid};
  emit(&e);
}
static void NVTX_API c_name_thread_w(uint32_t tid, const wchar_t *name) {
  char buf[MSGBUF];
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_NAMETHREAD, .value = tid,
               .message = message_text(NVTX_MESSAGE_TYPE_UNICODE, name, buf, sizeof buf)};
  emit(&e);
}

/* ---- domains ---- */

static uint64_t dom(nvtxDomainHandle_t d) { return CX_U64(d); }

static void NVTX_API d_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  char buf[MSGBUF];
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_MARK, .domain = dom(d)};
  from_attribs(&e, a, buf, sizeof buf);
  emit(&e);
}
static nvtxRangeId_t NVTX_API d_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  char buf[MSGBUF];
  nvtx_ev e = {0};
  from_attribs(&e, a, buf, sizeof buf);
  return start(dom(d), &e);
}
static void NVTX_API d_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { end(dom(d), id); }
static int NVTX_API d_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  char buf[MSGBUF];
  nvtx_ev e = {0};
  from_attribs(&e, a, buf, sizeof buf);
  return push(dom(d), &e);
}
static int NVTX_API d_pop(nvtxDomainHandle_t d) { return pop(dom(d)); }

static void NVTX_API d_name_category_a(nvtxDomainHandle_t d, uint32_t cat, const char *name) {
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_NAMECATEGORY, .domain = dom(d), .message = name,
               .value = cat, .category = cat};
  emit(&e);
}
static void NVTX_API d_name_category_w(nvtxDomainHandle_t d, uint32_t cat, const wchar_t *name) {
  char buf[MSGBUF];
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_NAMECATEGORY, .domain = dom(d), .value = cat,
               .category = cat,
               .message = message_text(NVTX_MESSAGE_TYPE_UNICODE, name, buf, sizeof buf)};
  emit(&e);
}

/* Registered strings are their own copy: message.registered is then the text. */
static nvtxStringHandle_t NVTX_API d_register_a(nvtxDomainHandle_t d, const char *s) {
  (void)d;
  return (nvtxStringHandle_t)(s ? strdup(s) : NULL);
}
static nvtxStringHandle_t NVTX_API d_register_w(nvtxDomainHandle_t d, const wchar_t *s) {
  (void)d;
  char buf[MSGBUF];
  const char *t = message_text(NVTX_MESSAGE_TYPE_UNICODE, s, buf, sizeof buf);
  return (nvtxStringHandle_t)(t ? strdup(t) : NULL);
}

static nvtxDomainHandle_t domain_create(const char *name) {
  size_t n = name ? strlen(name) : 0;
  nvtx_domain *h = malloc(sizeof *h + n);
  if (!h)
    return NULL;
  if (n)
    memcpy(h->name, name, n);
  h->name[n] = 0;
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_DOMAINCREATE, .domain = CX_U64(h), .message = h->name};
  emit(&e);
  return (nvtxDomainHandle_t)h;
}
static nvtxDomainHandle_t NVTX_API d_create_a(const char *name) { return domain_create(name); }
static nvtxDomainHandle_t NVTX_API d_create_w(const wchar_t *name) {
  char buf[MSGBUF];
  return domain_create(message_text(NVTX_MESSAGE_TYPE_UNICODE, name, buf, sizeof buf));
}
static void NVTX_API d_destroy(nvtxDomainHandle_t d) {
  /* the handle stays allocated: ranges of other threads may still use it */
  nvtx_ev e = {.op = CUCAP_FB_NVTXOP_DOMAINDESTROY, .domain = dom(d)};
  emit(&e);
}
static void NVTX_API d_initialize(const void *reserved) { (void)reserved; }

/* ---- injection entry point ---- */

static void set_slot(NvtxFunctionTable t, unsigned size, unsigned id, NvtxFunctionPointer f) {
  if (t && id < size && t[id])
    *t[id] = f;
}

#define FP(f) ((NvtxFunctionPointer)(void (*)(void))(f))

CUCAP_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const NvtxExportTableCallbacks *cb =
      get ? (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS) : NULL;
  if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
    return 0;
  NvtxFunctionTable t = NULL;
  unsigned n = 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) && t) {
    set_slot(t, n, NVTX_CBID_CORE_MarkEx, FP(c_mark_ex));
    set_slot(t, n, NVTX_CBID_CORE_MarkA, FP(c_mark_a));
    set_slot(t, n, NVTX_CBID_CORE_MarkW, FP(c_mark_w));
    set_slot(t, n, NVTX_CBID_CORE_RangeStartEx, FP(c_start_ex));
    set_slot(t, n, NVTX_CBID_CORE_RangeStartA, FP(c_start_a));
    set_slot(t, n, NVTX_CBID_CORE_RangeStartW, FP(c_start_w));
    set_slot(t, n, NVTX_CBID_CORE_RangeEnd, FP(c_end));
    set_slot(t, n, NVTX_CBID_CORE_RangePushEx, FP(c_push_ex));
    set_slot(t, n, NVTX_CBID_CORE_RangePushA, FP(c_push_a));
    set_slot(t, n, NVTX_CBID_CORE_RangePushW, FP(c_push_w));
    set_slot(t, n, NVTX_CBID_CORE_RangePop, FP(c_pop));
    set_slot(t, n, NVTX_CBID_CORE_NameCategoryA, FP(c_name_category_a));
    set_slot(t, n, NVTX_CBID_CORE_NameCategoryW, FP(c_name_category_w));
    set_slot(t, n, NVTX_CBID_CORE_NameOsThreadA, FP(c_name_thread_a));
    set_slot(t, n, NVTX_CBID_CORE_NameOsThreadW, FP(c_name_thread_w));
  }
  t = NULL;
  n = 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) && t) {
    set_slot(t, n, NVTX_CBID_CORE2_DomainMarkEx, FP(d_mark_ex));
    set_slot(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, FP(d_start_ex));
    set_slot(t, n, NVTX_CBID_CORE2_DomainRangeEnd, FP(d_end));
    set_slot(t, n, NVTX_CBID_CORE2_DomainRangePushEx, FP(d_push_ex));
    set_slot(t, n, NVTX_CBID_CORE2_DomainRangePop, FP(d_pop));
    set_slot(t, n, NVTX_CBID_CORE2_DomainNameCategoryA, FP(d_name_category_a));
    set_slot(t, n, NVTX_CBID_CORE2_DomainNameCategoryW, FP(d_name_category_w));
    set_slot(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, FP(d_register_a));
    set_slot(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, FP(d_register_w));
    set_slot(t, n, NVTX_CBID_CORE2_DomainCreateA, FP(d_create_a));
    set_slot(t, n, NVTX_CBID_CORE2_DomainCreateW, FP(d_create_w));
    set_slot(t, n, NVTX_CBID_CORE2_DomainDestroy, FP(d_destroy));
    set_slot(t, n, NVTX_CBID_CORE2_Initialize, FP(d_initialize));
  }
  CUCAP_DEBUG("NVTX injection attached");
  return 1;
}

/* custom_table.txt: cuProfilerStart pre=custom_profiler_start_pre */
void custom_profiler_start_pre(cucap_call *c) {
  (void)c;
  cx_snapshot_range_start("cuProfilerStart");
}
