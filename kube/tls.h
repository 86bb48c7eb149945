// OpenSSL as kube's client (https.cc) and server (server.cc) both set it up, in one place:
// initialised once without reading openssl.cnf, and nothing older than TLS 1.2.
#pragma once
#include <boost/asio/ssl/context.hpp>

#include <string>

namespace kube::tls {

/// OpenSSL initialised, once per process, without openssl.cnf: the static binary would read
/// the file at the build machine's OPENSSLDIR, and a node's file there (or OPENSSL_CONF)
/// could change protocols and ciphers under us. Throws kube::Error.
void init();

/// TLS 1.2 and 1.3 only, on a context made after init().
void modern_only(boost::asio::ssl::context& ctx);

/// The oldest error OpenSSL queued, as text ("unknown TLS error" when none).
std::string last_error();

}  // namespace kube::tls
