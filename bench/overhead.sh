#!/usr/bin/env bash
# Harness overhead of `carb profile`: the share of a campaign's wall time spent outside the
# inferences it runs (warm-up, timed passes, energy window), with a fresh worker process per
# configuration (--worker-reuse 1, A) and with reused workers (--worker-reuse 25, B), side by
# side. The sample is split into chunks; each chunk is profiled by both arms, alternately A B and
# B A, each arm into its own new database, so both measure the same configurations under the
# same conditions. The wall time is the whole `carb profile` command's (start-up included).
#
#   bench/overhead.sh [N (120)] [CHUNKS (12)] [extra carb profile arguments...]
#
# Prints per arm: wall, inside inferences, prepare, overhead share, configurations per minute;
# and how far the two arms' latencies lie apart (median |A-B|/mean over the configurations).
set -euo pipefail
cd "$(dirname "$0")/.."
count="${1:-120}"
chunks="${2:-12}"
shift $(($# < 2 ? $# : 2))
carb="${CARB:-build/src/cli/carb}"
spec=examples/spaces/cpu-demo.yaml
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
profile_args=(--target-ci 0.02 --max-time 2 "$@")

"$carb" space list --spec "$spec" --sample "$count" --seed 1 --sampling stratified \
  --format csv | tail -n +2 | cut -d, -f1 >"$work/keys"
split -n "l/$chunks" -d -a 3 "$work/keys" "$work/chunk."

declare -A wall=([A]=0 [B]=0)
run_arm() {  # arm chunk-file
  local arm="$1" keys="$2" reuse=1
  [ "$arm" = B ] && reuse=25
  local start end
  start=$(date +%s.%N)
  "$carb" profile --keys "$keys" --db "$work/$arm.$(basename "$keys").sqlite" \
    --worker-reuse "$reuse" "${profile_args[@]}" >/dev/null 2>"$work/err" ||
    { cat "$work/err" >&2; exit 1; }
  end=$(date +%s.%N)
  wall[$arm]=$(echo "${wall[$arm]} + $end - $start" | bc -l)
}
i=0
for keys in "$work"/chunk.*; do
  if ((i % 2 == 0)); then run_arm A "$keys"; run_arm B "$keys"; else run_arm B "$keys"; run_arm A "$keys"; fi
  i=$((i + 1))
done

# Per arm, one row per configuration: key, status, wall median, inference s, prepare s, contended.
for arm in A B; do
  for db in "$work/$arm".chunk.*.sqlite; do
    sqlite3 -separator ' ' "$db" "SELECT configuration_key, status, ifnull(wall_median_ms, 0),
      json_extract(provenance, '\$.timings_s.warmup') + json_extract(provenance, '\$.timings_s.timed') +
      json_extract(provenance, '\$.timings_s.energy'), json_extract(provenance, '\$.timings_s.prepare'),
      detail LIKE '%contended%' FROM measurements"
  done | sort >"$work/$arm.rows"
done

printf '%-24s %9s %14s %12s %9s %12s %10s\n' arm "wall (s)" "inference (s)" "prepare (s)" \
  overhead "configs/min" contended
for arm in A B; do
  name="A: a fresh worker each"
  [ "$arm" = B ] && name="B: workers reused (25)"
  awk -v wall="${wall[$arm]}" -v name="$name" '
    { inference += $4; prepare += $5; contended += $6; rows += 1 }
    END { printf "%-24s %9.1f %14.1f %12.1f %8.1f%% %12.1f %10d\n", name, wall, inference, prepare,
          100 * (wall - inference) / wall, 60 * rows / wall, contended }' "$work/$arm.rows"
done
join "$work/A.rows" "$work/B.rows" | awk '$2 == "ok" && $7 == "ok" {
    d = $3 - $8; if (d < 0) d = -d; print 2 * d / ($3 + $8) }' | sort -g |
  awk '{ r[NR] = $1 } END { printf "latency, A vs B: median |A-B|/mean %.2f%% over %d configurations\n",
       100 * r[int((NR + 1) / 2)], NR }'
