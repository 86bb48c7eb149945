#include "cluster/dra_sync.h"

#include <algorithm>
#include <cstdio>

#include "base/hash.h"
#include "base/log.h"
#include "cluster/dra_slices.h"
#include "kube/error.h"

namespace cluster::dra {

using nlohmann::json;

namespace {

/// A device's name; "" when it has none (a LIST may hand back anything: nothing here throws).
std::string name_of(const json& d) {
    if (!d.is_object()) return "";
    auto it = d.find("name");
    return it != d.end() && it->is_string() ? it->get<std::string>() : "";
}

/// The devices as one text, whatever slice holds each: sorted by name.
std::string devices_text(std::vector<json> devices) {
    std::stable_sort(devices.begin(), devices.end(), [](const json& a, const json& b) { return name_of(a) < name_of(b); });
    return json(devices).dump();
}

bool shared(const json& d) {
    if (!d.is_object()) return false;
    auto it = d.find("allowMultipleAllocations");
    return it != d.end() && *it == json(true);
}

/// Whether the server kept the shared devices of `sent` as sent: with its gate off it drops
/// allowMultipleAllocations (and the request policies) on write, without an error.
bool kept_shared(const json& sent, const json& answer) {
    const json* devices = nullptr;
    if (answer.is_object() && answer.contains("spec") && answer["spec"].is_object() && answer["spec"].contains("devices"))
        devices = &answer["spec"]["devices"];
    if (!devices || !devices->is_array()) return true;   // no body to compare: assume kept
    for (const auto& d : sent["spec"]["devices"]) {
        if (!shared(d)) continue;
        bool found = std::any_of(devices->begin(), devices->end(),
                                 [&](const json& a) { return name_of(a) == name_of(d) && shared(a); });
        if (!found) return false;
    }
    return true;
}

const json& member(const json& j, const char* key) {
    static const json null;
    if (!j.is_object()) return null;
    auto it = j.find(key);
    return it == j.end() ? null : *it;
}

}  // namespace

std::string SliceSync::slice_name(size_t index) const {
    std::string base = node_ + "-" + driver_;
    if (base.size() > 230) {   // 253 with the index and a hash
        char hash[10];
        std::snprintf(hash, sizeof hash, "-%08x", base::fnv1a32(base));
        base = base.substr(0, 220) + hash;
        while (base.back() == '.' || base.back() == '-') base.pop_back();
    }
    return base + "-" + std::to_string(index);
}

void SliceSync::check_kept(const json& sent, const json& answer, size_t index) {
    if (shared_dropped_ || kept_shared(sent, answer)) return;
    shared_dropped_ = true;
    base::log::warn("the API server dropped allowMultipleAllocations from resourceslice '" + slice_name(index) +
                    "': its DRAConsumableCapacity feature gate is off (Kubernetes before 1.36 with default "
                    "gates); shared links and address pools are no longer offered, only VFs");
}

SliceSync::Held SliceSync::read_held(const std::vector<json>& items) const {
    Held h;
    long long count = -1;
    bool consistent = true;
    for (const auto& s : items) {
        const json& spec = member(s, "spec");
        const json& pool = member(spec, "pool");
        if (member(pool, "name") != node_ || member(spec, "driver") != driver_) continue;
        const json& gen = member(pool, "generation");
        if (gen.is_number_integer()) h.generation = std::max(h.generation, gen.get<long long>());
        const json& name = member(member(s, "metadata"), "name");
        if (!name.is_string() || name.get<std::string>().empty()) continue;   // nothing to address it by
        // Ours are <node>-<driver>-<index>.
        std::string prefix = slice_name(0);
        prefix.pop_back();
        const std::string& n = name.get_ref<const std::string&>();
        size_t index = 0;
        bool ours = n.size() > prefix.size() && n.size() <= prefix.size() + 5 && n.compare(0, prefix.size(), prefix) == 0 &&
                    std::all_of(n.begin() + static_cast<long>(prefix.size()), n.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (ours) {
            index = std::stoul(n.substr(prefix.size()));
            ours = slice_name(index) == n;   // no leading zeros
        }
        if (!ours) {
            h.strays.push_back(s);
            consistent = false;
            continue;
        }
        if (h.slices.size() <= index) h.slices.resize(index + 1);
        h.slices[index] = s;
        const json& rc = member(pool, "resourceSliceCount");
        if (count < 0 && rc.is_number_integer()) count = rc.get<long long>();
    }
    std::vector<json> held;
    for (const auto& s : h.slices) {
        if (s.is_null() || member(member(member(s, "spec"), "pool"), "generation") != h.generation) {
            consistent = false;
            continue;
        }
        const json& devices = member(member(s, "spec"), "devices");
        if (devices.is_array())
            for (const auto& d : devices) held.push_back(d);
        else
            consistent = false;
    }
    consistent = consistent && count == static_cast<long long>(h.slices.size());
    h.content = consistent ? devices_text(held) : "";
    return h;
}

/// What the API holds: our slices of this node's pool (the field selector takes node and
/// driver; the pool is compared here, as the API serves no selector on it), and the Node's
/// uid for the slices' owner.
void SliceSync::learn(kube::Client& c) {
    std::string path = std::string(kSlicesPath) + "?fieldSelector=" +
                       kube::url_escape("spec.nodeName=" + node_ + ",spec.driver=" + driver_);
    Held h = read_held(c.list(path, "resourceslices").items);
    slices_ = std::move(h.slices);
    strays_ = std::move(h.strays);
    content_ = std::move(h.content);
    generation_ = h.generation;
    owner_ = json();
    try {
        json node = c.get("/api/v1/nodes/" + kube::url_escape(node_), "node '" + node_ + "'", "nodes");
        const json& uid = member(member(node, "metadata"), "uid");
        if (uid.is_string())
            owner_ = json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_}, {"uid", uid}, {"controller", true}}});
    } catch (const kube::Error& e) {
        if (e.http_status != 404) throw;   // no Node (yet): slices without an owner
    }
    known_ = true;
    learnt_at_ = std::chrono::steady_clock::now();
}

int SliceSync::sync(kube::Client& c, const std::vector<json>& all) {
    try {
        if (known_ && std::chrono::steady_clock::now() - learnt_at_ >= std::chrono::duration<double>(relist_after_))
            known_ = false;
        if (!known_) learn(c);
        std::vector<json> devices = all;
        if (shared_dropped_) std::erase_if(devices, shared);
        std::string content = devices_text(devices);
        if (content == content_) return 0;
        bool dropped_before = shared_dropped_;
        int writes = write(c, devices, content);
        // Learnt just now: the slices hold shared devices the server made exclusive; once
        // more without them.
        if (shared_dropped_ && !dropped_before) writes += sync(c, all);
        return writes;
    } catch (...) {
        known_ = false;
        throw;
    }
}

int SliceSync::write(kube::Client& c, const std::vector<json>& devices, const std::string& content) {
    auto object_path = [](const std::string& name) {
        std::string path = kSlicesPath;
        path += '/';
        path += kube::url_escape(name);
        return path;
    };
    // Every change bumps the generation in every slice: "Whenever a driver changes something
    // about one or more of the resources in a pool, it must change the generation in all
    // ResourceSlices which are part of that pool" (resource/v1 types.go, ResourcePool).
    auto specs = slice_specs(devices, node_, driver_, ++generation_);
    int writes = 0;
    // Obsolete slices first: a consumer never sees a device twice.
    for (auto& s : strays_) {
        std::string name = member(member(s, "metadata"), "name").get<std::string>();   // read_held kept named ones only
        c.remove(object_path(name), "resourceslice '" + name + "'", "resourceslices");
        ++writes;
    }
    strays_.clear();
    for (size_t i = specs.size(); i < slices_.size(); ++i) {
        if (slices_[i].is_null()) continue;
        c.remove(object_path(slice_name(i)), "resourceslice '" + slice_name(i) + "'", "resourceslices");
        ++writes;
    }
    slices_.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
        std::string what = "resourceslice '" + slice_name(i) + "'";
        json s = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceSlice"}, {"spec", specs[i]}};
        const json& had = member(slices_[i], "metadata");
        // An update carries the metadata the API gave (resourceVersion: conditional).
        s["metadata"] = had.is_object() ? had : json::object();
        s["metadata"]["name"] = slice_name(i);
        if (!owner_.is_null()) s["metadata"]["ownerReferences"] = owner_;
        json answer = had.is_object() ? c.update(object_path(slice_name(i)), s, what, "resourceslices")
                                      : c.create(kSlicesPath, s, what, "resourceslices");
        slices_[i] = member(answer, "metadata").is_object() ? answer : s;
        ++writes;
        check_kept(s, answer, i);
    }
    content_ = content;
    base::log::info("resourceslices of node '" + node_ + "': " + std::to_string(devices.size()) + " devices in " +
                    std::to_string(specs.size()) + " slice(s), pool generation " + std::to_string(generation_));
    return writes;
}

}  // namespace cluster::dra
