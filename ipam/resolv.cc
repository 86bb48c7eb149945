#include "ipam/resolv.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <unistd.h>

#include "ipam/error.h"
#include "base/fd.h"

namespace ipam {

namespace {

std::vector<std::string> words(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

void take_line(base::Dns& dns, const std::vector<std::string>& w) {
    // Keyword lines need a value; a bare keyword is skipped like the reference does.
    if (w.size() < 2 || w[0][0] == '#' || w[0][0] == ';') return;
    if (w[0] == "nameserver") dns.nameservers.push_back(w[1]);
    else if (w[0] == "domain") dns.domain = w[1];
    else if (w[0] == "search") dns.search.insert(dns.search.end(), w.begin() + 1, w.end());
    else if (w[0] == "options") dns.options.insert(dns.options.end(), w.begin() + 1, w.end());
}

[[noreturn]] void unreadable(const std::string& path, int err) {
    throw Error(Error::Kind::Invalid, "ipam.resolvConf: failed to read '" + path + "': " + std::strerror(err), {}, err);
}

// The whole file; symlinks are followed (/etc/resolv.conf usually is one). Capped,
// since a resolv.conf is tiny and the path comes from the config.
std::string slurp(const std::string& path) {
    base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) unreadable(path, errno);
    std::string out;
    char buf[4096];
    while (out.size() < (1u << 20)) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) unreadable(path, errno);
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    return out;
}

}  // namespace

base::Dns parse_resolv_conf(const std::string& path) {
    std::istringstream in(slurp(path));
    base::Dns dns;
    for (std::string line; std::getline(in, line);) take_line(dns, words(line));
    return dns;
}

}  // namespace ipam
