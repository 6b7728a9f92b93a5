/* capture_version.c - identifies the capture library build. */
#include "cucap_format.h"
const char *cucap_capture_version(void);
const char *cucap_capture_version(void) { return CUCAP_VERSION_STRING; }
