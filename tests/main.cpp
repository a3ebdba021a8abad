// Catch2 (v2, Debian's package) entry point.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
