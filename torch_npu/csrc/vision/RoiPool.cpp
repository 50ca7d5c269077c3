// torchvision::roi_pool (max over each bin, with the argmax for the backward) and ps_roi_pool
// (position-sensitive average) on the CPU. Boxes are rounded to whole pixels.
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
  PixelBox(const T* roi, T spatial_scale, int pooled_height, int pooled_width, int inclusive,
           bool round_in_float = false) {
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
    bin_h = static_cast<T>(height) / static_cast<T>(pooled_height);
    bin_w = static_cast<T>(width) / static_cast<T>(pooled_width);
  }

  struct Range {
    int h0, h1, w0, w1;
    bool empty() const { return h1 <= h0 || w1 <= w0; }
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

void check_pool_rois(const at::Tensor& values, const at::Tensor& rois, const char* values_name) {
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, "Tensor rois should have shape as Tensor[K, 5]");
  TORCH_CHECK(values.scalar_type() == rois.scalar_type(), values_name, " and rois must have the same dtype");
}

template <typename T>
void roi_pool_forward(const T* input, const T* rois, T* output, int* argmax, int num_rois, T spatial_scale,
                      int channels, int height, int width, int pooled_height, int pooled_width) {
  for (int n = 0; n < num_rois; ++n) {
    const PixelBox<T> box(rois + n * 5, spatial_scale, pooled_height, pooled_width, 1);
    for (int ph = 0; ph < pooled_height; ++ph) {
      for (int pw = 0; pw < pooled_width; ++pw) {
        const auto r = box.bin(ph, pw, height, width);
        for (int c = 0; c < channels; ++c) {
          const T* plane = input + (static_cast<int64_t>(box.batch) * channels + c) * height * width;
          T best = r.empty() ? 0 : -FLT_MAX;  // an empty bin is 0 and passes no gradient back
          int best_at = -1;
          for (int h = r.h0; h < r.h1; ++h) {
            for (int w = r.w0; w < r.w1; ++w) {
              if (plane[h * width + w] > best) {
                best = plane[h * width + w];
                best_at = h * width + w;
              }
            }
          }
          const int64_t index = ((static_cast<int64_t>(n) * channels + c) * pooled_height + ph) * pooled_width + pw;
          output[index] = best;
          argmax[index] = best_at;
        }
      }
    }
  }
}

template <typename T>
void ps_roi_pool_forward(const T* input, const T* rois, T* output, int* channel_mapping, int num_rois,
                         T spatial_scale, int channels, int height, int width, int pooled_height, int pooled_width,
                         int channels_out) {
  for (int n = 0; n < num_rois; ++n) {
    const PixelBox<T> box(rois + n * 5, spatial_scale, pooled_height, pooled_width, 0);
    int c_in = 0;
    for (int c_out = 0; c_out < channels_out; ++c_out) {
      for (int ph = 0; ph < pooled_height; ++ph) {
        for (int pw = 0; pw < pooled_width; ++pw, ++c_in) {
          // torchvision's CPU forward clips bins to the last row and column (its backward does not).
          const auto r = box.bin(ph, pw, height - 1, width - 1);
          const T* plane = input + (static_cast<int64_t>(box.batch) * channels + c_in) * height * width;
          T sum = 0;
          for (int h = r.h0; h < r.h1; ++h) {
            for (int w = r.w0; w < r.w1; ++w) {
              sum += plane[h * width + w];
            }
          }
          const int64_t index =
              ((static_cast<int64_t>(n) * channels_out + c_out) * pooled_height + ph) * pooled_width + pw;
          const T area = (r.h1 - r.h0) * (r.w1 - r.w0);
          output[index] = r.empty() ? static_cast<T>(0) : sum / area;
          channel_mapping[index] = c_in;
        }
      }
    }
  }
}

template <typename T>
void ps_roi_pool_backward_impl(const T* grad, const int* channel_mapping, const T* rois, T* grad_input, int num_rois,
                               T spatial_scale, int channels, int height, int width, int pooled_height,
                               int pooled_width, int channels_out) {
  for (int n = 0; n < num_rois; ++n) {
    const PixelBox<T> box(rois + n * 5, spatial_scale, pooled_height, pooled_width, 0, /*round_in_float=*/true);
    for (int ph = 0; ph < pooled_height; ++ph) {
      for (int pw = 0; pw < pooled_width; ++pw) {
        const auto r = box.bin(ph, pw, height, width);
        for (int c_out = 0; c_out < channels_out; ++c_out) {
          const int64_t index =
              ((static_cast<int64_t>(n) * channels_out + c_out) * pooled_height + ph) * pooled_width + pw;
          T* plane = grad_input + (static_cast<int64_t>(box.batch) * channels + channel_mapping[index]) * height * width;
          const T area = (r.h1 - r.h0) * (r.w1 - r.w0);
          const T share = r.empty() ? static_cast<T>(0) : grad[index] / area;
          for (int h = r.h0; h < r.h1; ++h) {
            for (int w = r.w0; w < r.w1; ++w) {
              plane[h * width + w] += share;
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
  TORCH_CHECK(input.dim() == 4, "roi_pool expects a 4D input (N, C, H, W), got ", input.dim(), "D");
  check_pool_rois(input, rois, "input");
  at::Tensor output = at::zeros({rois.size(0), input.size(1), pooled_height, pooled_width}, input.options());
  at::Tensor argmax = at::zeros(output.sizes(), input.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  const at::Tensor in = input.contiguous();
  const at::Tensor boxes = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(input.scalar_type(), "roi_pool_forward_kernel", [&] {
    roi_pool_forward<scalar_t>(in.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(),
                               output.data_ptr<scalar_t>(), argmax.data_ptr<int>(), static_cast<int>(rois.size(0)),
                               static_cast<scalar_t>(spatial_scale), static_cast<int>(input.size(1)),
                               static_cast<int>(input.size(2)), static_cast<int>(input.size(3)),
                               static_cast<int>(pooled_height), static_cast<int>(pooled_width));
  });
  return {output, argmax};
}

at::Tensor roi_pool_backward(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& argmax,
                             double /*spatial_scale*/, int64_t pooled_height, int64_t pooled_width,
                             int64_t batch_size, int64_t channels, int64_t height, int64_t width) {
  check_pool_rois(grad, rois, "grad");
  at::Tensor grad_input = at::zeros({batch_size, channels, height, width}, grad.options());
  if (grad.numel() == 0) {
    return grad_input;
  }
  const at::Tensor boxes = rois.contiguous();
  const at::Tensor best = argmax.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(grad.scalar_type(), "roi_pool_backward_kernel", [&] {
    const scalar_t* g = grad.const_data_ptr<scalar_t>();
    const scalar_t* r = boxes.const_data_ptr<scalar_t>();
    const int* at_index = best.const_data_ptr<int>();
    scalar_t* out = grad_input.data_ptr<scalar_t>();
    const int64_t n_stride = grad.stride(0), c_stride = grad.stride(1), h_stride = grad.stride(2),
                  w_stride = grad.stride(3);
    for (int64_t n = 0; n < rois.size(0); ++n) {
      const int batch = static_cast<int>(r[n * 5]);
      for (int64_t c = 0; c < channels; ++c) {
        scalar_t* plane = out + (batch * channels + c) * height * width;
        const int* bins = at_index + (n * channels + c) * pooled_height * pooled_width;
        for (int64_t ph = 0; ph < pooled_height; ++ph) {
          for (int64_t pw = 0; pw < pooled_width; ++pw) {
            const int from = bins[ph * pooled_width + pw];
            if (from != -1) {
              plane[from] += g[n * n_stride + c * c_stride + ph * h_stride + pw * w_stride];
            }
          }
        }
      }
    }
  });
  return grad_input;
}

std::tuple<at::Tensor, at::Tensor> ps_roi_pool(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                                               int64_t pooled_height, int64_t pooled_width) {
  TORCH_CHECK(input.dim() == 4, "ps_roi_pool expects a 4D input (N, C, H, W), got ", input.dim(), "D");
  check_pool_rois(input, rois, "input");
  const int64_t channels = input.size(1);
  TORCH_CHECK(channels % (pooled_height * pooled_width) == 0,
              "input channels must be a multiple of pooling height * pooling width");
  const int64_t channels_out = channels / (pooled_height * pooled_width);
  at::Tensor output = at::zeros({rois.size(0), channels_out, pooled_height, pooled_width}, input.options());
  at::Tensor mapping = at::zeros(output.sizes(), input.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, mapping};
  }
  const at::Tensor in = input.contiguous();
  const at::Tensor boxes = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(input.scalar_type(), "ps_roi_pool_forward_kernel", [&] {
    ps_roi_pool_forward<scalar_t>(in.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(),
                                  output.data_ptr<scalar_t>(), mapping.data_ptr<int>(),
                                  static_cast<int>(rois.size(0)), static_cast<scalar_t>(spatial_scale),
                                  static_cast<int>(channels), static_cast<int>(input.size(2)),
                                  static_cast<int>(input.size(3)), static_cast<int>(pooled_height),
                                  static_cast<int>(pooled_width), static_cast<int>(channels_out));
  });
  return {output, mapping};
}

at::Tensor ps_roi_pool_backward(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& channel_mapping,
                                double spatial_scale, int64_t pooled_height, int64_t pooled_width, int64_t batch_size,
                                int64_t channels, int64_t height, int64_t width) {
  check_pool_rois(grad, rois, "grad");
  at::Tensor grad_input = at::zeros({batch_size, channels, height, width}, grad.options());
  if (grad.numel() == 0) {
    return grad_input;
  }
  const at::Tensor g = grad.contiguous();
  const at::Tensor boxes = rois.contiguous();
  const at::Tensor mapping = channel_mapping.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(grad.scalar_type(), "ps_roi_pool_backward_kernel", [&] {
    ps_roi_pool_backward_impl<scalar_t>(g.const_data_ptr<scalar_t>(), mapping.const_data_ptr<int>(),
                                        boxes.const_data_ptr<scalar_t>(), grad_input.data_ptr<scalar_t>(),
                                        static_cast<int>(rois.size(0)), static_cast<scalar_t>(spatial_scale),
                                        static_cast<int>(channels), static_cast<int>(height), static_cast<int>(width),
                                        static_cast<int>(pooled_height), static_cast<int>(pooled_width),
                                        static_cast<int>(channels / (pooled_height * pooled_width)));
  });
  return grad_input;
}

}  // namespace vnpu::vision
