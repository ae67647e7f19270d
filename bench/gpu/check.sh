#!/usr/bin/env bash
# The GPU check: one command, at most about 9.5 minutes, on a machine with an NVIDIA GPU and the
# CUDA toolkit (written for the 16-core H200 device machine, which has no network):
#   1. environment: nvidia-smi, nvcc, cuDNN, cmake, PyTorch                          env.txt
#   2. build carb with -DCARB_CUDA=ON -DCARB_REPORT=OFF (Release, only the targets used here)
#   3. the GPU tests (tests/cuda) and the conformance suite on the GPU               tests-*.xml
#   4. a fixed list of configurations (bench/gpu/first-keys.txt: small to large, fp32, fp16 and
#      bf16, batch 1 to 256), profiled first so that a short window still yields data
#   5. carb vs PyTorch eager side by side: resnet18/50, fp32/fp16, 3 batch sizes     torch.tsv
#   6. a stratified sample of examples/spaces/paper.yaml for the time left, into the same
#      database: latency, energy, memory                                             paper-gpu.sqlite.xz
# Each step has a hard timeout and a failed step does not stop the next; OUT_DIR/check.log holds
# every step's output and OUT_DIR/summary.txt the outcome and duration of each. It writes at most
# 8 files into OUT_DIR (the device tool brings back 8) and never changes a GPU setting.
#
# Usage:  bash bench/gpu/check.sh [--dry-run] OUT_DIR
# Device tool: run(command='bash bench/gpu/check.sh "$OUT"', carry=[".gpu-deps"], timeout_s=600)
#
# --dry-run rehearses the check on a machine without a GPU (docs/gpu.md, "Rehearsal"): every step
# runs as it would on the GPU machine (the GPU tests skip, PyTorch says it has no GPU), except that
# the two profiling steps must end in carb's refusal of a machine without a CUDA device, which
# shows that their command lines parse; it fails (exit 1) when any step does not do that. There
# is no deadline unless CHECK_TOTAL_S is set, step limits are CHECK_LIMIT_SCALE (8) times longer
# (a 2-core machine builds slower than the 16-core GPU machine), and CHECK_FORCE_DEPS defaults to 1.
# Environment: CHECK_BUILD_DIR (build-gpu), CHECK_BUILD_TYPE (Release),
#   CHECK_TOTAL_S (560: everything ends by then), CHECK_CAMPAIGN_S (360),
#   CHECK_FIRST_S (100: at most this long for the fixed list),
#   CHECK_DEPS (.gpu-deps: Debian packages from bench/gpu/fetch-deps.sh, unpacked into
#   /tmp/carb-deps when the machine's own libraries do not configure),
#   CHECK_FORCE_DEPS (0; 1: configure against the unpacked packages from the start).
set -uo pipefail
cd "$(dirname "$0")/../.."

dry_run=0
if [ "${1:-}" = "--dry-run" ]; then
  dry_run=1
  shift
fi
out="${1:?usage: bash bench/gpu/check.sh [--dry-run] OUT_DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
build="${CHECK_BUILD_DIR:-build-gpu}"
build_type="${CHECK_BUILD_TYPE:-Release}"
if [ "$dry_run" = 1 ]; then
  total_s="${CHECK_TOTAL_S:-100000}"
  force_deps="${CHECK_FORCE_DEPS:-1}"
  limit_scale="${CHECK_LIMIT_SCALE:-8}"
else
  total_s="${CHECK_TOTAL_S:-560}"
  force_deps="${CHECK_FORCE_DEPS:-0}"
  limit_scale="${CHECK_LIMIT_SCALE:-1}"
fi
campaign_cap_s="${CHECK_CAMPAIGN_S:-360}"
first_cap_s="${CHECK_FIRST_S:-100}"
deps="${CHECK_DEPS:-.gpu-deps}"
jobs="$(nproc)"
start=$(date +%s)
log="$out/check.log"
summary="$out/summary.txt"
failures=0
: >"$log"
: >"$summary"

elapsed() { echo $(($(date +%s) - start)); }
note() { echo "[check +$(elapsed)s] $*" | tee -a "$log"; }
# step NAME LIMIT_S COMMAND...: runs COMMAND with a hard timeout, its output appended to the log.
# No step runs past the whole check's deadline (CHECK_TOTAL_S): its limit shrinks to the time
# left, and with under 20 s left it is skipped.
step() {
  local name="$1" limit="$2"
  shift 2
  limit=$((limit * limit_scale))
  local left=$((total_s - $(elapsed) - 10))
  [ "$limit" -gt "$left" ] && limit="$left"
  if [ "$limit" -lt 20 ]; then
    note "skip $name: $((total_s - $(elapsed)))s left"
    printf '%-14s %-28s\n' "$name" "skipped (no time left)" >>"$summary"
    return 1
  fi
  local began=$(date +%s)
  note "begin $name (limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  local took=$(($(date +%s) - began))
  local outcome="ok"
  [ "$rc" -ne 0 ] && outcome="FAILED (exit $rc)"
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && outcome="TIMED OUT after ${limit}s"
  note "end $name: $outcome in ${took}s"
  printf '%-14s %-28s %4ss\n' "$name" "$outcome" "$took" >>"$summary"
  [ "$rc" -ne 0 ] && failures=$((failures + 1))
  return "$rc"
}
# profile_step NAME LIMIT_S COMMAND...: a step that needs the GPU. In a dry run the command must
# be refused for want of a CUDA device (exit 2, "cuda" in its message): its flags parsed.
profile_step() {
  if [ "$dry_run" = 0 ]; then
    step "$@"
    return
  fi
  local name="$1"
  shift 2
  local refusal
  refusal="$("$@" 2>&1)"
  local rc=$?
  echo "$refusal" >>"$log"
  if [ "$rc" -eq 2 ] && echo "$refusal" | grep -q 'cuda'; then
    note "dry run: $name refused as expected without a GPU: $refusal"
    printf '%-14s %-28s\n' "$name" "ok (dry run: refused, no GPU)" >>"$summary"
  else
    note "dry run: $name FAILED: exit $rc, not the no-GPU refusal: $refusal"
    printf '%-14s %-28s\n' "$name" "FAILED (dry run: exit $rc)" >>"$summary"
    failures=$((failures + 1))
  fi
}

# --- 1. environment ----------------------------------------------------------------------------
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
# cuDNN: the toolkit's, else the one PyTorch's pip wheels bring (nvidia/cudnn).
toolkit_cudnn=""
for header in /usr/local/cuda/include/cudnn.h /usr/include/cudnn.h \
  /usr/include/x86_64-linux-gnu/cudnn.h; do
  if [ -f "$header" ]; then
    toolkit_cudnn="$header"
    break
  fi
done
if [ -z "${CUDNN_ROOT:-}" ] && [ -z "$toolkit_cudnn" ]; then
  wheel_cudnn="$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)"
  if [ -n "$wheel_cudnn" ] && [ -f "$wheel_cudnn/include/cudnn.h" ]; then
    export CUDNN_ROOT="$wheel_cudnn"
    export LD_LIBRARY_PATH="$wheel_cudnn/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
{
  echo "date: $(date -u +%FT%TZ)"
  echo "mode: $([ "$dry_run" = 1 ] && echo "dry run (no GPU expected)" || echo "GPU check")"
  echo "host: $(hostname) $(uname -r), $(nproc) CPUs"
  echo "git: $(git rev-parse HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  echo "cuDNN: ${CUDNN_ROOT:+CUDNN_ROOT=$CUDNN_ROOT}${toolkit_cudnn:+$toolkit_cudnn}"
  echo "--- nvidia-smi (read only)"
  nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,power.limit,clocks.sm,clocks.mem,temperature.gpu,clocks_event_reasons.active --format=csv 2>&1
  echo "--- tools"
  nvcc --version 2>&1 | tail -2
  cmake --version 2>&1 | head -1
  ninja --version 2>&1
  g++ --version 2>&1 | head -1
  python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
} >"$out/env.txt" 2>&1
note "environment in env.txt"

# --- 2. build -----------------------------------------------------------------------------------
# Only what the check runs: no report (its Vega-Lite scripts come from npm, which the GPU machine
# cannot reach), no MPI. CMAKE_POLICY_VERSION_MINIMUM lets CMake 4 read package files written
# for older CMake; CMake 3 ignores it.
configure=(cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DCARB_CUDA=ON
  -DCARB_REPORT=OFF -DCARB_MPI=OFF -DCARB_BUILD_TESTS=ON -DCARB_BUILD_BENCH=ON
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
use_deps() {
  note "configuring against $deps, unpacked into /tmp/carb-deps"
  rm -rf /tmp/carb-deps "$build"
  mkdir -p /tmp/carb-deps
  for package in "$deps"/*.deb; do dpkg -x "$package" /tmp/carb-deps; done
  prefix=/tmp/carb-deps/usr
  export CPATH="$prefix/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$prefix/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  step configure-deps 120 "${configure[@]}" -DCMAKE_PREFIX_PATH="$prefix"
}
have_deps=0
ls "$deps"/*.deb >/dev/null 2>&1 && have_deps=1
if [ "$force_deps" = 1 ] && [ "$have_deps" = 1 ]; then
  use_deps
elif ! step configure 120 "${configure[@]}"; then
  if [ "$have_deps" = 1 ]; then
    failures=$((failures - 1))  # the fallback decides
    use_deps
  else
    note "no $deps/*.deb to fall back on (bench/gpu/fetch-deps.sh makes them)"
  fi
elif [ "$force_deps" = 1 ]; then
  note "CHECK_FORCE_DEPS=1 but no $deps/*.deb: configured against this machine's libraries"
fi
step build 300 cmake --build "$build" -j "$jobs" --target carb test_cuda test_backends bench_engine
carb="$build/src/cli/carb"

# --- 3. GPU tests and conformance ---------------------------------------------------------------
# Through ctest: each test in its own process with its own timeout, so a crash costs one test.
if [ -x "$build/tests/test_cuda" ]; then
  step gpu-tests 120 ctest --test-dir "$build" -L '^cuda$' -j 4 --timeout 60 \
    --output-on-failure --output-junit "$out/tests-cuda.xml"
fi
if [ -x "$build/tests/backends/test_backends" ]; then
  step conformance 120 ctest --test-dir "$build" -L '^backends$' -R 'Conformance' -j 8 \
    --timeout 60 --output-on-failure --output-junit "$out/tests-conformance.xml"
fi
[ -x "$carb" ] && step devices 60 "$carb" devices

# --- 4. the fixed list first --------------------------------------------------------------------
# The protocol of both profiling steps: 0.2-1 s timed, energy windows of at least 1 s aligned to
# the counter's updates (docs/measurement.md), a throttled window is kept as it is (recorded,
# not measured again: the time is short).
db="$out/paper-gpu.sqlite"
protocol=(--device cuda --db "$db" --min-time 0.2 --max-time 1 --energy-window 1 --cooldown 0.25
  --idle-window 2 --timeout 55 --retry-limit 1 --throttle-retries 0)
if [ -x "$carb" ]; then
  profile_step first-keys $((first_cap_s + 60)) "$carb" profile --keys bench/gpu/first-keys.txt \
    "${protocol[@]}" --time-budget "${first_cap_s}s"
fi

# --- 5. carb vs PyTorch -------------------------------------------------------------------------
if [ -x "$build/bench/bench_engine" ]; then
  step torch 150 python3 bench/gpu/torch_compare.py --bench "$build/bench/bench_engine" \
    --out "$out/torch.tsv"
fi

# --- 6. the stratified sample, for the time left ------------------------------------------------
# Leave time for the last configuration (its worker timeout) and for packing the results.
campaign_s=$((total_s - $(elapsed) - 60 - 30))
[ "$campaign_s" -gt "$campaign_cap_s" ] && campaign_s="$campaign_cap_s"
if [ -x "$carb" ] && [ "$campaign_s" -ge 60 ]; then
  profile_step campaign $((campaign_s + 75)) "$carb" profile --spec examples/spaces/paper.yaml \
    --sample 600 --sampling stratified --seed 8 "${protocol[@]}" --time-budget "${campaign_s}s"
else
  note "campaign skipped: under 60 s left for it, or no carb binary"
  echo "campaign       skipped (no time left)" >>"$summary"
fi
if [ -f "$db" ]; then
  python3 - "$db" >>"$summary" 2>>"$log" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("select status, count(*) from measurements group by status").fetchall()
print("database      " + ", ".join(f"{status} {count}" for status, count in rows))
ok = db.execute("""select count(*), count(energy_j), count(device_median_ms),
                   min(device_median_ms), max(device_median_ms),
                   sum(json_extract(provenance, '$.timings_s.prepare')),
                   sum(json_extract(provenance, '$.timings_s.warmup') +
                       json_extract(provenance, '$.timings_s.timed') +
                       json_extract(provenance, '$.timings_s.energy'))
                   from measurements where status = 'ok'""").fetchone()
print(f"              ok rows {ok[0]}, with energy {ok[1]}, with device latency {ok[2]}, "
      f"device median {ok[3]}..{ok[4]} ms, prepare {ok[5]} s, inference {ok[6]} s")
PY
  xz -T0 -6 -f "$db" && rm -f "$db-wal" "$db-shm"
fi

note "done in $(elapsed)s; files in $out:"
ls -l "$out" | tee -a "$log"
echo "--- summary"
cat "$summary"
[ -f "$out/torch.tsv" ] && column -t "$out/torch.tsv"
if [ "$dry_run" = 1 ]; then
  if [ "$failures" -ne 0 ]; then
    echo "dry run: $failures step(s) failed (check.log says why)"
    exit 1
  fi
  echo "dry run: every step passed"
fi
exit 0
