#!/bin/sh
# make_test_ca.sh DIR [NAME...]: a test CA and a server certificate for localhost and
# 127.0.0.1 signed by it, made with openssl into DIR (created when missing), for
# keel-payments-sim and the services that call it over HTTPS:
#
#   DIR/ca.pem  DIR/ca-key.pem          the CA (what clients trust: --webhook-ca, tls.ca_file)
#   DIR/server.pem  DIR/server-key.pem  localhost + 127.0.0.1 + each NAME (--tls-cert, --tls-key)
#
# Each NAME is a further host name or IP address of the server, for callers that reach it by
# another name than localhost: `make_test_ca.sh DIR payments` on a compose network
# (deploy/compose.yaml).
#
# Idempotent: files that exist are kept (a CA is made only when DIR has none; the server
# certificate only when it is missing or does not name every NAME). Remove DIR to start
# over. For tests only: the keys are unencrypted and the certificates last 825 days.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: $0 DIR [NAME...]" >&2
    exit 2
fi
dir=$1
shift

# True for an IP address, false for a host name.
is_address() {
    case $1 in
        *:*) return 0 ;;        # IPv6
        *[!0-9.]*) return 1 ;;  # a letter or a hyphen: a host name
        *) return 0 ;;          # IPv4
    esac
}
# The certificate's subjectAltName: the names one machine's callers use, then the NAMEs.
san="DNS:localhost,IP:127.0.0.1"
for name in "$@"; do
    case $name in
        '' | *[!A-Za-z0-9.:-]*)
            echo "$0: not a host name or IP address: '$name'" >&2
            exit 2 ;;
    esac
    if is_address "$name"; then san="$san,IP:$name"; else san="$san,DNS:$name"; fi
done
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

# True when server.pem is valid for every NAME: a DIR made earlier without one gets a new
# server certificate from the same CA.
server_names_all() {
    for name in "$@"; do
        if is_address "$name"; then check=-checkip; else check=-checkhost; fi
        openssl x509 -in server.pem -noout "$check" "$name" | grep -q ' does match ' || return 1
    done
}

if [ ! -s server.pem ] || [ ! -s server-key.pem ] || ! server_names_all "$@"; then
    ext=$(mktemp)
    trap 'rm -f "$ext" server.csr' EXIT
    cat >"$ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$san
EXT
    openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" \
        -keyout server-key.pem -out server.csr 2>/dev/null
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
        -days 825 -sha256 -extfile "$ext" -out server.pem 2>/dev/null
    rm -f ca.srl
fi
chmod 644 ca.pem server.pem
echo "$dir: ca.pem, server.pem, server-key.pem"
