// File: banyan/version.h
// -----------------------------------------------------------------------------
// The library's version and what this build of it contains. Thread-safe: every
// function here only reads constants fixed at build time.
#ifndef BANYAN_VERSION_H_
#define BANYAN_VERSION_H_

#include <string_view>

namespace banyan {

// "MAJOR.MINOR.PATCH" of this build, e.g. "0.1.0".
std::string_view Version();

// True when this build contains the CUDA kernels and the CUDA backend
// (configured with BANYAN_CUDA=ON). A CPU-only build still runs everything on
// the CPU backend.
bool BuiltWithCuda();

}  // namespace banyan

#endif  // BANYAN_VERSION_H_
