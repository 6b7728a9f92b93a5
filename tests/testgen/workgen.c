/* workgen.c - cucap-workgen OUT SCENARIO: writes one of the synthetic
 * workloads of workload.h (train, oneshot, graph) for the analysis tests.
 * Exit 0 ok, 1 error, 2 usage. */
#include <stdio.h>
#include <string.h>

#include "workload.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: cucap-workgen OUT SCENARIO   (scenarios:");
    for (int i = 0; wl_scenarios[i]; i++)
      fprintf(stderr, " %s", wl_scenarios[i]);
    fprintf(stderr, ")\n");
    return 2;
  }
  char err[256];
  if (wl_write(argv[1], argv[2], err, sizeof err) != 0) {
    fprintf(stderr, "cucap-workgen: %s\n", err);
    return 1;
  }
  return 0;
}
