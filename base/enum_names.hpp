// An enum's names as one table of {value, name} pairs: every to_string of the
// library reads its enum's table, so a name is written once, in one place per
// enum, and a value missing from the table reads "?".
#pragma once
#include <cstddef>

namespace attnjit {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

template <class E, std::size_t N>
constexpr const char* name_in(const EnumName<E> (&names)[N], E value) noexcept {
  for (const EnumName<E>& n : names)
    if (n.value == value) return n.name;
  return "?";
}

}  // namespace attnjit
