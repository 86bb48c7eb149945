#include "cluster/cmd/prometheus.h"

#include <cstdio>

namespace cluster::cmd::prometheus {

std::string escape_label(const std::string& v) {
    std::string out;
    for (char ch : v) {
        if (ch == '\\') out += "\\\\";
        else if (ch == '"') out += "\\\"";
        else if (ch == '\n') out += "\\n";
        else out += ch;
    }
    return out;
}

std::string number(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

std::string number(unsigned __int128 v) {
    if (v > static_cast<unsigned __int128>(1) << 62) return number(static_cast<double>(v));
    return std::to_string(static_cast<unsigned long long>(v));
}

}  // namespace cluster::cmd::prometheus
