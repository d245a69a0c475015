#!/bin/sh
# make_test_ca.sh DIR: a test CA and a server certificate for localhost and 127.0.0.1 signed
# by it, made with openssl into DIR (created when missing), for keel-payments-sim and the
# services that call it over HTTPS on one machine:
#
#   DIR/ca.pem  DIR/ca-key.pem          the CA (what clients trust: --webhook-ca, tls.ca_file)
#   DIR/server.pem  DIR/server-key.pem  localhost + 127.0.0.1 (--tls-cert, --tls-key)
#
# Idempotent: files that exist are kept (a CA is made only when DIR has none; the server
# certificate only when it is missing). Remove DIR to start over. For tests only: the keys
# are unencrypted and the certificates last 825 days.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
dir=$1
command -v openssl >/dev/null || { echo "$0: openssl is not installed" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
umask 077

if [ ! -s ca.pem ] || [ ! -s ca-key.pem ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 825 \
        -subj "/CN=keel test CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout ca-key.pem -out ca.pem 2>/dev/null
    rm -f server.pem server-key.pem  # issued by an earlier CA
fi

if [ ! -s server.pem ] || [ ! -s server-key.pem ]; then
    ext=$(mktemp)
    trap 'rm -f "$ext" server.csr' EXIT
    cat >"$ext" <<'EXT'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1
EXT
    openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" \
        -keyout server-key.pem -out server.csr 2>/dev/null
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
        -days 825 -sha256 -extfile "$ext" -out server.pem 2>/dev/null
    rm -f ca.srl
fi
chmod 644 ca.pem server.pem
echo "$dir: ca.pem, server.pem, server-key.pem"
