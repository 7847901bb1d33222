#!/usr/bin/env bash
# Makes a private certificate authority and the TLS certificates of an
# mcpbus deployment, into tls/ of this directory (or the directory given as
# $1), never overwriting a CA that exists:
#   ca.pem, ca.key          the CA (keep ca.key offline once done)
#   nats.pem, nats.key      the NATS nodes (client port, cluster routes,
#                           monitoring): nats-1..3, the Kubernetes
#                           StatefulSet's names, localhost
#   postgres.pem, .key      PostgreSQL (sslmode=verify-full against ca.pem)
#   api.pem, api.key        the api's HTTPS (api.tls.cert_file/key_file)
#   mcpbus-<service>.pem/.key  each service's client certificate, for NATS
#                           mutual TLS (nats.tls.cert_file/key_file)
# Extra DNS names for the server certificates: MCPBUS_TLS_NATS_NAMES,
# MCPBUS_TLS_API_NAMES, MCPBUS_TLS_POSTGRES_NAMES (space-separated).
# Certificates are valid for MCPBUS_TLS_DAYS days (default 365); run it
# again with the CA in place to renew them (the CA is kept). Needs bash and
# openssl. In Kubernetes, cert-manager can do the same from the CA: see
# docs/deployment.md.
set -euo pipefail
umask 077
dir=${1:-$(dirname "$0")}/tls
days=${MCPBUS_TLS_DAYS:-365}
mkdir -p "$dir"
cd "$dir"

if [ ! -e ca.key ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
		-subj "/CN=mcpbus deployment CA" -keyout ca.key -out ca.pem \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

# cert NAME USAGE DNS... : NAME.pem and NAME.key signed by the CA.
cert() {
	local name=$1 usage=$2
	shift 2
	local san="" n
	for n in "$@"; do san="$san${san:+,}DNS:$n"; done
	local ext
	ext=$(mktemp)
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$usage"
		[ -n "$san" ] && echo "subjectAltName=$san,IP:127.0.0.1"
	} >"$ext"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
		-keyout "$name.key" -out "$name.csr" 2>/dev/null
	openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
		-extfile "$ext" -out "$name.pem" 2>/dev/null
	rm -f "$name.csr" "$ext"
}

# shellcheck disable=SC2086 # the extra names are a list
cert nats serverAuth,clientAuth nats nats-1 nats-2 nats-3 mcpbus-nats \
	"*.mcpbus-nats-headless" localhost ${MCPBUS_TLS_NATS_NAMES:-}
# shellcheck disable=SC2086
cert postgres serverAuth postgres mcpbus-postgres localhost ${MCPBUS_TLS_POSTGRES_NAMES:-}
# shellcheck disable=SC2086
cert api serverAuth api mcpbus-api localhost ${MCPBUS_TLS_API_NAMES:-}
for svc in api discovery toolcall taskpoller tokens; do
	cert "mcpbus-$svc" clientAuth
done
# The CA certificate and the certificates are public; the keys stay 0600.
chmod 0644 ./*.pem
echo "certs.sh: wrote the CA and the certificates to $dir (valid $days days)"
