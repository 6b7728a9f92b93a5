/* replay_verify.c - --verify / --verify=launch checks and the report printer.
 *
 * DtoH copies are compared byte for byte with the payload the recorder
 * stored; Snapshot(Exit) regions are read back from the device at the point
 * the snapshot was recorded (after a context sync) and compared with their
 * blobs; LaunchHash regions (cucap record --hash-launches) are read after the
 * launch they follow and hashed with XXH3-128 like the recorder does. The
 * first difference is kept in the report with record/launch context. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "replay_state.h"

static uint64_t rp_first_diff(const uint8_t *a, const uint8_t *b, uint64_t n) {
  uint64_t i = 0;
  /* word-wise first, then bytes */
  while (i + 8 <= n) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    if (x != y)
      break;
    i += 8;
  }
  while (i < n && a[i] == b[i])
    i++;
  return i;
}

void rp_verify_bytes(rp_state *R, const char *what, const void *got,
                     const void *want, uint64_t size, uint64_t addr) {
  cucap_replay_report *rep = R->rep;
  rep->bytes_checked += size;
  uint64_t off = rp_first_diff(got, want, size);
  if (off == size) {
    rep->bytes_matched += size;
    return;
  }
  /* count matching bytes for the report */
  uint64_t same = 0;
  const uint8_t *a = got, *b = want;
  for (uint64_t i = 0; i < size; i++)
    same += a[i] == b[i];
  rep->bytes_matched += same;
  rep->mismatches++;
  CUCAP_ERROR("replay: %s differs at offset %" PRIu64 " (address 0x%" PRIx64
              "): got 0x%02x, recorded 0x%02x; %" PRIu64 " of %" PRIu64
              " bytes differ",
              what, off, addr + off, a[off], b[off], size - same, size);
  if (!rep->first_mismatch[0])
    snprintf(rep->first_mismatch, sizeof rep->first_mismatch,
             "%s: first differing offset %" PRIu64 " (address 0x%" PRIx64
             ", got 0x%02x, recorded 0x%02x), %" PRIu64 " of %" PRIu64
             " bytes differ",
             what, off, addr + off, a[off], b[off], size - same, size);
}

/* Reads `size` device bytes at live address into the scratch buffer. */
cucap_status rp_read_device(rp_state *R, uint64_t live, uint64_t size,
                            void **out) {
  if (!rp_grow(&R->scratch, &R->scratch_cap, size ? size : 1,
               &R->scratch_pinned, R))
    return CUCAP_ERR_NOMEM;
  if (size && (R->d.df.MemcpyDtoHAsync(R->scratch, live, size, NULL) !=
                   CUDA_SUCCESS ||
               R->d.df.StreamSynchronize(NULL) != CUDA_SUCCESS))
    return CUCAP_ERR_CUDA;
  *out = R->scratch;
  return CUCAP_OK;
}

void rp_verify_snapshot(rp_state *R, const cucap_fb_snapshot *s) {
  if (R->capturing)
    return;
  R->d.df.CtxSynchronize();
  size_t n = cucap_fb_snapshot_regions_len(s);
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, i);
    uint64_t addr = cucap_fb_mem_region_address(g);
    uint64_t size = cucap_fb_mem_region_size(g);
    cucap_hash128 h = rp_h(cucap_fb_mem_region_data(g));
    uint64_t bsz = 0;
    if (!cucap_fb_mem_region_data(g) ||
        cucap_reader_blob_size(R->r, h, &bsz) != CUCAP_OK || bsz != size) {
      R->rep->copies_unverifiable++;
      continue;
    }
    if (!rp_grow(&R->expect, &R->expect_cap, size ? size : 1,
                 &R->expect_pinned, R) ||
        cucap_reader_blob_read(R->r, h, R->expect, size) != CUCAP_OK) {
      R->rep->copies_unverifiable++;
      continue;
    }
    void *got = NULL;
    uint64_t live = rp_mem_translate(&R->mem, addr, NULL);
    if (rp_read_device(R, live, size, &got) != CUCAP_OK) {
      CUCAP_WARN("replay: cannot read snapshot region 0x%" PRIx64 "+%" PRIu64,
                 addr, size);
      R->rep->copies_unverifiable++;
      continue;
    }
    char what[128];
    snprintf(what, sizeof what, "exit snapshot region %zu (0x%" PRIx64 "+%" PRIu64
             ", record %" PRIu64 ")", i, addr, size, R->rec_index);
    R->rep->snapshot_regions_checked++;
    rp_verify_bytes(R, what, got, R->expect, size, addr);
  }
}

static void rp_check_hashes(rp_state *R, uint64_t li, uint64_t seq,
                            uint64_t rec_index, const rp_region *g, size_t n) {
  if (R->capturing) { /* reading device memory would invalidate the capture */
    R->rep->copies_unverifiable += n;
    return;
  }
  R->d.df.CtxSynchronize();
  uint64_t fidx = 0;
  const char *fname = "?";
  if (rp_map_get(&R->launch_fn, li, &fidx) && fidx)
    fname = R->funcs[fidx - 1].name;
  for (size_t i = 0; i < n; i++) {
    void *got = NULL;
    uint64_t live = rp_mem_translate(&R->mem, g[i].addr, NULL);
    if (rp_read_device(R, live, g[i].size, &got) != CUCAP_OK) {
      R->rep->copies_unverifiable++;
      continue;
    }
    cucap_hash128 h = cucap_hash128_of(got, g[i].size);
    R->rep->launch_hashes_checked++;
    if (cucap_hash128_eq(h, g[i].data))
      continue;
    R->rep->mismatches++;
    CUCAP_ERROR("replay: launch %" PRIu64 " (%s): region %zu at 0x%" PRIx64
                "+%" PRIu64 " differs after the launch",
                li, fname, i, g[i].addr, g[i].size);
    if (!R->rep->first_mismatch[0])
      snprintf(R->rep->first_mismatch, sizeof R->rep->first_mismatch,
               "first divergent kernel: launch %" PRIu64 " (%s), region %zu, "
               "address 0x%" PRIx64 ", %" PRIu64 " bytes (LaunchHash record %"
               PRIu64 ", launch seq %" PRIu64 ")",
               li, fname, i, g[i].addr, g[i].size, rec_index, seq);
  }
}

/* The recorder may write a LaunchHash before the Launch record it belongs
 * to (it is emitted from the launch's post hook): such hashes wait until
 * launch `launch_index` has executed. */
void rp_verify_launch_hash(rp_state *R, const cucap_fb_launch_hash *lh) {
  uint64_t li = cucap_fb_launch_hash_launch_index(lh);
  size_t n = cucap_fb_launch_hash_regions_len(lh);
  rp_region *g = calloc(n ? n : 1, sizeof *g);
  if (!g)
    return;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_mem_region *m = cucap_fb_launch_hash_regions_at(lh, i);
    const cucap_fb_hash128 *want = cucap_fb_mem_region_hash(m);
    if (!want)
      continue;
    g[k].addr = cucap_fb_mem_region_address(m);
    g[k].size = cucap_fb_mem_region_size(m);
    g[k].data.lo = want->lo;
    g[k].data.hi = want->hi;
    k++;
  }
  uint64_t seq = cucap_fb_launch_hash_launch_seq(lh);
  if (rp_map_get(&R->launch_fn, li, NULL)) { /* its launch already ran */
    rp_check_hashes(R, li, seq, R->rec_index, g, k);
    free(g);
    return;
  }
  if (R->npending == R->cappending) {
    size_t nc = R->cappending ? R->cappending * 2 : 8;
    rp_pending_hash *np = realloc(R->pending, nc * sizeof *np);
    if (!np) {
      free(g);
      return;
    }
    R->pending = np;
    R->cappending = nc;
  }
  rp_pending_hash *p = &R->pending[R->npending++];
  p->launch_index = li;
  p->seq = seq;
  p->rec_index = R->rec_index;
  p->regions = g;
  p->n = k;
}

void rp_verify_launch_done(rp_state *R, uint64_t li) {
  for (size_t i = 0; i < R->npending;) {
    rp_pending_hash *p = &R->pending[i];
    if (p->launch_index != li) {
      i++;
      continue;
    }
    rp_check_hashes(R, li, p->seq, p->rec_index, p->regions, p->n);
    free(p->regions);
    R->pending[i] = R->pending[--R->npending];
  }
}

void rp_verify_pending_free(rp_state *R) {
  for (size_t i = 0; i < R->npending; i++)
    free(R->pending[i].regions);
  if (R->npending)
    CUCAP_WARN("replay: %zu launch hash record(s) name launches that never "
               "ran", R->npending);
  R->npending = 0;
}

/* ---------------------------------------------------------------- report */

static void rp_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

void cucap_replay_report_print(const cucap_replay_report *p, FILE *f,
                               int json) {
  if (json) {
    fprintf(f, "{\"status\":");
    rp_json_str(f, cucap_status_name(p->status));
    fprintf(f, ",\"exit_code\":%d,\"error\":", p->exit_code);
    rp_json_str(f, p->error);
    fprintf(f, ",\"records\":%" PRIu64 ",\"loops\":%u,\"executed\":%" PRIu64
            ",\"skipped\":%" PRIu64 ",\"ignored\":%" PRIu64
            ",\"bodyless_calls\":%" PRIu64
            ",\"launches\":%" PRIu64 ",\"partial\":%s",
            p->records, p->loops, p->executed, p->skipped, p->ignored,
            p->bodyless_calls, p->launches, p->partial ? "true" : "false");
    fprintf(f, ",\"skipped_ops\":{");
    for (unsigned i = 0; i < p->skip_kinds; i++) {
      if (i)
        fputc(',', f);
      rp_json_str(f, p->skip_name[i]);
      fprintf(f, ":%" PRIu64, p->skip_count[i]);
    }
    fprintf(f, "},\"fixed_address\":%s,\"fixed_ranges\":%" PRIu64
            ",\"fixed_bytes\":%" PRIu64 ",\"relocated_allocs\":%" PRIu64
            ",\"patched_params\":%" PRIu64 ",\"pinned_host_ranges\":%" PRIu64
            ",\"pinned_host_failed\":%" PRIu64 ",\"env_warnings\":%d",
            p->fixed_address ? "true" : "false", p->fixed_ranges,
            p->fixed_bytes, p->relocated_allocs, p->patched_params,
            p->pinned_host_ranges, p->pinned_host_failed, p->env_warnings);
    fprintf(f, ",\"pinned_host_device_backed\":%" PRIu64
            ",\"patched_pointers\":%" PRIu64 ",\"substituted\":%" PRIu64
            ",\"substituted_ops\":{",
            p->pinned_host_device_backed, p->patched_pointers, p->substituted);
    for (unsigned i = 0; i < p->subst_kinds; i++) {
      if (i)
        fputc(',', f);
      rp_json_str(f, p->subst_name[i]);
      fprintf(f, ":%" PRIu64, p->subst_count[i]);
    }
    fputc('}', f);
    fprintf(f, ",\"replay_wall_s\":%.6f,\"gpu_time_s\":%.6f"
            ",\"recorded_wall_s\":%.6f,\"ratio\":%.3f",
            p->replay_wall_s, p->gpu_time_s, p->recorded_wall_s, p->ratio);
    fprintf(f, ",\"verify\":%d,\"copies_checked\":%" PRIu64
            ",\"copies_unverifiable\":%" PRIu64 ",\"bytes_checked\":%" PRIu64
            ",\"bytes_matched\":%" PRIu64 ",\"snapshot_regions_checked\":%" PRIu64
            ",\"launch_hashes_checked\":%" PRIu64 ",\"mismatches\":%" PRIu64
            ",\"first_mismatch\":",
            p->verify_mode, p->copies_checked, p->copies_unverifiable,
            p->bytes_checked, p->bytes_matched, p->snapshot_regions_checked,
            p->launch_hashes_checked, p->mismatches);
    rp_json_str(f, p->first_mismatch);
    fprintf(f, "}\n");
    return;
  }
  fprintf(f, "replay: %" PRIu64 " records x %u loop(s): %" PRIu64
          " ops executed (%" PRIu64 " launches), %" PRIu64 " skipped, %" PRIu64
          " informational (%" PRIu64 " calls without a body)\n",
          p->records, p->loops, p->executed, p->launches, p->skipped,
          p->ignored, p->bodyless_calls);
  if (p->partial)
    fprintf(f, "  capture damaged, replayed what was recovered: %s\n",
            p->partial_problem);
  for (unsigned i = 0; i < p->skip_kinds; i++)
    fprintf(f, "  skipped: %s x%" PRIu64 "\n", p->skip_name[i],
            p->skip_count[i]);
  for (unsigned i = 0; i < p->subst_kinds; i++)
    fprintf(f, "  skipped with a substitute: %s x%" PRIu64 "\n",
            p->subst_name[i], p->subst_count[i]);
  fprintf(f, "memory: %s; %" PRIu64 " range(s), %" PRIu64
          " MiB at recorded addresses; %" PRIu64
          " allocation(s) relocated, %" PRIu64 " kernel parameter(s) patched",
          p->fixed_address ? "fixed addresses"
          : p->fixed_ranges ? "partly fixed addresses"
                            : "relocated",
          p->fixed_ranges, p->fixed_bytes >> 20, p->relocated_allocs,
          p->patched_params);
  if (p->patched_pointers)
    fprintf(f, ", %" PRIu64 " pointer(s) in uploaded data patched",
            p->patched_pointers);
  if (p->pinned_host_ranges || p->pinned_host_failed || p->pinned_host_device_backed)
    fprintf(f, "; %" PRIu64 " pinned host range(s) at recorded addresses, %" PRIu64
            " not placed", p->pinned_host_ranges, p->pinned_host_failed);
  if (p->pinned_host_device_backed)
    fprintf(f, ", %" PRIu64 " backed by device memory inside reserved ranges",
            p->pinned_host_device_backed);
  fputc('\n', f);
  fprintf(f, "time: replay %.6f s", p->replay_wall_s);
  if (p->gpu_time_s >= 0)
    fprintf(f, ", GPU (events) %.6f s", p->gpu_time_s);
  fprintf(f, ", recorded program %.6f s", p->recorded_wall_s);
  if (p->ratio > 0)
    fprintf(f, ", ratio recorded/replay %.2fx", p->ratio);
  fprintf(f, "\n");
  if (p->verify_mode) {
    fprintf(f, "verify: %" PRIu64 " copies, %" PRIu64
            " snapshot regions, %" PRIu64 " launch hashes checked; %" PRIu64
            " of %" PRIu64 " bytes matched; %" PRIu64 " unverifiable; %s\n",
            p->copies_checked, p->snapshot_regions_checked,
            p->launch_hashes_checked, p->bytes_matched, p->bytes_checked,
            p->copies_unverifiable,
            p->mismatches ? "MISMATCH" : "all bytes matched");
    if (p->first_mismatch[0])
      fprintf(f, "  %s\n", p->first_mismatch);
  }
  if (p->error[0] && p->loops) /* the caller reports the error itself */
    fprintf(f, "stopped: %s\n", p->error);
}
