/* cmd_stub.c - weak fallbacks for subcommands owned by other files
 * (cmd_record.c, cmd_replay.c). A strong definition in those files replaces
 * these at link time; until then the commands exit 2. Owner: tools/ (CLI). */
#include <stdio.h>

#include "cucap_cli.h"

static int not_yet(const char *cmd, int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "cucap %s: not yet implemented\n", cmd);
  return CUCAP_EXIT_USAGE;
}

__attribute__((weak)) int cucap_cmd_record(int argc, char **argv) {
  return not_yet("record", argc, argv);
}

__attribute__((weak)) int cucap_cmd_replay(int argc, char **argv) {
  return not_yet("replay", argc, argv);
}
