// topocni-dra: `topocni dra-driver` with kubelet's DRA plugin beside the ResourceSlice
// publisher. A binary of its own because it links gRPC, whose static initialisers would
// cost every ADD a tenth more if topocni carried them; `topocni dra-driver` execs this.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>

#include "base/error.h"
#include "base/log.h"
#include "cluster/cmd/api_credentials.h"
#include "cluster/cmd/commands.h"
#include "cluster/cmd/publish.h"
#include "kube/client.h"
#include "kubelet/plugin.h"

namespace {

/// The publisher on this thread, the kubelet plugin on gRPC's, until SIGTERM.
int serve(cluster::cmd::PublishOptions pub, const cluster::cmd::KubeletPluginFlags& k) {
    if (!k.enabled) return cluster::cmd::publish_until_signal(pub);
    // The publisher's NAD watch, read by the plugin too: a claim's NAD without a GET.
    auto nads = std::make_shared<cluster::NadInformer>();
    pub.nads = nads;
    base::log::configure("info", "");
    kubelet_plugin::Options o;
    o.registration_dir = k.registration_dir;
    o.plugin_dir = k.plugin_dir;
    o.driver = pub.driver;
    o.sweep_interval = pub.interval;
    o.prepare.node = pub.facts.node;
    o.prepare.driver = pub.driver;
    o.prepare.state_dir = pub.facts.state_dir;
    // The plugin's own client: prepare calls come one at a time (Core's mutex), on gRPC's threads.
    auto client = std::make_shared<kube::Client>(cluster::cmd::pick_kubeconfig(pub.kubeconfig, pub.kubeconfig_set),
                                                 std::chrono::milliseconds(static_cast<long long>(pub.api_timeout * 1000)));
    o.prepare.get = [client](const std::string& path) {
        cluster::claims::ApiAnswer a;
        try {
            auto r = client->send("GET", path);
            a.status = r.status;
            a.body = nlohmann::json::parse(r.body, nullptr, false);
        } catch (const std::exception& e) {
            a.error = e.what();
        }
        return a;
    };
    o.prepare.cached_nad = [nads](const std::string& key) {
        return nads->synced() ? nads->store().get(key) : nullptr;
    };
    o.prepare.sysfs_root = pub.facts.sysfs_root;
    o.prepare.bandwidth_overcommit = pub.devices.bandwidth_overcommit;
    std::unique_ptr<kubelet_plugin::Plugin> plugin;
    try {
        plugin = std::make_unique<kubelet_plugin::Plugin>(o);   // checks the socket paths
    } catch (const base::Error& e) {
        std::fprintf(stderr, "topocni-dra: %s\n", e.what());
        return 2;
    }
    plugin->start();
    int status = cluster::cmd::publish_until_signal(pub);
    plugin->stop();
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    CLI::App app{"topocni-dra: topocni's Dynamic Resource Allocation driver (ResourceSlices and kubelet's plugin)"};
    app.require_subcommand(1);
    int status = 0;
    cluster::cmd::add_dra_driver(app, status, serve);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    } catch (const base::Error& e) {
        std::fprintf(stderr, "topocni-dra: %s%s%s\n", e.what(), e.details.empty() ? "" : ": ", e.details.c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "topocni-dra: %s\n", e.what());
        return 1;
    }
    return status;
}
