#!/usr/bin/env bash
# Writes the secrets deploy/compose.yaml reads, into this directory (or the
# directory given as $1), never overwriting one that exists:
#   mcpbus.env         the services' environment: MCPBUS_CREDENTIALS_KEY,
#                      MCPBUS_NATS_URL (the services' NATS user and password),
#                      MCPBUS_DATABASE_URL, MCPBUS_ADMIN_KEY_SHA256
#   nats.env           nats-server's: the password of every accounts.conf user
#   postgres_password  PostgreSQL's superuser password (a compose secret)
#   admin-api-key      the admin API key (Authorization: Bearer <key>); only
#                      its SHA-256 reaches the services
#   agent-*.password   each agent worker's NATS password, to hand to it
# Needs bash and coreutils only. Keep the files mode 0600 and out of git
# (.gitignore here ignores everything but the examples).
set -euo pipefail
umask 077
dir=${1:-$(dirname "$0")}
mkdir -p "$dir"
cd "$dir"
if [ -e mcpbus.env ] || [ -e nats.env ] || [ -e postgres_password ]; then
	echo "generate.sh: secrets already exist in $dir; remove them to generate new ones" >&2
	exit 1
fi
rand() { head -c 32 /dev/urandom; }
hex() { rand | od -An -v -tx1 | tr -d ' \n'; }

services_pw=$(hex)
pg_pw=$(hex)
admin_key=$(hex)
for who in trusted alice bob; do hex >"agent-$who.password"; done

printf '%s' "$pg_pw" >postgres_password
printf '%s\n' "$admin_key" >admin-api-key
cat >nats.env <<EOT
MCPBUS_NATS_SERVICES_PASSWORD=$services_pw
MCPBUS_NATS_AGENT_TRUSTED_PASSWORD=$(cat agent-trusted.password)
MCPBUS_NATS_AGENT_ALICE_PASSWORD=$(cat agent-alice.password)
MCPBUS_NATS_AGENT_BOB_PASSWORD=$(cat agent-bob.password)
EOT
nats_url=""
for n in 1 2 3; do nats_url="$nats_url${nats_url:+,}nats://mcpbus-services:$services_pw@nats-$n:4222"; done
cat >mcpbus.env <<EOT
MCPBUS_CREDENTIALS_KEY=$(rand | base64 -w0)
MCPBUS_NATS_URL=$nats_url
MCPBUS_DATABASE_URL=postgres://mcpbus:$pg_pw@postgres:5432/mcpbus?sslmode=disable
MCPBUS_ADMIN_KEY_SHA256=$(printf '%s' "$admin_key" | sha256sum | cut -d' ' -f1)
EOT
echo "generate.sh: wrote mcpbus.env, nats.env, postgres_password, admin-api-key and agent-*.password to $dir"
