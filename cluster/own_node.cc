#include "cluster/own_node.h"

namespace cluster {

std::string OwnNode::resource_version(const json& o) {
    if (!o.is_object()) return "";
    auto md = o.find("metadata");
    if (md == o.end() || !md->is_object()) return "";
    auto rv = md->find("resourceVersion");
    return rv != md->end() && rv->is_string() ? rv->get<std::string>() : "";
}

void OwnNode::replace(const std::vector<json>& items) {
    std::lock_guard<std::mutex> l(mu_);
    node_ = items.empty() ? json() : items.front();
    overlay_.reset();
    listed_ = true;
    if (in_flight_) in_flight_->relisted = true;
}

void OwnNode::event(const kube::Event& e) {
    std::lock_guard<std::mutex> l(mu_);
    if (e.type == "DELETED") {
        node_ = json();
        overlay_.reset();   // a Node made again starts from what kubelet registers, not from our patch
    } else if (e.type == "ADDED" || e.type == "MODIFIED") {
        node_ = e.object;
    } else {
        return;
    }
    const std::string version = resource_version(node_);
    if (in_flight_ && !version.empty()) {
        if (in_flight_->seen.size() < kSeenBound) in_flight_->seen.insert(version);
        else in_flight_->overflowed = true;
    }
    overlay_locked(Clock::now());
}

void OwnNode::overlay_locked(Clock::time_point now) {
    if (!overlay_) return;
    if (resource_version(node_) == overlay_->version || now > overlay_->until) {
        overlay_.reset();   // the watch brought our version: the view has it
    } else if (node_.is_object()) {
        node_["status"]["capacity"] = overlay_->capacity;
        node_["status"]["allocatable"] = overlay_->allocatable;
    }
}

void OwnNode::sending() {
    std::lock_guard<std::mutex> l(mu_);
    in_flight_ = InFlight{{}, false, false};
}

void OwnNode::sent(const json& patched, const json& capacity, const json& allocatable, Clock::time_point now) {
    std::lock_guard<std::mutex> l(mu_);
    std::optional<InFlight> flight = std::move(in_flight_);
    in_flight_.reset();
    const std::string version = resource_version(patched);
    if (!patched.is_object() || version.empty()) return;
    // The watch brought this version already, perhaps with later changes: the view has it.
    if (resource_version(node_) == version) return;
    if (flight && (flight->seen.count(version) || flight->relisted || flight->overflowed)) return;
    // Otherwise everything the watch brought is older than the PATCH (it delivers in order).
    node_ = patched;
    node_["status"]["capacity"] = capacity;
    node_["status"]["allocatable"] = allocatable;
    overlay_ = Overlay{version, capacity, allocatable, now + kOverlayFor};
}

nlohmann::json OwnNode::node() const {
    std::lock_guard<std::mutex> l(mu_);
    return node_;
}

bool OwnNode::listed() const {
    std::lock_guard<std::mutex> l(mu_);
    return listed_;
}

}  // namespace cluster
