#!/usr/bin/env bash
# Checks that coda's C and C++ sources are formatted as .clang-format says
# (LLVM style); `scripts/check-format.sh --fix` formats them in place.
# CLANG_FORMAT names the binary (default: clang-format). Lists the files
# that differ and exits non-zero when there are any.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format}
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.c')
else
  mapfile -t files < <(find include lib tools test/lib bench -name '*.cpp' -o -name '*.h' -o -name '*.c' | sort)
fi
if [ "${1:-}" = "--fix" ]; then
  "$clang_format" -i --style=file "${files[@]}"
  exit 0
fi
unformatted=()
for f in "${files[@]}"; do
  "$clang_format" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done
if ((${#unformatted[@]})); then
  echo "check-format: ${#unformatted[@]} of ${#files[@]} files are not formatted as .clang-format says (scripts/check-format.sh --fix formats them):"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
