#include "cluster/claim_prepare.h"

#include <chrono>
#include <set>

#include <sys/stat.h>

#include "base/error.h"
#include "base/failpoint.h"
#include "base/flock.h"
#include "base/files.h"
#include "base/log.h"
#include "cni/attach/sriov_state.h"
#include "cluster/dra_claims.h"
#include "cluster/dra_slices.h"
#include "cluster/parsed.h"
#include "netns/sysfs.h"
#include "placement/evaluate.h"
#include "placement/facts.h"
#include "placement/ledger.h"
#include "placement/placement.h"

namespace cluster::claims {

using nlohmann::json;
namespace pc = placement::prepared_claims;
namespace ledger = placement::ledger;

namespace {

// --- the reader ---

[[noreturn]] void wrong(const std::string& at, const char* expected) { throw base::Error(at + ": expected " + expected); }

/// The member `key` of object `j`, or null when absent (or JSON null, as the API omits).
const json* opt(const json& j, const char* key) {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
}

const json& object_at(const json& j, const std::string& at) {
    if (!j.is_object()) wrong(at, "an object");
    return j;
}

std::string string_at(const json& j, const char* key, const std::string& at, bool required) {
    const json* v = opt(j, key);
    if (!v) {
        if (required) throw base::Error(at + "." + key + ": missing");
        return "";
    }
    if (!v->is_string()) wrong(at + "." + key, "a string");
    return v->get<std::string>();
}

const json* array_at(const json& j, const char* key, const std::string& at) {
    const json* v = opt(j, key);
    if (v && !v->is_array()) wrong(at + "." + key, "an array");
    return v;
}

const json* object_or_null(const json& j, const char* key, const std::string& at) {
    const json* v = opt(j, key);
    if (v) object_at(*v, at + "." + key);
    return v;
}

std::map<std::string, std::string> string_map(const json& j, const std::string& at) {
    std::map<std::string, std::string> out;
    object_at(j, at);
    for (auto& [k, v] : j.items()) {
        // A quantity is serialised as a string; an integer is accepted as the API decodes it.
        if (v.is_string()) out[k] = v.get<std::string>();
        else if (v.is_number_integer()) out[k] = std::to_string(v.get<long long>());
        else wrong(at + "." + k, "a string");
    }
    return out;
}

// --- devices on this node, by the names the slices give them ---

struct Found {
    std::string kind;   ///< "vf", "link", "pool", "" (none)
    std::string pci, link;
    bool in_use = false;                   ///< vf: an attachment that did not come through DRA holds it
    std::optional<long long> speed_mbps;   ///< link (a VF's: its PF's)
};

/// "0000-af-02-1" back to "0000:af:02.1", when the name is one dra::device_name gave a PCI
/// address (it maps them one to one).
std::optional<std::string> pci_of(const std::string& prefix, const std::string& name) {
    std::string rest = name.substr(prefix.size() + 1);
    auto a = rest.find('-'), b = rest.find('-', a + 1), c = rest.rfind('-');
    if (a == std::string::npos || b == std::string::npos || c <= b) return std::nullopt;
    std::string pci = rest.substr(0, a) + ":" + rest.substr(a + 1, b - a - 1) + ":" + rest.substr(b + 1, c - b - 1) + "." +
                      rest.substr(c + 1);
    if (!netns::sysfs::is_pci_address(pci) || dra::device_name(prefix, pci) != name) return std::nullopt;
    return pci;
}

/// The device the slices named `name`, found on the node as it is now, and its part of the
/// node read into `f` (only that part: a prepare reads one VF, not the node's 512).
Found locate(placement::NodeFacts& f, const std::string& sysfs, const std::string& sd, const std::string& name) {
    netns::sysfs::Tree tree(sysfs);
    auto prefixed = [&](const char* p) { return name.rfind(std::string(p) + "-", 0) == 0; };
    if (prefixed("vf")) {
        auto pci = pci_of("vf", name);
        auto pf = pci ? tree.physfn(*pci) : std::nullopt;
        if (!pf) return {};
        placement::gather_numa(f, sysfs);
        placement::gather_pci(f, sysfs, *pf, {}, *pci, false);
        return {"vf", *pci, *pf, cni::state::VfStore(sd).holds(*pci), f.pf(*pf)->speed_mbps};
    }
    if (prefixed("pf")) {
        auto pci = pci_of("pf", name);
        if (!pci || !tree.pci_exists(*pci) || tree.physfn(*pci)) return {};
        placement::gather_pci(f, sysfs, *pci, {}, "", false);
        return {"link", "", *pci, false, f.pf(*pci)->speed_mbps};
    }
    if (prefixed("link")) {
        // A netdev's name maps to itself unless it has characters a device name cannot hold.
        std::vector<std::string> candidates{name.substr(5)};
        if (dra::device_name("link", candidates[0]) != name) candidates = base::fs::list_dir(sysfs + "/class/net");
        for (const auto& nd : candidates) {
            struct stat st {};
            if (dra::device_name("link", nd) != name || ::stat((sysfs + "/class/net/" + nd).c_str(), &st) != 0) continue;
            placement::gather_link(f, sysfs, nd, "macvlan", false, {});
            return {"link", "", nd, false, f.link(nd)->speed_mbps};
        }
        return {};
    }
    if (prefixed("pool")) return {"pool", "", "", false, {}};
    return {};
}

std::string request_base(const std::string& request) {
    // A subrequest ("link/fast") answers for its request, as kubelet's helper strips it.
    return request.substr(0, request.find('/'));
}

/// Mb/s of capacity `name` the result consumed, else what the request asked for.
uint64_t mbps_of(const AllocationResult& r, const Claim& c, const char* name) {
    std::string q;
    if (auto it = r.consumed_capacity.find(name); it != r.consumed_capacity.end()) {
        q = it->second;
    } else if (auto req = c.requested_capacity.find(request_base(r.request)); req != c.requested_capacity.end()) {
        if (auto it2 = req->second.find(name); it2 != req->second.end()) q = it2->second;
    }
    if (q.empty()) return 0;
    auto v = quantity_value(q);
    if (!v) throw base::Error(std::string(name) + " '" + q + "' is no whole number of Mb/s");
    return *v;
}

/// The claim's NAD (topocni.io/network) re-checked for `device` (a VF, a master) on this
/// node's live facts, with placement's evaluation. What a claim cannot re-check here is left
/// out: the node's labels (nodeSelector: the scheduler chose this node by them), the pod's
/// CPUs (numaPolicy: kubelet assigns them after preparing), bandwidth (a link request books
/// it) and a master's attachments (the claim's `attachments` capacity counted them).
std::string recheck(placement::NodeFacts& f, const json& nad, const placement::Device& device, const placement::PodInfo& pod) {
    auto text = topocni_config_of(nad);
    if (!text) return "";
    PodNetwork::Parsed parsed(*text);
    conf::NetConf c = parsed.conf;
    c.bandwidth.reset();
    if (c.placement) {
        c.placement->node_selector.reset();
        if (c.placement->topology) {
            c.placement->topology->numa_policy = conf::NumaPolicy::None;
            c.placement->topology->max_attachments_per_master.reset();
        }
    }
    std::optional<ipam::Config> pool;
    try { pool = parsed.kind->pool(parsed.conf); } catch (const base::Error&) {}
    if (pool && c.placement && c.placement->topology && c.placement->topology->min_free_addresses)
        placement::gather_pool(f, *pool, c.name, {});
    auto src = placement::published_facts(f, device, {}, {}, pool);
    placement::EvalOptions opt;
    opt.collect_errors = true;
    std::string names, details;
    for (const auto& v : placement::evaluate_on(c, *src, pod, opt)) {
        if (v.pass) continue;
        names += (names.empty() ? "" : ", ") + v.constraint;
        details += (details.empty() ? "" : " | ") + v.constraint + ": " + v.evidence;
    }
    return names.empty() ? "" : "placement constraint not met: " + names + " | " + details;
}

/// What is committed on `link` by everything but claim `uid`, and the capacity admission
/// counts against (0: unknown).
std::string book_bandwidth(const std::string& sd, const pc::Device& d, const pc::Record& r, std::optional<long long> speed_mbps,
                           double overcommit) {
    auto lock = base::DirLock::create(ledger::dir(sd, d.link), sd, base::DirLock::Exclusive, std::chrono::seconds(10),
                                      "an ADD is admitting bandwidth on this link");
    uint64_t eg = 0, in = 0;
    for (const auto& e : ledger::entries(sd, d.link)) {
        if (e.network == pc::kLedgerNetwork && e.container_id == r.uid && e.ifname == d.request) continue;
        eg += e.egress_bps;
        in += e.ingress_bps;
    }
    uint64_t cap = 0;
    std::string source;
    if (auto c = ledger::capacity(sd, d.link); c && c->capacity_bps) {
        cap = static_cast<uint64_t>(static_cast<double>(c->capacity_bps) * c->overcommit);
        source = c->capacity_source;
    } else if (speed_mbps && *speed_mbps > 0) {
        // What the slices offered: the link speed x dra-driver's --bandwidth-overcommit.
        cap = static_cast<uint64_t>(static_cast<double>(*speed_mbps) * 1e6 * overcommit);
        source = "link speed";
    }
    auto over = [&](uint64_t used, uint64_t want) { return cap && used + want > cap; };
    if (over(eg, d.egress_bps) || over(in, d.ingress_bps)) {
        lock.release_created();
        return "bandwidth: link " + d.link + " has " + placement::rate_text(static_cast<double>(cap > eg ? cap - eg : 0)) +
               " egress and " + placement::rate_text(static_cast<double>(cap > in ? cap - in : 0)) + " ingress free of " +
               placement::rate_text(static_cast<double>(cap)) + " (" + source + "); the claim consumes " +
               placement::rate_text(static_cast<double>(d.egress_bps)) + " egress, " +
               placement::rate_text(static_cast<double>(d.ingress_bps)) + " ingress";
    }
    ledger::Entry e{pc::kLedgerNetwork, r.uid, d.request, d.egress_bps, d.ingress_bps, cap, 1.0, source};
    e.pod = r.key();
    ledger::commit(sd, d.link, e, /*durable=*/false);   // rebuilt from the record after a crash (recover)
    return "";
}

std::string claim_text(const ClaimRef& ref) { return "ResourceClaim " + ref.ns + "/" + ref.name; }

bool has_entry(const std::string& sd, const std::string& link, const std::string& uid, const std::string& request) {
    for (const auto& e : ledger::entries(sd, link))
        if (e.network == pc::kLedgerNetwork && e.container_id == uid && e.ifname == request) return true;
    return false;
}

/// The records' lock: one plugin process at a time (a DaemonSet's rolling update runs the
/// old and the new pod side by side for a moment).
base::DirLock lock_records(const std::string& sd) {
    return base::DirLock::create(pc::root(sd), sd, base::DirLock::Exclusive, std::chrono::seconds(10),
                                 "another topocni-dra is preparing or unpreparing claims");
}

}  // namespace

Claim read_claim(const json& j) {
    Claim c;
    object_at(j, "claim");
    const json* md = object_or_null(j, "metadata", "");
    if (!md) throw base::Error("metadata: missing");
    c.ns = string_at(*md, "namespace", "metadata", false);
    c.name = string_at(*md, "name", "metadata", true);
    c.uid = string_at(*md, "uid", "metadata", true);
    if (const json* a = object_or_null(*md, "annotations", "metadata")) c.annotations = string_map(*a, "metadata.annotations");
    if (const json* spec = object_or_null(j, "spec", ""))
        if (const json* devs = object_or_null(*spec, "devices", "spec"))
            if (const json* reqs = array_at(*devs, "requests", "spec.devices")) {
                for (size_t i = 0; i < reqs->size(); ++i) {
                    std::string at = "spec.devices.requests[" + std::to_string(i) + "]";
                    const json& r = object_at((*reqs)[i], at);
                    std::string name = string_at(r, "name", at, true);
                    if (const json* ex = object_or_null(r, "exactly", at))
                        if (const json* cap = object_or_null(*ex, "capacity", at + ".exactly"))
                            if (const json* rq = object_or_null(*cap, "requests", at + ".exactly.capacity"))
                                c.requested_capacity[name] = string_map(*rq, at + ".exactly.capacity.requests");
                }
            }
    const json* st = object_or_null(j, "status", "");
    if (!st) return c;
    if (const json* alloc = object_or_null(*st, "allocation", "status")) {
        c.allocated = true;
        if (const json* devs = object_or_null(*alloc, "devices", "status.allocation"))
            if (const json* results = array_at(*devs, "results", "status.allocation.devices")) {
                for (size_t i = 0; i < results->size(); ++i) {
                    std::string at = "status.allocation.devices.results[" + std::to_string(i) + "]";
                    const json& r = object_at((*results)[i], at);
                    AllocationResult x;
                    x.request = string_at(r, "request", at, true);
                    x.driver = string_at(r, "driver", at, true);
                    x.pool = string_at(r, "pool", at, true);
                    x.device = string_at(r, "device", at, true);
                    if (opt(r, "shareID")) x.share_id = string_at(r, "shareID", at, true);
                    if (const json* cc = object_or_null(r, "consumedCapacity", at))
                        x.consumed_capacity = string_map(*cc, at + ".consumedCapacity");
                    c.results.push_back(std::move(x));
                }
            }
    }
    if (const json* rf = array_at(*st, "reservedFor", "status")) {
        for (size_t i = 0; i < rf->size(); ++i) {
            std::string at = "status.reservedFor[" + std::to_string(i) + "]";
            const json& r = object_at((*rf)[i], at);
            c.reserved_for.push_back({string_at(r, "apiGroup", at, false), string_at(r, "resource", at, true),
                                      string_at(r, "name", at, true), string_at(r, "uid", at, true)});
        }
    }
    return c;
}

std::optional<uint64_t> quantity_value(const std::string& q) {
    size_t i = 0;
    uint64_t v = 0;
    while (i < q.size() && std::isdigit(static_cast<unsigned char>(q[i]))) {
        if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
        v = v * 10 + static_cast<uint64_t>(q[i++] - '0');
    }
    if (i == 0) return std::nullopt;
    static const std::map<std::string, uint64_t> kSuffix = {
        {"", 1},          {"k", 1000ULL},     {"M", 1000000ULL}, {"G", 1000000000ULL}, {"T", 1000000000000ULL},
        {"Ki", 1ULL << 10}, {"Mi", 1ULL << 20}, {"Gi", 1ULL << 30}, {"Ti", 1ULL << 40}};
    auto it = kSuffix.find(q.substr(i));
    if (it == kSuffix.end()) return std::nullopt;
    if (v && it->second > UINT64_MAX / v) return std::nullopt;
    return v * it->second;
}

Answer answer_of(const pc::Record& r) {
    Answer a;
    for (const auto& d : r.devices) a.devices.push_back({{request_base(d.request)}, d.pool, d.device, d.share_id});
    return a;
}

Answer Preparer::prepare(const ClaimRef& ref) {
    if (ref.ns.empty() || ref.name.empty() || !pc::valid_uid(ref.uid))
        return {{}, "kubelet named no valid claim (namespace '" + ref.ns + "', name '" + ref.name + "', uid '" + ref.uid + "')"};
    try {
        auto lock = lock_records(o_.state_dir);
        if (auto r = pc::read(o_.state_dir, ref.uid)) {
            if (r->state == "prepared") return answer_of(*r);   // again: the same answer, no API call
            release(*r);   // a crash while preparing or unpreparing: start over
        }
        return prepare_fresh(ref);
    } catch (const std::exception& e) {
        return {{}, claim_text(ref) + ": " + e.what()};
    }
}

Answer Preparer::prepare_fresh(const ClaimRef& ref) {
    auto got = o_.get("/apis/resource.k8s.io/v1/namespaces/" + ref.ns + "/resourceclaims/" + ref.name);
    if (got.status == 0) return {{}, "API unreachable reading " + claim_text(ref) + ": " + got.error};
    if (got.status == 404) return {{}, claim_text(ref) + " not found"};
    if (got.status != 200)
        return {{}, "API answered " + std::to_string(got.status) + " reading " + claim_text(ref) + ": " +
                    (got.body.is_object() ? got.body.value("message", std::string{}) : std::string{})};
    Claim c;
    try {
        c = read_claim(got.body);
    } catch (const base::Error& e) {
        return {{}, claim_text(ref) + " does not read as a v1 ResourceClaim: " + e.what()};
    }
    if (c.uid != ref.uid)
        return {{}, claim_text(ref) + " is now UID " + c.uid + " (replaced; kubelet asked for " + ref.uid + ")"};
    if (!c.allocated) return {{}, claim_text(ref) + " is not allocated"};

    pc::Record rec;
    rec.uid = ref.uid;
    rec.ns = ref.ns;
    rec.name = ref.name;
    if (auto it = c.annotations.find(dra::kNetworkAnnotation); it != c.annotations.end()) rec.network = it->second;
    for (const auto& r : c.reserved_for)
        if (r.resource == "pods" && r.api_group.empty()) rec.pods.push_back({r.uid, r.name});
    std::vector<const AllocationResult*> ours;
    for (const auto& r : c.results)
        if (r.driver == o_.driver) ours.push_back(&r);
    if (ours.empty()) return {};   // no device of ours: nothing to prepare, nothing recorded
    if (rec.pods.empty()) return {{}, claim_text(ref) + " is reserved for no pod"};
    for (const auto& pod : rec.pods)
        if (!pc::valid_uid(pod.uid)) return {{}, claim_text(ref) + " is reserved for pod " + pod.name + " with no valid UID"};

    placement::NodeFacts f;   // the claimed devices' part of the node, read live
    std::vector<std::pair<pc::Device, std::optional<long long>>> planned;
    for (const AllocationResult* r : ours) {
        std::string what = "device " + r->pool + "/" + r->device;
        if (r->pool != o_.node) return {{}, what + " is in pool " + r->pool + ", not this node's (" + o_.node + ")"};
        Found found = locate(f, o_.sysfs_root, o_.state_dir, r->device);
        if (found.kind.empty())
            return {{}, what + " is not on this node: no VF, link or address pool of that name (the node changed after "
                               "the scheduler allocated it)"};
        pc::Device d{r->request, r->pool, r->device, r->share_id, found.kind, found.pci, found.link, 0, 0};
        if (found.kind == "vf") {
            if (rec.pods.size() > 1)
                return {{}, what + ": reserved for " + std::to_string(rec.pods.size()) + " pods; a VF attaches to one pod"};
            if (auto holder = pc::vf_holder(o_.state_dir, found.pci); holder && *holder != ref.uid) {
                auto other = pc::read(o_.state_dir, *holder);
                return {{}, what + ": VF " + found.pci + " is held by ResourceClaim " + (other ? other->key() : "?") +
                                " (uid " + *holder + ")"};
            }
            if (found.in_use)
                return {{}, what + ": VF " + found.pci + " is in use by an attachment that did not come through DRA "
                                   "(its SR-IOV state record is under the state directory)"};
        } else if (found.kind == "link") {
            d.egress_bps = mbps_of(*r, c, "egressMbps") * 1000000;
            d.ingress_bps = mbps_of(*r, c, "ingressMbps") * 1000000;
        }
        planned.emplace_back(std::move(d), found.speed_mbps);
    }
    // The claim's network, re-checked for each VF with ADD's evaluation on the node as it is now.
    if (!rec.network.empty()) {
        auto slash = rec.network.find('/');
        if (slash == std::string::npos) return {{}, "annotation " + std::string(dra::kNetworkAnnotation) + " '" + rec.network + "' is not namespace/name"};
        std::shared_ptr<const json> cached = o_.cached_nad ? o_.cached_nad(rec.network) : nullptr;
        auto nad = cached ? ApiAnswer{200, *cached, ""}
                          : o_.get("/apis/k8s.cni.cncf.io/v1/namespaces/" + rec.network.substr(0, slash) +
                                   "/network-attachment-definitions/" + rec.network.substr(slash + 1));
        if (nad.status == 0) return {{}, "API unreachable reading NetworkAttachmentDefinition " + rec.network + ": " + nad.error};
        if (nad.status != 200)
            return {{}, "NetworkAttachmentDefinition " + rec.network + " (the claim's " + dra::kNetworkAnnotation + "): " +
                        (nad.status == 404 ? std::string("not found") : "API answered " + std::to_string(nad.status))};
        placement::PodInfo pod;
        pod.uid = rec.pods[0].uid;
        pod.pod_namespace = rec.ns;
        pod.pod_name = rec.pods[0].name;
        bool vf = false;
        for (const auto& [d, speed] : planned) vf = vf || d.kind == "vf";
        for (const auto& [d, speed] : planned) {
            // A VF, or a master (a link that is a netdev) when the claim has no VF: a PF's
            // bandwidth beside a VF is the VF's link, judged with the VF.
            std::string refused;
            if (d.kind == "vf") refused = recheck(f, nad.body, vf_device(d.pci), pod);
            else if (d.kind == "link" && !vf && !netns::sysfs::is_pci_address(d.link))
                refused = recheck(f, nad.body, master_dev(d.link), pod);
            if (!refused.empty())
                return {{}, "device " + d.pool + "/" + d.device + " (" + (d.kind == "vf" ? "VF " + d.pci : "master '" + d.link + "'") +
                                "): " + refused};
        }
    }

    // Write, step by step: each hold, then the record. A crash before the record leaves holds
    // no record names, which recover() takes away when the plugin starts again (kubelet
    // prepares the claim again); one durable write fewer than marking the record first.
    for (auto& [d, speed] : planned) rec.devices.push_back(d);
    try {
        return hold(rec, planned);
    } catch (...) {
        drop_holds(rec);   // an I/O error half-way: nothing stays held (no record was written)
        throw;
    }
}

Answer Preparer::hold(pc::Record& rec, const std::vector<std::pair<pc::Device, std::optional<long long>>>& planned) {
    for (const auto& [d, speed] : planned) {
        std::string refused;
        if (d.kind == "vf") {
            if (auto holder = pc::hold_vf(o_.state_dir, d.pci, rec.uid))
                refused = "device " + d.pool + "/" + d.device + ": VF " + d.pci + " is held by claim uid " + *holder;
        } else if (d.books_bandwidth()) {
            refused = book_bandwidth(o_.state_dir, d, rec, speed, o_.bandwidth_overcommit);
            if (!refused.empty()) refused = "device " + d.pool + "/" + d.device + ": " + refused;
        }
        if (!refused.empty()) {
            drop_holds(rec);   // no record was written: only the holds taken so far go
            return {{}, refused};
        }
        base::failpoint("prepare-after-hold");
    }
    pc::index_pods(o_.state_dir, rec);
    base::failpoint("prepare-before-record");
    rec.state = "prepared";
    pc::create(o_.state_dir, rec);   // prepare() found none (or released the last one) under the lock
    base::log::info("ResourceClaim " + rec.key() + " (uid " + rec.uid + ") prepared: " + std::to_string(rec.devices.size()) +
                    " device(s)");
    return answer_of(rec);
}

void Preparer::release(const pc::Record& r) {
    if (r.state != "unpreparing") {
        pc::Record going = r;
        going.state = "unpreparing";
        pc::write(o_.state_dir, going);
        base::failpoint("unprepare-after-mark");
    }
    drop_holds(r);
    pc::remove(o_.state_dir, r.uid);
}

void Preparer::drop_holds(const pc::Record& r) {
    for (const auto& d : r.devices) {
        if (d.kind == "vf" && !d.pci.empty()) pc::release_vf(o_.state_dir, d.pci, r.uid);
        if (d.kind == "link" && !d.link.empty())
            ledger::remove(o_.state_dir, d.link, pc::kLedgerNetwork, r.uid, d.request, /*durable=*/false);
        base::failpoint("unprepare-after-release");
    }
    for (const auto& pod : r.pods) pc::unindex_pod(o_.state_dir, pod.uid, r.uid);
}

std::string Preparer::unprepare(const ClaimRef& ref) {
    try {
        auto lock = lock_records(o_.state_dir);
        auto r = pc::read(o_.state_dir, ref.uid);
        if (!r) return "";   // never prepared here, or already unprepared: nothing to do
        release(*r);
        base::log::info(claim_text(ref) + " (uid " + ref.uid + ") unprepared");
        return "";
    } catch (const std::exception& e) {
        return claim_text(ref) + ": " + e.what();
    }
}

std::vector<std::string> Preparer::recover() {
    auto lock = lock_records(o_.state_dir);
    std::vector<std::string> did;
    for (const auto& dir : pc::drop_nested_index(o_.state_dir))
        did.push_back("removed an earlier version's pod index " + dir + " (indexed again from the records)");
    std::set<std::string> live;
    for (const auto& uid : pc::uids(o_.state_dir)) {
        std::optional<pc::Record> r;
        try {
            r = pc::read(o_.state_dir, uid);
        } catch (const std::exception& e) {
            // Records are written whole (rename), so this is damage from outside: drop it;
            // kubelet prepares the claim again.
            base::log::warn("prepared claim " + uid + ": " + e.what() + "; removed");
            pc::remove(o_.state_dir, uid);
            did.push_back("removed unreadable record " + uid);
            continue;
        }
        if (!r) continue;
        if (r->state == "prepared") {
            live.insert(uid);
            // Its holds and index entries, again where a power loss took them (they are not
            // synced; the record is).
            for (const auto& d : r->devices) {
                if (d.kind == "vf" && !d.pci.empty()) {
                    if (auto other = pc::hold_vf(o_.state_dir, d.pci, uid))
                        base::log::warn("recovery: VF " + d.pci + " of " + r->key() + " (uid " + uid + ") is held by claim uid " + *other);
                }
                if (d.books_bandwidth() &&
                    !has_entry(o_.state_dir, d.link, uid, d.request)) {
                    ledger::Entry e{pc::kLedgerNetwork, uid, d.request, d.egress_bps, d.ingress_bps, 0, 1.0, ""};
                    e.pod = r->key();
                    ledger::commit(o_.state_dir, d.link, e, false);   // write_file makes the link's directory
                    did.push_back("booked again " + r->key() + "'s bandwidth on " + d.link);
                }
            }
            pc::index_pods(o_.state_dir, *r);
            continue;
        }
        release(*r);
        did.push_back((r->state == "preparing" ? "rolled back " : "finished unpreparing ") + r->key() + " (uid " + uid + ")");
    }
    for (const auto& [pci, uid] : pc::held_vfs(o_.state_dir)) {
        if (live.count(uid)) continue;
        pc::release_vf(o_.state_dir, pci, uid);
        did.push_back("released VF " + pci + " of no prepared claim (uid " + uid + ")");
    }
    for (const auto& [pod, uid] : pc::indexed_pods(o_.state_dir)) {
        if (live.count(uid)) continue;
        pc::unindex_pod(o_.state_dir, pod, uid);
        did.push_back("removed pod index " + pod + " of no prepared claim (uid " + uid + ")");
    }
    for (const auto& link : ledger::links(o_.state_dir))
        for (const auto& e : ledger::entries(o_.state_dir, link))
            if (e.network == pc::kLedgerNetwork && !live.count(e.container_id)) {
                ledger::remove(o_.state_dir, link, e.network, e.container_id, e.ifname, false);
                did.push_back("removed ledger entry of no prepared claim on " + link + " (uid " + e.container_id + ")");
            }
    // What a kill -9 in the middle of a write leaves: the temp file beside the target.
    std::vector<std::string> dirs{pc::root(o_.state_dir) + "/claims", pc::root(o_.state_dir) + "/devices",
                                  pc::root(o_.state_dir) + "/pods"};
    for (const auto& link : ledger::links(o_.state_dir)) dirs.push_back(ledger::dir(o_.state_dir, link));
    for (const auto& dir : dirs)
        for (const auto& t : pc::remove_stale_temps(dir)) did.push_back("removed temp file " + t + " of a killed writer");
    for (const auto& d : did) base::log::info("recovery: " + d);
    return did;
}

std::vector<std::string> Preparer::sweep() {
    auto lock = lock_records(o_.state_dir);
    std::vector<std::string> did;
    for (const auto& uid : pc::uids(o_.state_dir)) {
        std::optional<pc::Record> r;
        try { r = pc::read(o_.state_dir, uid); } catch (const std::exception&) { continue; }   // recover()'s
        if (!r || r->state != "prepared") continue;
        auto got = o_.get("/apis/resource.k8s.io/v1/namespaces/" + r->ns + "/resourceclaims/" + r->name);
        bool replaced = got.status == 200 && got.body.is_object() &&
                        got.body.value("/metadata/uid"_json_pointer, std::string{}) != uid;
        if (got.status != 404 && !replaced) continue;
        cni::state::VfStore attachments(o_.state_dir);
        bool attached = false;
        for (const auto& d : r->devices) attached = attached || (d.kind == "vf" && attachments.holds(d.pci));
        if (attached) continue;   // its pod still has the VF: kubelet unprepares after the pod
        release(*r);
        did.push_back("released " + r->key() + " (uid " + uid + "): the API " +
                      (replaced ? "has another claim of that name" : "no longer has it"));
    }
    for (const auto& d : did) base::log::info("sweep: " + d);
    return did;
}

}  // namespace cluster::claims
