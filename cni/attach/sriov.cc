// SR-IOV VF attachment: a VF picked by PCI address is configured on its PF (vlan, MAC,
// rates, spoofchk, trust, link state), and its netdev moves into the pod under CNI_IFNAME.
// A VF bound to a userspace driver (DPDK) has no netdev: only the PF side is configured.
//
// Everything ADD changes is put back by DEL from a state record (cni/attach/sriov_state.h) written
// before the first change: the PF-side settings, then the netdev's name, netns, MAC, MTU
// and up state. The record also marks the VF as taken, and a per-VF lock serialises
// every verb on it, so an old pod's late DEL never touches a VF that a new pod now holds.
//
// The move into the pod is one RTM_NEWLINK carrying the pod netns and CNI_IFNAME: the
// kernel renames the link on the way in when its node name is taken in the pod (say the
// VF is "eth0" on the node), then names it CNI_IFNAME. Unlike sriov-cni's temporary
// netns (or its older temporary name on the node), nothing transient is left to clean
// up after a crash, and the node never sees a strange name. The kernel can still move
// the link and then fail the rename, so the undo is registered before the move and
// looks for the VF under both names.
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <map>
#include <thread>

#include "cni/attach/sriov.h"
#include "cni/attach/device.h"

#include <climits>

#include "conf/fields.h"
#include "cni/error.h"
#include "base/failpoint.h"
#include "cni/attach/ifconfig.h"
#include "base/log.h"
#include "cni/pod_netns.h"
#include "cni/records.h"
#include "cni/attach/shaping.h"
#include "cni/attach/sriov_state.h"
#include "base/files.h"
#include "netns/netlink.h"
#include "netns/sysctl.h"
#include "netns/sysfs.h"
#include "netns/vf.h"

namespace cni {

namespace nl = netns::nl;
namespace vf = netns::vf;
using state::VfRecord;

namespace {

// When a netns is destroyed the kernel hands its physical devices back to the initial
// netns from a work queue, so a VF can be missing on the node for a moment.
constexpr auto kReturnWait = std::chrono::seconds(3);
constexpr auto kPoll = std::chrono::milliseconds(100);
// i40e/iavf apply a VF's MAC asynchronously through the PF and refuse it while busy;
// sriov-cni retries 20 x 100 ms and reads it back.
constexpr int kMacAttempts = 20;

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
    return s;
}

}  // namespace

// ---- the keys ----

using json = nlohmann::json;
using conf::bad;
using conf::member;
using conf::member_ci;
using conf::opt_int;
using conf::opt_object;
using conf::opt_string;


namespace {

/// The VF's PCI address from the first key that has one. It becomes part of sysfs and
/// state paths, so anything but the strict PCI form (a `../` say) is refused here.
std::optional<std::string> parse_device_id(const json& raw) {
    std::optional<std::string> id;
    std::string path;
    if ((id = opt_string(raw, "deviceID", ""))) path = "deviceID";
    else if ((id = opt_string(raw, "pciBusID", ""))) path = "pciBusID";
    else if (auto* rc = opt_object(raw, "runtimeConfig", "")) {
        if (auto* v = member_ci(*rc, "deviceID")) {
            path = "runtimeConfig.deviceID";
            if (!v->is_string()) bad(path, "expected a string, got " + std::string(v->type_name()));
            id = v->get<std::string>();
        }
    }
    if (!id) return std::nullopt;
    if (!netns::sysfs::is_pci_address(*id))
        bad(path, "'" + *id + "' is not a PCI address (dddd:bb:dd.f, e.g. 0000:af:06.0)");
    return lower(*id);
}

/// spoofchk and trust: "on" / "off"; "" means unset, as in sriov-cni.
std::optional<bool> on_off(const json& raw, const std::string& key) {
    auto s = opt_string(raw, key, "");
    if (!s || s->empty()) return std::nullopt;
    if (*s == "on") return true;
    if (*s == "off") return false;
    bad(key, "'" + *s + "' is not one of on, off");
}

std::optional<int> opt_small(const json& raw, const std::string& key, long long lo, long long hi) {
    if (auto v = opt_int(raw, key, "", lo, hi)) return static_cast<int>(*v);
    return std::nullopt;
}

}  // namespace

SriovKeys read_sriov_keys(const conf::NetConf& c) {
    const json& raw = c.raw;
    SriovKeys s;
    s.device_id = parse_device_id(raw).value_or("");
    s.vlan = opt_small(raw, "vlan", 0, 4094);
    s.vlan_qos = opt_small(raw, "vlanQoS", 0, 7);
    if (auto p = opt_string(raw, "vlanProto", "")) {
        s.vlan_proto = lower(*p);
        if (*s.vlan_proto != "802.1q" && *s.vlan_proto != "802.1ad")
            bad("vlanProto", "'" + *p + "' is not one of 802.1q, 802.1ad");
    }
    if (!s.vlan) {
        if (s.vlan_qos) bad("vlanQoS", "needs vlan");
        if (s.vlan_proto) bad("vlanProto", "needs vlan");
    } else if (*s.vlan == 0) {
        // Untagged traffic has no priority field and no S-tag.
        if (s.vlan_qos.value_or(0) != 0) bad("vlanQoS", "needs a non-zero vlan");
        if (s.vlan_proto == "802.1ad") bad("vlanProto", "802.1ad needs a non-zero vlan");
    }
    s.spoofchk = on_off(raw, "spoofchk");
    s.trust = on_off(raw, "trust");
    if (auto l = opt_string(raw, "link_state", ""); l && !l->empty()) {
        if (*l != "auto" && *l != "enable" && *l != "disable")
            bad("link_state", "'" + *l + "' is not one of auto, enable, disable");
        s.link_state = *l;
    }
    s.min_tx_rate = opt_small(raw, "min_tx_rate", 0, INT_MAX);
    s.max_tx_rate = opt_small(raw, "max_tx_rate", 0, INT_MAX);
    if (s.min_tx_rate && s.max_tx_rate && *s.max_tx_rate != 0 && *s.min_tx_rate > *s.max_tx_rate)
        bad("min_tx_rate", std::to_string(*s.min_tx_rate) + " exceeds max_tx_rate " + std::to_string(*s.max_tx_rate));
    if (auto* rc = opt_object(raw, "runtimeConfig", "")) {
        if (auto* f = member_ci(*rc, "CNIDeviceInfoFile")) {
            const std::string path = "runtimeConfig.CNIDeviceInfoFile";
            if (!f->is_string()) bad(path, "expected a string, got " + std::string(f->type_name()));
            auto file = f->get<std::string>();
            if (file.empty() || file[0] != '/' || file.back() == '/') bad(path, "'" + file + "' must be an absolute file path");
            s.device_info_file = file;
        }
    }
    // One VF rate limit, set through the PF: two keys for it would contradict each other.
    if (c.bandwidth && c.bandwidth->egress && s.max_tx_rate)
        bad(c.bandwidth->source + ".egressRate", "and max_tx_rate both limit the VF's transmit rate; set one");
    return s;
}


namespace {

state::Owner owner_of(const Context& ctx) {
    return {ctx.conf.name, ctx.env.container_id, ctx.env.ifname, ctx.env.netns};
}

/// The PF-side settings a config asks for. Rates go together in one request, so an
/// unset one keeps its current value.
vf::VfConfig wanted_settings(const conf::NetConf& c, const SriovKeys& s, const vf::VfConfig& current) {
    vf::VfConfig w;
    if (s.vlan) {
        w.vlan = *s.vlan;
        w.qos = s.vlan_qos.value_or(0);
        w.vlan_proto = *vf::vlan_proto_value(s.vlan_proto.value_or("802.1q"));
    }
    if (c.mac) w.mac = lower(*c.mac);
    // The bandwidth capability's egress is the VF's transmit limit, in whole Mb/s (at least 1).
    std::optional<int> max_rate = s.max_tx_rate;
    if (c.bandwidth && c.bandwidth->egress)
        max_rate = static_cast<int>(std::max<uint64_t>(1, (c.bandwidth->egress->rate_bps + 500'000) / 1'000'000));
    if (s.min_tx_rate || max_rate) {
        w.min_tx_rate = s.min_tx_rate ? uint32_t(*s.min_tx_rate) : current.min_tx_rate.value_or(0);
        w.max_tx_rate = max_rate ? uint32_t(*max_rate) : current.max_tx_rate.value_or(0);
    }
    w.spoofchk = s.spoofchk;
    w.trust = s.trust;
    if (s.link_state) w.link_state = vf::link_state_value(*s.link_state);
    return w;
}

/// Whether link `l` may be the VF: its parent device is the VF, or (virtual links, old
/// kernels) unknown and `trust_unknown`.
bool is_vf(nl::Socket& s, const nl::Link& l, const std::string& pci, bool trust_unknown) {
    std::optional<std::string> parent;
    try { parent = vf::parent_device(s, l.index); } catch (const base::Error&) { return false; }
    return parent ? *parent == pci : trust_unknown;
}

/// The VF in the pod: under CNI_IFNAME (ours by the runtime's contract), else under its
/// node name or any name, recognised by its PCI parent only.
std::optional<nl::Link> find_in_pod(nl::Socket& s, const VfRecord& r) {
    if (auto l = s.get_link(r.owner.ifname); l && is_vf(s, *l, r.pci, true)) return l;
    if (auto l = s.get_link(r.netdev); l && is_vf(s, *l, r.pci, false)) return l;
    return vf::find_by_parent(s, r.pci);
}

/// The VF on the node: by its PCI address (sysfs names it, under whatever name the
/// kernel gave it), else under its original name if the kernel says it is the VF.
std::optional<nl::Link> find_on_node(nl::Socket& h, const VfRecord& r, const netns::sysfs::Tree& tree) {
    for (auto& name : tree.netdevs(r.pci))
        if (auto l = h.get_link(name)) return l;
    if (auto l = h.get_link(r.netdev); l && is_vf(h, *l, r.pci, false)) return l;
    return std::nullopt;
}

void set_mac_verified(nl::Socket& s, int index, const std::string& mac) {
    for (int attempt = 1;; ++attempt) {
        try {
            s.set_mac(index, mac);
        } catch (const base::Error& e) {
            if (attempt >= kMacAttempts || (e.sys_errno != EBUSY && e.sys_errno != EAGAIN)) throw;
        }
        auto l = s.get_link(index);
        if (l && l->mac == lower(mac)) return;
        if (attempt >= kMacAttempts)
            throw Error(kInternal, "MAC of VF netdev '" + (l ? l->name : std::to_string(index)) + "' is still " +
                                       (l ? l->mac : "unknown") + " after setting " + mac);
        std::this_thread::sleep_for(kPoll);
    }
}

std::string device_info_json(const VfRecord& r, const netns::sysfs::Tree& tree) {
    nlohmann::json pci = {{"pci-address", r.pci}, {"pf-pci-address", r.pf_pci}};
    std::string rdma;
    for (auto& d : tree.rdma_devices(r.pci)) rdma += (rdma.empty() ? "" : ",") + d;
    if (!rdma.empty()) pci["rdma-device"] = rdma;
    return nlohmann::json{{"type", "pci"}, {"version", "1.1.0"}, {"pci", pci}}.dump(4) + "\n";
}

bool file_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0 || errno != ENOENT; }

/// Collects the failures of independent steps, so one failed step does not stop the others.
class Failures {
public:
    template <class F>
    void run(F&& step) {
        try {
            step();
        } catch (const base::Error& e) {
            if (!first_) first_ = code_of(e);
            msgs_ += (msgs_.empty() ? "" : "; ") + std::string(e.what());
        }
    }
    void raise(const std::string& what) const {
        if (first_) throw Error(*first_, what + ": " + msgs_);
    }

private:
    std::optional<int> first_;
    std::string msgs_;
};

class Sriov : public Attachment {
public:
    Sriov(SriovKeys keys, std::unique_ptr<vf::PfControl> pf) : keys_(std::move(keys)), pf_(std::move(pf)) {}

    // Everything that can refuse the VF without a change: it exists, is a VF of a PF with
    // a netdev, is free (or held by an attachment whose netns is gone, which ADD takes
    // back), and has a netdev on the node or a userspace driver. ADD repeats the checks
    // that matter under the VF's lock.
    void preflight(Context& ctx) override {
        const auto& c = ctx.conf;
        if (keys_.device_id.empty())
            fail_config("deviceID: missing: set deviceID (Multus injects it from the network's "
                        "k8s.v1.cni.cncf.io/resourceName), pciBusID or runtimeConfig.deviceID");
        const std::string pci = keys_.device_id;
        netns::sysfs::Tree tree(c.sysfs_root);
        state::VfStore store(c.state_dir);
        locate(tree, pci);
        if (auto held = store.read(pci)) {
            if (!held->owner.same_attachment(owner_of(ctx)) && netns_exists(held->owner.netns))
                throw busy(*held, store);
            return;   // ours from a retried ADD, or a dead pod's: ADD restores it first
        }
        if (tree.netdevs(pci).empty()) {
            require_userspace_driver(tree, pci);
            refuse_ingress_shaping(c, pci);
        }
    }

    // Before a node is chosen, a VF of the NAD's device-plugin resource (any VF without one).
    placement::ScheduledDevice scheduled_device(const conf::NetConf&, const std::string&) const override {
        placement::ScheduledDevice d;
        d.kind = placement::ScheduledDevice::Kind::Vf;
        return d;
    }

    placement::Device device(const conf::NetConf& c) const override {
        // DEL and GC may not have the keys; a deviceID that was not read is taken as given.
        auto pci = keys_.device_id.empty() ? device_id_in(c.raw) : std::optional<std::string>(keys_.device_id);
        if (!pci) {
            placement::Device d;
            d.none_why = "attachment sriov names no device (no deviceID, pciBusID or master)";
            return d;
        }
        return pci_device(*pci, c);
    }

    std::optional<int> add(Context& ctx, const Result& ipam, Result& result, base::Rollback& undo) override {
        const auto& c = ctx.conf;
        const std::string pci = keys_.device_id;
        netns::sysfs::Tree tree(c.sysfs_root);
        state::VfStore store(c.state_dir);

        VfRecord rec = locate(tree, pci);
        lock(store, tree, pci);
        claim(ctx, store, tree, pci);
        inspect(tree, rec);
        if (rec.dpdk) refuse_ingress_shaping(c, pci);
        rec.owner = owner_of(ctx);
        rec.applied = wanted_settings(c, keys_, rec.original);
        // Multus may have copied the device plugin's file already: then it stays theirs.
        if (keys_.device_info_file && !file_exists(*keys_.device_info_file)) {
            rec.device_info_file = keys_.device_info_file;
            // Known before the record is written, so DEL can take them away again.
            auto slash = rec.device_info_file->rfind('/');
            rec.device_info_dirs = base::fs::missing_dirs(rec.device_info_file->substr(0, slash ? slash : 1));
        }

        // From here on the node changes: the record goes first, so DEL can always undo.
        auto created = store.write(rec);
        undo.add("state record " + pci, [store, pci, created] {
            store.remove(pci);
            base::fs::remove_dirs(created);
        });
        base::failpoint("after-state-record");
        apply_pf_settings(rec, undo);
        if (rec.device_info_file) {
            auto path = *rec.device_info_file;
            auto dirs = rec.device_info_dirs;
            bool mine = false;
            try {
                mine = base::fs::create_once(path, device_info_json(rec, tree), 0444, 0755);
            } catch (const base::Error&) {
                base::fs::remove_dirs(dirs);
                throw;
            }
            if (mine)
                undo.add("device info " + path, [path, dirs] {
                    base::fs::remove_file(path);
                    base::fs::remove_dirs(dirs);
                });
        }

        if (rec.dpdk) {
            // Nothing to put in the pod: addresses are allocated (the application may use
            // them) but configured nowhere, and name no interface.
            base::log::info("VF " + pci + " is bound to a userspace driver: PF side configured, no netdev to move");
            return std::nullopt;
        }
        nl::Link link = move_into_pod(ctx, rec, tree, ipam, undo);
        shape_in_pod(ctx, false, undo);   // what the pod receives; the PF limits what it sends
        result.interfaces.push_back({.name = link.name, .mac = link.mac, .mtu = link.mtu, .sandbox = ctx.env.netns,
                                     .pci_id = pci});
        return static_cast<int>(result.interfaces.size()) - 1;
    }

    void del(Context& ctx) override {
        const auto& c = ctx.conf;
        netns::sysfs::Tree tree(c.sysfs_root);
        state::VfStore store(c.state_dir);
        auto me = owner_of(ctx);
        // The record is found by owner, not by deviceID: DEL may come without it, and a
        // VF handed to another pod since is never ours to reset.
        for (auto& found : store.list()) {
            if (!found.owner.same_attachment(me)) continue;
            lock(store, tree, found.pci);
            auto rec = store.read(found.pci);   // again, under the lock
            if (!rec || !rec->owner.same_attachment(me)) continue;
            // Without CNI_NETNS (some runtimes send none once the pod is stopping) the
            // netns ADD recorded may still hold the VF.
            std::optional<netns::Handle> recorded;
            if (!ctx.pod) recorded = open_pod_netns_if_present(rec->owner.netns, ctx.host);
            restore(*rec, ctx.host, ctx.pod ? ctx.pod : recorded ? &*recorded : nullptr, tree, store);
        }
        unshape(ctx, true);
    }

    void check(Context& ctx, const Result& prev) override {
        const auto& c = ctx.conf;
        state::VfStore store(c.state_dir);
        auto me = owner_of(ctx);
        std::optional<VfRecord> rec;
        for (auto& r : store.list())
            if (r.owner.same_attachment(me)) rec = r;
        if (!rec) throw Error(kCheckFailed, "no SR-IOV state record names " + me.str() + " under '" + store.dir() + "'");
        if (!keys_.device_id.empty() && keys_.device_id != rec->pci)
            throw Error(kCheckFailed, "deviceID is " + keys_.device_id + " but the attachment holds VF " + rec->pci);
        check_pf_settings(*rec);
        if (rec->dpdk) return;

        const Interface& want = expected_pod_interface(prev, ctx.env.ifname, ctx.env.netns);
        netns::with(*ctx.pod, [&] {
            nl::Socket s;
            const nl::Link l = pod_link(s, ctx.env.ifname, "");
            if (!is_vf(s, l, rec->pci, true))
                throw Error(kCheckFailed, "interface '" + ctx.env.ifname + "' is not VF " + rec->pci);
            if (!want.mac.empty() && l.mac != lower(want.mac))
                throw Error(kCheckFailed, "interface '" + ctx.env.ifname + "' has MAC " + l.mac +
                                              ", prevResult says " + want.mac);
            if (!(l.flags & IFF_UP)) throw Error(kCheckFailed, "interface '" + ctx.env.ifname + "' is down");
            if (!prev.ips.empty()) check_pod_ips(s, l.index, ctx.env.ifname, prev, Routing::Subnet);
        });
        check_pod_shaping(ctx, false);
    }

    void gc(Context& ctx) override {
        const auto& c = ctx.conf;
        netns::sysfs::Tree tree(c.sysfs_root);
        state::VfStore store(c.state_dir);
        Failures failures;
        for (auto& found : store.list()) {
            if (found.owner.network != c.name || !c.valid_attachments) continue;
            bool valid = false;
            for (auto& v : *c.valid_attachments)
                valid = valid || (v.container_id == found.owner.container_id && v.ifname == found.owner.ifname);
            if (valid) continue;
            // Not valid: the runtime no longer knows the attachment (e.g. an ADD killed
            // half-way). Its netns may still exist; take the VF back from it as DEL would.
            failures.run([&] {
                lock(store, tree, found.pci);
                auto rec = store.read(found.pci);
                if (!rec || !rec->owner.same_attachment(found.owner)) return;
                std::optional<netns::Handle> pod;
                if (netns_exists(rec->owner.netns)) {
                    try { pod.emplace(netns::Handle::open(rec->owner.netns)); } catch (const base::Error&) {}
                }
                restore(*rec, ctx.host, pod ? &*pod : nullptr, tree, store);
            });
        }
        // A pod netns that outlived its attachment keeps the ifb that shaped it in there.
        if (ctx.stale)
            for (auto& r : *ctx.stale)
                if (netns_exists(r.netns))
                    try { unshape_pod(r.netns, r.container_id, r.ifname); } catch (const base::Error&) {}
        failures.raise("failed to release SR-IOV VFs");
    }

private:
    /// Takes the VF's lock unless this process holds it already (flock would not nest).
    /// A VF that no longer exists has nothing to serialise (restore drops its record).
    void lock(const state::VfStore& store, const netns::sysfs::Tree& tree, const std::string& pci) {
        if (locks_.count(pci)) return;
        if (auto l = store.lock(tree, pci)) locks_.emplace(pci, std::move(*l));
    }

    /// Traffic to a VF bound to a userspace driver never passes a netdev tc could shape.
    static void refuse_ingress_shaping(const conf::NetConf& c, const std::string& pci) {
        if (c.bandwidth && c.bandwidth->ingress)
            fail_config(c.bandwidth->source + ".ingressRate: VF " + pci +
                        " is bound to a userspace driver (no netdev): what it receives cannot be shaped; "
                        "only egressRate (the VF's max_tx_rate) can be set");
    }

    /// A VF without a netdev on the node is usable only bound to a userspace driver (DPDK).
    static void require_userspace_driver(const netns::sysfs::Tree& tree, const std::string& pci) {
        auto driver = tree.driver(pci);
        if (!driver || !netns::sysfs::is_userspace_driver(*driver))
            fail_config("deviceID: VF " + pci + " has no netdev on the node and is not bound to a userspace driver "
                        "(driver: " + driver.value_or("none") + "); is it in use by another netns?");
    }

    static Error busy(const VfRecord& held, const state::VfStore& store) {
        return Error(kDeviceBusy, "VF " + held.pci + " is in use by " + held.owner.str(),
                     "netns " + held.owner.netns + "; state record " + store.path(held.pci));
    }

    /// The VF's place in the PCI tree; code 7 naming the device when it is no VF.
    static VfRecord locate(const netns::sysfs::Tree& tree, const std::string& pci) {
        if (!tree.pci_exists(pci))
            fail_config("deviceID: PCI device " + pci + " not found under '" + tree.root() + "/bus/pci/devices'");
        VfRecord r;
        r.pci = pci;
        auto pf = tree.physfn(pci);
        if (!pf) fail_config("deviceID: PCI device " + pci + " is not an SR-IOV VF (it has no physfn)");
        r.pf_pci = *pf;
        auto pf_names = tree.netdevs(*pf);
        if (pf_names.empty()) fail_config("deviceID: the PF " + *pf + " of VF " + pci + " has no netdev on the node");
        r.pf = pf_names.front();
        auto index = tree.vf_index(*pf, pci);
        if (!index) fail_config("deviceID: no virtfnN link of PF " + *pf + " points at VF " + pci);
        r.vf_index = *index;
        return r;
    }

    /// Refuses a VF that another live attachment holds; a record whose pod netns is gone
    /// (or left by a crashed ADD of this same attachment) is restored first.
    void claim(Context& ctx, const state::VfStore& store, const netns::sysfs::Tree& tree, const std::string& pci) {
        auto rec = store.read(pci);
        if (!rec) return;
        if (!rec->owner.same_attachment(owner_of(ctx))) {
            if (netns_exists(rec->owner.netns)) throw busy(*rec, store);
            base::log::warn("VF " + pci + " was left by " + rec->owner.str() + " whose netns is gone; restoring it");
        }
        auto pod = open_pod_netns_if_present(rec->owner.netns, ctx.host);
        restore(*rec, ctx.host, pod ? &*pod : nullptr, tree, store);
    }

    /// The netdev as it is now and the PF-side settings, before anything changes.
    void inspect(const netns::sysfs::Tree& tree, VfRecord& r) {
        auto names = tree.netdevs(r.pci);
        if (!names.empty()) {
            nl::Socket h;
            auto l = h.get_link(names.front());
            if (!l)
                throw Error(kInternal, "netdev '" + names.front() + "' of VF " + r.pci + " (from sysfs) is not in the node netns");
            r.netdev = l->name;
            r.mac = l->mac;
            r.mtu = l->mtu;
            r.up = l->flags & IFF_UP;
        } else {
            require_userspace_driver(tree, r.pci);
            r.dpdk = true;
        }
        // A PF that reports no VF info (no SR-IOV driver) leaves the originals unknown:
        // nothing can be restored from them, and any set will fail anyway.
        r.original = pf_->get(r.pf, r.vf_index).value_or(vf::VfConfig{});
    }

    void apply_pf_settings(const VfRecord& r, base::Rollback& undo) {
        auto* pf = pf_.get();
        for (auto s : vf::kAllSettings) {
            if (!vf::has(r.applied, s)) continue;
            pf->set(r.pf, r.vf_index, s, r.applied);
            undo.add(std::string("PF ") + vf::setting_name(s), [pf, r, s] { restore_pf_setting(*pf, r, r.pf, r.vf_index, s); });
        }
    }

    static void restore_pf_setting(vf::PfControl& pf, const VfRecord& r, const std::string& pf_name, int index,
                                   vf::Setting s) {
        if (!vf::has(r.original, s)) {
            base::log::warn(std::string("VF ") + r.pci + ": original " + vf::setting_name(s) + " unknown, left as set");
            return;
        }
        try {
            pf.set(pf_name, index, s, r.original);
        } catch (const base::Error& e) {
            // Several drivers refuse an all-zero admin MAC (sriov-cni#115); the VF is still usable.
            if (s == vf::Setting::Mac && r.original.mac == "00:00:00:00:00:00") {
                base::log::warn(std::string("VF ") + r.pci + ": cannot clear the admin MAC: " + e.what());
                return;
            }
            throw;
        }
    }

    /// Moves the VF netdev into the pod as CNI_IFNAME, sets MAC and MTU, adds the IPAM
    /// addresses and brings it up. Returns the link as it ends up.
    nl::Link move_into_pod(Context& ctx, const VfRecord& r, const netns::sysfs::Tree& tree, const Result& ipam,
                           base::Rollback& undo) {
        const auto& c = ctx.conf;
        const std::string& ifname = ctx.env.ifname;
        nl::Socket h;
        auto vf_link = h.get_link(r.netdev);
        if (!vf_link) throw Error(kInternal, "netdev '" + r.netdev + "' of VF " + r.pci + " vanished from the node netns");
        // One undo for name, netns, MAC, MTU and addresses (which leave with the netns),
        // registered before the move because a half-done move still moves the link.
        const netns::Handle* host = &ctx.host;
        const netns::Handle* pod = ctx.pod;
        undo.add("VF netdev " + r.netdev, [host, pod, r, tree] { restore_netdev(r, *host, pod, tree); });
        h.move_link(vf_link->index, ctx.pod->fd(), ifname);
        base::failpoint("after-move");

        return netns::with(*ctx.pod, [&] {
            nl::Socket s;
            auto l = s.get_link(ifname);
            if (!l) throw Error(kInternal, "VF " + r.pci + " vanished after the move into the pod netns as '" + ifname + "'");
            // Announce the address on up and MAC change: neighbours may cache an old MAC.
            netns::sysctl::set("net/ipv4/conf/" + ifname + "/arp_notify", "1");
            if (netns::sysctl::get("net/ipv6/conf/" + ifname + "/ndisc_notify"))
                netns::sysctl::set("net/ipv6/conf/" + ifname + "/ndisc_notify", "1");
            if (c.mac) set_mac_verified(s, l->index, lower(*c.mac));
            if (c.mtu) s.set_mtu(l->index, *c.mtu);
            if (ipam.ips.empty()) s.set_up(l->index);
            else configure_pod_ips(s, l->index, ifname, ipam, Routing::Subnet);
            base::failpoint("after-addresses");
            return *s.get_link(l->index);
        });
    }

    /// Puts everything in the record back, then removes the record; the record stays
    /// when any step failed, so a retried DEL tries again.
    void restore(const VfRecord& r, const netns::Handle& host, const netns::Handle* pod,
                 const netns::sysfs::Tree& tree, const state::VfStore& store) {
        Failures failures;
        if (tree.pci_exists(r.pci)) {
            // PF side first: some drivers refuse netdev changes while trust is off
            // (sriov-cni). The PF is looked up again in case it was renamed since ADD.
            std::string pf_name = r.pf;
            if (auto names = tree.netdevs(r.pf_pci); !names.empty()) pf_name = names.front();
            int index = tree.vf_index(r.pf_pci, r.pci).value_or(r.vf_index);
            for (auto s : vf::kAllSettings)
                if (vf::has(r.applied, s)) failures.run([&] { restore_pf_setting(*pf_, r, pf_name, index, s); });
            if (!r.dpdk) failures.run([&] { restore_netdev(r, host, pod, tree); });
        } else {
            // The VF itself is gone (sriov_numvfs changed), and with it all there was to restore.
            base::log::warn("VF " + r.pci + " no longer exists; dropping its state record");
        }
        if (r.device_info_file)
            failures.run([&] {
                base::fs::remove_file(*r.device_info_file);
                base::fs::remove_dirs(r.device_info_dirs);   // each only when empty
            });
        failures.raise("failed to restore VF " + r.pci + " of " + r.owner.str());
        store.remove(r.pci);
        base::log::info("VF " + r.pci + " restored as '" + (r.dpdk ? std::string("(dpdk)") : r.netdev) + "'");
    }

    /// Puts the VF netdev back on the node under its original name, MAC, MTU and up state,
    /// wherever it is now: in the pod, on the node under another name, or still on its way
    /// back from a deleted netns.
    static void restore_netdev(const VfRecord& r, const netns::Handle& host, const netns::Handle* pod,
                               const netns::sysfs::Tree& tree) {
        if (pod) {
            auto in_pod = netns::with(*pod, [&] {
                nl::Socket s;
                return find_in_pod(s, r);
            });
            if (in_pod) {
                // Taken names must be caught before the move: the kernel would move the
                // link and then fail the rename, leaving it on the node under the pod's name.
                nl::Socket h;
                if (h.get_link(r.netdev))
                    throw Error(kInternal, "failed to return VF " + r.pci + " to the node as '" + r.netdev +
                                               "': another link has that name there");
                netns::with(*pod, [&] {
                    nl::Socket s;
                    s.move_link(in_pod->index, host.fd(), r.netdev);
                });
            }
        }
        nl::Socket h;
        auto l = find_on_node(h, r, tree);
        for (auto deadline = std::chrono::steady_clock::now() + kReturnWait; !l && !pod;) {
            if (std::chrono::steady_clock::now() >= deadline) break;
            std::this_thread::sleep_for(kPoll);
            l = find_on_node(h, r, tree);
        }
        if (!l) {
            if (auto d = tree.driver(r.pci); d && netns::sysfs::is_userspace_driver(*d)) {
                base::log::warn("VF " + r.pci + " is now bound to " + *d + ": no netdev to restore");
                return;
            }
            if (pod)
                throw Error(kInternal, "VF " + r.pci + " ('" + r.netdev + "') is neither in the pod netns as '" +
                                           r.owner.ifname + "' nor on the node");
            throw Error(kTryAgainLater, "VF " + r.pci + " ('" + r.netdev +
                                            "') has not come back to the node since its pod netns was deleted; retry");
        }
        if (l->name != r.netdev) {
            if (h.get_link(r.netdev))
                throw Error(kInternal, "failed to rename VF " + r.pci + " back to '" + r.netdev +
                                           "': another link has that name on the node");
            h.set_down(l->index);   // names of up links cannot change
            h.rename(l->index, r.netdev);
        }
        if (!r.mac.empty() && l->mac != r.mac) set_mac_verified(h, l->index, r.mac);
        if (r.mtu && l->mtu != r.mtu) h.set_mtu(l->index, r.mtu);
        if (r.up) h.set_up(l->index);
        else if (l->flags & IFF_UP) h.set_down(l->index);
    }

    /// CHECK: the PF still has what ADD set (when the PF reports its VFs at all).
    void check_pf_settings(const VfRecord& r) {
        if (r.applied == vf::VfConfig{}) return;
        auto now = pf_->get(r.pf, r.vf_index);
        if (!now) throw Error(kCheckFailed, "PF '" + r.pf + "' reports no VF " + std::to_string(r.vf_index));
        for (auto s : vf::kAllSettings) {
            if (!vf::has(r.applied, s)) continue;
            if (vf::describe(*now, s) != vf::describe(r.applied, s))
                throw Error(kCheckFailed, "VF " + r.pci + " has " + vf::describe(*now, s) + ", the attachment set " +
                                              vf::describe(r.applied, s));
        }
    }

    SriovKeys keys_;
    std::unique_ptr<vf::PfControl> pf_;
    std::map<std::string, base::DirLock> locks_;   ///< by VF, held until the plugin exits
};

}  // namespace

std::unique_ptr<Attachment> make_sriov(conf::NetConf& c, conf::Purpose purpose, std::unique_ptr<vf::PfControl> pf) {
    // DEL and GC find the VF from its state record: they need no deviceID.
    return std::make_unique<Sriov>(read_keys<SriovKeys>(c, purpose, [&] { return read_sriov_keys(c); }), std::move(pf));
}

std::unique_ptr<Attachment> make_sriov(conf::NetConf& c, conf::Purpose purpose) {
    return make_sriov(c, purpose, vf::netlink_pf());
}

}  // namespace cni
