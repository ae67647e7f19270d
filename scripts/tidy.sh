#!/usr/bin/env bash
# Runs clang-tidy with the repository's .clang-tidy on the C++ sources under src/ that changed
# since a base commit; any warning fails. The base is $CARB_TIDY_BASE if set, else the commit
# named in .ci/tidy-base (move it forward once everything up to a commit is clean). Needs the
# compilation database of a configured build (${CARB_BUILD_DIR:-build}, as scripts/build.sh
# makes it). Usage: bash scripts/tidy.sh [FILE...]   (files given replace the changed ones)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${CARB_BUILD_DIR:-build}"
database="$build_dir/compile_commands.json"
if [ ! -f "$database" ]; then
  echo "tidy: $database is missing; run scripts/build.sh first" >&2
  exit 2
fi
if ! command -v clang-tidy >/dev/null; then
  echo "tidy: clang-tidy is not installed (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
if [ "$#" -gt 0 ]; then
  files=("$@")
  base="(files given)"
else
  base="${CARB_TIDY_BASE:-$(tr -d '[:space:]' < .ci/tidy-base)}"
  if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
    echo "tidy: base '$base' is not a commit of this clone" >&2
    exit 2
  fi
  mapfile -t files < <(git diff --name-only --diff-filter=d "$base" HEAD -- 'src/*.cpp')
fi
# Only sources this build compiles have a command (CUDA sources only where CUDA was found).
checked=()
# libtorch 1.13's headers do not parse with clang 14 in C++20 (c10::IValue is incomplete where a
# std::vector<IValue> is instantiated), so the PyTorch backend is left to GCC's warnings.
for file in "${files[@]}"; do
  if [[ "$file" == src/backends/torch/* ]]; then
    echo "tidy: skipped $file (libtorch's headers do not parse with clang 14)"
  elif grep -q "\"file\": \"$PWD/$file\"" "$database"; then
    checked+=("$file")
  else
    echo "tidy: skipped $file (not compiled in this build)"
  fi
done
echo "tidy: ${#checked[@]} changed source(s) since $base"
[ "${#checked[@]}" -eq 0 ] && exit 0
# clang-tidy parses with clang, which refuses GCC-only flags; a copy of the database without
# them is what it reads.
tidy_db="$build_dir/tidy"
mkdir -p "$tidy_db"
sed -E 's/ -f(tree-loop-vectorize|vect-cost-model=[a-z]+)//g' "$database" > "$tidy_db/compile_commands.json"
log="$build_dir/tidy.log"
# One process per file, as many at once as there are CPUs; the log keeps every warning.
rc=0
printf '%s\n' "${checked[@]}" |
  xargs -P "$(nproc)" -I{} clang-tidy -p "$tidy_db" --quiet --warnings-as-errors='*' {} \
    > "$log" 2>&1 || rc=$?
grep -E "(warning|error):" "$log" | sort -u || true
if [ "$rc" -ne 0 ]; then
  echo "tidy: clang-tidy found problems (whole output in $log)" >&2
  exit 1
fi
echo "tidy: clean"
