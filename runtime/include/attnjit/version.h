#pragma once
#define ATTNJIT_VERSION_MAJOR 0
#define ATTNJIT_VERSION_MINOR 2
#define ATTNJIT_VERSION_PATCH 0
/* The C ABI: bumped when a struct or signature of attnjit.h changes incompatibly. */
#define ATTNJIT_ABI_VERSION 2
#define ATTNJIT_VERSION_NUMBER (ATTNJIT_VERSION_MAJOR * 10000 + ATTNJIT_VERSION_MINOR * 100 + ATTNJIT_VERSION_PATCH)
