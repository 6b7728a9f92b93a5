/* replay_skips.c - what a replay could not do exactly, by name: skipped
 * operations (rp_skip) and operations replayed with a stand-in
 * (rp_substitute, e.g. a graph's host node run as an empty node). Both are
 * counted per name in the report; with --strict the first one stops the
 * replay (CUCAP_ERR_UNSUPPORTED) and names the record. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "replay_state.h"

void rp_skip(rp_state *R, const char *name) {
  cucap_replay_report *rep = R->rep;
  if (R->o->strict) { /* found only while executing (a missing blob, ...) */
    rp_set_error(R, CUCAP_ERR_UNSUPPORTED,
                 "--strict: record %" PRIu64 " (seq %" PRIu64
                 ") cannot be replayed: %s", R->rec_index, R->cur_seq, name);
    return;
  }
  rep->skipped++;
  char key[sizeof rep->skip_name[0]]; /* compared as stored (truncated) */
  snprintf(key, sizeof key, "%s", name);
  for (unsigned i = 0; i < rep->skip_kinds; i++)
    if (!strcmp(rep->skip_name[i], key)) {
      rep->skip_count[i]++;
      return;
    }
  if (rep->skip_kinds < CUCAP_REPLAY_MAX_SKIP_NAMES) {
    snprintf(rep->skip_name[rep->skip_kinds], sizeof rep->skip_name[0], "%s",
             name);
    rep->skip_count[rep->skip_kinds++] = 1;
  }
}

void rp_substitute(rp_state *R, const char *name) {
  cucap_replay_report *rep = R->rep;
  if (R->o->strict) {
    rp_set_error(R, CUCAP_ERR_UNSUPPORTED,
                 "--strict: record %" PRIu64 " (seq %" PRIu64
                 ") cannot be replayed exactly: %s", R->rec_index, R->cur_seq,
                 name);
    return;
  }
  rep->substituted++;
  char key[sizeof rep->subst_name[0]]; /* compared as stored (truncated) */
  snprintf(key, sizeof key, "%s", name);
  for (unsigned i = 0; i < rep->subst_kinds; i++)
    if (!strcmp(rep->subst_name[i], key)) {
      rep->subst_count[i]++;
      return;
    }
  if (rep->subst_kinds < CUCAP_REPLAY_MAX_SKIP_NAMES) {
    snprintf(rep->subst_name[rep->subst_kinds], sizeof rep->subst_name[0], "%s",
             name);
    rep->subst_count[rep->subst_kinds++] = 1;
  }
}
