// attnjit's C++ API. Link libattnjit.so; see README.md for examples.
#pragma once
#include "attnjit/batch_decode.hpp"
#include "attnjit/config.hpp"
#include "attnjit/error.hpp"
#include "attnjit/prewarm.hpp"
#include "attnjit/runtime.hpp"
#include "attnjit/batch_prefill.hpp"
#include "attnjit/merge_state.hpp"
#include "attnjit/prefill.hpp"
#include "attnjit/single_decode.hpp"
#include "attnjit/tensor.hpp"
#include "attnjit/types.hpp"
#include "attnjit/version.h"
