// The plugin protocol in one place: read the environment and stdin, run the verb from
// the table, print the result or the error JSON on stdout, and exit non-zero on error.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cni/attachment.h"
#include "cni/error.h"
#include "cni/log.h"
#include "cni/result.h"
#include "cni/verbs.h"
#include "cni/version.h"

namespace cni {

namespace {

struct VerbEntry {
    Verb verb;
    Output (*run)(const Env&, const conf::NetConf&);
    const char* min_version;   ///< oldest cniVersion that has this verb
};

const VerbEntry kVerbs[] = {
    {Verb::Add, cmd_add, "0.1.0"},
    {Verb::Del, cmd_del, "0.1.0"},
    {Verb::Check, cmd_check, "0.4.0"},
    {Verb::Gc, cmd_gc, "1.1.0"},
    {Verb::Status, cmd_status, "1.1.0"},
};

constexpr size_t kMaxStdin = 64u << 20;   // far above any real config; bounds memory

std::string read_stdin() {
    std::string text;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(0, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Error(kIoFailure, std::string("failed to read config from stdin: ") + strerror(errno));
        }
        text.append(buf, n);
        if (text.size() > kMaxStdin) throw Error(kIoFailure, "config on stdin is larger than 64 MiB");
    }
    return text;
}

void print(const nlohmann::json& j) {
    std::string s = j.dump(4) + "\n";
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

}  // namespace

std::unique_ptr<Attachment> make_attachment(const conf::NetConf& c) {
    switch (c.attachment) {
        case conf::Attachment::Veth: return make_veth();
        case conf::Attachment::Macvlan: return make_macvlan();
        case conf::Attachment::Sriov: return make_sriov();
        default: throw Error(kInvalidConfig, "attachment: not supported yet");
    }
}

const Interface& expected_pod_interface(const Context& ctx, const Result& prev) {
    for (auto& i : prev.interfaces)
        if (i.name == ctx.env.ifname && i.sandbox == ctx.env.netns) return i;
    throw Error(kCheckFailed, "prevResult has no interface '" + ctx.env.ifname + "' in sandbox '" + ctx.env.netns + "'");
}

int plugin_main() {
    std::string version;   // for the error object; the config's when we got that far
    try {
        Env env = Env::from_environment();
        log::set_context(env.command, env.container_id, env.ifname);
        if (env.verb == Verb::Version) {
            print(cmd_version(isatty(0) ? std::string() : read_stdin()));
            return 0;
        }
        std::string text = read_stdin();
        version = conf::peek_version(text);
        conf::NetConf c = conf::parse(text, {env.args.mac, env.args.ips});
        version = c.cni_version;
        log::configure(c.log_level, c.log_file.value_or(""));
        log::debug("config: " + text);
        for (auto& v : kVerbs) {
            if (v.verb != env.verb) continue;
            if (!at_least(c.cni_version, v.min_version))
                throw Error(kIncompatibleVersion, std::string("config version does not allow ") + verb_name(env.verb),
                            "cniVersion " + c.cni_version + " < " + v.min_version);
            if (auto out = v.run(env, c)) {
                print(*out);
                log::info("result: " + out->dump());
            } else {
                log::info("done");
            }
            return 0;
        }
        throw Error(kInvalidEnv, "unknown CNI_COMMAND: '" + env.command + "'");
    } catch (const Error& e) {
        log::error("code " + std::to_string(e.code) + ": " + e.what() + (e.details.empty() ? "" : " (" + e.details + ")"));
        print(error_to_json(e.code, e.what(), e.details, version));
    } catch (const std::exception& e) {
        log::error(std::string("internal error: ") + e.what());
        print(error_to_json(kInternal, e.what(), "", version));
    }
    return 1;
}

}  // namespace cni
