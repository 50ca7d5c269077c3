// Ascend's reduced-precision cube arithmetic, emulated: with emulation on, the float32 operands of
// matmul-class and convolution operators are rounded to the precision the NPU's cube unit uses
// before the CPU kernel runs (accumulation stays float32, as on the cube).
//
//   HF32: float32's sign and 8-bit exponent with the mantissa cut to 11 bits, rounded to nearest,
//         ties to even (Ascend's default rounding mode 0); inf and NaN unchanged.
//   FP16: the value converted to IEEE half precision (round to nearest even; overflow to inf).
//
// Emulation is off by default (npu results equal the CPU's bit for bit). It turns on with
// VNPU_PRECISION_EMULATION=1 or when a program sets a precision knob; then torch_npu's defaults
// apply (convolutions use HF32 unless torch.npu.conv.allow_hf32 = False).
#pragma once

#include "aten/OpFacts.h"

#include <ATen/core/Tensor.h>

namespace vnpu {

enum class CubeRounding { None = 0, Hf32 = 1, Fp16 = 2 };

struct PrecisionSettings {
  bool emulate = false;
  int matmul_cube_math_type = 0;  // torch_npu.npu.CubeMathType: 0 KEEP_DTYPE ... 4 USE_FP32_ADD
  bool conv_hf32 = true;
  bool fp32_to_fp16 = false;  // ACL_PRECISION_MODE=allow_fp32_to_fp16
};

void set_precision_settings(const PrecisionSettings& settings);
// Re-derives the settings from the option store (ALLOW_MATMUL_HF32, MATMUL_CUBE_MATH_TYPE,
// ALLOW_CONV_HF32, ACL_PRECISION_MODE) after options change; emulation turns on once any of
// them is set, or with VNPU_PRECISION_EMULATION=1.
void update_precision_from_options();
PrecisionSettings precision_settings();

// How the cube operands of this operator are rounded under the current settings.
CubeRounding cube_rounding(const OpFacts& facts);

// A float32 CPU tensor with each element rounded; other dtypes are returned unchanged.
at::Tensor round_for_cube(const at::Tensor& t, CubeRounding rounding);
float round_to_hf32(float value);

}  // namespace vnpu
