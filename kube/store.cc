#include "kube/store.h"

namespace kube {

using nlohmann::json;

namespace {

std::string metadata_field(const json& object, const char* key) {
    if (!object.is_object()) return "";
    auto md = object.find("metadata");
    if (md == object.end() || !md->is_object()) return "";
    auto v = md->find(key);
    return v != md->end() && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace

std::string Store::key_of(const json& object) {
    return metadata_field(object, "namespace") + "/" + metadata_field(object, "name");
}

ReflectorHandlers Store::handlers() {
    ReflectorHandlers h;
    h.replace = [this](const std::vector<json>& items, const std::string&) { replace(items); };
    h.event = [this](const Event& e) { event(e); };
    return h;
}

void Store::replace(const std::vector<json>& items) {
    std::map<std::string, Entry> fresh;
    for (const auto& item : items) {
        Entry e{std::make_shared<const json>(item), metadata_field(item, "resourceVersion"), {}};
        fresh[key_of(item)] = std::move(e);
    }
    std::lock_guard<std::mutex> l(mu_);
    // An object the relist hands back unchanged keeps what was derived from it.
    for (auto& [key, e] : fresh)
        if (auto it = objects_.find(key); it != objects_.end() && !e.version.empty() && it->second.version == e.version) e = it->second;
    objects_ = std::move(fresh);
    synced_ = true;
    ++changes_;
}

void Store::event(const Event& e) {
    std::lock_guard<std::mutex> l(mu_);
    if (e.type == "DELETED") {
        objects_.erase(key_of(e.object));
    } else if (e.type == "ADDED" || e.type == "MODIFIED") {
        objects_[key_of(e.object)] = Entry{std::make_shared<const json>(e.object), metadata_field(e.object, "resourceVersion"), {}};
    } else {
        return;   // BOOKMARK: the version moved on, no object did
    }
    ++changes_;
}

bool Store::synced() const {
    std::lock_guard<std::mutex> l(mu_);
    return synced_;
}

uint64_t Store::changes() const {
    std::lock_guard<std::mutex> l(mu_);
    return changes_;
}

std::shared_ptr<const json> Store::get(const std::string& key) const {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(key);
    return it == objects_.end() ? nullptr : it->second.object;
}

std::vector<std::shared_ptr<const json>> Store::list() const {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::shared_ptr<const json>> out;
    out.reserve(objects_.size());
    for (const auto& [key, e] : objects_) out.push_back(e.object);
    return out;
}

std::pair<std::shared_ptr<const json>, std::any> Store::lookup(const std::string& key) const {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return {nullptr, {}};
    return {it->second.object, it->second.derived};
}

void Store::remember(const std::string& key, const std::shared_ptr<const json>& object, std::any derived) const {
    std::lock_guard<std::mutex> l(mu_);
    // Only onto the version it was made from: the object may have changed meanwhile.
    if (auto it = objects_.find(key); it != objects_.end() && it->second.object == object) it->second.derived = std::move(derived);
}

}  // namespace kube
