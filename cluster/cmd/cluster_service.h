// What the two cluster-side servers (admission-webhook, scheduler-extender) share: their
// server and API flags, and one way to run: SIGTERM handled, one LIST+WATCH loop per
// cached resource, the HTTP(S) server until SIGTERM, every loop stopped and joined however
// the server ends.
#pragma once
#include <CLI/CLI.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "kube/kubeconfig.h"
#include "kube/reflector.h"
#include "kube/server.h"

namespace cluster::cmd {

struct ServiceFlags {
    kube::server::Options server;
    std::string kubeconfig;
    double api_timeout = 10;   ///< seconds per API request

    std::chrono::milliseconds api_timeout_ms() const {
        return std::chrono::milliseconds(static_cast<long long>(api_timeout * 1000));
    }
};

/// --listen, --tls-cert, --tls-key, --max-body, --max-connections, --max-queue and
/// --api-timeout, with the defaults already in `f`. (--kubeconfig is each command's: their defaults differ.)
void add_service_flags(CLI::App* cmd, ServiceFlags& f, const std::string& tls_cert_help,
                       const std::string& api_timeout_help);

/// One resource kept by LIST+WATCH: `path` is the collection's URL path (and query).
struct Watch {
    std::string path, resource;
    kube::ReflectorHandlers handlers;   ///< `trouble` may be left empty: logged as "<resource>: <what>"
};

/// Serves `handler` until SIGTERM or SIGINT (base::stop_on_signal(): first thing in a subcommand's callback, so that a SIGTERM while it reads its kubeconfig still ends it with status 0), each watch on its own thread and API client
/// meanwhile; logs "<name> listening on port N" and "<name> stopped". Throws what the
/// server throws (a port in use, a bad certificate), after stopping the watches.
/// The probes are answered here, before `handler`: GET /readyz and /healthz 503 (naming the
/// caches) until every watch's first LIST has been applied, then 200; GET /livez 200 while
/// serving (kube-apiserver's own probe paths).
void run_service(const ServiceFlags& f, const kube::Kubeconfig& kc, const std::string& name,
                 std::vector<Watch> watches, const kube::server::Handler& handler);

}  // namespace cluster::cmd
