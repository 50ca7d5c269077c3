// torchvision::roi_align and ps_roi_align (position-sensitive) on the CPU, with their backwards:
// each output bin averages a grid of bilinear samples of the feature map inside its part of the box.
#include "vision/Bilinear.h"
#include "vision/RoiShape.h"
#include "vision/VisionKernels.h"

#include <ATen/Dispatch.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace vnpu::vision {
namespace {

// Where a box lies on the feature map and how its bins are sampled.
template <typename T>
struct BoxGrid {
  int batch = 0;
  T start_h = 0, start_w = 0, height = 0, width = 0, bin_h = 0, bin_w = 0;
  int grid_h = 0, grid_w = 0;

  // roi_align: `aligned` shifts by half a pixel; unaligned boxes are at least 1x1.
  // ps_roi_align: always shifted, never enlarged.
  BoxGrid(const T* roi, T spatial_scale, const RoiShape& s, bool aligned, bool enlarge_small) {
    batch = static_cast<int>(roi[0]);
    const T offset = aligned ? static_cast<T>(0.5) : static_cast<T>(0.0);
    start_w = roi[1] * spatial_scale - offset;
    start_h = roi[2] * spatial_scale - offset;
    const T end_w = roi[3] * spatial_scale - offset;
    const T end_h = roi[4] * spatial_scale - offset;
    width = end_w - start_w;
    height = end_h - start_h;
    if (enlarge_small) {
      width = std::max(width, static_cast<T>(1.));
      height = std::max(height, static_cast<T>(1.));
    }
    bin_h = static_cast<T>(height) / static_cast<T>(s.pooled_height);
    bin_w = static_cast<T>(width) / static_cast<T>(s.pooled_width);
    grid_h = s.sampling_ratio > 0 ? s.sampling_ratio : static_cast<int>(std::ceil(height / s.pooled_height));
    grid_w = s.sampling_ratio > 0 ? s.sampling_ratio : static_cast<int>(std::ceil(width / s.pooled_width));
  }
  T sample_y(int ph, int iy) const {
    return start_h + ph * bin_h + static_cast<T>(iy + .5f) * bin_h / static_cast<T>(grid_h);
  }
  T sample_x(int pw, int ix) const {
    return start_w + pw * bin_w + static_cast<T>(ix + .5f) * bin_w / static_cast<T>(grid_w);
  }
  // ps_roi_align forms the bin start first, then adds the sample's offset.
  T ps_sample_y(int ph, int iy) const {
    const T bin_start = static_cast<T>(ph) * bin_h + start_h;
    return bin_start + static_cast<T>(iy + .5f) * bin_h / static_cast<T>(grid_h);
  }
  T ps_sample_x(int pw, int ix) const {
    const T bin_start = static_cast<T>(pw) * bin_w + start_w;
    return bin_start + static_cast<T>(ix + .5f) * bin_w / static_cast<T>(grid_w);
  }
};

void check_rois(const at::Tensor& values, const at::Tensor& rois, const char* values_name) {
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, "rois must have shape as Tensor[K, 5]");
  TORCH_CHECK(values.scalar_type() == rois.scalar_type(), values_name, " should have the same type as rois");
}

template <typename T>
void roi_align_forward(const T* input, const T* rois, T* output, T spatial_scale, const RoiShape& s, bool aligned) {
  // One box's sampling points: the four corners and weights are shared by every channel.
  struct Sample {
    int pos1, pos2, pos3, pos4;
    T w1, w2, w3, w4;
  };
  std::vector<Sample> samples;
  for (int n = 0; n < s.rois; ++n) {
    const BoxGrid<T> box(rois + n * 5, spatial_scale, s, aligned, !aligned);
    const T count = std::max(box.grid_h * box.grid_w, 1);
    samples.clear();
    for (int ph = 0; ph < s.pooled_height; ++ph) {
      for (int pw = 0; pw < s.pooled_width; ++pw) {
        for (int iy = 0; iy < box.grid_h; ++iy) {
          const T y = box.sample_y(ph, iy);
          for (int ix = 0; ix < box.grid_w; ++ix) {
            const BilinearCorners<T> c = bilinear_corners(s.height, s.width, y, box.sample_x(pw, ix));
            // Outside points still add 0 * input[0], as torchvision's kernel does.
            samples.push_back(c.inside ? Sample{c.y_low * s.width + c.x_low, c.y_low * s.width + c.x_high,
                                                c.y_high * s.width + c.x_low, c.y_high * s.width + c.x_high, c.w1, c.w2,
                                                c.w3, c.w4}
                                       : Sample{0, 0, 0, 0, 0, 0, 0, 0});
          }
        }
      }
    }
    for (int c = 0; c < s.channels; ++c) {
      const T* plane = input + (static_cast<int64_t>(box.batch) * s.channels + c) * s.height * s.width;
      size_t k = 0;
      for (int ph = 0; ph < s.pooled_height; ++ph) {
        for (int pw = 0; pw < s.pooled_width; ++pw) {
          T value = 0.;
          for (int i = 0; i < box.grid_h * box.grid_w; ++i, ++k) {
            const Sample& p = samples[k];
            value += p.w1 * plane[p.pos1] + p.w2 * plane[p.pos2] + p.w3 * plane[p.pos3] + p.w4 * plane[p.pos4];
          }
          value /= count;
          output[s.bin(n, c, ph, pw)] = value;
        }
      }
    }
  }
}

template <typename T>
void roi_align_backward_impl(const at::Tensor& grad, const T* rois, T* grad_input, T spatial_scale, const RoiShape& s,
                             bool aligned) {
  const T* g = grad.const_data_ptr<T>();
  const int64_t n_stride = grad.stride(0), c_stride = grad.stride(1);
  const int64_t h_stride = grad.stride(2), w_stride = grad.stride(3);
  for (int n = 0; n < s.rois; ++n) {
    const BoxGrid<T> box(rois + n * 5, spatial_scale, s, aligned, !aligned);
    const T count = box.grid_h * box.grid_w;
    for (int c = 0; c < s.channels; ++c) {
      T* plane = grad_input + (static_cast<int64_t>(box.batch) * s.channels + c) * s.height * s.width;
      for (int ph = 0; ph < s.pooled_height; ++ph) {
        for (int pw = 0; pw < s.pooled_width; ++pw) {
          const T bin_grad = g[n * n_stride + c * c_stride + ph * h_stride + pw * w_stride];
          for (int iy = 0; iy < box.grid_h; ++iy) {
            const T y = box.sample_y(ph, iy);
            for (int ix = 0; ix < box.grid_w; ++ix) {
              bilinear_scatter(plane, s.width, bilinear_corners(s.height, s.width, y, box.sample_x(pw, ix)), bin_grad,
                               count);
            }
          }
        }
      }
    }
  }
}

template <typename T>
void ps_roi_align_forward(const T* input, const T* rois, T* output, int* channel_mapping, T spatial_scale,
                          const RoiShape& s) {
  for (int n = 0; n < s.rois; ++n) {
    const BoxGrid<T> box(rois + n * 5, spatial_scale, s, true, false);
    const T count = box.grid_h * box.grid_w;
    int c_in = 0;
    for (int c_out = 0; c_out < s.channels_out; ++c_out) {
      for (int ph = 0; ph < s.pooled_height; ++ph) {
        for (int pw = 0; pw < s.pooled_width; ++pw, ++c_in) {
          const T* plane = input + (static_cast<int64_t>(box.batch) * s.channels + c_in) * s.height * s.width;
          T sum = 0;
          for (int iy = 0; iy < box.grid_h; ++iy) {
            const T y = box.ps_sample_y(ph, iy);
            for (int ix = 0; ix < box.grid_w; ++ix) {
              sum += bilinear_value(plane, s.height, s.width, y, box.ps_sample_x(pw, ix));
            }
          }
          sum /= count;
          output[s.bin(n, c_out, ph, pw)] = sum;
          channel_mapping[s.bin(n, c_out, ph, pw)] = c_in;
        }
      }
    }
  }
}

template <typename T>
void ps_roi_align_backward_impl(const T* grad, const int* channel_mapping, const T* rois, T* grad_input,
                                int64_t grad_numel, T spatial_scale, const RoiShape& s) {
  for (int64_t index = 0; index < grad_numel; ++index) {
    const int pw = static_cast<int>(index % s.pooled_width);
    const int ph = static_cast<int>((index / s.pooled_width) % s.pooled_height);
    const int n = static_cast<int>(index / s.pooled_width / s.pooled_height / s.channels_out);
    const BoxGrid<T> box(rois + n * 5, spatial_scale, s, true, false);
    const T count = box.grid_h * box.grid_w;
    T* plane =
        grad_input + (static_cast<int64_t>(box.batch) * s.channels + channel_mapping[index]) * s.height * s.width;
    for (int iy = 0; iy < box.grid_h; ++iy) {
      const T y = box.ps_sample_y(ph, iy);
      for (int ix = 0; ix < box.grid_w; ++ix) {
        bilinear_scatter(plane, s.width, bilinear_corners(s.height, s.width, y, box.ps_sample_x(pw, ix)), grad[index],
                         count);
      }
    }
  }
}

}  // namespace

at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, double spatial_scale, int64_t pooled_height,
                     int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  const RoiShape s = RoiShape::of_forward("roi_align", input, rois, pooled_height, pooled_width, sampling_ratio);
  check_rois(input, rois, "input");
  at::Tensor output = std::get<0>(pooled_outputs(input, s));
  if (output.numel() == 0) {
    return output;
  }
  const at::Tensor in = input.contiguous();
  const at::Tensor boxes = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(input.scalar_type(), "roi_align_forward_kernel", [&] {
    roi_align_forward<scalar_t>(in.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(),
                                output.data_ptr<scalar_t>(), static_cast<scalar_t>(spatial_scale), s, aligned);
  });
  return output;
}

at::Tensor roi_align_backward(const at::Tensor& grad, const at::Tensor& rois, double spatial_scale,
                              int64_t pooled_height, int64_t pooled_width, int64_t batch_size, int64_t channels,
                              int64_t height, int64_t width, int64_t sampling_ratio, bool aligned) {
  check_rois(grad, rois, "grad");
  at::Tensor grad_input = at::zeros({batch_size, channels, height, width}, grad.options());
  if (grad.numel() == 0) {
    return grad_input;
  }
  const RoiShape s(rois.size(0), channels, height, width, pooled_height, pooled_width, sampling_ratio);
  const at::Tensor boxes = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(grad.scalar_type(), "roi_align_backward_kernel", [&] {
    roi_align_backward_impl<scalar_t>(grad, boxes.const_data_ptr<scalar_t>(), grad_input.data_ptr<scalar_t>(),
                                      static_cast<scalar_t>(spatial_scale), s, aligned);
  });
  return grad_input;
}

std::tuple<at::Tensor, at::Tensor> ps_roi_align(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                                                int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio) {
  RoiShape s = RoiShape::of_forward("ps_roi_align", input, rois, pooled_height, pooled_width, sampling_ratio);
  check_rois(input, rois, "input");
  s.position_sensitive();
  auto [output, mapping] = pooled_outputs(input, s);
  if (output.numel() == 0) {
    return {output, mapping};
  }
  const at::Tensor in = input.contiguous();
  const at::Tensor boxes = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(input.scalar_type(), "ps_roi_align_forward_kernel", [&] {
    ps_roi_align_forward<scalar_t>(in.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(),
                                   output.data_ptr<scalar_t>(), mapping.data_ptr<int>(),
                                   static_cast<scalar_t>(spatial_scale), s);
  });
  return {output, mapping};
}

at::Tensor ps_roi_align_backward(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& channel_mapping,
                                 double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                                 int64_t sampling_ratio, int64_t batch_size, int64_t channels, int64_t height,
                                 int64_t width) {
  check_rois(grad, rois, "grad");
  at::Tensor grad_input = at::zeros({batch_size, channels, height, width}, grad.options());
  if (grad.numel() == 0) {
    return grad_input;
  }
  RoiShape s(rois.size(0), channels, height, width, pooled_height, pooled_width, sampling_ratio);
  s.position_sensitive();
  const at::Tensor g = grad.contiguous();
  const at::Tensor boxes = rois.contiguous();
  const at::Tensor mapping = channel_mapping.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(grad.scalar_type(), "ps_roi_align_backward_kernel", [&] {
    ps_roi_align_backward_impl<scalar_t>(g.const_data_ptr<scalar_t>(), mapping.const_data_ptr<int>(),
                                         boxes.const_data_ptr<scalar_t>(), grad_input.data_ptr<scalar_t>(), g.numel(),
                                         static_cast<scalar_t>(spatial_scale), s);
  });
  return grad_input;
}

}  // namespace vnpu::vision
