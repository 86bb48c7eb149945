// The reservation store the allocator works on, and the reservation file format.
// Every call is made with the store's lock held, so a check followed by a change is
// race-free against other topocni processes and the reference plugin alike.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipam/host_local.h"

namespace ipam {

/// A reservation file's exact bytes: TrimSpace(containerID) "\r\n" ifname, no newline.
std::string reservation_content(const Owner& o);
/// Reads a reservation file's bytes as the reference matches them (TrimSpace'd). No
/// "\r\n" means a legacy id-only file (empty ifname); an empty file gives empty fields.
Reservation parse_reservation(const base::IpAddr& ip, std::string_view content);
/// The reservation was written for exactly this owner.
bool held_by(const Reservation& r, const Owner& o);
/// A legacy id-only reservation of the owner's container (the reference's fallback match).
bool legacy_of(const Reservation& r, const Owner& o);

class Store {
public:
    virtual ~Store() = default;

    /// Whether some reservation exists for `ip`; does not read it.
    virtual bool taken(const base::IpAddr& ip) = 0;
    /// The reservation of `ip`; nullopt when the address is free.
    virtual std::optional<Reservation> holder(const base::IpAddr& ip) = 0;
    /// Reserves `ip` for `owner`; false when someone already holds it.
    virtual bool reserve(const base::IpAddr& ip, const Owner& owner) = 0;
    /// Removes `r` if the address is still held exactly as `r` says.
    virtual void remove(const Reservation& r) = 0;
    /// Addresses the owner index lists for `owner`, checked against their files. Never
    /// a full scan, so reservations made by the reference plugin are not seen here.
    virtual std::vector<base::IpAddr> indexed(const Owner& owner) = 0;
    /// Every reservation of `owner`, legacy id-only ones included.
    virtual std::vector<Reservation> find(const Owner& owner) = 0;
    /// Removes what find(owner) returns and forgets the owner; returns it.
    virtual std::vector<Reservation> release(const Owner& owner) = 0;
    /// Every reservation, in address order.
    virtual std::vector<Reservation> all() = 0;
    /// Every reserved address, in order, without reading the reservations.
    virtual std::vector<base::IpAddr> addresses() = 0;
    /// The round-robin cursor of range set `set`; nullopt when missing or garbage.
    virtual std::optional<base::IpAddr> cursor(size_t set) = 0;
    virtual void set_cursor(size_t set, const base::IpAddr& ip) = 0;
    /// Removes the cursor of range set `set` (it did not exist before an undone allocation).
    virtual void remove_cursor(size_t set) = 0;
    /// Drops owner-index entries that no longer match a reservation.
    virtual void tidy_index() {}
    /// Throws when a reservation could not be written right now.
    virtual void check_writable() {}
};

}  // namespace ipam
