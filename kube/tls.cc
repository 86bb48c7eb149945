#include "kube/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "base/log.h"
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

ServerCertificate::ServerCertificate(std::string cert, std::string key) : cert_(std::move(cert)), key_(std::move(key)) {
    cert_stamp_ = stamp_of(cert_);
    key_stamp_ = stamp_of(key_);
    std::string error;
    ctx_ = load(error);
    if (!ctx_) throw Error(Error::Kind::Invalid, error);
    next_check_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
}

std::shared_ptr<boost::asio::ssl::context> ServerCertificate::current() {
    std::lock_guard<std::mutex> l(mu_);
    auto now = std::chrono::steady_clock::now();
    if (now < next_check_) return ctx_;
    next_check_ = now + std::chrono::seconds(1);
    Stamp cert = stamp_of(cert_), key = stamp_of(key_);
    if (cert == cert_stamp_ && key == key_stamp_) return ctx_;
    // Tried once per change: a broken pair is not read again (nor logged) every second.
    cert_stamp_ = cert;
    key_stamp_ = key;
    std::string error;
    if (auto fresh = load(error)) {
        ctx_ = std::move(fresh);
        base::log::info("TLS certificate " + cert_ + " read again: new connections get it");
    } else {
        base::log::error(error + "; the certificate loaded before keeps serving");
    }
    return ctx_;
}

ServerCertificate::Stamp ServerCertificate::stamp_of(const std::string& path) {
    struct stat st {};
    Stamp s;
    if (::stat(path.c_str(), &st) != 0) {
        s.err = errno;
        return s;
    }
    s.dev = st.st_dev;
    s.ino = st.st_ino;
    s.size = st.st_size;
    s.mtime_ns = st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec;
    s.ctime_ns = st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec;
    return s;
}

std::shared_ptr<boost::asio::ssl::context> ServerCertificate::load(std::string& error) const {
    auto ctx = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
    modern_only(*ctx);
    boost::system::error_code ec;
    ctx->use_certificate_chain_file(cert_, ec);
    if (ec) {
        error = "--tls-cert '" + cert_ + "': " + ec.message();
        return nullptr;
    }
    ctx->use_private_key_file(key_, boost::asio::ssl::context::pem, ec);
    if (ec) {
        error = "--tls-key '" + key_ + "': " + ec.message();
        return nullptr;
    }
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {   // half of a rotation seen
        error = "--tls-key '" + key_ + "' is not the key of --tls-cert '" + cert_ + "': " + last_error();
        return nullptr;
    }
    return ctx;
}

}  // namespace kube::tls
