#include "cni/delegate.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cni/error.h"
#include "base/log.h"
#include "base/fd.h"

extern char** environ;

namespace cni {

namespace {

/// Environment of the child: ours, with CNI_COMMAND replaced.
std::vector<std::string> child_env(const std::string& command) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "CNI_COMMAND=", 12) != 0) env.emplace_back(*e);
    env.push_back("CNI_COMMAND=" + command);
    return env;
}

}  // namespace

std::string find_plugin(const std::vector<std::string>& path, const std::string& type, const std::string& key) {
    if (type.empty() || type.find('/') != std::string::npos || type == "." || type == "..")
        throw Error(kInvalidConfig, key + ": '" + type + "' must be a plugin name, not a path");
    for (auto& dir : path) {
        std::string p = dir + "/" + type;
        struct stat st;
        if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0) return p;
    }
    std::string dirs;
    for (auto& d : path) dirs += (dirs.empty() ? "" : ":") + d;
    throw Error(kInvalidConfig, key + ": plugin '" + type + "' not found in CNI_PATH '" + dirs + "'");
}

bool absent_plugin(const std::vector<std::string>& path, const std::string& type, const std::string& key,
                   const std::function<bool()>& recorded) {
    try {
        find_plugin(path, type, key);
        return false;
    } catch (const base::Error& e) {
        if (recorded()) throw;
        base::log::warn(std::string(e.what()) + "; it got no ADD for this attachment, so it holds nothing of it");
        return true;
    }
}

std::string delegate(const std::vector<std::string>& path, const std::string& type, const std::string& command,
                     const std::string& stdin_text) {
    return run_plugin(path, type, command, stdin_text, "ipam plugin", "ipam.type");
}

std::string run_plugin(const std::vector<std::string>& path, const std::string& type, const std::string& command,
                       const std::string& stdin_text, const std::string& what, const std::string& key) {
    std::string exe = find_plugin(path, type, key);
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0) fail_internal("failed to create pipe: " + std::string(strerror(errno)), errno);
    base::UniqueFd in_r(in[0]), in_w(in[1]);
    if (pipe2(out, O_CLOEXEC) < 0) fail_internal("failed to create pipe: " + std::string(strerror(errno)), errno);
    base::UniqueFd out_r(out[0]), out_w(out[1]);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_r.get(), 0);
    posix_spawn_file_actions_adddup2(&fa, out_w.get(), 1);   // stderr is inherited (spec)
    auto env = child_env(command);
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string arg0 = exe;
    char* argv[] = {arg0.data(), nullptr};
    pid_t pid;
    int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) fail_internal("failed to run " + what + " '" + exe + "': " + strerror(rc), rc);
    in_r.reset();
    out_w.reset();

    // Feed stdin and drain stdout together so a chatty plugin can never deadlock us.
    std::string output;
    size_t written = 0;
    char buf[16384];
    while (out_r) {
        pollfd fds[2] = {{out_r.get(), POLLIN, 0}, {in_w.get(), POLLOUT, 0}};
        int n = ::poll(fds, in_w ? 2 : 1, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        if (in_w && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = ::write(in_w.get(), stdin_text.data() + written, stdin_text.size() - written);
            if (w > 0) written += w;
            if (w < 0 || written == stdin_text.size()) in_w.reset();
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = ::read(out_r.get(), buf, sizeof buf);
            if (r > 0) output.append(buf, r);
            else if (r == 0 || errno != EINTR) out_r.reset();
        }
    }
    in_w.reset();
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return output;

    auto j = nlohmann::json::parse(output, nullptr, false);
    std::string who = what + " '" + type + "' " + command;
    if (j.is_object() && j.contains("code") && j["code"].is_number_integer()) {
        std::string msg = j.value("msg", std::string("failed"));
        std::string details = j.contains("details") && j["details"].is_string() ? j["details"].get<std::string>() : "";
        throw Error(j["code"].get<int>(), who + ": " + msg, details);
    }
    throw Error(kDelegateFailed, who + " failed (" +
                                     (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                                        : "killed by signal " + std::to_string(WTERMSIG(status))) +
                                     ")", output);
}

}  // namespace cni
