/* workload.h - deterministic synthetic captures with controlled host timing,
 * for the analysis and profile tests (tests/unit/test_analyze.c,
 * test_profile.c, tests/integration/test_analyze_cli.sh via cucap-workgen).
 * Every byte of the file except the writer's own index end time is a
 * function of the scenario name.
 *
 * Scenarios:
 *   train    a warm-up (10 distinct kernels), then WL_STEPS steps of: device
 *            alloc, 256 B pageable HtoD, 4 MiB pinned HtoD, 6 launches on
 *            blocking stream S1, 1 on blocking stream S2, 1 on the legacy
 *            default stream, 4 KiB async DtoH, stream + context sync, 200 us
 *            of host work, free. Callstacks in "/opt/cucap-test/trainer".
 *   oneshot  5 distinct kernels, one 8 MiB pageable HtoD, one blocking DtoH.
 *   graph    3 launches captured into a graph, then WL_STEPS graph launches
 *            each followed by a stream sync. */
#ifndef CUCAP_TEST_WORKLOAD_H
#define CUCAP_TEST_WORKLOAD_H

#include <stddef.h>

#define WL_STEPS 40
#define WL_WARMUP_KERNELS 10
#define WL_STEP_LAUNCHES 8

/* Writes scenario `name` to path. 0 on success; else err says why. */
int wl_write(const char *path, const char *name, char *err, size_t err_size);

/* NULL-terminated list of the scenario names. */
extern const char *const wl_scenarios[];

#endif
