#include "cni/verbs/verbs.h"
#include "cni/version.h"

namespace cni {

nlohmann::json cmd_version(const std::string& stdin_text) {
    std::string v = "1.1.0";
    auto j = nlohmann::json::parse(stdin_text, nullptr, false);
    if (j.is_object() && j.contains("cniVersion") && j["cniVersion"].is_string()) v = j["cniVersion"];
    if (v.empty()) v = "0.1.0";   // libcni's "" for a config without cniVersion
    return {{"cniVersion", v}, {"supportedVersions", supported_versions()}};
}

}  // namespace cni
