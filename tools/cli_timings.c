/* cli_timings.c - the GPU timings that `export --profile` and `diff
 * --profile-a/-b` read (cucap_cli.h): a profile file, as `replay --profile
 * --profile-out` writes it (profile/, told by its magic), or the CSV timings
 * table (share/cucap_profile_table.h) as an import format.
 *
 * share/ may not depend on profile/ (tools/check_layers.sh), so a profile
 * file is turned here into the table's own text and parsed by the one table
 * parser: export and diff see one kind of input whatever the file was. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_cli.h"
#include "cucap_profile.h"
#include "cucap_profile_table.h"

static int is_profile_file(const char *path) {
  char head[8];
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  return n == sizeof head && !memcmp(head, CUCAP_PROFILE_MAGIC, sizeof head);
}

/* The table text of a profile: one row per launch of the capture that has
 * a GPU time (kernels run by graph launches have no launch_index and are
 * left out), its first pass's start and the median duration over the
 * passes (what the profile's report gives as the launch's time), the
 * mangled kernel name, and every metric the profile holds (at most the
 * table's CUCAP_PROFILE_MAX_METRICS, first seen first). */
static char *profile_csv(cucap_profile *p, size_t *size) {
  const char *names[CUCAP_PROFILE_MAX_METRICS];
  size_t nnames = 0, n = cucap_profile_launch_count(p);
  for (size_t i = 0; i < n; i++) {
    const cucap_profile_launch *l = cucap_profile_launch_at(p, i);
    for (size_t m = 0; l && m < l->nmetrics && nnames < CUCAP_PROFILE_MAX_METRICS; m++) {
      const char *name = cucap_profile_metric_name(p, l->metric_ids[m]);
      if (!name || !name[0] || strpbrk(name, ",\r\n"))
        continue;
      size_t k = 0;
      while (k < nnames && strcmp(names[k], name))
        k++;
      if (k == nnames)
        names[nnames++] = name;
    }
  }
  char *buf = NULL;
  FILE *f = open_memstream(&buf, size);
  if (!f)
    return NULL;
  fputs("# cucap GPU timings, from a profile file\nlaunch_index,start_ns,end_ns,kernel", f);
  for (size_t k = 0; k < nnames; k++)
    fprintf(f, ",%s", names[k]);
  fputc('\n', f);
  for (size_t i = 0; i < n; i++) {
    const cucap_profile_launch *l = cucap_profile_launch_at(p, i);
    if (!l || CUCAP_PROFILE_KEY_IS_GRAPH(l->key) || l->ntimings == 0)
      continue;
    uint64_t start = l->timings[0].start_ns, end = l->timings[0].end_ns;
    uint64_t dur = l->median_ns ? l->median_ns : end >= start ? end - start : 0;
    const char *k = l->kernel && !strpbrk(l->kernel, ",\r\n") ? l->kernel : "";
    fprintf(f, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%s", l->key, start,
            start + dur >= start ? start + dur : start, k);
    for (size_t m = 0; m < nnames; m++) {
      double v;
      if (cucap_profile_launch_metric(p, l, names[m], &v) && isfinite(v))
        fprintf(f, ",%.17g", v);
      else
        fputc(',', f);
    }
    fputc('\n', f);
  }
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

int cucap_cli_load_timings(const char *cmd, const char *path, cucap_profile_table **out) {
  char msg[256] = "";
  *out = NULL;
  if (!is_profile_file(path)) {
    cucap_status st = cucap_profile_table_load(path, out, msg, sizeof msg);
    if (st == CUCAP_OK)
      return CUCAP_EXIT_OK;
    if (st == CUCAP_ERR_IO || st == CUCAP_ERR_NOMEM) {
      cucap_cli_error(cmd, path, "%s", msg[0] ? msg : cucap_status_str(st));
      return CUCAP_EXIT_IO;
    }
    cucap_cli_error(cmd, path,
                    "neither a profile file (replay --profile-out) nor a CSV timings table: %s",
                    msg[0] ? msg : cucap_status_str(st));
    return CUCAP_EXIT_BAD_INPUT;
  }
  cucap_profile *p = NULL;
  cucap_status st = cucap_profile_load(path, &p, msg, sizeof msg);
  if (st != CUCAP_OK) {
    if (st == CUCAP_ERR_IO || st == CUCAP_ERR_NOMEM) {
      cucap_cli_error(cmd, path, "%s", msg[0] ? msg : cucap_status_str(st));
      return CUCAP_EXIT_IO;
    }
    /* msg says what is wrong; the status names are a capture's words */
    cucap_cli_error(cmd, path, "damaged or truncated profile file: %s",
                    msg[0] ? msg : cucap_status_str(st));
    return CUCAP_EXIT_BAD_INPUT;
  }
  size_t size = 0;
  char *csv = profile_csv(p, &size);
  cucap_profile_destroy(p);
  if (!csv) {
    cucap_cli_error(cmd, path, "%s", cucap_status_str(CUCAP_ERR_NOMEM));
    return CUCAP_EXIT_IO;
  }
  st = cucap_profile_table_parse(csv, size, out, msg, sizeof msg);
  free(csv);
  if (st == CUCAP_OK)
    return CUCAP_EXIT_OK;
  cucap_cli_error(cmd, path, "profile file without usable GPU times: %s",
                  msg[0] ? msg : cucap_status_str(st));
  return st == CUCAP_ERR_NOMEM ? CUCAP_EXIT_IO : CUCAP_EXIT_BAD_INPUT;
}
