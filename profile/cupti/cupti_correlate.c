/* cupti_correlate.c - the engine's CUPTI callback (subscribed in
 * cupti_engine.c's attach): which op of the capture each driver call
 * belongs to, and the cubins loaded for PC sampling and SASS metrics.
 *
 * Correlation: a driver-API callback (CUPTI_CB_DOMAIN_DRIVER_API, API
 * enter) fires on the replayer's thread inside every driver call the
 * replayer makes; between op_before and op_after that call belongs to the
 * op being executed, so (correlation id -> op) is recorded there. Activity
 * records (kernels, copies, memsets of graph launches included) and
 * KERNEL_SERIALIZED PC samples carry that correlation id. This needs no
 * API activity records (EXTERNAL_CORRELATION would need DRIVER activity
 * records for every call) and gives the op even for kernels the driver
 * launches on its own behalf of one call (graph nodes). Calls the engine
 * makes itself (L2 flush) are excluded (own_call). */
#include <stdint.h>
#include <stdlib.h>

#include "cucap_schema.h"
#include "cupti_internal.h"

/* The recorded stream handle of a GPU-work record (0: NULL stream). */
static uint64_t ck_rec_stream(const cucap_fb_record *rec, int body) {
  if (!rec)
    return 0;
  switch (body) {
  case CUCAP_FB_BODY_LAUNCH:
    return cucap_fb_launch_stream(cucap_fb_record_body_as_launch(rec));
  case CUCAP_FB_BODY_MEMCPY:
    return cucap_fb_memcpy_stream(cucap_fb_record_body_as_memcpy(rec));
  case CUCAP_FB_BODY_MEMSET:
    return cucap_fb_memset_stream(cucap_fb_record_body_as_memset(rec));
  case CUCAP_FB_BODY_GRAPH:
    return cucap_fb_graph_stream(cucap_fb_record_body_as_graph(rec));
  default:
    return 0;
  }
}

void CUPTIAPI ck_callback(void *user, CUpti_CallbackDomain dom,
                          CUpti_CallbackId cbid, const void *data) {
  ck_engine *E = user;
  if (dom == CUPTI_CB_DOMAIN_DRIVER_API) {
    if (E->probing) { /* ck_cupti_alive's own calls */
      E->probe_hits++;
      return;
    }
    const CUpti_CallbackData *cd = data;
    /* correlation id 0 means "none" (no API activity kind enabled) */
    if (!cd || cd->callbackSite != CUPTI_API_ENTER || !E->op.in_op || E->own_call ||
        !E->op.cur || !cd->correlationId)
      return;
    if (E->op.cur_op < 0) {
      if (!cucap_vec_reserve(&E->op.ops, &E->op.capops, E->op.nops + 1, sizeof *E->op.ops, 16))
        return;
      ck_op *o = &E->op.ops[E->op.nops];
      const cucap_fb_record *rec = E->op.cur->record;
      o->rec_index = E->op.cur->rec_index;
      o->seq = E->op.cur->seq;
      o->launch_index = E->op.cur->launch_index;
      /* every record carries its host callstack (graph launches too) */
      o->callstack = E->op.cur->callstack ? E->op.cur->callstack
                                       : (rec ? cucap_fb_record_stack(rec) : 0);
      o->body = E->op.cur->body_type;
      o->stream = ck_rec_stream(rec, o->body);
      o->copy_kind = rec && o->body == CUCAP_FB_BODY_MEMCPY
                         ? (int)cucap_fb_memcpy_kind(cucap_fb_record_body_as_memcpy(rec))
                         : -1;
      E->op.cur_op = (int64_t)E->op.nops++;
    }
    if (!cucap_vec_reserve(&E->op.corr, &E->op.capcorr, E->op.ncorr + 1, sizeof *E->op.corr, 16))
      return;
    if (E->op.ncorr && E->op.corr[E->op.ncorr - 1].corr > cd->correlationId)
      E->op.corr_unsorted = 1;
    E->op.corr[E->op.ncorr].corr = cd->correlationId;
    E->op.corr[E->op.ncorr].op = (uint32_t)E->op.cur_op;
    E->op.ncorr++;
  } else if (dom == CUPTI_CB_DOMAIN_RESOURCE &&
             cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
    if (!E->o.pc_sampling && !E->o.sass_metrics)
      return;
    const CUpti_ResourceData *rd = data;
    const CUpti_ModuleResourceData *md =
        rd ? (const CUpti_ModuleResourceData *)rd->resourceDescriptor : NULL;
    if (md && md->pCubin && md->cubinSize)
      ck_cubin_add(E, md->pCubin, md->cubinSize);
  }
}

void ck_ops_free(ck_engine *E) {
  free(E->op.ops);
  free(E->op.corr);
}
