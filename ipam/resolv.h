// resolv.conf → result "dns", as the reference host-local fills it from ipam.resolvConf.
#pragma once
#include <string>

#include "base/result_model.h"

namespace ipam {

/// nameserver lines append, the last domain wins, search and options append every
/// word; lines starting with '#' or ';' are comments. An unreadable file is
/// ipam::Error Invalid naming it.
base::Dns parse_resolv_conf(const std::string& path);

}  // namespace ipam
