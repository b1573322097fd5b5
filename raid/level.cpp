#include "raid/level.hpp"

namespace stripefs {

std::unique_ptr<Level> Level::create(const Geometry& geometry) {
  switch (geometry.level()) {
    case RaidLevel::raid0:
      return make_striped_level(geometry);
    case RaidLevel::raid1:
    case RaidLevel::raid10:
      return make_mirrored_level(geometry);
    case RaidLevel::raid5:
    case RaidLevel::raid6:
      return make_parity_level(geometry);
  }
  return nullptr;
}

}  // namespace stripefs
