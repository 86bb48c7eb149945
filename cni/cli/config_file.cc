#include "cni/cli/config_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cni/error.h"
#include "kube/yaml.h"

namespace cni::cli {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
    size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

/// A manifest: named .yaml/.yml, or not named as JSON and not starting like JSON.
bool is_yaml(const std::string& path, const std::string& text) {
    if (ends_with(path, ".yaml") || ends_with(path, ".yml")) return true;
    if (ends_with(path, ".conf") || ends_with(path, ".conflist") || ends_with(path, ".json")) return false;
    size_t first = text.find_first_not_of(" \t\r\n");
    return first != std::string::npos && text[first] != '{';
}

/// spec.config of a NAD (as text), or `text` itself when the document is no manifest.
std::string inner_config(const nlohmann::json& doc, const std::string& text, const std::string& path) {
    auto spec = doc.find("spec");
    if (spec == doc.end()) return text;
    auto cfg = spec->is_object() ? spec->find("config") : spec->end();
    if (!spec->is_object() || cfg == spec->end())
        throw Error(kInvalidConfig, "'" + path + "': spec.config: missing (not a NetworkAttachmentDefinition?)");
    // Multus hands spec.config to the plugin as it is written.
    return cfg->is_string() ? cfg->get<std::string>() : cfg->dump();
}

}  // namespace

ConfigFile read_config_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(kInvalidConfig, "failed to read config file '" + path + "': " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    ConfigFile f{path, ss.str(), {}, false};
    if (is_yaml(path, f.text)) {
        auto doc = kube::parse_yaml(f.text, "'" + path + "'");
        if (!doc.is_object())
            throw Error(kInvalidConfig, "'" + path + "' is not a CNI config or a NetworkAttachmentDefinition");
        f.text = inner_config(doc, doc.dump(), path);
    } else {
        // A NAD written as JSON is a manifest too.
        auto doc = nlohmann::json::parse(f.text, nullptr, false);
        if (doc.is_object()) f.text = inner_config(doc, f.text, path);
    }
    auto conf = nlohmann::json::parse(f.text, nullptr, false);
    if (!conf.is_object()) return f;   // the plugin says why, in its words (code 6)
    auto plugins = conf.find("plugins");
    if (plugins == conf.end()) {
        f.plugins.push_back(conf);
        return f;
    }
    if (!plugins->is_array()) throw Error(kInvalidConfig, "'" + path + "': plugins: expected a list");
    f.is_list = true;
    for (auto& p : *plugins) {
        if (!p.is_object()) throw Error(kInvalidConfig, "'" + path + "': plugins: every entry must be an object");
        nlohmann::json c = p;
        // libcni: the list's name and cniVersion go into every plugin's config; without a
        // cniVersion the spec reads 0.1.0.
        c["name"] = conf.value("name", "");
        if (conf.contains("cniVersion")) c["cniVersion"] = conf["cniVersion"];
        f.plugins.push_back(std::move(c));
    }
    return f;
}

size_t topocni_entry(const ConfigFile& f) {
    for (size_t i = 0; i < f.plugins.size(); ++i)
        if (f.plugins[i].value("type", "") == "topocni") return i;
    throw Error(kInvalidConfig, "'" + f.path + "' has no plugin of type topocni");
}

}  // namespace cni::cli
