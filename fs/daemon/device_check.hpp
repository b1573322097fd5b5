// Vetting a device before stripefs writes to it (mkfs.stripefs, and `stripefsctl add`): what
// other filesystem, partition table or array libblkid finds on it, and wiping those
// signatures when the user forces it.
#pragma once
#include <string>
#include "raid/result.hpp"

namespace stripefs::fs {

// The signature libblkid finds on `path` ("ext4", "gpt", "linux_raid_member", ...), or ""
// for none. Fails when `path` cannot be read and written.
Result<std::string> signature_of(const std::string& path);

// Erases every signature libblkid knows of on `path` (only after every other check passed:
// it is the first write).
Result<void> wipe_signatures(const std::string& path);

}  // namespace stripefs::fs
