/* replay_version.c - identifies the replay library build. */
#include "cucap_format.h"
const char *cucap_replay_version(void);
const char *cucap_replay_version(void) { return CUCAP_VERSION_STRING; }
