/* cli_exit.c - the one mapping from a cucap_status to the exit code of a
 * cucap command (cucap_cli_exit_code, cucap_cli.h). The libraries return
 * statuses; only this file decides what the process returns for them. A
 * library of its own (cucap_cli_exit) so that unit tests check the exit
 * codes the commands give without linking the CLI. */
#include "cucap_cli.h"

int cucap_cli_exit_code(cucap_status s) {
  switch (s) {
  case CUCAP_OK:
  case CUCAP_END:
    return CUCAP_EXIT_OK;
  case CUCAP_ERR_INVALID_ARG:
  case CUCAP_ERR_NOT_IMPLEMENTED:
    return CUCAP_EXIT_USAGE;
  case CUCAP_ERR_MISMATCH:
    return CUCAP_EXIT_MISMATCH;
  case CUCAP_ERR_IO:
  case CUCAP_ERR_NOMEM:
  case CUCAP_ERR_COMPRESS:
  case CUCAP_ERR_INTERNAL:
  case CUCAP_ERR_CUDA: /* a driver call failed while replaying */
    return CUCAP_EXIT_IO;
  default: /* the input: damaged, unsupported here, no code for this GPU */
    return CUCAP_EXIT_BAD_INPUT;
  }
}
