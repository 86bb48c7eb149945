// `topocni exec`: a built-in cnitool. Runs this binary as a plugin with the CNI_*
// variables and stdin a runtime would give it, and keeps the ADD result (in the
// attachment record) as libcni's cache does, for CHECK and DEL.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cni/cli/cli.h"
#include "base/hash.h"
#include "cni/error.h"
#include "cni/pod_netns.h"
#include "cni/records.h"
#include "cni/attach/attachment.h"
#include "cni/cli/config_file.h"
#include "cni/delegate.h"

extern char** environ;

namespace cni::cli {

namespace {

struct ExecOptions {
    std::string verb, config, netns, ifname = "eth0", container_id, args, cap_args, state_dir, data_dir;
    bool strict = false;
};

/// The plugin's error object, for what exec refuses before any plugin runs.
int print_error(int code, const std::string& msg, const std::string& version) {
    nlohmann::json j = {{"cniVersion", version.empty() ? "1.1.0" : version}, {"code", code}, {"msg", msg}};
    std::printf("%s\n", j.dump(4, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 1;
}

std::string default_container_id(const std::string& netns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "topocni-%016llx", static_cast<unsigned long long>(base::fnv1a64(netns, base::kNameSeed)));
    return buf;
}

/// Runs the plugin `binary` (ourselves: /proc/self/exe); returns (exit status, stdout).
std::pair<int, std::string> run_child(const std::string& binary, const std::vector<std::string>& env_kv,
                                       const std::string& input) {
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
    std::string self = binary;
    char* argv[] = {self.data(), nullptr};
    pid_t pid;
    int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) throw Error(kInternal, "failed to run the plugin '" + binary + "': " + std::strerror(rc));
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

std::vector<std::string> split_path(const std::string& path) {
    std::vector<std::string> out;
    for (size_t pos = 0; pos <= path.size();) {
        size_t end = path.find(':', pos);
        std::string dir = path.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        if (!dir.empty()) out.push_back(dir);
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return out;
}

/// One plugin's stdin: its config with what exec adds as a runtime would (the scratch
/// directories, declared capability args, prevResult, GC's list).
nlohmann::json plugin_input(nlohmann::json conf, const ExecOptions& o, const nlohmann::json& caps,
                            const nlohmann::json& prev, const nlohmann::json& valid) {
    bool ours = conf.value("type", "") == "topocni";
    if (!o.state_dir.empty() && ours) conf["stateDir"] = o.state_dir;
    // host-local reads dataDir whichever plugin runs it.
    if (!o.data_dir.empty() && conf.contains("ipam") && conf["ipam"].is_object() &&
        conf["ipam"].value("type", "") == "host-local")
        conf["ipam"]["dataDir"] = o.data_dir;
    // Capability args go to runtimeConfig only for capabilities the config declares
    // (libcni), merged into what the file has, capability args winning.
    if (caps.is_object() && !caps.empty()) {
        nlohmann::json rc = conf.contains("runtimeConfig") && conf["runtimeConfig"].is_object()
                                ? conf["runtimeConfig"] : nlohmann::json::object();
        auto declared = conf.value("capabilities", nlohmann::json::object());
        for (auto& [k, v] : caps.items())
            if (declared.is_object() && declared.value(k, false)) rc[k] = v;
        if (!rc.empty()) conf["runtimeConfig"] = rc;
    }
    if (!prev.is_null()) conf["prevResult"] = prev;
    if (!valid.is_null()) conf["cni.dev/valid-attachments"] = valid;
    return conf;
}

/// `--netns`: a path, or the name `ip netns add` gave (under /run/netns).
std::string netns_path(const std::string& given) {
    if (given.empty() || given.find('/') != std::string::npos) return given;
    std::string path = "/run/netns/" + given;
    if (::access(path.c_str(), F_OK) != 0)
        throw CLI::ValidationError("--netns", "'" + given + "' is neither a path nor a netns in /run/netns");
    return path;
}

int run_exec(ExecOptions o) {
    ConfigFile file = read_config_file(o.config);
    std::string verb = o.verb;
    for (auto& ch : verb) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    // The plugin would name CNI_NETNS; the operator typed --netns.
    if ((verb == "ADD" || verb == "CHECK") && ::access(o.netns.c_str(), F_OK) != 0)
        throw CLI::ValidationError("--netns", "'" + o.netns + "' does not exist (ip netns add NAME makes /run/netns/NAME)");
    std::string cid = o.container_id.empty() ? default_container_id(o.netns) : o.container_id;
    const char* path_env = std::getenv("CNI_PATH");
    std::string cni_path = path_env && *path_env ? path_env : kDefaultCniPath;
    std::vector<std::string> env = {"CNI_COMMAND=" + verb, "CNI_CONTAINERID=" + cid, "CNI_NETNS=" + o.netns,
                                    "CNI_IFNAME=" + o.ifname, "CNI_ARGS=" + o.args, "CNI_PATH=" + cni_path};
    // Not a JSON object: the plugin reads the text as it would from a runtime, and says why.
    if (file.plugins.empty()) {
        auto [status, output] = run_child("/proc/self/exe", env, file.text);
        std::fwrite(output.data(), 1, output.size(), stdout);
        return status;
    }
    size_t ours = file.is_list ? topocni_entry(file) : 0;
    const nlohmann::json& conf = file.plugins[ours];
    std::string network = conf.value("name", "");
    std::string version = conf.value("cniVersion", "");
    std::string state_dir = !o.state_dir.empty() ? o.state_dir : conf.value("stateDir", "/var/lib/cni/topocni");

    // Keys topocni does not read: a typo here would otherwise just take a default.
    try {
        auto net = read_network(plugin_input(conf, o, {}, {}, {}).dump(), {});
        if (verb == "ADD" || verb == "CHECK")
            for (auto& k : net.conf.unknown_keys) std::fprintf(stderr, "topocni exec: warning: %s\n", k.c_str());
        if (o.strict && !net.conf.unknown_keys.empty())
            return print_error(kInvalidConfig, "--strict: " + net.conf.unknown_keys.front(), version);
    } catch (const base::Error&) {
        // The plugin reports it, with its code, in its own words.
    }

    nlohmann::json caps;
    if (!o.cap_args.empty()) {
        caps = nlohmann::json::parse(o.cap_args, nullptr, false);
        if (!caps.is_object()) throw CLI::ValidationError("--cap-args", "not a JSON object");
        for (auto& [k, v] : caps.items()) {
            bool declared = false;
            for (auto& p : file.plugins) {
                auto d = p.value("capabilities", nlohmann::json::object());
                declared = declared || (d.is_object() && d.value(k, false));
            }
            if (!declared)
                std::fprintf(stderr, "topocni: capability '%s' is not declared in the config; not passed\n", k.c_str());
        }
    }
    // libcni's cache: the ADD result, kept in topocni's attachment record.
    nlohmann::json prev, valid;
    if (verb == "CHECK" || verb == "DEL") {
        auto rec = read_record(state_dir, network, cid, o.ifname);
        if (rec && !rec->result.is_null()) prev = rec->result;
        else if (verb == "CHECK" && !conf.contains("prevResult"))
            return print_error(kInvalidConfig,
                               "no ADD record for container '" + cid + "' ifname '" + o.ifname + "' in network '" +
                                   network + "' under '" + state_dir + "': nothing to CHECK (never added, or deleted since)",
                               version);
    }
    if (verb == "GC") {
        valid = nlohmann::json::array();
        for (auto& r : list_records(state_dir, network))
            if (netns_exists(r.netns)) valid.push_back({{"containerID", r.container_id}, {"ifname", r.ifname}});
    }
    // The whole chain, as libcni runs it: ADD in order, each plugin getting the previous
    // one's result; DEL in reverse order; CHECK, GC and STATUS in order. The first
    // failure stops the chain and is printed, as cnitool prints it.
    std::vector<size_t> order;
    for (size_t i = 0; i < file.plugins.size(); ++i) order.push_back(i);
    if (verb == "DEL") std::reverse(order.begin(), order.end());
    // Every plugin is found before the first one runs: a missing one changes nothing.
    auto dirs = split_path(cni_path);
    std::vector<std::string> binaries;
    for (size_t i = 0; i < file.plugins.size(); ++i)
        binaries.push_back(i == ours ? "/proc/self/exe"
                                     : find_plugin(dirs, file.plugins[i].value("type", ""),
                                                   "plugins[" + std::to_string(i) + "].type"));
    std::string output;
    for (size_t i : order) {
        const auto& p = file.plugins[i];
        std::string type = p.value("type", "");
        const std::string& binary = binaries[i];
        auto input = plugin_input(p, o, caps, prev, verb == "GC" ? valid : nlohmann::json());
        auto [status, out] = run_child(binary, env, input.dump());
        if (status != 0 || (verb == "ADD" && nlohmann::json::parse(out, nullptr, false).is_discarded())) {
            if (file.plugins.size() > 1)
                std::fprintf(stderr, "topocni exec: %s of plugin %zu of %zu ('%s') failed\n", verb.c_str(), i + 1,
                             file.plugins.size(), type.c_str());
            // Go plugins print their error object without a final newline.
            if (!out.empty() && out.back() != '\n') out += '\n';
            std::fwrite(out.data(), 1, out.size(), stdout);
            return status ? status : 1;
        }
        if (verb == "ADD") prev = nlohmann::json::parse(out);
        output = out;
    }
    if (verb == "ADD" || verb == "GC" || verb == "STATUS" || !output.empty())
        std::fwrite(output.data(), 1, output.size(), stdout);
    return 0;
}

}  // namespace

void add_exec(CLI::App& app, int& status) {
    auto o = std::make_shared<ExecOptions>();
    auto* cmd = app.add_subcommand("exec", "Run a CNI verb by hand, as a runtime would (a built-in cnitool)");
    cmd->add_option("verb", o->verb, "add, check, del, gc or status")
        ->required()
        ->check(CLI::IsMember({"add", "check", "del", "gc", "status"}, CLI::ignore_case));
    cmd->add_option("--config", o->config,
                    "CNI config (.conf, JSON, read exactly as the plugin reads stdin), conflist (every plugin "
                    "is run, as cnitool does), or NAD in JSON or YAML")
        ->required();
    cmd->add_option("--netns", o->netns, "pod netns: a path (/run/netns/test, /proc/PID/ns/net) or an `ip netns` name");
    cmd->add_option("--ifname", o->ifname, "interface name in the pod")->capture_default_str();
    cmd->add_option("--container-id", o->container_id, "container ID (default: derived from --netns)");
    cmd->add_option("--args", o->args, "CNI_ARGS, e.g. 'K8S_POD_UID=abc;IP=10.1.0.5'");
    cmd->add_option("--cap-args", o->cap_args, "capability args as JSON, e.g. '{\"mac\":\"02:00:00:00:00:01\"}'");
    cmd->add_option("--state-dir", o->state_dir, "use this stateDir instead of the config's (a scratch directory)");
    cmd->add_option("--data-dir", o->data_dir, "use this host-local ipam.dataDir instead of the config's");
    cmd->add_flag("--strict", o->strict, "refuse a config with keys topocni does not read (as topocni validate)");
    cmd->footer("Examples:\n"
                "  ip netns add test\n"
                "  topocni exec add --config examples/veth-ptp.conf --netns test --state-dir /tmp/t/state --data-dir /tmp/t/ipam\n"
                "  topocni exec check --config examples/veth-ptp.conf --netns test --state-dir /tmp/t/state --data-dir /tmp/t/ipam\n"
                "  topocni exec del --config examples/veth-ptp.conf --netns test --state-dir /tmp/t/state --data-dir /tmp/t/ipam\n"
                "The ADD result is kept under stateDir and used as prevResult for check and del.\n"
                "Exit status and output are the plugin's (the first failing plugin's in a conflist).");
    cmd->callback([o, &status] {
        std::string v = o->verb;
        for (auto& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if ((v == "add" || v == "check") && o->netns.empty())
            throw CLI::ValidationError("--netns", "required for " + v + " (a path such as /run/netns/NAME, or an `ip netns` name)");
        o->netns = netns_path(o->netns);
        o->verb = v;
        status = run_exec(*o);
    });
}

}  // namespace cni::cli
