// The on-disk store, byte-compatible with the reference host-local plugin:
//   <dataDir>/<net>/<ip>                    reservation: "<containerID>\r\n<ifname>", mode 0600
//   <dataDir>/<net>/last_reserved_ip.<set>  round-robin cursor: the address as text
//   <dataDir>/<net>/lock                    flocked for the whole of every operation
// plus our own, beside the network's directory rather than in it: the reference walks
// <dataDir>/<net> recursively and reads every file there as a possible reservation, so
// nothing of ours may sit inside it.
//   <dataDir>/.topocni/<net>/owners/<name>  owner index (see owner_index.h)
//   <dataDir>/.topocni/<net>/tmp/           a reservation being written (then linked into
//                                           place); anything here when we get the lock
//                                           is a crash leftover and is removed
// A network's name never starts with '.', so ".topocni" is never a network's directory.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ipam/lock.h"
#include "ipam/owner_index.h"
#include "ipam/store.h"
#include "base/fd.h"

namespace ipam {

class DiskStore final : public Store {
public:
    enum class Mode {
        Create,     ///< ADD: create the directories when missing
        Existing,   ///< DEL, GC, CHECK...: the caller saw `dir` exist; create nothing new in it
    };
    /// Opens the store in `dir` with our files under `own_dir`, takes its lock within
    /// `lock_timeout` (else code 11) and removes temp files a crashed run left behind.
    /// `durable`: reserve and remove return only once the change would survive a power
    /// loss (ipam.fsync). In Existing mode a store removed meanwhile is code 5 with
    /// sys_errno ENOENT.
    DiskStore(std::string dir, std::string own_dir, std::chrono::milliseconds lock_timeout, bool durable, Mode mode);

    bool taken(const base::IpAddr& ip) override;
    std::optional<Reservation> holder(const base::IpAddr& ip) override;
    bool reserve(const base::IpAddr& ip, const Owner& owner) override;
    void remove(const Reservation& r) override;
    std::vector<base::IpAddr> indexed(const Owner& owner) override;
    std::vector<Reservation> find(const Owner& owner) override;
    std::vector<Reservation> release(const Owner& owner) override;
    std::vector<Reservation> all() override;
    std::vector<base::IpAddr> addresses() override;
    std::optional<base::IpAddr> cursor(size_t set) override;
    void set_cursor(size_t set, const base::IpAddr& ip) override;
    void remove_cursor(size_t set) override;
    void tidy_index() override;
    void check_writable() override;

    /// Directories this open (and the writes since) created, outermost first.
    const std::vector<std::string>& created() const { return created_; }
    /// Undo of an ADD that created directories (`created`, from created()): each that is
    /// empty now is removed; the store's own directory too when only its lock is left in
    /// it, lock and all (a waiter on the lock notices, see FileLock, and starts over).
    void remove_created(const std::vector<std::string>& created);

private:
    std::string path(const std::string& name) const { return dir_ + "/" + name; }
    std::string own_path(const std::string& name) const { return own_dir_ + "/" + name; }
    int owners_fd(bool create);
    int tmp_fd();
    void open_own(bool create);
    void clear_temps();
    std::optional<OwnerIndex> load_index(const Owner& owner);
    void save_index(const OwnerIndex& idx);
    void index_add(const Owner& owner, const base::IpAddr& ip);
    void index_drop(const Owner& owner, const base::IpAddr& ip);
    std::vector<Reservation> verified(const OwnerIndex& idx);
    std::vector<Reservation> scan(const Owner& owner);

    std::string dir_, own_dir_;
    std::vector<std::string> created_;
    FileLock lock_;
    base::UniqueFd dir_fd_, owners_fd_, tmp_fd_;
    unsigned seq_ = 0;
    bool durable_ = false;
};

}  // namespace ipam
