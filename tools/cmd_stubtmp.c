/* cmd_stubtmp.c - export and diff are not implemented yet (next commits). */
#include <stdio.h>

#include "cucap_cli.h"
int cucap_cmd_export(int argc, char **argv) {
  (void)argc, (void)argv;
  fprintf(stderr, "cucap export: not yet implemented\n");
  return CUCAP_EXIT_USAGE;
}
int cucap_cmd_diff(int argc, char **argv) {
  (void)argc, (void)argv;
  fprintf(stderr, "cucap diff: not yet implemented\n");
  return CUCAP_EXIT_USAGE;
}
