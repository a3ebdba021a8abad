// libattnjit.so is the core archive linked whole; this file exists because a
// CMake library target needs at least one source of its own.
#include "attnjit/attnjit.h"
