#!/usr/bin/env bash
# fake_nvdisasm.sh - stands in for `nvdisasm -c -gi [-fun LIST] CUBIN` in the
# CUPTI engine's mock tests: prints, for every function asked for, a listing
# in nvdisasm's layout (section line, /*offset*/ instructions, //## File
# line-info comments, one of them inlined) with instructions at 0x10, 0x20
# and 0x30, the PCs the stand-in libcupti samples.
funs=""; file=""
while [ $# -gt 0 ]; do
  case "$1" in
    -fun) funs="$2"; shift 2 ;;
    -c|-g|-gi) shift ;;
    *) file="$1"; shift ;;
  esac
done
[ -f "$file" ] || exit 1
IFS=, read -ra fs <<< "$funs"
for f in "${fs[@]}"; do
  printf '\t.section\t.text.%s,"ax",@progbits\n' "$f"
  printf '.text.%s:\n' "$f"
  printf '        /*0000*/                   LDC R1, c[0x0][0x28] ;\n'
  printf '\t//## File "/mock/inner.cuh", line 7 inlined at "/mock/mock_kernels.cu", line 42\n'
  printf '        /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;\n'
  printf '\t//## File "/mock/mock_kernels.cu", line 12\n'
  printf '        /*0020*/                   FFMA R0, R2, R3, R0 ;\n'
  printf '        /*0030*/                   STG.E desc[UR4][R4.64], R0 ;\n'
done
