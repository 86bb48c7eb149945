// A config file as the operator gives it to `exec`, `explain` and `validate`: a CNI config
// (.conf), a conflist, or a NetworkAttachmentDefinition in JSON or YAML. A config is read
// exactly as the plugin reads its stdin (strict JSON: a trailing comma is code 6 here as
// there); YAML only for a manifest, whose spec.config is then the plugin's text.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cni::cli {

struct ConfigFile {
    std::string path;
    /// The CNI config text inside the file (for a NAD: spec.config), as the plugin would get it.
    std::string text;
    /// A conflist: each plugin's config as libcni hands it over (name and cniVersion from
    /// the list). A single config: the one config. Empty when `text` is not a JSON object:
    /// then the plugin itself must say why (it reads `text`).
    std::vector<nlohmann::json> plugins;
    bool is_list = false;
};

/// Reads `path`. A file that cannot be read is code 7 with the system's reason; a YAML
/// manifest that is no NAD is code 7 too.
ConfigFile read_config_file(const std::string& path);

/// The index in f.plugins of the (first) topocni entry; code 7 naming the file if none.
size_t topocni_entry(const ConfigFile& f);

}  // namespace cni::cli
