/* What a TLS stream's session and client certificate say, in RabbitMQ's
 * words: the management API's ssl_* and peer_cert_* fields (Erlang's
 * names for protocols and suites, rabbit_cert_info's RFC 4514 names and
 * validity), and the user name SASL EXTERNAL takes from the certificate
 * (rabbit_auth_mechanism_ssl / rabbit_ssl:peer_cert_auth_name).
 */
#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "net_int.h"

static const char *protocol_name(int version)
{
    switch (version) {
    case TLS1_3_VERSION: return "tlsv1.3";
    case TLS1_2_VERSION: return "tlsv1.2";
    case TLS1_1_VERSION: return "tlsv1.1";
    case TLS1_VERSION: return "tlsv1";
    default: return "unknown";
    }
}

/* OpenSSL's short name, lower case with '_' for '-': "aes-256-gcm" -> "aes_256_gcm". */
static void erlang_name(int nid, char *out, size_t cap)
{
    const char *sn = nid == NID_undef ? "null" : OBJ_nid2sn(nid);
    size_t i = 0;
    for (; sn && sn[i] && i + 1 < cap; i++)
        out[i] = sn[i] == '-' ? '_' : (char)(sn[i] >= 'A' && sn[i] <= 'Z' ? sn[i] + 32 : sn[i]);
    out[i] = 0;
}

static void cipher_name(int nid, char *out, size_t cap)
{
    static const struct { int nid; const char *name; } names[] = {
        {NID_aes_128_gcm, "aes_128_gcm"}, {NID_aes_256_gcm, "aes_256_gcm"},
        {NID_aes_128_ccm, "aes_128_ccm"}, {NID_aes_256_ccm, "aes_256_ccm"},
        {NID_aes_128_cbc, "aes_128_cbc"}, {NID_aes_256_cbc, "aes_256_cbc"},
        {NID_chacha20_poly1305, "chacha20_poly1305"}, {NID_des_ede3_cbc, "3des_ede_cbc"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].nid == nid) {
            snprintf(out, cap, "%s", names[i].name);
            return;
        }
    erlang_name(nid, out, cap);
}

static void key_exchange(const SSL_CIPHER *c, char *out, size_t cap)
{
    int kx = SSL_CIPHER_get_kx_nid(c), auth = SSL_CIPHER_get_auth_nid(c);
    const char *a = auth == NID_auth_rsa ? "rsa" : auth == NID_auth_ecdsa ? "ecdsa"
                  : auth == NID_auth_dss ? "dss" : "anon";
    switch (kx) {
    case NID_kx_any: snprintf(out, cap, "any"); break;
    case NID_kx_rsa: snprintf(out, cap, "rsa"); break;
    case NID_kx_ecdhe: snprintf(out, cap, "ecdhe_%s", a); break;
    case NID_kx_dhe: snprintf(out, cap, "dhe_%s", a); break;
    default: erlang_name(kx, out, cap);
    }
}

static void mac_name(const SSL_CIPHER *c, char *out, size_t cap)
{
    int d = SSL_CIPHER_get_digest_nid(c);
    if (SSL_CIPHER_is_aead(c))
        snprintf(out, cap, "aead");
    else if (d == NID_sha1)
        snprintf(out, cap, "sha");
    else
        erlang_name(d, out, cap);
}

/* rabbit_cert_info's attribute names; others as a dotted OID. */
static void attribute_name(const ASN1_OBJECT *o, char *out, size_t cap)
{
    static const struct { int nid; const char *name; } names[] = {
        {NID_surname, "SN"}, {NID_givenName, "GIVENNAME"}, {NID_initials, "INITIALS"},
        {NID_generationQualifier, "GENERATIONQUALIFIER"}, {NID_commonName, "CN"},
        {NID_localityName, "L"}, {NID_stateOrProvinceName, "ST"},
        {NID_organizationName, "O"}, {NID_organizationalUnitName, "OU"}, {NID_title, "TITLE"},
        {NID_countryName, "C"}, {NID_serialNumber, "SERIALNUMBER"}, {NID_pseudonym, "PSEUDONYM"},
        {NID_domainComponent, "DC"}, {NID_pkcs9_emailAddress, "EMAILADDRESS"},
        {NID_streetAddress, "STREET"}, {NID_userId, "UID"},
    };
    int nid = OBJ_obj2nid(o);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].nid == nid) {
            snprintf(out, cap, "%s", names[i].name);
            return;
        }
    OBJ_obj2txt(out, (int)cap, o, 1);
}

/* Appends to out (`*used` so far), truncating at the end. */
static void put(char *out, size_t cap, size_t *used, const char *s, size_t n)
{
    if (*used + 1 >= cap)
        return;
    if (n > cap - 1 - *used)
        n = cap - 1 - *used;
    memcpy(out + *used, s, n);
    *used += n;
    out[*used] = 0;
}

/* An attribute value escaped as rabbit_cert_info's escape_rdn_value. */
static void put_value(char *out, size_t cap, size_t *used, const unsigned char *v, int n)
{
    for (int i = 0; i < n; i++) {
        unsigned char ch = v[i];
        char esc[4];
        bool edge = (i == 0 && (ch == ' ' || ch == '#')) || (i == n - 1 && ch == ' ');
        if (edge || (ch && strchr("\"+,;<>\\", ch))) {
            esc[0] = '\\', esc[1] = (char)ch;
            put(out, cap, used, esc, 2);
        } else if (ch < 32 || ch >= 127) {
            snprintf(esc, sizeof esc, "\\%02X", ch);
            put(out, cap, used, esc, 3);
        } else {
            put(out, cap, used, (const char *)&ch, 1);
        }
    }
}

/* RFC 4514: the last RDN first, ',' between RDNs, '+' inside one. */
static void format_name(const X509_NAME *name, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    int n = X509_NAME_entry_count(name);
    for (int end = n; end > 0;) {
        int set = X509_NAME_ENTRY_set(X509_NAME_get_entry(name, end - 1)), start = end - 1;
        while (start > 0 && X509_NAME_ENTRY_set(X509_NAME_get_entry(name, start - 1)) == set)
            start--;
        if (end != n)
            put(out, cap, &used, ",", 1);
        for (int i = start; i < end; i++) {
            const X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
            char attr[80];
            unsigned char *utf8 = NULL;
            attribute_name(X509_NAME_ENTRY_get_object(e), attr, sizeof attr);
            if (i != start)
                put(out, cap, &used, "+", 1);
            put(out, cap, &used, attr, strlen(attr));
            put(out, cap, &used, "=", 1);
            int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(e));
            if (len > 0)
                put_value(out, cap, &used, utf8, len);
            OPENSSL_free(utf8);
        }
        end = start;
    }
}

/* rabbit_cert_info's: a UTCTime as 2026-12-06T19:59:18Z; a GeneralizedTime
 * (years from 2050) as RabbitMQ 3.10 prints the term it does not format,
 * {generalTime,"21261112195918Z"}. */
static void format_time(const ASN1_TIME *t, char *out, size_t cap)
{
    struct tm tm;
    if (t && ASN1_STRING_type(t) == V_ASN1_GENERALIZEDTIME)
        snprintf(out, cap, "{generalTime,\"%.*s\"}", ASN1_STRING_length(t),
                 (const char *)ASN1_STRING_get0_data(t));
    else if (!t || !ASN1_TIME_to_tm(t, &tm))
        snprintf(out, cap, "?");
    else
        strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

bool transport_tls_describe(const transport *t, tls_description *out)
{
    const SSL *ssl = transport_tls_session(t);
    memset(out, 0, sizeof *out);
    if (!ssl || !SSL_is_init_finished(ssl))
        return false;
    const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
    snprintf(out->protocol, sizeof out->protocol, "%s", protocol_name(SSL_version(ssl)));
    if (c) {
        cipher_name(SSL_CIPHER_get_cipher_nid(c), out->cipher, sizeof out->cipher);
        key_exchange(c, out->key_exchange, sizeof out->key_exchange);
        mac_name(c, out->hash, sizeof out->hash);
    }
    X509 *cert = SSL_get0_peer_certificate(ssl);
    if (!cert)
        return true;
    out->peer_cert = true;
    format_name(X509_get_subject_name(cert), out->peer_subject, sizeof out->peer_subject);
    format_name(X509_get_issuer_name(cert), out->peer_issuer, sizeof out->peer_issuer);
    char from[36], until[36];
    format_time(X509_get0_notBefore(cert), from, sizeof from);
    format_time(X509_get0_notAfter(cert), until, sizeof until);
    snprintf(out->peer_validity, sizeof out->peer_validity, "%s - %s", from, until);
    return true;
}

/* Every CN of the subject, joined with ',' as rabbit_ssl does. */
static bool common_name(X509 *cert, char *out, size_t cap)
{
    const X509_NAME *name = X509_get_subject_name(cert);
    size_t used = 0;
    out[0] = 0;
    for (int i = -1; (i = X509_NAME_get_index_by_NID(name, NID_commonName, i)) >= 0;) {
        unsigned char *utf8 = NULL;
        int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i)));
        if (used)
            put(out, cap, &used, ",", 1);
        if (len > 0)
            put(out, cap, &used, (const char *)utf8, (size_t)len);
        OPENSSL_free(utf8);
    }
    return used > 0;
}

static bool san_text(const GENERAL_NAME *g, char *out, size_t cap)
{
    const ASN1_STRING *s = NULL;
    switch (g->type) {
    case GEN_DNS: s = g->d.dNSName; break;
    case GEN_EMAIL: s = g->d.rfc822Name; break;
    case GEN_URI: s = g->d.uniformResourceIdentifier; break;
    case GEN_IPADD: {
        int len = ASN1_STRING_length(g->d.iPAddress);
        const unsigned char *p = ASN1_STRING_get0_data(g->d.iPAddress);
        return (len == 4 || len == 16) && inet_ntop(len == 4 ? AF_INET : AF_INET6, p, out,
                                                    (socklen_t)cap);
    }
    case GEN_OTHERNAME:
        if (g->d.otherName->value->type == V_ASN1_UTF8STRING)
            s = g->d.otherName->value->value.utf8string;
        break;
    }
    if (!s)
        return false;
    snprintf(out, cap, "%.*s", ASN1_STRING_length(s), (const char *)ASN1_STRING_get0_data(s));
    return true;
}

static bool alternative_name(X509 *cert, tls_san_type type, unsigned index, char *out, size_t cap)
{
    static const int types[] = {GEN_DNS, GEN_IPADD, GEN_EMAIL, GEN_URI, GEN_OTHERNAME};
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    bool found = false;
    for (int i = 0, seen = 0; names && !found && i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        if (g->type == types[type] && (unsigned)seen++ == index)
            found = san_text(g, out, cap);
    }
    GENERAL_NAMES_free(names);
    return found;
}

bool transport_tls_peer_name(const transport *t, tls_name_from from, tls_san_type san,
                             unsigned san_index, char *out, size_t outlen, char *why,
                             size_t whylen)
{
    const SSL *ssl = transport_tls_session(t);
    X509 *cert = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
    const char *refusal = NULL;
    if (!ssl)
        refusal = "not TLS connection";
    else if (!cert)
        refusal = "connection peer presented no TLS (x.509) certificate";
    else if (!(SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) ||
             SSL_get_verify_result(ssl) != X509_V_OK)
        refusal = "TLS configuration is unsafe";
    else if (from == TLS_NAME_DN)
        format_name(X509_get_subject_name(cert), out, outlen);
    else if (!(from == TLS_NAME_CN ? common_name(cert, out, outlen)
                                   : alternative_name(cert, san, san_index, out, outlen)))
        refusal = "no name found";
    if (refusal)
        snprintf(why, whylen, "%s", refusal);
    return !refusal;
}
