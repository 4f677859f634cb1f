#!/bin/sh
# Regenerates the test PKI used by the TLS tests (tests/unit/test_net_tls.c,
# tests/integration/py/test_tls*.py). Made with OpenSSL's command line by
# this script alone (no outside origin); valid for 100 years so the tests
# do not expire. Run from anywhere: writes next to this script.
#   ca.pem / ca.key            a test CA ("Warren Test CA")
#   server.pem / server.key    CN=localhost, SAN DNS:localhost, IP:127.0.0.1
#   server2.pem / server2.key  the same names from a second key (reload tests)
#   server_enc.key             server.key encrypted with the password "warren"
#   client.pem / client.key    CN=warren-client, O=Warren Tests, with SANs
#   other_ca.pem/.key, other_client.pem/.key  a CA the server does not trust
set -eu
cd "$(dirname "$0")"
days=36500
ca() { # name subject
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.pem" -days $days \
        -subj "$2" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}
leaf() { # name subject ca extensions
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$4" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial \
        -out "$1.pem" -days $days -extfile "$1.ext" 2>/dev/null
    rm -f "$1.csr" "$1.ext" "$3.srl"
}
ca ca "/O=Warren Tests/CN=Warren Test CA"
ca other_ca "/CN=Untrusted Test CA"
leaf server "/O=Warren Tests/CN=localhost" ca "subjectAltName=DNS:localhost,IP:127.0.0.1"
leaf server2 "/O=Warren Tests/OU=Second/CN=localhost" ca "subjectAltName=DNS:localhost,IP:127.0.0.1"
leaf client "/C=GB/O=Warren Tests/CN=warren-client" ca \
    "subjectAltName=DNS:client.example,email:client@example.com,URI:urn:warren:client
extendedKeyUsage=clientAuth"
leaf other_client "/CN=warren-client" other_ca "extendedKeyUsage=clientAuth"
openssl pkey -in server.key -aes256 -passout pass:warren -out server_enc.key
