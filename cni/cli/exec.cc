// `topocni exec`: a built-in cnitool. Runs this binary as a plugin with the CNI_*
// variables and stdin a runtime would give it, and keeps the ADD result (in the
// attachment record) as libcni's cache does, for CHECK and DEL.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cni/cli/cli.h"
#include "base/hash.h"
#include "cni/error.h"
#include "cni/records.h"
#include "kube/yaml.h"

extern char** environ;

namespace cni::cli {

namespace {

struct ExecOptions {
    std::string verb, config, netns, ifname = "eth0", container_id, args, cap_args;
};

nlohmann::json load_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(kInvalidConfig, "cannot read config file '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    // Not JSON: a NetworkAttachmentDefinition manifest in YAML, as kubectl takes it.
    if (j.is_discarded()) j = kube::parse_yaml(ss.str(), "config file '" + path + "'");
    if (!j.is_object()) throw Error(kDecodingFailure, "config file '" + path + "' is not a JSON or YAML object");
    // A NetworkAttachmentDefinition in JSON: its spec.config holds the CNI config as a string.
    if (j.contains("spec") && j["spec"].is_object() && j["spec"].contains("config") && j["spec"]["config"].is_string()) {
        j = nlohmann::json::parse(j["spec"]["config"].get<std::string>(), nullptr, false);
        if (!j.is_object()) throw Error(kDecodingFailure, "spec.config of '" + path + "' is not a JSON object");
    }
    if (!j.contains("plugins")) return j;
    // A conflist: take the topocni entry, with name and cniVersion from the list.
    if (!j["plugins"].is_array()) throw Error(kInvalidConfig, "plugins: expected a list in '" + path + "'");
    for (auto& p : j["plugins"]) {
        if (p.is_object() && p.value("type", "") == "topocni") {
            nlohmann::json c = p;
            c["name"] = j.value("name", "");
            // No cniVersion in the list: leave it out, which the spec reads as 0.1.0.
            if (j.contains("cniVersion")) c["cniVersion"] = j["cniVersion"];
            return c;
        }
    }
    throw Error(kInvalidConfig, "conflist '" + path + "' has no plugin of type topocni");
}

std::string default_container_id(const std::string& netns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "topocni-%016llx", static_cast<unsigned long long>(base::fnv1a64(netns, base::kNameSeed)));
    return buf;
}

/// Runs ourselves as the plugin; returns (exit status, stdout).
std::pair<int, std::string> run_self(const std::vector<std::string>& env_kv, const std::string& input) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) throw Error(kInternal, "pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
        if (std::string(*e).rfind("CNI_", 0) != 0) env.emplace_back(*e);
    for (auto& kv : env_kv) env.push_back(kv);
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe";
    char* argv[] = {self.data(), nullptr};
    pid_t pid;
    int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) throw Error(kInternal, "cannot run the plugin");
    // Configs are small: the pipe buffer takes them whole before the child reads.
    ssize_t w = ::write(in[1], input.data(), input.size());
    (void)w;
    ::close(in[1]);
    std::string output;
    char buf[8192];
    ssize_t n;
    while ((n = ::read(out[0], buf, sizeof buf)) > 0) output.append(buf, n);
    ::close(out[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : 1, output};
}

int run_exec(const ExecOptions& o) {
    nlohmann::json conf = load_config(o.config);
    std::string verb = o.verb;
    for (auto& ch : verb) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    std::string cid = o.container_id.empty() ? default_container_id(o.netns) : o.container_id;
    std::string network = conf.value("name", "");
    std::string state_dir = conf.value("stateDir", "/var/lib/cni/topocni");

    // Capability args go to runtimeConfig only for capabilities the config declares (libcni).
    if (!o.cap_args.empty()) {
        auto caps = nlohmann::json::parse(o.cap_args, nullptr, false);
        if (!caps.is_object()) throw Error(kInvalidConfig, "--cap-args: not a JSON object");
        // Merged into what the file has, capability args winning (libcni injects them).
        nlohmann::json rc = conf.contains("runtimeConfig") && conf["runtimeConfig"].is_object()
                                ? conf["runtimeConfig"] : nlohmann::json::object();
        auto declared = conf.value("capabilities", nlohmann::json::object());
        for (auto& [k, v] : caps.items()) {
            if (declared.is_object() && declared.value(k, false)) rc[k] = v;
            else std::fprintf(stderr, "topocni: capability '%s' is not declared in the config; not passed\n", k.c_str());
        }
        if (!rc.empty()) conf["runtimeConfig"] = rc;
    }
    if (verb == "CHECK" || verb == "DEL") {
        if (auto rec = read_record(state_dir, network, cid, o.ifname); rec && !rec->result.is_null())
            conf["prevResult"] = rec->result;
    }
    if (verb == "GC") {
        nlohmann::json valid = nlohmann::json::array();
        for (auto& r : list_records(state_dir, network))
            if (netns_exists(r.netns)) valid.push_back({{"containerID", r.container_id}, {"ifname", r.ifname}});
        conf["cni.dev/valid-attachments"] = valid;
    }
    const char* path = std::getenv("CNI_PATH");
    std::vector<std::string> env = {"CNI_COMMAND=" + verb, "CNI_CONTAINERID=" + cid, "CNI_NETNS=" + o.netns,
                                    "CNI_IFNAME=" + o.ifname, "CNI_ARGS=" + o.args,
                                    std::string("CNI_PATH=") + (path ? path : "/opt/cni/bin:/usr/lib/cni")};
    auto [status, output] = run_self(env, conf.dump());
    std::fwrite(output.data(), 1, output.size(), stdout);
    return status;
}

}  // namespace

void add_exec(CLI::App& app, int& status) {
    auto o = std::make_shared<ExecOptions>();
    auto* cmd = app.add_subcommand("exec", "Run a CNI verb by hand, as a runtime would (a built-in cnitool)");
    cmd->add_option("verb", o->verb, "add, check, del, gc or status")
        ->required()
        ->check(CLI::IsMember({"add", "check", "del", "gc", "status"}, CLI::ignore_case));
    cmd->add_option("--config", o->config, "CNI config, conflist (its topocni entry is used) or NAD in JSON")
        ->required();
    cmd->add_option("--netns", o->netns, "pod network namespace path, e.g. /run/netns/test");
    cmd->add_option("--ifname", o->ifname, "interface name in the pod")->capture_default_str();
    cmd->add_option("--container-id", o->container_id, "container ID (default: derived from --netns)");
    cmd->add_option("--args", o->args, "CNI_ARGS, e.g. 'K8S_POD_UID=abc;IP=10.1.0.5'");
    cmd->add_option("--cap-args", o->cap_args, "capability args as JSON, e.g. '{\"mac\":\"02:00:00:00:00:01\"}'");
    cmd->footer("Examples:\n"
                "  ip netns add test\n"
                "  topocni exec add --config examples/macvlan.conf --netns /run/netns/test\n"
                "  topocni exec check --config examples/macvlan.conf --netns /run/netns/test\n"
                "  topocni exec del --config examples/macvlan.conf --netns /run/netns/test\n"
                "The ADD result is kept under stateDir and used as prevResult for check and del.\n"
                "Exit status and output are the plugin's.");
    cmd->callback([o, &status] {
        std::string v = o->verb;
        for (auto& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if ((v == "add" || v == "check") && o->netns.empty()) throw Error(kInvalidEnv, "--netns is required for " + v);
        o->verb = v;
        status = run_exec(*o);
    });
}

}  // namespace cni::cli
