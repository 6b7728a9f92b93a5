/* test_cupti.c - profile/cupti/cupti_*.c pieces that need no CUPTI: option
 * validation of cucap_cupti_create, the metric sets, and the nvdisasm
 * listing parser (ck_disasm_parse) on nvdisasm's layout: section lines,
 * labels, predicated instructions, //## line info with inline chains.
 * The engine itself runs against the stand-in libcupti in
 * tests/integration/test_profile_cupti.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_cupti.h"
#include "testutil.h"

#include "cupti_disasm.h" /* internal to replay/ */

typedef struct seen {
  int n;
  char fn[8][64], text[8][64], file[8][64], chain[8][128];
  uint64_t pc[8];
  uint32_t line[8];
} seen;

static void cb(void *user, const char *function, uint64_t pc, const char *text,
               const char *file, uint32_t line, const char *chain) {
  seen *s = user;
  if (s->n >= 8)
    return;
  snprintf(s->fn[s->n], 64, "%s", function);
  snprintf(s->text[s->n], 64, "%s", text);
  snprintf(s->file[s->n], 64, "%s", file);
  snprintf(s->chain[s->n], 128, "%s", chain);
  s->pc[s->n] = pc;
  s->line[s->n] = line;
  s->n++;
}

static void test_disasm(void) {
  static const char listing[] =
      "\t.headerflags\t@\"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"\n"
      "//--------------------- .text._Z3addPfS_S_i --------------------------\n"
      "\t.section\t.text._Z3addPfS_S_i,\"ax\",@progbits\n"
      "\t.sectioninfo\t@\"SHI_REGISTERS=10\"\n"
      "        .global         _Z3addPfS_S_i\n"
      "_Z3addPfS_S_i:\n"
      ".text._Z3addPfS_S_i:\n"
      "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
      "\t//## File \"/src/add.cu\", line 4\n"
      "        /*0010*/                   S2R R0, SR_TID.X ;\n"
      "\t//## File \"/src/util.cuh\", line 9 inlined at \"/src/add.cu\", line 6\n"
      "        /*00c0*/              @P0 EXIT ;\n"
      ".L_x_0:\n"
      "        /*0170*/                   BRA `(.L_x_0) ;\n"
      "\t.section\t.text.second,\"ax\",@progbits\n"
      "        /*0000*/                   RET.REL.NODEC R20 0x0 ;\n";
  seen s;
  memset(&s, 0, sizeof s);
  ck_disasm_parse(listing, sizeof listing - 1, cb, &s);
  TU_CHECK(s.n == 5);
  TU_CHECK(!strcmp(s.fn[0], "_Z3addPfS_S_i") && s.pc[0] == 0 &&
           !strcmp(s.text[0], "LDC R1, c[0x0][0x28]") && !s.file[0][0]);
  TU_CHECK(s.pc[1] == 0x10 && !strcmp(s.file[1], "/src/add.cu") &&
           s.line[1] == 4 && !s.chain[1][0]);
  TU_CHECK(s.pc[2] == 0xc0 && !strcmp(s.text[2], "@P0 EXIT") &&
           !strcmp(s.file[2], "/src/util.cuh") && s.line[2] == 9 &&
           !strcmp(s.chain[2], "/src/util.cuh:9 <- /src/add.cu:6"));
  TU_CHECK(s.pc[3] == 0x170 && !strcmp(s.text[3], "BRA `(.L_x_0)"));
  /* a new section resets the function and its line info */
  TU_CHECK(!strcmp(s.fn[4], "second") && s.pc[4] == 0 && !s.file[4][0]);
  /* garbage and truncation never crash and yield nothing odd */
  memset(&s, 0, sizeof s);
  ck_disasm_parse("/*zz*/ X ;\n/*0010*/ before any section ;\n//## File \"a", 52,
                  cb, &s);
  TU_CHECK(s.n == 0);
  for (size_t cut = 0; cut < sizeof listing; cut += 7) {
    memset(&s, 0, sizeof s);
    ck_disasm_parse(listing, cut, cb, &s);
    TU_CHECK(s.n <= 5);
  }
}

static void test_options(void) {
  cucap_cupti_options o;
  cucap_cupti_options_init(&o);
  TU_CHECK(o.timeline_passes == 1 && o.launch_count == CUCAP_CUPTI_ALL_LAUNCHES);
  cucap_cupti *e = NULL;
  char msg[256];
  TU_CHECK(cucap_cupti_create(&o, &e, msg, sizeof msg) == CUCAP_OK && e);
  TU_CHECK(cucap_cupti_observer(e) && cucap_cupti_observer(e)->attach);
  const cucap_cupti_kernel *k = NULL;
  TU_CHECK(cucap_cupti_kernels(e, &k) == 0);
  TU_CHECK(cucap_cupti_section_get(e, CUCAP_CUPTI_TIMELINE)->state ==
           CUCAP_CUPTI_NOT_REQUESTED);
  cucap_cupti_destroy(e);
  cucap_cupti_destroy(NULL);
  o.metrics = "sol";
  o.pc_period = 4;
  TU_CHECK(cucap_cupti_create(&o, &e, msg, sizeof msg) == CUCAP_ERR_INVALID_ARG &&
           !e && strstr(msg, "5..31"));
  o.pc_period = 0;
  const char *bad[] = {"a,,b", ",a", "a,", "sm__x;rm", "a b"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    o.metrics = bad[i];
    TU_CHECK(cucap_cupti_create(&o, &e, msg, sizeof msg) == CUCAP_ERR_INVALID_ARG);
  }
  o.metrics = "full";
  TU_CHECK(cucap_cupti_create(&o, &e, msg, sizeof msg) == CUCAP_OK);
  cucap_cupti_destroy(e);
}

static int in_set(const char *const *set, const char *name) {
  for (size_t i = 0; set && set[i]; i++)
    if (!strcmp(set[i], name))
      return 1;
  return 0;
}

static void test_sets(void) {
  const char *const *sol = cucap_cupti_metric_set("sol");
  const char *const *full = cucap_cupti_metric_set("full");
  TU_CHECK(sol && full && !cucap_cupti_metric_set("a,b") &&
           !cucap_cupti_metric_set(NULL));
  const char *need[] = {"gpu__time_duration.sum",
                        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                        "sm__warps_active.avg.pct_of_peak_sustained_active"};
  for (size_t i = 0; i < 4; i++)
    TU_CHECK(in_set(sol, need[i]) && in_set(full, need[i]));
  for (size_t i = 0; sol[i]; i++)
    TU_CHECK(in_set(full, sol[i]));
  TU_CHECK(in_set(full, "lts__t_sector_hit_rate.pct"));
  TU_CHECK(in_set(full, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"));
  TU_CHECK(!strcmp(cucap_cupti_section_name(CUCAP_CUPTI_PCSAMPLING), "pc-sampling"));
}

int main(void) {
  test_disasm();
  test_options();
  test_sets();
  if (tu_failures) {
    fprintf(stderr, "test_cupti: %d check(s) failed\n", tu_failures);
    return 1;
  }
  printf("test_cupti: ok\n");
  return 0;
}
