#include "journal/open_array.hpp"

#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "journal/journal_log.hpp"

namespace stripefs {

OpenOptions open_options(const ArraySetup& setup) {
  OpenOptions options;
  options.force = setup.force;
  options.log_partial_stripes = setup.log_partial_stripes;
  options.speed_min = setup.speed_min;
  options.speed_max = setup.speed_max;
  use_bitmap(options, setup.bitmap_clear_delay);
  use_stripe_journal(options, setup.journal_device, setup.journal_idle_checkpoint);
  return options;
}

Result<OpenedArray> open_array(std::span<Member* const> members, const ArraySetup& setup) {
  auto array = Array::open(members, open_options(setup));
  if (!array) return fail(array.error());
  FixedBuffer parity;
  const std::span<std::byte> arena = (*array)->volume().parity_arena();
  if (setup.engine != nullptr && !arena.empty()) {
    auto registered = setup.engine->register_buffer(arena.data(), arena.size());
    if (registered) {
      parity = std::move(*registered);
    } else {
      journal_log().warn(
          "parity buffers not registered with io_uring ({}); parity goes out as "
          "ordinary writes",
          registered.error().message);
    }
  }
  return OpenedArray(std::move(*array), std::move(parity));
}

Result<void> OpenedArray::close() {
  if (!array_) return {};
  return array_->close();
}

void OpenedArray::reset() {
  parity_ = FixedBuffer();
  array_.reset();
}

}  // namespace stripefs
