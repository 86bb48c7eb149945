// IPAM for every verb: the built-in host-local, or any other type run from CNI_PATH.
#pragma once
#include "base/rollback.h"
#include "cni/env.h"
#include "cni/result.h"
#include "conf/netconf.h"

namespace cni {

/// Checks what can be checked before anything changes: requested addresses in range,
/// another IPAM plugin present in CNI_PATH.
void ipam_preflight(const Env& env, const conf::NetConf& c);
/// Allocates addresses (empty result when the config has no ipam) and registers on
/// `undo` how to take them back: the built-in store also puts its cursors back and
/// removes the directories it created; another plugin gets a DEL.
Result ipam_add(const Env& env, const conf::NetConf& c, base::Rollback& undo);
/// Releases the attachment's addresses; succeeds when there is nothing to release.
void ipam_del(const Env& env, const conf::NetConf& c);
/// Verifies the attachment still holds the addresses of `prev`.
void ipam_check(const Env& env, const conf::NetConf& c, const Result& prev);
void ipam_gc(const Env& env, const conf::NetConf& c);
void ipam_status(const Env& env, const conf::NetConf& c);

/// ADD, for kinds that run topocni's IPAM: IPAM's addresses (on the pod interface the
/// kind created, when there is one), routes and dns, the config's dns over IPAM's.
void take_ipam_result(Result& result, const Result& ipam, std::optional<int> pod_interface, const Dns& dns);

}  // namespace cni
