/* status.c - strings for cucap_status and the trace of CUCAP_RETURN_IF /
 * CUCAP_FORWARD (see cucap_status.h). */
#include "cucap_log.h"
#include "cucap_status.h"

const char *cucap_status_str(cucap_status s) {
  switch (s) {
#define CUCAP_X_STR(name, num, msg)                                            \
  case name:                                                                   \
    return msg;
    CUCAP_STATUS_LIST(CUCAP_X_STR)
#undef CUCAP_X_STR
  }
  return "unknown status";
}

const char *cucap_status_name(cucap_status s) {
  switch (s) {
#define CUCAP_X_NAME(name, num, msg)                                           \
  case name:                                                                   \
    return #name;
    CUCAP_STATUS_LIST(CUCAP_X_NAME)
#undef CUCAP_X_NAME
  }
  return "CUCAP_UNKNOWN";
}

void cucap_status_trace(cucap_status s, const char *expr, const char *file, int line) {
  if (s == CUCAP_OK || !CUCAP_LOG_ENABLED(CUCAP_LOG_DEBUG))
    return;
  cucap_log(CUCAP_LOG_DEBUG, "%s:%d: %s -> %s", file, line, expr, cucap_status_name(s));
}
