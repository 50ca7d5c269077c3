// torchvision::roi_pool (max over each bin, with the argmax for the backward) and ps_roi_pool
// (position-sensitive average) on the CPU. Boxes are rounded to whole pixels.
#include "vision/RoiShape.h"
#include "vision/VisionKernels.h"

#include <ATen/Dispatch.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace vnpu::vision {
namespace {

// A box rounded to pixels and the pixel range of one of its bins.
template <typename T>
struct PixelBox {
  int batch, start_h, start_w;
  T bin_h, bin_w;

  // roi_pool counts both end pixels (+1); ps_roi_pool does not. torchvision's ps_roi_pool backward
  // rounds the scaled corners in single precision (roundf), its forwards in T.
  PixelBox(const T* roi, T spatial_scale, const RoiShape& s, int inclusive, bool round_in_float = false) {
    const auto to_pixel = [&](T v) {
      return static_cast<int>(round_in_float ? std::roundf(static_cast<float>(v)) : std::round(v));
    };
    batch = static_cast<int>(roi[0]);
    start_w = to_pixel(roi[1] * spatial_scale);
    start_h = to_pixel(roi[2] * spatial_scale);
    const int end_w = to_pixel(roi[3] * spatial_scale);
    const int end_h = to_pixel(roi[4] * spatial_scale);
    const int width = std::max(end_w - start_w + inclusive, 1);
    const int height = std::max(end_h - start_h + inclusive, 1);
    bin_h = static_cast<T>(height) / static_cast<T>(s.pooled_height);
    bin_w = static_cast<T>(width) / static_cast<T>(s.pooled_width);
  }

  struct Range {
    int h0, h1, w0, w1;
    bool empty() const {
      return h1 <= h0 || w1 <= w0;
    }
    T area() const {
      return (h1 - h0) * (w1 - w0);
    }
  };
  // The bin's pixels, clipped to [0, limit_h) x [0, limit_w).
  Range bin(int ph, int pw, int limit_h, int limit_w) const {
    int h0 = static_cast<int>(std::floor(static_cast<T>(ph) * bin_h));
    int w0 = static_cast<int>(std::floor(static_cast<T>(pw) * bin_w));
    int h1 = static_cast<int>(std::ceil(static_cast<T>(ph + 1) * bin_h));
    int w1 = static_cast<int>(std::ceil(static_cast<T>(pw + 1) * bin_w));
    h0 = std::min(std::max(h0 + start_h, 0), limit_h);
    h1 = std::min(std::max(h1 + start_h, 0), limit_h);
    w0 = std::min(std::max(w0 + start_w, 0), limit_w);
    w1 = std::min(std::max(w1 + start_w, 0), limit_w);
    return {h0, h1, w0, w1};
  }
};

void check_rois(const at::Tensor& values, const at::Tensor& rois, const char* values_name) {
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, "Tensor rois should have shape as Tensor[K, 5]");
  TORCH_CHECK(values.scalar_type() == rois.scalar_type(), values_name, " and rois must have the same dtype");
}

template <typename T>
void roi_pool_forward(const T* input, const T* rois, T* output, int* argmax, T spatial_scale, const RoiShape& s) {
  for (int n = 0; n < s.rois; ++n) {
    const PixelBox<T> box(rois + n * 5, spatial_scale, s, 1);
    for (int ph = 0; ph < s.pooled_height; ++ph) {
      for (int pw = 0; pw < s.pooled_width; ++pw) {
        const auto r = box.bin(ph, pw, s.height, s.width);
        for (int c = 0; c < s.channels; ++c) {
          const T* plane = input + (static_cast<int64_t>(box.batch) * s.channels + c) * s.height * s.width;
          T best = r.empty() ? 0 : -FLT_MAX;  // an empty bin is 0 and passes no gradient back
          int best_at = -1;
          for (int h = r.h0; h < r.h1; ++h) {
            for (int w = r.w0; w < r.w1; ++w) {
              if (plane[h * s.width + w] > best) {
                best = plane[h * s.width + w];
                best_at = h * s.width + w;
              }
            }
          }
          output[s.bin(n, c, ph, pw)] = best;
          argmax[s.bin(n, c, ph, pw)] = best_at;
        }
      }
    }
  }
}

template <typename T>
void roi_pool_backward_impl(const at::Tensor& grad, const T* rois, const int* argmax, T* grad_input,
                            const RoiShape& s) {
  const T* g = grad.const_data_ptr<T>();
  const int64_t n_stride = grad.stride(0), c_stride = grad.stride(1);
  const int64_t h_stride = grad.stride(2), w_stride = grad.stride(3);
  for (int n = 0; n < s.rois; ++n) {
    const int batch = static_cast<int>(rois[n * 5]);
    for (int c = 0; c < s.channels; ++c) {
      T* plane = grad_input + (static_cast<int64_t>(batch) * s.channels + c) * s.height * s.width;
      for (int ph = 0; ph < s.pooled_height; ++ph) {
        for (int pw = 0; pw < s.pooled_width; ++pw) {
          const int from = argmax[s.bin(n, c, ph, pw)];
          if (from != -1) {
            plane[from] += g[n * n_stride + c * c_stride + ph * h_stride + pw * w_stride];
          }
        }
      }
    }
  }
}

template <typename T>
void ps_roi_pool_forward(const T* input, const T* rois, T* output, int* channel_mapping, T spatial_scale,
                         const RoiShape& s) {
  for (int n = 0; n < s.rois; ++n) {
    const PixelBox<T> box(rois + n * 5, spatial_scale, s, 0);
    int c_in = 0;
    for (int c_out = 0; c_out < s.channels_out; ++c_out) {
      for (int ph = 0; ph < s.pooled_height; ++ph) {
        for (int pw = 0; pw < s.pooled_width; ++pw, ++c_in) {
          // torchvision's CPU forward clips bins to the last row and column (its backward does not).
          const auto r = box.bin(ph, pw, s.height - 1, s.width - 1);
          const T* plane = input + (static_cast<int64_t>(box.batch) * s.channels + c_in) * s.height * s.width;
          T sum = 0;
          for (int h = r.h0; h < r.h1; ++h) {
            for (int w = r.w0; w < r.w1; ++w) {
              sum += plane[h * s.width + w];
            }
          }
          output[s.bin(n, c_out, ph, pw)] = r.empty() ? static_cast<T>(0) : sum / r.area();
          channel_mapping[s.bin(n, c_out, ph, pw)] = c_in;
        }
      }
    }
  }
}

template <typename T>
void ps_roi_pool_backward_impl(const T* grad, const int* channel_mapping, const T* rois, T* grad_input, T spatial_scale,
                               const RoiShape& s) {
  for (int n = 0; n < s.rois; ++n) {
    const PixelBox<T> box(rois + n * 5, spatial_scale, s, 0, /*round_in_float=*/true);
    for (int ph = 0; ph < s.pooled_height; ++ph) {
      for (int pw = 0; pw < s.pooled_width; ++pw) {
        const auto r = box.bin(ph, pw, s.height, s.width);
        for (int c_out = 0; c_out < s.channels_out; ++c_out) {
          const int64_t index = s.bin(n, c_out, ph, pw);
          T* plane =
              grad_input + (static_cast<int64_t>(box.batch) * s.channels + channel_mapping[index]) * s.height * s.width;
          const T share = r.empty() ? static_cast<T>(0) : grad[index] / r.area();
          for (int h = r.h0; h < r.h1; ++h) {
            for (int w = r.w0; w < r.w1; ++w) {
              plane[h * s.width + w] += share;
            }
          }
        }
      }
    }
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> roi_pool(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                                            int64_t pooled_height, int64_t pooled_width) {
  const RoiShape s = RoiShape::of_forward("roi_pool", input, rois, pooled_height, pooled_width);
  check_rois(input, rois, "input");
  auto [output, argmax] = pooled_outputs(input, s);
  if (output.numel() == 0) {
    return {output, argmax};
  }
  const at::Tensor in = input.contiguous();
  const at::Tensor boxes = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(input.scalar_type(), "roi_pool_forward_kernel", [&] {
    roi_pool_forward<scalar_t>(in.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(),
                               output.data_ptr<scalar_t>(), argmax.data_ptr<int>(),
                               static_cast<scalar_t>(spatial_scale), s);
  });
  return {output, argmax};
}

at::Tensor roi_pool_backward(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& argmax,
                             double /*spatial_scale*/, int64_t pooled_height, int64_t pooled_width, int64_t batch_size,
                             int64_t channels, int64_t height, int64_t width) {
  check_rois(grad, rois, "grad");
  at::Tensor grad_input = at::zeros({batch_size, channels, height, width}, grad.options());
  if (grad.numel() == 0) {
    return grad_input;
  }
  const RoiShape s(rois.size(0), channels, height, width, pooled_height, pooled_width);
  const at::Tensor boxes = rois.contiguous();
  const at::Tensor best = argmax.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(grad.scalar_type(), "roi_pool_backward_kernel", [&] {
    roi_pool_backward_impl<scalar_t>(grad, boxes.const_data_ptr<scalar_t>(), best.const_data_ptr<int>(),
                                     grad_input.data_ptr<scalar_t>(), s);
  });
  return grad_input;
}

std::tuple<at::Tensor, at::Tensor> ps_roi_pool(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                                               int64_t pooled_height, int64_t pooled_width) {
  RoiShape s = RoiShape::of_forward("ps_roi_pool", input, rois, pooled_height, pooled_width);
  check_rois(input, rois, "input");
  s.position_sensitive();
  auto [output, mapping] = pooled_outputs(input, s);
  if (output.numel() == 0) {
    return {output, mapping};
  }
  const at::Tensor in = input.contiguous();
  const at::Tensor boxes = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(input.scalar_type(), "ps_roi_pool_forward_kernel", [&] {
    ps_roi_pool_forward<scalar_t>(in.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(),
                                  output.data_ptr<scalar_t>(), mapping.data_ptr<int>(),
                                  static_cast<scalar_t>(spatial_scale), s);
  });
  return {output, mapping};
}

at::Tensor ps_roi_pool_backward(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& channel_mapping,
                                double spatial_scale, int64_t pooled_height, int64_t pooled_width, int64_t batch_size,
                                int64_t channels, int64_t height, int64_t width) {
  check_rois(grad, rois, "grad");
  at::Tensor grad_input = at::zeros({batch_size, channels, height, width}, grad.options());
  if (grad.numel() == 0) {
    return grad_input;
  }
  RoiShape s(rois.size(0), channels, height, width, pooled_height, pooled_width);
  s.position_sensitive();
  const at::Tensor g = grad.contiguous();
  const at::Tensor boxes = rois.contiguous();
  const at::Tensor mapping = channel_mapping.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(grad.scalar_type(), "ps_roi_pool_backward_kernel", [&] {
    ps_roi_pool_backward_impl<scalar_t>(g.const_data_ptr<scalar_t>(), mapping.const_data_ptr<int>(),
                                        boxes.const_data_ptr<scalar_t>(), grad_input.data_ptr<scalar_t>(),
                                        static_cast<scalar_t>(spatial_scale), s);
  });
  return grad_input;
}

}  // namespace vnpu::vision
