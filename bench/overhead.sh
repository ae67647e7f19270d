#!/usr/bin/env bash
# Harness overhead of `carb profile`: the share of a campaign's wall time spent outside the
# inferences it runs (warm-up, timed passes, energy window), with a fresh worker process per
# configuration (--worker-reuse 1, A) and with reused workers (--worker-reuse 100, B), side by
# side. The sample is split into chunks; each chunk is profiled by both arms, alternately A B and
# B A, each arm into its own new database, so both measure the same configurations under the
# same conditions. The wall time is the whole `carb profile` command's (start-up included).
#
#   [CARB_PROTOCOL_ARGS=...] bench/overhead.sh [N (120)] [CHUNKS (12)] [extra carb profile arguments...]
#
# Prints per arm: wall, inside inferences (warm-up, timed, energy), of it the warm-up, prepare,
# the overhead share with and without prepare, the warm-up's share, configurations per minute;
# and how far the two arms' latencies lie apart (median |A-B|/mean over the configurations).
# Drift probes are off here (--drift-probe none): each chunk is a campaign of its own, so it would
# be probed at its start and end, far more often than a whole campaign is; their cost in a real
# campaign is the summary's "drift probes" time over its wall time (docs/measurement.md).
set -euo pipefail
cd "$(dirname "$0")/.."
count="${1:-120}"
chunks="${2:-12}"
shift $(($# < 2 ? $# : 2))
carb="${CARB:-build/src/cli/carb}"
spec=examples/spaces/cpu-demo.yaml
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The reference campaign's protocol (data/README.md) unless CARB_PROTOCOL_ARGS says otherwise
# ("" for carb's defaults).
read -r -a protocol_args <<<"${CARB_PROTOCOL_ARGS---target-ci 0.02 --max-time 2}"
profile_args=("${protocol_args[@]}" --drift-probe none "$@")

"$carb" space list --spec "$spec" --sample "$count" --seed 1 --sampling stratified \
  --format csv | tail -n +2 | cut -d, -f1 >"$work/keys"
split -n "l/$chunks" -d -a 3 "$work/keys" "$work/chunk."

declare -A wall=([A]=0 [B]=0)
run_arm() {  # arm chunk-file
  local arm="$1" keys="$2" reuse=1
  [ "$arm" = B ] && reuse=100
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
      detail LIKE '%contended%', json_extract(provenance, '\$.timings_s.warmup') FROM measurements"
  done | sort >"$work/$arm.rows"
done

printf '%-24s %8s %10s %8s %8s %9s %10s %8s %11s %9s\n' arm "wall (s)" "inference" \
  "warm-up" prepare overhead "w/o prep." warm-up% configs/min contended
for arm in A B; do
  name="A: a fresh worker each"
  [ "$arm" = B ] && name="B: workers reused (100)"
  # inference: warm-up, timed and energy passes; overhead: the rest of the wall time; w/o prep.:
  # the rest less prepare (the harness proper); warm-up%: the warm-up's share of the wall time.
  awk -v wall="${wall[$arm]}" -v name="$name" '
    { inference += $4; prepare += $5; contended += $6; warmup += $7; rows += 1 }
    END { printf "%-24s %8.1f %10.1f %8.1f %8.1f %8.1f%% %9.1f%% %7.1f%% %11.1f %9d\n", name,
          wall, inference, warmup, prepare, 100 * (wall - inference) / wall,
          100 * (wall - inference - prepare) / wall, 100 * warmup / wall, 60 * rows / wall,
          contended }' "$work/$arm.rows"
done
# Paired by configuration: the median absolute difference (how far apart) and the median signed
# one (whether reuse makes inferences faster or slower).
join "$work/A.rows" "$work/B.rows" | awk '$2 == "ok" && $8 == "ok" { print 2 * ($3 - $9) / ($3 + $9) }' \
  >"$work/diffs"
median() { sort -g | awk '{ r[NR] = $1 } END { print r[int((NR + 1) / 2)], NR }'; }
read -r absolute n < <(awk '{ print ($1 < 0 ? -$1 : $1) }' "$work/diffs" | median)
read -r signed _ < <(median <"$work/diffs")
printf 'latency, A vs B over %d configurations: median |A-B|/mean %.2f%%, median (A-B)/mean %+.2f%%\n' \
  "$n" "$(echo "100 * $absolute" | bc -l)" "$(echo "100 * $signed" | bc -l)"
