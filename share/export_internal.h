/* export_internal.h - the timeline model shared by export_model.c (built
 * from the capture) and its two writers export_perfetto.c and
 * export_chrome.c. Internal to share/. */
#ifndef CUCAP_EXPORT_INTERNAL_H
#define CUCAP_EXPORT_INTERNAL_H

#include "cucap_export.h"
#include "share_internal.h"

enum { XT_PROCESS = 0, XT_THREAD, XT_STREAM, XT_COUNTER, XT_ASYNC, XT_CHILD };
enum { XE_SLICE = 0, XE_INSTANT, XE_COUNTER };

typedef struct xp_track {
  int type;              /* XT_* */
  uint64_t uuid, parent; /* parent: uuid of the thread/process track */
  uint32_t tid;          /* XT_THREAD: OS thread; XT_STREAM/ASYNC: a pseudo id */
  uint32_t name;         /* string id */
  int unit_bytes;        /* XT_COUNTER: 1 bytes, 0 plain */
} xp_track;

#define XP_MAX_ARGS 4

typedef struct xp_arg {
  uint32_t key;          /* string id */
  int is_str;
  uint64_t u;            /* number, or a string id */
} xp_arg;

typedef struct xp_event {
  int kind;              /* XE_* */
  uint32_t track;        /* index into tracks */
  uint64_t ts, dur;      /* ns; slices last >= 1 ns */
  uint32_t name, cat;    /* string ids */
  uint64_t flow_out, flow_in; /* 0: none */
  double value;          /* XE_COUNTER */
  int int_value;         /* XE_COUNTER: integer counter */
  xp_arg args[XP_MAX_ARGS];
  int nargs;
  uint64_t order;        /* generation order (stable ties) */
} xp_event;

typedef struct xp_model {
  sh_vec tracks;         /* xp_track */
  sh_vec events;         /* xp_event */
  char *strings;         /* NUL-separated, id = offset + 1 */
  size_t nstr, capstr;
  cucap_map str_ids;        /* hash -> id (collisions resolved by compare) */
  uint32_t pid;
  uint32_t process_name;
} xp_model;

uint32_t xp_str(xp_model *m, const char *s);          /* 0 on OOM */
const char *xp_s(const xp_model *m, uint32_t id);     /* "" for 0 */

cucap_status xp_build(cucap_reader *r, const cucap_export_options *o, xp_model *m,
                      cucap_export_report *rep);
void xp_free(xp_model *m);

cucap_status xp_write_perfetto(const xp_model *m, FILE *out);
cucap_status xp_write_chrome(const xp_model *m, FILE *out);

#endif
