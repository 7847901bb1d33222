#!/usr/bin/env bash
# Writes the secrets deploy/compose.yaml reads, into this directory (or the
# directory given as $1), never overwriting one that exists. Each service
# gets only what it needs (docs/deployment.md has the table):
#   common.env         every service: MCPBUS_NATS_URL (the three nodes, no
#                      credentials) and MCPBUS_ADMIN_KEY_SHA256 (a hash, for
#                      config.yaml's api.keys, which every service loads)
#   <service>.env      tokens, discovery, toolcall, taskpoller, api: the
#                      service's own NATS password
#                      (MCPBUS_NATS_<SERVICE>_PASSWORD, its user in
#                      deploy/nats/accounts.conf) and, where it uses them,
#                      MCPBUS_DATABASE_URL (every service; discovery
#                      keeps the tool pins there) and
#                      MCPBUS_CREDENTIALS_KEY (tokens and api only)
#   migrate.env        the migrations job: MCPBUS_DATABASE_URL only
#   nats.env           nats-server's: the password of every accounts.conf user
#   postgres_password  PostgreSQL's superuser password (a compose secret)
#   admin-api-key      the admin API key (Authorization: Bearer <key>); only
#                      its SHA-256 reaches the services
#   agent-*.password   each agent worker's NATS password, to hand to it
# The TLS certificates come from certs.sh (run it too: compose mounts
# tls/). Needs bash and coreutils only. Keep the files mode 0600 and out
# of git (.gitignore here ignores everything but the examples).
set -euo pipefail
umask 077
dir=${1:-$(dirname "$0")}
mkdir -p "$dir"
cd "$dir"
if [ -e common.env ] || [ -e nats.env ] || [ -e postgres_password ]; then
	echo "generate.sh: secrets already exist in $dir; remove them to generate new ones" >&2
	exit 1
fi
rand() { head -c 32 /dev/urandom; }
hex() { rand | od -An -v -tx1 | tr -d ' \n'; }

pg_pw=$(hex)
admin_key=$(hex)
credentials_key=$(rand | base64 -w0)
for who in trusted alice bob; do hex >"agent-$who.password"; done
# PostgreSQL over TLS, verified against the deployment CA (certs.sh).
database_url="postgres://mcpbus:$pg_pw@postgres:5432/mcpbus?sslmode=verify-full&sslrootcert=/run/mcpbus/tls/ca.pem"

printf '%s' "$pg_pw" >postgres_password
printf '%s\n' "$admin_key" >admin-api-key
nats_url=""
for n in 1 2 3; do nats_url="$nats_url${nats_url:+,}tls://nats-$n:4222"; done
{
	printf 'MCPBUS_NATS_URL=%s\n' "$nats_url"
	printf 'MCPBUS_ADMIN_KEY_SHA256=%s\n' "$(printf '%s' "$admin_key" | sha256sum | cut -d' ' -f1)"
} >common.env
printf 'MCPBUS_DATABASE_URL=%s\n' "$database_url" >migrate.env
: >nats.env
for svc in tokens discovery toolcall taskpoller api; do
	var="MCPBUS_NATS_${svc^^}_PASSWORD"
	pw=$(hex)
	printf '%s=%s\n' "$var" "$pw" >>nats.env
	{
		printf '%s=%s\n' "$var" "$pw"
		printf 'MCPBUS_DATABASE_URL=%s\n' "$database_url"
		case $svc in tokens | api) printf 'MCPBUS_CREDENTIALS_KEY=%s\n' "$credentials_key" ;; esac
	} >"$svc.env"
done
cat >>nats.env <<EOT
MCPBUS_NATS_AGENT_TRUSTED_PASSWORD=$(cat agent-trusted.password)
MCPBUS_NATS_AGENT_ALICE_PASSWORD=$(cat agent-alice.password)
MCPBUS_NATS_AGENT_BOB_PASSWORD=$(cat agent-bob.password)
EOT
echo "generate.sh: wrote common.env, <service>.env, migrate.env, nats.env, postgres_password, admin-api-key and agent-*.password to $dir"
