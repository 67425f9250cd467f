// Catch2 v2 main() shared by all tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
