// GELU with the exact erf, vectorisable (see gelu_erf below). Header-only so the C++ tests can
// compare it with std::erf.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace minilm {

// GELU with the exact erf, as BERT computes it: x/2 * (1 + erf(x/sqrt(2))). ggml's gelu_erf calls
// libm's scalar erff per element (16% of batch-32 time); this is branch-free arithmetic the
// compiler vectorises. erf: Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7); exp: 2^n * e^r,
// r in [-ln2/2, ln2/2], degree-7 Taylor polynomial (relative error < 1e-8).
inline float exp_nonpositive(float x) {
    x = std::max(x, -87.0f);
    const float shift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float n = (x * 1.44269504088896341f + shift) - shift;
    const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // Cody-Waite ln 2
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

inline float gelu_erf(float x) {
    const float z = std::fabs(x) * 0.70710678118654752f;
    const float t = 1.0f / (1.0f + 0.3275911f * z);
    const float poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
    const float erf_abs = 1.0f - poly * exp_nonpositive(-z * z);
    return 0.5f * x * (1.0f + std::copysign(erf_abs, x));
}

}  // namespace minilm
