// The on-disk store, byte-compatible with the reference host-local plugin:
//   <dir>/<ip>                   reservation: "<containerID>\r\n<ifname>", mode 0600
//   <dir>/last_reserved_ip.<set> round-robin cursor: the address as text
//   <dir>/lock                   flocked for the whole of every operation
// plus our own, which the reference ignores (it only ever matches file contents):
//   <dir>/.topocni/owners/<name> owner index (see owner_index.h)
//   <dir>/.topocni/tmp/          temp files and "spare-*" files kept for reuse (no inode
//                                allocated per ADD: see clear_temps()); any other file
//                                here when we get the lock is a crash leftover, removed
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ipam/lock.h"
#include "ipam/owner_index.h"
#include "ipam/store.h"
#include "ipam/unique_fd.h"

namespace ipam {

class DiskStore final : public Store {
public:
    /// Creates `dir` (0755) when missing, takes its lock within `lock_timeout` (else
    /// code 11) and removes temp files a crashed run left behind. `durable`: reserve and
    /// remove return only once the change would survive a power loss (ipam.fsync).
    DiskStore(std::string dir, std::chrono::milliseconds lock_timeout, bool durable = false);

    bool taken(const IpAddr& ip) override;
    std::optional<Reservation> holder(const IpAddr& ip) override;
    bool reserve(const IpAddr& ip, const Owner& owner) override;
    void remove(const Reservation& r) override;
    std::vector<IpAddr> indexed(const Owner& owner) override;
    std::vector<Reservation> find(const Owner& owner) override;
    std::vector<Reservation> release(const Owner& owner) override;
    std::vector<Reservation> all() override;
    std::vector<IpAddr> addresses() override;
    std::optional<IpAddr> cursor(size_t set) override;
    void set_cursor(size_t set, const IpAddr& ip) override;
    void tidy_index() override;
    void check_writable() override;

private:
    std::string path(const std::string& name) const { return dir_ + "/" + name; }
    std::string owners_path(const std::string& name) const { return dir_ + "/.topocni/owners/" + name; }
    std::string tmp_path(const std::string& name) const { return dir_ + "/.topocni/tmp/" + name; }
    std::string write_temp(std::string_view content, bool sync);
    void replace(const std::string& tmp, int to_fd, const std::string& name, const std::string& shown);
    void clear_temps();
    std::string spare_name();
    std::optional<std::string> take_spare(std::string_view content, bool sync);
    void keep_spare(const std::string& tmp);
    void retire(int at, const std::string& name, const std::string& shown);
    std::optional<OwnerIndex> load_index(const Owner& owner);
    void save_index(const OwnerIndex& idx);
    void index_add(const Owner& owner, const IpAddr& ip);
    void index_drop(const Owner& owner, const IpAddr& ip);
    std::vector<Reservation> verified(const OwnerIndex& idx);
    std::vector<Reservation> scan(const Owner& owner);

    std::string dir_;
    FileLock lock_;
    UniqueFd dir_fd_, owners_fd_, tmp_fd_;
    unsigned seq_ = 0;
    std::vector<std::string> spares_;   ///< names in tmp/ of files free for reuse
    static constexpr size_t kMaxSpares = 256;
    bool durable_ = false;
};

}  // namespace ipam
