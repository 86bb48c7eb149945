#include "kube/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "kube/error.h"

// Set before OpenSSL is initialised: the static binary's OPENSSL_cpuid_setup waits for it
// (bin/static_guards.cc). Weak: dynamic builds run OpenSSL's own at start-up instead.
extern "C" __attribute__((weak)) int topocni_tls_wanted;

namespace kube::tls {

void init() {
    static const bool ok = [] {
        if (&topocni_tls_wanted) topocni_tls_wanted = 1;
        return OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) == 1;
    }();
    if (!ok) throw Error(Error::Kind::Internal, "failed to initialise OpenSSL: " + last_error());
}

void modern_only(boost::asio::ssl::context& ctx) {
    using C = boost::asio::ssl::context;
    ctx.set_options(C::default_workarounds | C::no_sslv2 | C::no_sslv3 | C::no_tlsv1 | C::no_tlsv1_1);
}

std::string last_error() {
    unsigned long e = ERR_get_error();
    if (!e) return "unknown TLS error";
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    return buf;
}

}  // namespace kube::tls
