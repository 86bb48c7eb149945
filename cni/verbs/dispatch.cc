// The plugin protocol in one place: read the environment and stdin, run the verb from
// the table, print the result or the error JSON on stdout, and exit non-zero on error.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "cni/attach/attachment.h"
#include "cni/error.h"
#include "base/log.h"
#include "cni/result.h"
#include "cni/verbs/verbs.h"
#include "cni/version.h"

namespace cni {

namespace {

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

// Whatever it is given, this prints: the error path quotes input, and no input may
// keep the runtime from getting JSON (nlohmann refuses to print invalid UTF-8).
std::string printed(const nlohmann::json& j) {
    return j.dump(4, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

int dispatch(const PluginIo& io, std::span<const VerbEntry> verbs) {
    std::string version;   // for the error object; the config's when we got that far
    try {
        Env env = Env::from(io.getenv);
        base::log::set_context(env.command, env.container_id, env.ifname);
        if (env.verb == Verb::Version) {
            io.write(printed(cmd_version(io.stdin_is_tty ? std::string() : io.read_stdin())));
            return 0;
        }
        std::string text = io.read_stdin();
        version = conf::peek_version(text);
        // DEL and GC clean up: a key they do not need must not stop them (see conf::parse).
        bool teardown = env.verb == Verb::Del || env.verb == Verb::Gc;
        Network net = read_network(text, {env.args.mac, env.args.ips},
                                   teardown ? conf::Purpose::Teardown : conf::Purpose::Setup);
        const conf::NetConf& c = net.conf;
        version = c.cni_version;
        if (io.configure_logging) base::log::configure(c.log_level, c.log_file.value_or(""));
        base::log::debug("config: " + text);
        for (auto& ignored : c.ignored) base::log::warn(std::string("ignored for ") + verb_name(env.verb) + ": " + ignored);
        for (auto& unknown : c.unknown_keys) base::log::warn(unknown);
        for (auto& v : verbs) {
            if (v.verb != env.verb) continue;
            if (!at_least(c.cni_version, v.min_version))
                throw Error(kIncompatibleVersion,
                            std::string(verb_name(env.verb)) + " needs cniVersion " + v.min_version +
                                " or newer; the config has " + c.cni_version + " (set \"cniVersion\": \"" +
                                (std::string(v.min_version) == "0.4.0" ? "1.0.0" : "1.1.0") + "\")",
                            "cniVersion " + c.cni_version + " < " + v.min_version);
            if (auto out = v.run(env, c, *net.kind)) {
                io.write(printed(*out));
                base::log::info("result: " + out->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            } else {
                base::log::info("done");
            }
            return 0;
        }
        throw Error(kInvalidEnv, "unknown CNI_COMMAND: '" + env.command + "'");
    } catch (const base::Error& e) {
        base::log::error("code " + std::to_string(code_of(e)) + ": " + e.what() + (e.details.empty() ? "" : " (" + e.details + ")"));
        io.write(printed(error_to_json(code_of(e), e.what(), e.details, version)));
    } catch (const std::exception& e) {
        base::log::error(std::string("internal error: ") + e.what());
        io.write(printed(error_to_json(kInternal, e.what(), "", version)));
    }
    return 1;
}

int plugin_main() {
    PluginIo io;
    io.getenv = [](const char* name) -> const char* { return std::getenv(name); };
    io.read_stdin = read_stdin;
    io.stdin_is_tty = isatty(0);
    io.write = [](const std::string& s) {
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fflush(stdout);
    };
    return dispatch(io, kVerbs);
}

}  // namespace cni
