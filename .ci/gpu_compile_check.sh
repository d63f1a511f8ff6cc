#!/usr/bin/env bash
# Compile check of the GPU sources as HIP (no AMD GPU needed), with Debian's ROCm packages: builds
# the `fusekit` library target for gfx90a (CDNA, wave64), runs every GPU source through clang's
# front end for gfx1030 (RDNA, wave32) and builds the device code of two of them for it, then
# reads the AMDGPU metadata of the device code objects to check that the warp-dependent kernels
# (norm, norm backward, fp8 activation) exist for the warp size of each target (dispatch_warp
# instantiates kWarp = 32 and 64 on HIP) and to report registers / LDS / scratch / spills.
#
# Why the front end for the second target: the compile work is the optimizer and code generator
# over some thousand kernels per target and unit (clang's -ftime-report on norm_layer.cu for
# gfx90a: 400 of 449 s), and machine code for both targets was half of CI's compile work. The
# front end still instantiates every kernel for the target's wavefront size and checks its
# builtins, in about an eighth of the time; the units in FUSEKIT_CI_HIP_FULL_UNITS (an fp8
# activation unit and the norm backward, whose kernels hold the per-warp-size paths of
# platform.h) get machine code for it too, so its wave32 kernels are seen to exist, not empty.
# Those compiles run beside the gfx90a build, at the lowest priority.
#
#   .ci/gpu_compile_check.sh            # from anywhere; builds in <repo>/build/ci-hip
#   .ci/gpu_compile_check.sh --tools-only   # only install what it needs (hipcc, cmake, ninja)
#
# Environment: FUSEKIT_CI_HIP_ARCHS (targets with machine code for every unit; default gfx90a),
# FUSEKIT_CI_HIP_FRONTEND_ARCHS (targets checked by the front end; default gfx1030; empty for
# none), FUSEKIT_CI_HIP_FULL_UNITS (GPU sources with machine code on those too; default
# "act_silu.cu norm_backward.cu"), FUSEKIT_CI_BUILD_DIR, FUSEKIT_CI_JOBS (default: nproc),
# FUSEKIT_CI_FAIL_ON_SPILLS=1 to fail when a kernel that can run on a target (its kWarp equals the
# target's wavefront size) spills VGPRs. FUSEKIT_CI_HIP_ARCHS="gfx90a;gfx1030"
# FUSEKIT_CI_HIP_FRONTEND_ARCHS= builds machine code of every unit for both. Fails when a source
# does not compile, when a target has no kernels for its wavefront size, when those are empty, or
# when the staged kernel's static LDS exceeds kStaticSmemReserve (norm_gpu.cu).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FUSEKIT_CI_BUILD_DIR:-$repo/build/ci-hip}"
archs="${FUSEKIT_CI_HIP_ARCHS:-gfx90a}"
frontend_archs="${FUSEKIT_CI_HIP_FRONTEND_ARCHS-gfx1030}"
full_units="${FUSEKIT_CI_HIP_FULL_UNITS-act_silu.cu norm_backward.cu}"
jobs="${FUSEKIT_CI_JOBS:-$(nproc)}"
t_start=$(date +%s)

# ---- toolchain -------------------------------------------------------------------------------
if ! command -v hipcc >/dev/null 2>&1; then
  echo "== installing Debian's ROCm packages (hipcc libamdhip64-dev rocm-device-libs)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y hipcc libamdhip64-dev rocm-device-libs
fi
missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
if ((${#missing[@]})); then
  echo "== installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y "${missing[@]}"
fi
t_tools=$(date +%s)
[[ "${1:-}" == --tools-only ]] && exit 0

# ---- configure + build -----------------------------------------------------------------------
mkdir -p "$build"
echo "== configure ($build)"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DFUSEKIT_GPU=HIP -DCMAKE_HIP_ARCHITECTURES="$archs" \
  -DFUSEKIT_BUILD_TESTS=OFF -DFUSEKIT_BUILD_BENCH=OFF >"$build/ci-configure.log" 2>&1 ||
  { cat "$build/ci-configure.log"; echo "FAIL: configure"; exit 1; }
grep -E "HIP compiler identification|fusekit" "$build/ci-configure.log" | sed 's/^/   /'
t_conf=$(date +%s)

IFS=';' read -r -a arch_list <<<"$archs"
IFS=';' read -r -a frontend_list <<<"$frontend_archs"
read -r -a full_unit_list <<<"$full_units"
((${#arch_list[@]})) || { echo "FAIL: FUSEKIT_CI_HIP_ARCHS names no target"; exit 1; }
for arch in "${frontend_list[@]}"; do
  [[ ";$archs;" != *";$arch;"* ]] ||
    { echo "FAIL: $arch is in FUSEKIT_CI_HIP_ARCHS and FUSEKIT_CI_HIP_FRONTEND_ARCHS"; exit 1; }
done

work="$build/device-check"
rm -rf "$work" && mkdir -p "$work"
# The library's GPU objects, from the build graph (not what lies in the directory: a source
# removed since an earlier build leaves its object).
mapfile -t objects < <(ninja -C "$build" -t targets all |
  sed -n "s#^\(CMakeFiles/fusekit\.dir/src/gpu/.*\.cu\.o\): .*#$build/\1#p" | sort)
((${#objects[@]})) || { echo "FAIL: no GPU objects found"; exit 1; }

# ---- targets checked by the front end ---------------------------------------------------------
# Each GPU source's own compile command (ninja's), for one target and device code only: through
# the front end (-Xclang -disable-llvm-passes: the IR as the optimizer would get it, not
# written), or, for the full units, to a device code bundle that the metadata step below reads
# like the library's objects.
frontend="$work/frontend"
mkdir -p "$frontend"
for unit in "${full_unit_list[@]}"; do
  [[ " ${objects[*]##*/} " == *" $unit.o "* ]] ||
    { echo "FAIL: FUSEKIT_CI_HIP_FULL_UNITS: no GPU source $unit in the library"; exit 1; }
done
compiles=()
for arch in "${frontend_list[@]}"; do
  for obj in "${objects[@]}"; do
    unit=$(basename "$obj" .o)
    command=$(ninja -C "$build" -t commands "${obj#"$build/"}" | tail -n 1)
    words=()
    eval "words=($command)"  # ninja's command line, as the shell would split it
    args=()
    skip=0
    for w in "${words[@]}"; do
      if ((skip)); then skip=0; continue; fi
      case "$w" in
        -o | -MT | -MF) skip=1 ;;
        -c | -MD | --offload-arch=*) ;;
        *) args+=("$w") ;;
      esac
    done
    args+=(--offload-arch="$arch" --cuda-device-only)
    if [[ " ${full_unit_list[*]} " == *" $unit "* ]]; then
      args+=(-c -o "$frontend/$unit.$arch.fatbin")
    else
      args+=(-Xclang -disable-llvm-passes -S -emit-llvm -o /dev/null)
    fi
    job="$frontend/$unit.$arch"
    { printf 'cd %q && ' "$build"; printf '%q ' "${args[@]}"; } >"$job.sh"
    compiles+=("$job")
  done
done
# These compiles need only the configured build's commands, so they run beside the library's
# build, at the lowest priority: they take the cycles that its last long compile, alone at the
# end, leaves idle (a core for minutes on a 2-core machine), not its own.
if ((${#compiles[@]})); then
  # Each compile's output and exit code beside it; xargs runs them, $jobs at a time ($1: the
  # inner shell's).
  # shellcheck disable=SC2016
  # In a process group of their own (setsid), which the script stops if it exits first.
  printf '%s\0' "${compiles[@]}" |
    setsid -w nice -n 19 xargs -0 -n 1 -P "$jobs" \
      sh -c 'sh "$1.sh" >"$1.log" 2>&1; echo $? >"$1.rc"' sh &
  frontend_pid=$!
  trap 'kill -- -"$frontend_pid" 2>/dev/null || true' EXIT
fi

echo "== build fusekit for ${arch_list[*]} ($jobs jobs)"
cmake --build "$build" --target fusekit -j "$jobs" >"$build/ci-build.log" 2>&1 ||
  { tail -n 80 "$build/ci-build.log"; echo "FAIL: build (full log: $build/ci-build.log)"; exit 1; }
t_build=$(date +%s)
warnings=$(grep -c "warning:" "$build/ci-build.log" || true)
echo "   built $build/libfusekit.a; $warnings compiler warning lines (log: $build/ci-build.log)"

if ((${#compiles[@]})); then
  echo "== ${frontend_list[*]}: every GPU source through the front end; machine code of" \
    "${full_unit_list[*]:-none} ($jobs jobs, beside the build)"
  wait "$frontend_pid" || { echo "FAIL: the front-end compiles' runner (exit code $?)"; exit 1; }
  failed=0
  for job in "${compiles[@]}"; do
    if [[ "$(cat "$job.rc")" != 0 ]]; then
      echo "   FAIL: ${job##*/} (command: $job.sh)"; tail -n 40 "$job.log" | sed 's/^/      /'
      failed=1
    fi
  done
  ((failed == 0)) || { echo "FAIL: front-end compile"; exit 1; }
  echo "   $((${#compiles[@]})) compiles OK"
fi
t_frontend=$(date +%s)

compiler=$(sed -n 's/^CMAKE_HIP_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
llvm_bin=$(dirname "$(readlink -f "$compiler")")
for tool in llvm-objcopy clang-offload-bundler llvm-readelf llvm-cxxfilt; do
  [[ -x "$llvm_bin/$tool" ]] || { echo "FAIL: $llvm_bin/$tool not found"; exit 1; }
done

# ---- device code: which kernels, what resources ----------------------------------------------
table="$work/kernels.tsv"  # arch, vgpr, agpr, sgpr, vgpr_spill, sgpr_spill, scratch, lds, wave, name
: >"$table"
# Appends the kernels of target $2's code object in the bundle $1 to the table.
read_kernels() {
  local bundle=$1 arch=$2
  "$llvm_bin/clang-offload-bundler" --unbundle --type=o --input="$bundle" \
    --targets="hipv4-amdgcn-amd-amdhsa--$arch" --output="${bundle%.fatbin}.$arch.co"
  "$llvm_bin/llvm-readelf" --notes "${bundle%.fatbin}.$arch.co" | awk -v arch="$arch" '
    { sub(/^  - /, "    ") }
    /^    \.[a-z_]+:/ {
      key = $1; sub(/:$/, "", key); v[key] = $2
      if (key == ".wavefront_size")
        printf "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", arch, v[".vgpr_count"],
               v[".agpr_count"], v[".sgpr_count"], v[".vgpr_spill_count"],
               v[".sgpr_spill_count"], v[".private_segment_fixed_size"],
               v[".group_segment_fixed_size"], v[".wavefront_size"], v[".name"]
      if (key == ".wavefront_size") delete v
    }' >>"$table"
}
with_kernels=()
for obj in "${objects[@]}"; do
  sections=$("$llvm_bin/llvm-readelf" -S "$obj")  # (not piped into grep -q: SIGPIPE + pipefail)
  [[ "$sections" == *.hip_fatbin* ]] || continue   # no kernels in this object
  with_kernels+=("$(basename "$obj" .o)")
  base="$work/$(basename "$obj" .o)"
  "$llvm_bin/llvm-objcopy" --dump-section=.hip_fatbin="$base.fatbin" "$obj" "$base.host.o"
  for arch in "${arch_list[@]}"; do read_kernels "$base.fatbin" "$arch"; done
done
for arch in "${frontend_list[@]}"; do
  for unit in "${full_unit_list[@]}"; do read_kernels "$frontend/$unit.$arch.fatbin" "$arch"; done
done
# Demangle, and pull out each kernel's path and its kWarp / kLoad template arguments. Where those
# sit in each warp-dependent kernel's template list (1-based; the kernels' declarations):
#   NormTraits<kKind, kAdd, TX, TW, TR, kLoad, kWarp, Fp8>          (norm registers/staged kernels)
#   norm_backward_rows_kernel<TG, TH, TW, kGroup, kLoad, kWarp>
#   act_quant_kernel<K, Format, kWarp, kItems, kMaxThreads>,
#   act_quant_cluster_kernel<K, Format, kWarp, kItems>
# Other kernels (elementwise, column reductions) do not depend on the warp size: kWarp 0.
# A kernel of a listed family whose kWarp is not 32 or 64 fails the check (a changed signature).
cut -f10 "$table" | "$llvm_bin/llvm-cxxfilt" >"$work/names.txt"
# kernels.txt: arch, path, kWarp, kLoad, vgpr, agpr, sgpr, vgpr_spill, sgpr_spill, scratch, lds,
# wave, demangled name
paste "$table" "$work/names.txt" | awk -F'\t' -v OFS='\t' '
  # Top-level template arguments of the first "name<...>" in d, into args[1..n]; returns n.
  function template_args(d, name, args,    i, c, depth, n, cur) {
    i = index(d, name "<"); if (!i) return 0
    depth = 0; n = 0; cur = ""
    for (i += length(name) + 1; i <= length(d); i++) {
      c = substr(d, i, 1)
      if (depth == 0 && (c == "," || c == ">")) {
        sub(/^ +/, "", cur); args[++n] = cur; cur = ""
        if (c == ">") return n
        continue
      }
      if (c == "<" || c == "(") depth++
      if (c == ">" || c == ")") depth--
      cur = cur c
    }
    return 0
  }
  {
    d = $11; path = "other"; family = ""; warp = 0; load = 0
    if (d ~ /norm_staged_kernel/) path = "staged"
    if (d ~ /norm_registers_kernel/) path = "registers"
    if (d ~ /norm_backward_rows_kernel/) path = "backward"
    if (d ~ /act_quant_kernel/) path = "act-quant"
    # Thread-block cluster kernels (CUDA sm_90+) are empty where clusters_compiled() is false,
    # HIP included, and never launched there: not counted as native kernels below.
    if (d ~ /(norm|act_quant)_cluster_kernel/) path = "cluster"
    if (template_args(d, "NormTraits", a) >= 7) { family = "NormTraits"; load = a[6]; warp = a[7] }
    else if (path == "staged" || path == "registers") family = "NormTraits"
    if (path == "backward") {
      family = path; if (template_args(d, "norm_backward_rows_kernel", a) >= 6) {
        load = a[5]; warp = a[6] } }
    if (d ~ /act_quant(_cluster)?_kernel/) {
      family = "act-quant"; n = template_args(d, "act_quant_kernel", a)
      if (!n) n = template_args(d, "act_quant_cluster_kernel", a)
      if (n >= 3) warp = a[3] }
    if (family != "" && warp != 32 && warp != 64) {
      printf "kWarp of a %s kernel not found in its name: %s\n", family, d > "/dev/stderr"
      bad = 1 }
    print $1, path, warp + 0, load + 0, $2, $3, $4, $5, $6, $7, $8, $9, d }
  END { exit bad }' >"$work/kernels.txt" ||
  { echo "FAIL: kWarp unreadable for some kernels (positions: the comment above this awk)"; exit 1; }

report_archs=("${arch_list[@]}" "${frontend_list[@]}")
echo "== device code of ${with_kernels[*]} (${arch_list[*]}), of ${full_unit_list[*]:-none}" \
  "(${frontend_list[*]:-no other target}); 'native': kWarp = the target's wavefront size"
status=0
# norm_gpu.cu's `constexpr int kStaticSmemReserve = <integer expression>;` (e.g. 8 * 1024).
smem_reserve=$(sed -n '/kStaticSmemReserve = /{s/.*kStaticSmemReserve = \([^;]*\);.*/\1/p;q;}' \
  "$repo/src/gpu/norm/norm_gpu.cu")
if [[ "$smem_reserve" =~ ^[0-9\ \*+]+$ ]]; then
  smem_reserve=$((smem_reserve))
else
  echo "   (kStaticSmemReserve not found in norm_gpu.cu: staged static-LDS check skipped)"
  smem_reserve=""
fi
printf '   %-8s %5s %7s %7s %6s %5s %9s %7s %10s %7s %9s %10s\n' target wave kWarp32 kWarp64 native \
  stubs maxVGPR+A maxSGPR maxScratch maxLDS stagedLDS spills:v/s
for arch in "${report_archs[@]}"; do
  read -r wave n32 n64 native vmax smax scratch lds vspill sspill staged_lds stubs empty < <(awk -F'\t' \
    -v a="$arch" '
    $1 == a { wave = $12; n[$3]++; v = $5 + $6
              if ($3 != $12 && v == 0) stub++
              if ($3 == $12 && $2 != "cluster") {
                nat++; if (v == 0) empty++; if (v > vm) vm = v; if ($7 > sm) sm = $7
                if ($10 > sc) sc = $10; if ($11 > ld) ld = $11
                if ($8 > 0) vsp++; if ($9 > 0) ssp++
                if ($2 == "staged" && $11 > sl) sl = $11 } }
    END { printf "%d %d %d %d %d %d %d %d %d %d %d %d %d\n", wave, n[32], n[64], nat, vm, sm, sc, ld,
                 vsp, ssp, sl, stub, empty }' \
    "$work/kernels.txt")
  printf '   %-8s %5s %7s %7s %6s %5s %9s %7s %10s %7s %9s %10s\n' "$arch" "$wave" "$n32" "$n64" \
    "$native" "$stubs" "$vmax" "$smax" "$scratch" "$lds" "$staged_lds" "$vspill/$sspill"
  if ((native == 0)); then
    echo "   FAIL: no kernels for $arch's wavefront size ($wave)"; status=1
  fi
  # Each warp-dependent family built at all needs kernels of this target's wavefront size.
  while read -r family; do
    echo "   FAIL: no $family kernels for $arch's wavefront size ($wave)"; status=1
  done < <(awk -F'\t' -v a="$arch" '$1 == a && $3 != 0 && $2 != "cluster" { any[$2] = 1; if ($3 == $12) nat[$2] = 1 }
             END { for (p in any) if (!(p in nat)) print p }' "$work/kernels.txt")
  if ((empty > 0)); then
    echo "   FAIL: $empty kernels for $arch's wavefront size compiled to empty stubs"; status=1
  fi
  # The staged kernel takes dynamic LDS up to sharedMemPerBlock minus this reserve (norm_gpu.cu);
  # its static LDS (reduction scratch, plus any private array the compiler promoted to LDS) must
  # fit in the reserve, or launches with a full stage fail.
  if [[ -n "$smem_reserve" ]] && ((staged_lds > smem_reserve)); then
    echo "   FAIL: staged kernels on $arch use $staged_lds B of static LDS," \
      "more than kStaticSmemReserve = $smem_reserve B"; status=1
  fi
  if ((vspill > 0)) && [[ "${FUSEKIT_CI_FAIL_ON_SPILLS:-0}" == 1 ]]; then
    echo "   FAIL: $vspill kernels spill VGPRs to scratch on $arch"; status=1
  fi
done
# Resource usage of the largest registers-path and staged kernels per target (native warp size).
echo "== heaviest native kernels (VGPR+AGPR / SGPR / spills v,s / scratch B per lane / static LDS B)"
for arch in "${report_archs[@]}"; do
  for path in registers staged act-quant; do
    # (no `sort | head` here: head's early exit would fail the pipeline under pipefail)
    awk -F'\t' -v a="$arch" -v p="$path" '
      $1 == a && $2 == p && $3 == $12 {
        k = ($5 + $6) * 100000 + $10
        if (!found || k > best) { best = k; found = 1; line = $0 } }
      END { if (!found) exit
        split(line, f, "\t"); d = f[13]; sub(/^void fusekit::gpu::/, "", d)
        gsub(/fusekit::(gpu|detail)::/, "", d); sub(/\((Norm|Act)KernelArgs\)$/, "", d)
        sub(/\(NormKind\)0/, "Rms", d); sub(/\(NormKind\)1/, "Layer", d)
        printf "   %-8s %-9s %3d+%-3d %3d  %d,%d  %5d  %5d  %s\n", f[1], f[2], f[5], f[6], f[7], f[8],
               f[9], f[10], f[11], d }' "$work/kernels.txt"
  done
done
echo "   (stubs: copies for the other warp size, empty by platform.h's warp_size_compiled;"
echo "   cluster kernels (CUDA sm_90+ only, empty by clusters_compiled) are not counted;"
echo "   maxScratch: bytes of private memory per lane; LDS: static bytes per block, dynamic not"
echo "   included; spills: kernels spilling VGPRs (to scratch memory) / SGPRs (to VGPR lanes)."
echo "   Full table: $work/kernels.txt)"

t_end=$(date +%s)
echo "== time: tools $((t_tools - t_start)) s, configure $((t_conf - t_tools)) s," \
  "build $((t_build - t_conf)) s, front end (past the build) $((t_frontend - t_build)) s," \
  "checks $((t_end - t_frontend)) s, total $((t_end - t_start)) s"
if ((status)); then echo "FAIL"; else echo "OK"; fi
exit "$status"
