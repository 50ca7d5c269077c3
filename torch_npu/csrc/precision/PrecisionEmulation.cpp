#include "precision/PrecisionEmulation.h"

#include "aten/OpHooks.h"
#include "runtime/Options.h"

#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace vnpu {
namespace {

std::mutex g_mu;
PrecisionSettings g_settings;
std::atomic<int> g_matmul{0};  // CubeRounding for matmul-class operators while emulating
std::atomic<int> g_conv{0};    // CubeRounding for convolutions while emulating

CubeRounding matmul_rounding(const PrecisionSettings& s) {
  if (s.fp32_to_fp16) {
    return CubeRounding::Fp16;
  }
  switch (s.matmul_cube_math_type) {
    case 1:  // ALLOW_FP32_DOWN_PRECISION: HF32 on Atlas A2/A3
    case 3:  // USE_HF32
      return CubeRounding::Hf32;
    case 2:  // USE_FP16
      return CubeRounding::Fp16;
    default:  // KEEP_DTYPE, USE_FP32_ADD
      return CubeRounding::None;
  }
}

}  // namespace

void set_precision_settings(const PrecisionSettings& settings) {
  std::lock_guard<std::mutex> guard(g_mu);
  if (settings.emulate != g_settings.emulate) {
    g_slow_path_users.fetch_add(settings.emulate ? 1 : -1);
  }
  g_settings = settings;
  g_matmul = static_cast<int>(settings.emulate ? matmul_rounding(settings) : CubeRounding::None);
  g_conv = static_cast<int>(!settings.emulate       ? CubeRounding::None
                            : settings.fp32_to_fp16 ? CubeRounding::Fp16
                            : settings.conv_hf32    ? CubeRounding::Hf32
                                                    : CubeRounding::None);
}

void update_precision_from_options() {
  const auto matmul_hf32 = get_option("ALLOW_MATMUL_HF32");
  const auto cube_math = get_option("MATMUL_CUBE_MATH_TYPE");
  const auto conv_hf32 = get_option("ALLOW_CONV_HF32");
  const auto precision_mode = get_option("ACL_PRECISION_MODE");
  const char* env = std::getenv("VNPU_PRECISION_EMULATION");
  PrecisionSettings s;
  s.emulate = (env != nullptr && std::string(env) == "1") || matmul_hf32 || cube_math || conv_hf32 || precision_mode;
  if (cube_math) {
    s.matmul_cube_math_type = std::atoi(cube_math->c_str());
  } else if (matmul_hf32) {
    s.matmul_cube_math_type = *matmul_hf32 == "enable" ? 1 : 0;
  }
  s.conv_hf32 = !conv_hf32 || conv_hf32->empty() || *conv_hf32 == "enable";
  s.fp32_to_fp16 = precision_mode && *precision_mode == "allow_fp32_to_fp16";
  set_precision_settings(s);
}

PrecisionSettings precision_settings() {
  std::lock_guard<std::mutex> guard(g_mu);
  return g_settings;
}

CubeRounding cube_rounding(const OpFacts& facts) {
  switch (facts.cube_class) {
    case CubeClass::Matmul: return static_cast<CubeRounding>(g_matmul.load(std::memory_order_relaxed));
    case CubeClass::Convolution: return static_cast<CubeRounding>(g_conv.load(std::memory_order_relaxed));
    default: return CubeRounding::None;
  }
}

float round_to_hf32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u) {
    return value;  // inf and NaN keep their bits
  }
  // Keep 11 of the 23 mantissa bits: add half of the dropped range, plus one when the kept part is
  // odd (ties to even), then clear the 12 dropped bits. A carry into the exponent is correct
  // rounding (up to the next binade, or to inf past the largest finite value).
  const uint32_t kept_lsb = (bits >> 12) & 1u;
  bits += 0x7ffu + kept_lsb;
  bits &= ~0xfffu;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

at::Tensor round_for_cube(const at::Tensor& t, CubeRounding rounding) {
  if (rounding == CubeRounding::None || !t.defined() || t.scalar_type() != at::kFloat) {
    return t;
  }
  if (rounding == CubeRounding::Fp16) {
    return t.to(at::kHalf).to(at::kFloat);
  }
  at::Tensor src = t.contiguous();
  at::Tensor out = at::empty_like(src);
  const float* in = src.const_data_ptr<float>();
  float* dst = out.mutable_data_ptr<float>();
  at::parallel_for(0, src.numel(), 32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      dst[i] = round_to_hf32(in[i]);
    }
  });
  return out;
}

}  // namespace vnpu
