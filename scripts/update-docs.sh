#!/usr/bin/env bash
# Regenerates the dialect and pass reference in docs/generated from the
# TableGen sources (the coda-doc target). test/docs.test fails when they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target coda-doc
cp build/docs/Dialects/CodaDialect.md docs/generated/CodaDialect.md
for f in build/docs/*Passes.md; do
  cp "$f" docs/generated/
done
