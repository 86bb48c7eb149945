// `topocni api`: the Kubernetes API as topocni's own client sees it, with the kubeconfig
// and permissions topocni uses: GET an object, LIST a collection in pages, WATCH it (or
// LIST+WATCH it as the scheduler side does). For troubleshooting RBAC, certificates and
// connectivity from a node without kubectl; one JSON object per line on stdout.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "base/stop_signal.h"
#include "cluster/cmd/commands.h"
#include "cni/error.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "kube/reflector.h"

namespace cluster::cmd {

namespace {

using json = nlohmann::json;

struct ApiOptions {
    std::string verb, path, kubeconfig, resource_version;
    double timeout = 10;
    int events = 0;            ///< watch: stop after this many events (0: until SIGTERM)
    int watch_timeout = 300;
    size_t page_size = 500;
    bool reflect = false;
};


void line(const json& j) {
    std::string s = j.dump() + "\n";
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

/// The resource a path is about, as RBAC names it: "nodes" for /api/v1/nodes/w1,
/// "network-attachment-definitions" for /apis/k8s.cni.cncf.io/v1/namespaces/x/network-...
std::string resource_of(const std::string& path) {
    std::vector<std::string> parts;
    std::string p = path.substr(0, path.find('?'));
    for (size_t start = 0; start <= p.size();) {
        size_t slash = p.find('/', start);
        std::string seg = p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (!seg.empty()) parts.push_back(seg);
        if (slash == std::string::npos) break;
        start = slash + 1;
    }
    size_t i = !parts.empty() && parts[0] == "api" ? 2 : !parts.empty() && parts[0] == "apis" ? 3 : 0;
    if (i + 1 < parts.size() && parts[i] == "namespaces" && i + 2 < parts.size()) i += 2;
    if (i < parts.size()) {
        std::string r = parts[i];
        if (i + 2 < parts.size()) r += "/" + parts[i + 2];   // a subresource: pods/eviction, nodes/status
        return r;
    }
    return path;
}

std::string name_of(const json& o) {
    if (!o.is_object() || !o.contains("metadata") || !o["metadata"].is_object()) return "";
    return o["metadata"].value("name", "");
}

}  // namespace

void add_api(CLI::App& app, int& status) {
    auto o = std::make_shared<ApiOptions>();
    auto* cmd = app.add_subcommand("api", "GET, LIST or WATCH the Kubernetes API with topocni's own client");
    cmd->add_option("verb", o->verb, "get, list or watch")->required()->check(CLI::IsMember({"get", "list", "watch"}));
    cmd->add_option("path", o->path, "API path: /api/v1/nodes/worker-1, /api/v1/nodes, /apis/k8s.cni.cncf.io/v1/network-attachment-definitions")
        ->required();
    cmd->add_option("--kubeconfig", o->kubeconfig, "kubeconfig (default: the pod's service account, else topocni's)");
    cmd->add_option("--timeout", o->timeout, "seconds per request")->capture_default_str();
    cmd->add_option("--page-size", o->page_size, "list: objects per page")->capture_default_str();
    cmd->add_option("--resource-version", o->resource_version, "watch: from this resource version");
    cmd->add_option("--events", o->events, "watch: stop after this many events (0: until SIGTERM)");
    cmd->add_option("--watch-timeout", o->watch_timeout, "watch: seconds the server keeps one WATCH open")
        ->capture_default_str();
    cmd->add_flag("--reflect", o->reflect, "watch: LIST, then WATCH from there, listing again when the version expires");
    cmd->footer("Output: get prints the object; list prints one line per object, then\n"
                "{\"resourceVersion\":...,\"items\":N,\"connections\":N}; watch prints {\"type\",\"name\",\"resourceVersion\"} per\n"
                "event (and {\"type\":\"LIST\",...} per list with --reflect).\n"
                "Examples:\n  topocni api get /api/v1/nodes/worker-1 --kubeconfig /etc/cni/net.d/topocni.d/topocni.kubeconfig\n"
                "  topocni api watch /api/v1/nodes --reflect --events 10");
    cmd->callback([o, &status] {
        kube::Kubeconfig kc;
        if (!o->kubeconfig.empty()) kc = kube::load_kubeconfig(o->kubeconfig);
        else if (auto in = kube::in_cluster_config()) kc = *in;
        else kc = kube::load_kubeconfig(kube::kTopocniKubeconfig);
        kube::Client client(kc, std::chrono::milliseconds(static_cast<long long>(o->timeout * 1000)));
        auto& signalled = base::stop_on_signal();
        int seen = 0;
        auto stop = [&] { return signalled.load() || (o->events > 0 && seen >= o->events); };
        auto print_event = [&](const kube::Event& e) {
            ++seen;
            std::string rv;
            if (e.object.is_object() && e.object.contains("metadata") && e.object["metadata"].is_object())
                rv = e.object["metadata"].value("resourceVersion", "");
            line({{"type", e.type}, {"name", name_of(e.object)}, {"resourceVersion", rv}});
            return !stop();
        };
        if (o->verb == "get") {
            line(client.get(o->path, "'" + o->path + "'", resource_of(o->path)));
        } else if (o->verb == "list") {
            auto page = client.list(o->path, resource_of(o->path), o->page_size);
            for (auto& item : page.items) line(item);
            line({{"resourceVersion", page.resource_version}, {"items", page.items.size()},
                  {"connections", client.connections_opened()}});
        } else if (o->reflect) {
            kube::ReflectorHandlers h;
            h.replace = [&](const std::vector<json>& items, const std::string& rv) {
                line({{"type", "LIST"}, {"items", items.size()}, {"resourceVersion", rv}});
            };
            h.event = [&](const kube::Event& e) { print_event(e); };
            h.trouble = [](const std::string& what) { std::fprintf(stderr, "topocni api: %s\n", what.c_str()); };
            kube::reflect(client, o->path, resource_of(o->path), h, stop, o->watch_timeout);
        } else {
            std::string rv = client.watch(o->path, o->resource_version, resource_of(o->path), print_event, stop,
                                          o->watch_timeout);
            line({{"type", "END"}, {"resourceVersion", rv}, {"connections", client.connections_opened()}});
        }
        status = 0;
    });
}

}  // namespace cluster::cmd
