// OpenSSL as kube's client (https.cc) and server (server.cc) both set it up, in one place:
// initialised once without reading openssl.cnf, and nothing older than TLS 1.2.
#pragma once
#include <boost/asio/ssl/context.hpp>

#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <mutex>
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

/// A server's certificate chain and key, read again when either file changes: cert-manager
/// rotates them in place, and kubelet updates a Secret volume by swapping the `..data`
/// symlink, so a server that read them once serves an expired certificate. A new pair that
/// does not load (half written, a key that is not the certificate's) is logged once and the
/// pair loaded before keeps serving.
class ServerCertificate {
public:
    /// Reads both files (after init()); throws kube::Error (Invalid) naming the file that
    /// does not load.
    ServerCertificate(std::string cert, std::string key);

    /// The context for a new connection. The files are looked at again (two stat calls) at
    /// most once a second; a connection keeps the context it began with.
    std::shared_ptr<boost::asio::ssl::context> current();

private:
    /// What tells a changed file: stat follows the symlinks, so a swapped `..data` shows as
    /// another inode, an edit in place as another size or time.
    struct Stamp {
        int err = 0;
        dev_t dev = 0;
        ino_t ino = 0;
        off_t size = 0;
        long long mtime_ns = 0, ctime_ns = 0;
        bool operator==(const Stamp&) const = default;
    };
    static Stamp stamp_of(const std::string& path);
    /// A context from the files as they are now, or why not (`error` set).
    std::shared_ptr<boost::asio::ssl::context> load(std::string& error) const;

    std::string cert_, key_;
    std::mutex mu_;
    std::shared_ptr<boost::asio::ssl::context> ctx_;
    Stamp cert_stamp_, key_stamp_;   ///< of the pair last tried, loaded or not
    std::chrono::steady_clock::time_point next_check_;
};

}  // namespace kube::tls
