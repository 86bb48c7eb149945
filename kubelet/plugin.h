// topocni's kubelet plugin for Dynamic Resource Allocation: the two gRPC services kubelet
// talks to a DRA driver with (the protos under proto/, vendored from kubernetes/kubelet),
// each on its own unix socket:
//   <plugin dir>/dra.sock              DRAPlugin, v1 and v1beta1 (kubelet 1.34+ and 1.32-1.33):
//                                      NodePrepareResources, NodeUnprepareResources
//   <registration dir>/<driver>-reg.sock  Registration (kubelet's plugin watcher): GetInfo,
//                                      NotifyRegistrationStatus
// dra.sock serves before the registration socket appears, and the registration socket
// goes first at stop, so kubelet never dials a plugin that is not there. The calls
// themselves are cluster/claim_prepare.h's, one at a time (kubelet may call in parallel;
// one claim's records are never written by two calls at once).
//
// Only topocni-dra links this (and gRPC): the topocni binary a runtime execs per ADD stays
// free of gRPC's start-up cost.
#pragma once
#include <memory>
#include <string>

#include "cluster/claim_prepare.h"

namespace kubelet_plugin {

struct Options {
    std::string registration_dir = "/var/lib/kubelet/plugins_registry";
    std::string plugin_dir = "/var/lib/kubelet/plugins/topocni.io";
    std::string driver = "topocni.io";
    cluster::claims::PrepareOptions prepare;
    double sweep_interval = 60;   ///< seconds between sweeps for claims the API no longer has
};

/// "<dir>/<name>" when it fits a unix socket address (sun_path: 107 bytes and a NUL);
/// throws base::Error naming `flag` otherwise.
std::string socket_path(const std::string& dir, const std::string& name, const std::string& flag);

class Plugin {
public:
    explicit Plugin(Options o);
    ~Plugin();
    /// Recovers the records (a crash before), serves dra.sock, then registers. Throws
    /// base::Error when a socket cannot be made.
    void start();
    /// Unregisters (removes the registration socket), then stops serving; idempotent.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kubelet_plugin
