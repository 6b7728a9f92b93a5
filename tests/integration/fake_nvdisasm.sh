#!/usr/bin/env bash
# fake_nvdisasm.sh - stands in for `nvdisasm -c -gi [-fun INDICES] CUBIN` in
# the CUPTI engine's mock tests. Like the real one, -fun takes symbol-table
# indices (not names: a name exits with status 1); the fake maps them to the
# FUNC symbols with readelf. Prints, for every function asked for (every
# FUNC symbol without -fun), a listing in nvdisasm's layout (section line,
# /*offset*/ instructions, //## File line-info comments, one of them
# inlined) with instructions at 0x10, 0x20 and 0x30, the PCs the stand-in
# libcupti samples. FAKE_NVDISASM_LOG=FILE appends one line per run.
funs=""; file=""; have_fun=0
args="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    -fun) funs="$2"; have_fun=1; shift 2 ;;
    -c|-g|-gi) shift ;;
    *) file="$1"; shift ;;
  esac
done
[ -n "${FAKE_NVDISASM_LOG:-}" ] && echo "$args" >> "$FAKE_NVDISASM_LOG"
[ -f "$file" ] || exit 1
syms=$(readelf -sW "$file" 2>/dev/null | awk '$4 == "FUNC" { sub(":", "", $1); print $1, $NF }')
names=()
if [ $have_fun = 1 ]; then
  IFS=, read -ra idx <<< "$funs"
  for i in "${idx[@]}"; do
    case "$i" in ''|*[!0-9]*) echo "nvdisasm fatal : bad symbol index '$i'" >&2; exit 1 ;; esac
    n=$(awk -v i="$i" '$1 == i { print $2 }' <<< "$syms")
    [ -n "$n" ] || { echo "nvdisasm fatal : no function symbol $i" >&2; exit 1; }
    names+=("$n")
  done
else
  while read -r _ n; do [ -n "$n" ] && names+=("$n"); done <<< "$syms"
fi
for f in "${names[@]}"; do
  printf '\t.section\t.text.%s,"ax",@progbits\n' "$f"
  printf '.text.%s:\n' "$f"
  printf '        /*0000*/                   LDC R1, c[0x0][0x28] ;\n'
  printf '\t//## File "/mock/inner.cuh", line 7 inlined at "/mock/mock_kernels.cu", line 42\n'
  printf '        /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;\n'
  printf '\t//## File "/mock/mock_kernels.cu", line 12\n'
  printf '        /*0020*/                   FFMA R0, R2, R3, R0 ;\n'
  printf '        /*0030*/                   STG.E desc[UR4][R4.64], R0 ;\n'
done
