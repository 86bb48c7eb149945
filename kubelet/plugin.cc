#include "kubelet/plugin.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include "base/error.h"
#include "base/files.h"
#include "base/log.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace kubelet_plugin {

namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace v1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace reg = pluginregistration;
using cluster::claims::Answer;
using cluster::claims::ClaimRef;

namespace {

/// The versions we serve, in the order kubelet should prefer them (it takes the first it knows).
const char* const kVersions[] = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};

/// "2.41 ms": a call's time in the plugin, in its log line (the bench reads it).
std::string ms_since(std::chrono::steady_clock::time_point start) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f ms",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    return buf;
}

/// Prepare and unprepare, one call at a time, over the records.
class Core {
public:
    explicit Core(cluster::claims::PrepareOptions o) : prep_(std::move(o)) {}
    Answer prepare(const ClaimRef& c) {
        std::lock_guard lock(mu_);
        return prep_.prepare(c);
    }
    std::string unprepare(const ClaimRef& c) {
        std::lock_guard lock(mu_);
        return prep_.unprepare(c);
    }
    void recover() {
        std::lock_guard lock(mu_);
        prep_.recover();
    }
    void sweep() {
        std::lock_guard lock(mu_);
        try {
            prep_.sweep();
        } catch (const std::exception& e) {
            base::log::warn(std::string("sweep of prepared claims: ") + e.what());
        }
    }

private:
    std::mutex mu_;
    cluster::claims::Preparer prep_;
};

/// DRAPlugin of one API version: v1 has Device.share_id, v1beta1 has not.
template <class Api, class Service, bool kShareId>
class DraService final : public Service {
public:
    explicit DraService(Core& core) : core_(core) {}

    grpc::Status NodePrepareResources(grpc::ServerContext*, const typename Api::NodePrepareResourcesRequest* req,
                                      typename Api::NodePrepareResourcesResponse* resp) override {
        auto start = std::chrono::steady_clock::now();
        // Every claim gets an entry: kubelet counts a missing one as skipped.
        for (const auto& c : req->claims()) {
            Answer a = core_.prepare({c.namespace_(), c.uid(), c.name()});
            auto& out = (*resp->mutable_claims())[c.uid()];
            if (!a.error.empty()) {
                base::log::warn("NodePrepareResources " + c.namespace_() + "/" + c.name() + ": " + a.error);
                out.set_error(a.error);
                continue;
            }
            for (const auto& d : a.devices) {
                auto* dev = out.add_devices();
                for (const auto& r : d.request_names) dev->add_request_names(r);
                dev->set_pool_name(d.pool);
                dev->set_device_name(d.device);
                if constexpr (kShareId) {
                    if (d.share_id) dev->set_share_id(*d.share_id);
                }
            }
        }
        base::log::info("NodePrepareResources: " + std::to_string(req->claims_size()) + " claim(s) in " + ms_since(start));
        return grpc::Status::OK;
    }

    grpc::Status NodeUnprepareResources(grpc::ServerContext*, const typename Api::NodeUnprepareResourcesRequest* req,
                                        typename Api::NodeUnprepareResourcesResponse* resp) override {
        auto start = std::chrono::steady_clock::now();
        for (const auto& c : req->claims()) {
            std::string err = core_.unprepare({c.namespace_(), c.uid(), c.name()});
            if (!err.empty()) base::log::warn("NodeUnprepareResources " + c.namespace_() + "/" + c.name() + ": " + err);
            (*resp->mutable_claims())[c.uid()].set_error(err);
        }
        base::log::info("NodeUnprepareResources: " + std::to_string(req->claims_size()) + " claim(s) in " + ms_since(start));
        return grpc::Status::OK;
    }

private:
    Core& core_;
};

struct V1 {
    using NodePrepareResourcesRequest = v1::NodePrepareResourcesRequest;
    using NodePrepareResourcesResponse = v1::NodePrepareResourcesResponse;
    using NodeUnprepareResourcesRequest = v1::NodeUnprepareResourcesRequest;
    using NodeUnprepareResourcesResponse = v1::NodeUnprepareResourcesResponse;
};
struct V1beta1 {
    using NodePrepareResourcesRequest = v1beta1::NodePrepareResourcesRequest;
    using NodePrepareResourcesResponse = v1beta1::NodePrepareResourcesResponse;
    using NodeUnprepareResourcesRequest = v1beta1::NodeUnprepareResourcesRequest;
    using NodeUnprepareResourcesResponse = v1beta1::NodeUnprepareResourcesResponse;
};

class Registration final : public reg::Registration::Service {
public:
    Registration(std::string driver, std::string endpoint) : driver_(std::move(driver)), endpoint_(std::move(endpoint)) {}

    grpc::Status GetInfo(grpc::ServerContext*, const reg::InfoRequest*, reg::PluginInfo* info) override {
        info->set_type("DRAPlugin");
        info->set_name(driver_);
        info->set_endpoint(endpoint_);
        for (const char* v : kVersions) info->add_supported_versions(v);
        return grpc::Status::OK;
    }

    grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const reg::RegistrationStatus* s,
                                          reg::RegistrationStatusResponse*) override {
        // kubelet's verdict on us: a refusal is logged and we keep serving (kubelet tries
        // again when the socket is made again, e.g. at our restart).
        if (s->plugin_registered()) base::log::info("kubelet registered DRA driver " + driver_);
        else base::log::warn("kubelet refused to register DRA driver " + driver_ + ": " + s->error());
        return grpc::Status::OK;
    }

private:
    std::string driver_, endpoint_;
};

/// A sync server on unix socket `path`: a stale socket from a crash is removed first.
std::unique_ptr<grpc::Server> serve(const std::string& path, const std::vector<grpc::Service*>& services) {
    base::fs::mkdir_p(path.substr(0, path.rfind('/')), 0750);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) base::fs::fail_io("remove stale socket", path, errno);
    grpc::ServerBuilder b;
    // kubelet calls a driver one pod at a time per claim set; four threads are plenty, and
    // bound what a misbehaving client can make us hold.
    grpc::ResourceQuota quota("topocni-dra");
    quota.SetMaxThreads(4);
    b.SetResourceQuota(quota);
    b.SetMaxReceiveMessageSize(4 << 20);
    b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    for (auto* s : services) b.RegisterService(s);
    auto server = b.BuildAndStart();
    if (!server) throw base::Error("cannot serve gRPC on unix socket '" + path + "'");
    ::chmod(path.c_str(), 0600);
    return server;
}

}  // namespace

std::string socket_path(const std::string& dir, const std::string& name, const std::string& flag) {
    std::string p = dir + "/" + name;
    if (dir.empty() || dir[0] != '/') throw base::Error(flag + " '" + dir + "' is not an absolute path (kubelet dials it as given)");
    if (p.size() >= sizeof(sockaddr_un{}.sun_path))
        throw base::Error(flag + ": socket path '" + p + "' is " + std::to_string(p.size()) +
                          " bytes; a unix socket's is at most " + std::to_string(sizeof(sockaddr_un{}.sun_path) - 1));
    return p;
}

struct Plugin::Impl {
    Options o;
    std::string dra_sock, reg_sock;
    Core core;
    DraService<V1, v1::DRAPlugin::Service, true> v1_svc{core};
    DraService<V1beta1, v1beta1::DRAPlugin::Service, false> v1beta1_svc{core};
    Registration registration;
    std::unique_ptr<grpc::Server> dra, reg;
    std::thread sweeper;
    std::mutex stop_mu;
    std::condition_variable stop_cv;
    bool stopping = false;

    explicit Impl(Options opt)
        : o(std::move(opt)),
          dra_sock(socket_path(o.plugin_dir, "dra.sock", "--plugin-dir")),
          reg_sock(socket_path(o.registration_dir, o.driver + "-reg.sock", "--plugin-registration-dir")),
          core(o.prepare),
          registration(o.driver, dra_sock) {}
};

Plugin::Plugin(Options o) : impl_(std::make_unique<Impl>(std::move(o))) {}
Plugin::~Plugin() { stop(); }

void Plugin::start() {
    impl_->core.recover();
    impl_->dra = serve(impl_->dra_sock, {&impl_->v1_svc, &impl_->v1beta1_svc});
    impl_->reg = serve(impl_->reg_sock, {&impl_->registration});
    base::log::info("kubelet plugin: serving " + impl_->dra_sock + ", registered at " + impl_->reg_sock);
    impl_->sweeper = std::thread([impl = impl_.get()] {
        auto every = std::chrono::milliseconds(static_cast<long long>(impl->o.sweep_interval * 1000));
        std::unique_lock lock(impl->stop_mu);
        while (!impl->stop_cv.wait_for(lock, every, [impl] { return impl->stopping; })) {
            lock.unlock();
            impl->core.sweep();
            lock.lock();
        }
    });
}

void Plugin::stop() {
    {
        std::lock_guard lock(impl_->stop_mu);
        impl_->stopping = true;
    }
    impl_->stop_cv.notify_all();
    if (impl_->sweeper.joinable()) impl_->sweeper.join();
    if (impl_->reg) {
        ::unlink(impl_->reg_sock.c_str());   // kubelet's watcher deregisters us
        impl_->reg->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
        impl_->reg.reset();
    }
    if (impl_->dra) {
        // kubelet keeps its connection open: gRPC waits for the deadline before it cuts
        // idle connections, so the deadline is short. A call still running then finishes
        // its step (the handler thread is joined); kubelet retries what it did not answer.
        impl_->dra->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
        impl_->dra.reset();
        ::unlink(impl_->dra_sock.c_str());
    }
}

}  // namespace kubelet_plugin
