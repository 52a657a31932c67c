#!/usr/bin/env bash
# The layering check must pass on the tree and fail on an include that points up a layer: copies
# the layered directories, plants one upward include per rule, and expects each to be reported.
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bash "$src/scripts/check-layers" "$src"

# file to plant in | include that points up from it
plants=(
  "server/physics/types.h|shared/wire/codec.h"
  "server/request/apply_request.h|server/net/outbox.h"
  "server/net/outbox.h|server/app/server.h"
  "server/net/outbox.h|server/record/format.h"
  "server/record/format.h|server/net/outbox.h"
  "shared/math.h|server/physics/world.h"
  "client/client.cpp|server/app/server.h"
  "client/include/impulse/types.h|impulse/schemas/impulse_generated.h"
  "client/include/impulse/client.h|shared/wire/codec.h"
  "shared/net/link_estimates.h|shared/net/packet_acks.h"
)
for plant in "${plants[@]}"; do
  file=${plant%%|*}
  target=${plant##*|}
  rm -rf "$work/tree" && mkdir -p "$work/tree"
  cp -r "$src/scripts" "$src/shared" "$src/server" "$src/client" "$work/tree/"
  printf '#include "%s"\n' "$target" >> "$work/tree/$file"
  if out=$(bash "$work/tree/scripts/check-layers" "$work/tree" 2>&1); then
    echo "FAIL: check-layers accepted $file including $target" >&2
    exit 1
  fi
  if ! grep -q "^$file:[0-9]*: includes \"$target\"" <<<"$out"; then
    echo "FAIL: check-layers did not name $file including $target; it said:" >&2
    echo "$out" >&2
    exit 1
  fi
done
echo "check-layers caught all ${#plants[@]} planted upward includes"
