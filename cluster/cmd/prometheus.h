// The Prometheus text exposition format, as node_exporter's textfile collector reads it:
// one metric family at a time (# HELP, # TYPE, then its samples), label values escaped.
#pragma once
#include <initializer_list>
#include <ostream>
#include <string>
#include <utility>

namespace cluster::cmd::prometheus {

/// A label value with \\, \" and \n escaped.
std::string escape_label(const std::string& v);
/// A sample value: integers as integers, the rest with full precision.
std::string number(double v);
std::string number(unsigned __int128 v);

/// Writes its HELP and TYPE lines when made; then one line per sample.
class Family {
public:
    Family(std::ostream& out, const char* name, const char* type, const char* help) : out_(out), name_(name) {
        out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    }
    template <class V>
    void sample(std::initializer_list<std::pair<const char*, std::string>> labels, V value) {
        out_ << name_ << "{";
        bool first = true;
        for (auto& [k, v] : labels) {
            out_ << (first ? "" : ",") << k << "=\"" << escape_label(v) << "\"";
            first = false;
        }
        out_ << "} " << number(value) << "\n";
    }

private:
    std::ostream& out_;
    const char* name_;
};

}  // namespace cluster::cmd::prometheus
