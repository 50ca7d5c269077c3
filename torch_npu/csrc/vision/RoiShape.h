// What the RoI kernels (roi_align, roi_pool and their position-sensitive forms) share: the sizes of a
// call, the output pair (values, int32 index map) and the position-sensitive channel rule.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace vnpu::vision {

struct RoiShape {
  int rois = 0, channels = 0, height = 0, width = 0;
  int pooled_height = 0, pooled_width = 0, sampling_ratio = 0;
  int channels_out = 0;  // output channels: `channels`, or channels / bins when position-sensitive

  RoiShape(int64_t rois_, int64_t channels_, int64_t height_, int64_t width_, int64_t pooled_height_,
           int64_t pooled_width_, int64_t sampling_ratio_ = 0)
      : rois(static_cast<int>(rois_)),
        channels(static_cast<int>(channels_)),
        height(static_cast<int>(height_)),
        width(static_cast<int>(width_)),
        pooled_height(static_cast<int>(pooled_height_)),
        pooled_width(static_cast<int>(pooled_width_)),
        sampling_ratio(static_cast<int>(sampling_ratio_)),
        channels_out(channels) {}

  // The forward's sizes: the feature map `input` [N, C, H, W] and `rois` [K, 5].
  static RoiShape of_forward(const char* op, const at::Tensor& input, const at::Tensor& rois, int64_t pooled_height,
                             int64_t pooled_width, int64_t sampling_ratio = 0) {
    TORCH_CHECK(input.dim() == 4, op, " expects a 4D input (N, C, H, W), got ", input.dim(), "D");
    return RoiShape(rois.size(0), input.size(1), input.size(2), input.size(3), pooled_height, pooled_width,
                    sampling_ratio);
  }

  // Position-sensitive pooling: output channel c, bin (ph, pw) reads input channel (c * PH + ph) * PW + pw.
  RoiShape& position_sensitive() {
    const int bins = pooled_height * pooled_width;
    TORCH_CHECK(bins > 0 && channels % bins == 0,
                "input channels must be a multiple of pooling height * pooling width");
    channels_out = channels / bins;
    return *this;
  }

  int64_t bin(int n, int c, int ph, int pw) const {
    return ((static_cast<int64_t>(n) * channels_out + c) * pooled_height + ph) * pooled_width + pw;
  }
};

// The zero-filled outputs of a forward: values [K, C_out, PH, PW] and an int32 map of the same shape.
inline std::tuple<at::Tensor, at::Tensor> pooled_outputs(const at::Tensor& input, const RoiShape& s) {
  at::Tensor values = at::zeros({s.rois, s.channels_out, s.pooled_height, s.pooled_width}, input.options());
  return {values, at::zeros(values.sizes(), input.options().dtype(at::kInt))};
}

}  // namespace vnpu::vision
