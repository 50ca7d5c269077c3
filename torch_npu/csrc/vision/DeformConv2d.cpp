// torchvision::deform_conv2d on the CPU: every kernel tap samples the input at its offset position
// (bilinear, optionally scaled by a mask), the samples form a column matrix, and a matrix product
// with the weights per group gives the output. Batches are processed in blocks of images as
// torchvision does, so the matrix products have the same shapes (and the same results).
#include "vision/VisionKernels.h"

#include <ATen/Dispatch.h>

#include <algorithm>
#include <cmath>

namespace vnpu::vision {
namespace {

constexpr int kMaxImagesPerBlock = 32;

// torchvision's block size: the largest divisor of the batch up to min(batch / 2, 32), else 1.
int images_per_block(int batch) {
  for (int k = std::min(batch / 2, kMaxImagesPerBlock); k > 1; --k) {
    if (batch % k == 0) {
      return k;
    }
  }
  return 1;
}

struct Geometry {
  int channels, height, width;  // input
  int kernel_h, kernel_w;       // weight taps
  int stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int out_h, out_w;
  int block;  // images per block
  int offset_groups;
  bool use_mask;
};

// Bilinear sample with zero padding outside the map (deformable convolution's rule).
template <typename T>
T sample(const T* plane, int height, int width, T h, T w) {
  if (h <= -1 || height <= h || w <= -1 || width <= w) {
    return 0;
  }
  const int h_low = static_cast<int>(std::floor(h));
  const int w_low = static_cast<int>(std::floor(w));
  const int h_high = h_low + 1;
  const int w_high = w_low + 1;
  const T lh = h - h_low;
  const T lw = w - w_low;
  const T hh = 1 - lh;
  const T hw = 1 - lw;
  const T v1 = (h_low >= 0 && w_low >= 0) ? plane[h_low * width + w_low] : T(0);
  const T v2 = (h_low >= 0 && w_high <= width - 1) ? plane[h_low * width + w_high] : T(0);
  const T v3 = (h_high <= height - 1 && w_low >= 0) ? plane[h_high * width + w_low] : T(0);
  const T v4 = (h_high <= height - 1 && w_high <= width - 1) ? plane[h_high * width + w_high] : T(0);
  const T w1 = hh * hw, w2 = hh * lw, w3 = lh * hw, w4 = lh * lw;
  return w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4;
}

// Offsets of one image and offset group: [kernel_h * kernel_w * 2, out_h, out_w] (dy, dx per tap);
// the mask: [kernel_h * kernel_w, out_h, out_w].
template <typename T>
struct TapField {
  const T* offset;
  const T* mask;
  int out_h, out_w;
  T dy(int tap, int y, int x) const {
    return offset[((2 * tap) * out_h + y) * out_w + x];
  }
  T dx(int tap, int y, int x) const {
    return offset[((2 * tap + 1) * out_h + y) * out_w + x];
  }
  T scale(int tap, int y, int x) const {
    return mask != nullptr ? mask[(tap * out_h + y) * out_w + x] : T(1);
  }
};

template <typename T>
TapField<T> taps_of(const Geometry& g, const T* offset, const T* mask, int image, int group) {
  const int64_t field = static_cast<int64_t>(image) * g.offset_groups + group;
  const int64_t plane = static_cast<int64_t>(g.out_h) * g.out_w;
  return {offset + field * 2 * g.kernel_h * g.kernel_w * plane,
          g.use_mask ? mask + field * g.kernel_h * g.kernel_w * plane : nullptr, g.out_h, g.out_w};
}

// columns[(c * kh + i) * kw + j][(b * out_h + y) * out_w + x] = mask * input_b,c(sampled at the tap)
template <typename T>
void im2col(const Geometry& g, const T* input, const T* offset, const T* mask, T* columns) {
  const int64_t plane = static_cast<int64_t>(g.out_h) * g.out_w;
  const int64_t row_length = g.block * plane;
  const int per_group = g.channels / g.offset_groups;
  for (int c = 0; c < g.channels; ++c) {
    for (int b = 0; b < g.block; ++b) {
      const T* in = input + (static_cast<int64_t>(b) * g.channels + c) * g.height * g.width;
      const TapField<T> field = taps_of(g, offset, mask, b, c / per_group);
      for (int y = 0; y < g.out_h; ++y) {
        for (int x = 0; x < g.out_w; ++x) {
          T* out =
              columns + static_cast<int64_t>(c) * g.kernel_h * g.kernel_w * row_length + b * plane + y * g.out_w + x;
          for (int i = 0; i < g.kernel_h; ++i) {
            for (int j = 0; j < g.kernel_w; ++j) {
              const int tap = i * g.kernel_w + j;
              const T at_y = (y * g.stride_h - g.pad_h) + i * g.dilation_h + field.dy(tap, y, x);
              const T at_x = (x * g.stride_w - g.pad_w) + j * g.dilation_w + field.dx(tap, y, x);
              *out = field.scale(tap, y, x) * sample(in, g.height, g.width, at_y, at_x);
              out += row_length;
            }
          }
        }
      }
    }
  }
}

// The transpose of im2col: spreads column gradients back onto the input pixels.
template <typename T>
void col2im(const Geometry& g, const T* columns, const T* offset, const T* mask, T* grad_input) {
  const int per_group = g.channels / g.offset_groups;
  int64_t index = 0;
  for (int c = 0; c < g.channels; ++c) {
    for (int i = 0; i < g.kernel_h; ++i) {
      for (int j = 0; j < g.kernel_w; ++j) {
        const int tap = i * g.kernel_w + j;
        for (int b = 0; b < g.block; ++b) {
          const TapField<T> field = taps_of(g, offset, mask, b, c / per_group);
          T* plane = grad_input + (static_cast<int64_t>(b) * g.channels + c) * g.height * g.width;
          for (int y = 0; y < g.out_h; ++y) {
            for (int x = 0; x < g.out_w; ++x, ++index) {
              const T scale = field.scale(tap, y, x);
              const T at_y = (y * g.stride_h - g.pad_h) + i * g.dilation_h + field.dy(tap, y, x);
              const T at_x = (x * g.stride_w - g.pad_w) + j * g.dilation_w + field.dx(tap, y, x);
              for (int dy = -1; dy <= 1; ++dy) {
                for (int dx = -1; dx <= 1; ++dx) {
                  const int py = static_cast<int>(at_y) + dy;
                  const int px = static_cast<int>(at_x) + dx;
                  if (0 <= py && py < g.height && 0 <= px && px < g.width && std::abs(at_y - py) < 1 &&
                      std::abs(at_x - px) < 1) {
                    const T weight = (1 - std::abs(at_y - py)) * (1 - std::abs(at_x - px));
                    plane[py * g.width + px] += scale * weight * columns[index];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// d(sample)/d(offset) along y or x at (y, x).
template <typename T>
T coordinate_weight(const T* plane, int height, int width, T y, T x, bool along_y) {
  const int y_l = static_cast<int>(std::floor(y));
  const int x_l = static_cast<int>(std::floor(x));
  const int y_h = y_l + 1;
  const int x_h = x_l + 1;
  const bool in_y_l = 0 <= y_l && y_l < height, in_y_h = 0 <= y_h && y_h < height;
  const bool in_x_l = 0 <= x_l && x_l < width, in_x_h = 0 <= x_h && x_h < width;
  const T zero = 0;
  const T v_yx = (in_y_l && in_x_l) ? plane[y_l * width + x_l] : zero;
  const T v_yX = (in_y_l && in_x_h) ? plane[y_l * width + x_h] : zero;
  const T v_Yx = (in_y_h && in_x_l) ? plane[y_h * width + x_l] : zero;
  const T v_YX = (in_y_h && in_x_h) ? plane[y_h * width + x_h] : zero;
  if (along_y) {
    const T fx = x - x_l;
    return fx * (v_YX - v_yX) + (1 - fx) * (v_Yx - v_yx);
  }
  const T fy = y - y_l;
  return fy * (v_YX - v_Yx) + (1 - fy) * (v_yX - v_yx);
}

// Gradients of the offsets (and of the mask) of one block of images.
template <typename T>
void col2im_coordinates(const Geometry& g, const T* columns, const T* input, const T* offset, const T* mask,
                        T* grad_offset, T* grad_mask) {
  const int taps = g.kernel_h * g.kernel_w;
  const int per_group = g.channels / g.offset_groups;
  const int64_t plane = static_cast<int64_t>(g.out_h) * g.out_w;
  const int64_t row_length = g.block * plane;
  int64_t index = 0;  // over [block, offset_groups * taps * 2, out_h, out_w]
  for (int b = 0; b < g.block; ++b) {
    for (int group = 0; group < g.offset_groups; ++group) {
      const TapField<T> field = taps_of(g, offset, mask, b, group);
      const T* first_channel =
          input + (static_cast<int64_t>(b) * g.offset_groups + group) * per_group * g.height * g.width;
      const T* group_columns = columns + static_cast<int64_t>(group) * per_group * taps * row_length;
      for (int component = 0; component < 2 * taps; ++component) {
        const int tap = component / 2;
        const int i = tap / g.kernel_w, j = tap % g.kernel_w;
        const bool along_y = component % 2 == 0;
        for (int y = 0; y < g.out_h; ++y) {
          for (int x = 0; x < g.out_w; ++x, ++index) {
            T offset_grad = 0;
            T mask_grad = 0;
            const T scale = field.scale(tap, y, x);
            const T at_y = (y * g.stride_h - g.pad_h) + i * g.dilation_h + field.dy(tap, y, x);
            const T at_x = (x * g.stride_w - g.pad_w) + j * g.dilation_w + field.dx(tap, y, x);
            const T* channel = first_channel;
            for (int c = 0; c < per_group; ++c, channel += g.height * g.width) {
              const T column =
                  group_columns[(static_cast<int64_t>(c) * taps + tap) * row_length + b * plane + y * g.out_w + x];
              const T weight = coordinate_weight(channel, g.height, g.width, at_y, at_x, along_y);
              offset_grad += scale * weight * column;
              if (g.use_mask && along_y) {
                mask_grad += column * sample(channel, g.height, g.width, at_y, at_x);
              }
            }
            grad_offset[index] = offset_grad;
            if (g.use_mask && along_y) {
              grad_mask[((static_cast<int64_t>(b) * g.offset_groups + group) * taps + tap) * plane + y * g.out_w + x] =
                  mask_grad;
            }
          }
        }
      }
    }
  }
}

Geometry geometry_of(const at::Tensor& input, const at::Tensor& weight, int64_t stride_h, int64_t stride_w,
                     int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w, int64_t offset_groups,
                     bool use_mask) {
  Geometry g{};
  g.channels = static_cast<int>(input.size(1));
  g.height = static_cast<int>(input.size(2));
  g.width = static_cast<int>(input.size(3));
  g.kernel_h = static_cast<int>(weight.size(2));
  g.kernel_w = static_cast<int>(weight.size(3));
  g.stride_h = static_cast<int>(stride_h);
  g.stride_w = static_cast<int>(stride_w);
  g.pad_h = static_cast<int>(pad_h);
  g.pad_w = static_cast<int>(pad_w);
  g.dilation_h = static_cast<int>(dilation_h);
  g.dilation_w = static_cast<int>(dilation_w);
  g.out_h = (g.height + 2 * g.pad_h - (g.dilation_h * (g.kernel_h - 1) + 1)) / g.stride_h + 1;
  g.out_w = (g.width + 2 * g.pad_w - (g.dilation_w * (g.kernel_w - 1) + 1)) / g.stride_w + 1;
  g.block = images_per_block(static_cast<int>(input.size(0)));
  g.offset_groups = static_cast<int>(offset_groups);
  g.use_mask = use_mask;
  return g;
}

void check_arguments(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offset,
                     const at::Tensor& mask, const Geometry& g, int64_t groups) {
  TORCH_CHECK(input.dim() == 4, "deform_conv2d: input must be 4D, got ", input.dim(), "D");
  TORCH_CHECK(offset.dim() == 4, "deform_conv2d: offset must be 4D, got ", offset.dim(), "D");
  TORCH_CHECK(!g.use_mask || mask.dim() == 4, "deform_conv2d: mask must be 4D, got ", mask.dim(), "D");
  TORCH_CHECK(weight.dim() == 4, "deform_conv2d: weight must be 4D, got ", weight.dim(), "D");
  TORCH_CHECK(g.kernel_h > 0 && g.kernel_w > 0, "weight_h: ", g.kernel_h, " weight_w: ", g.kernel_w);
  TORCH_CHECK(g.stride_h > 0 && g.stride_w > 0, "stride_h: ", g.stride_h, " stride_w: ", g.stride_w);
  TORCH_CHECK(g.pad_h >= 0 && g.pad_w >= 0, "pad_h: ", g.pad_h, " pad_w: ", g.pad_w);
  TORCH_CHECK(g.dilation_h > 0 && g.dilation_w > 0, "dilation_h: ", g.dilation_h, " dilation_w: ", g.dilation_w);
  TORCH_CHECK(weight.size(1) * groups == input.size(1), "deform_conv2d: weight.shape[1] * groups (", weight.size(1),
              " * ", groups, ") must equal the input channels (", input.size(1), ")");
  TORCH_CHECK(weight.size(0) % groups == 0, "deform_conv2d: out channels (", weight.size(0),
              ") must be divisible by groups (", groups, ")");
  const int64_t taps = static_cast<int64_t>(g.kernel_h) * g.kernel_w;
  TORCH_CHECK(offset.size(1) == g.offset_groups * 2 * taps, "offset.shape[1] is not valid: got: ", offset.size(1),
              " expected: ", g.offset_groups * 2 * taps);
  TORCH_CHECK(!g.use_mask || mask.size(1) == g.offset_groups * taps, "mask.shape[1] is not valid: got: ", mask.size(1),
              " expected: ", g.offset_groups * taps);
  TORCH_CHECK(input.size(1) % g.offset_groups == 0, "deform_conv2d: input channels (", input.size(1),
              ") must be divisible by offset groups (", g.offset_groups, ")");
  TORCH_CHECK(offset.size(0) == input.size(0), "invalid batch size of offset");
  TORCH_CHECK(offset.size(2) == g.out_h && offset.size(3) == g.out_w, "offset output dims: (", offset.size(2), ", ",
              offset.size(3), ") - computed output dims: (", g.out_h, ", ", g.out_w, ")");
  TORCH_CHECK(mask.size(0) == input.size(0), "invalid batch size of mask");
  TORCH_CHECK(!g.use_mask || (mask.size(2) == g.out_h && mask.size(3) == g.out_w), "mask output dims: (", mask.size(2),
              ", ", mask.size(3), ") - computed output dims: (", g.out_h, ", ", g.out_w, ")");
  TORCH_CHECK(g.out_h > 0 && g.out_w > 0, "Calculated output size too small - out_h: ", g.out_h, " out_w: ", g.out_w);
}

Geometry checked_geometry(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offset,
                          const at::Tensor& mask, int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                          int64_t dilation_h, int64_t dilation_w, int64_t groups, int64_t offset_groups,
                          bool use_mask) {
  TORCH_CHECK(input.dim() == 4 && weight.dim() == 4, "deform_conv2d: input and weight must be 4D, got ", input.dim(),
              "D and ", weight.dim(), "D");
  const Geometry g =
      geometry_of(input, weight, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, offset_groups, use_mask);
  check_arguments(input, weight, offset, mask, g, groups);
  return g;
}

// The block `b` of a tensor whose first dimension is the batch: [batch / block, block, ...][b].
at::Tensor block_of(const at::Tensor& t, int block, int64_t b) {
  std::vector<int64_t> shape{t.size(0) / block, block};
  shape.insert(shape.end(), t.sizes().begin() + 1, t.sizes().end());
  return t.view(shape)[b];
}

// im2col of block `b` of the batch into `columns`.
void block_im2col(const Geometry& g, const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                  int64_t b, at::Tensor& columns) {
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(input.scalar_type(), "deformable_im2col", [&] {
    im2col<scalar_t>(g, block_of(input, g.block, b).const_data_ptr<scalar_t>(),
                     block_of(offset, g.block, b).const_data_ptr<scalar_t>(),
                     g.use_mask ? block_of(mask, g.block, b).const_data_ptr<scalar_t>() : nullptr,
                     columns.data_ptr<scalar_t>());
  });
}

}  // namespace

at::Tensor deform_conv2d(const at::Tensor& input_, const at::Tensor& weight_, const at::Tensor& offset_,
                         const at::Tensor& mask_, const at::Tensor& bias_, int64_t stride_h, int64_t stride_w,
                         int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w, int64_t groups,
                         int64_t offset_groups, bool use_mask) {
  const at::Tensor input = input_.contiguous(), weight = weight_.contiguous(), offset = offset_.contiguous();
  const at::Tensor mask = mask_.contiguous(), bias = bias_.contiguous();
  const Geometry g = checked_geometry(input, weight, offset, mask, stride_h, stride_w, pad_h, pad_w, dilation_h,
                                      dilation_w, groups, offset_groups, use_mask);
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  at::Tensor out = at::zeros({batch, out_channels, g.out_h, g.out_w}, input.options());
  if (batch == 0) {
    return out;
  }
  const int64_t blocks = batch / g.block;
  // out_buf[block][group][out channel of the group][image in block * out_h][out_w]
  at::Tensor out_buf = at::zeros({blocks, groups, out_channels / groups, g.block * g.out_h, g.out_w}, out.options());
  const at::Tensor grouped_weight =
      weight.view({groups, out_channels / groups, weight.size(1), g.kernel_h, g.kernel_w});
  at::Tensor columns = at::zeros(
      {static_cast<int64_t>(g.channels) * g.kernel_h * g.kernel_w, static_cast<int64_t>(g.block) * g.out_h * g.out_w},
      input.options());
  const at::Tensor grouped_columns = columns.view({groups, columns.size(0) / groups, columns.size(1)});
  for (int64_t b = 0; b < blocks; ++b) {
    block_im2col(g, input, offset, mask, b, columns);
    for (int64_t k = 0; k < groups; ++k) {
      out_buf[b][k].flatten(1).addmm_(grouped_weight[k].flatten(1), grouped_columns[k]);
    }
  }
  out.view({blocks, g.block, out_channels, g.out_h, g.out_w})
      .copy_(out_buf.view({blocks, out_channels, g.block, g.out_h, g.out_w}).transpose(1, 2));
  return out + bias.view({1, out_channels, 1, 1});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward(
    const at::Tensor& grad_, const at::Tensor& input_, const at::Tensor& weight_, const at::Tensor& offset_,
    const at::Tensor& mask_, const at::Tensor& bias_, int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
    int64_t dilation_h, int64_t dilation_w, int64_t groups, int64_t offset_groups, bool use_mask) {
  const at::Tensor grad = grad_.contiguous(), input = input_.contiguous(), weight = weight_.contiguous();
  const at::Tensor offset = offset_.contiguous(), mask = mask_.contiguous(), bias = bias_.contiguous();
  const Geometry g = checked_geometry(input, weight, offset, mask, stride_h, stride_w, pad_h, pad_w, dilation_h,
                                      dilation_w, groups, offset_groups, use_mask);
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  at::Tensor grad_input = at::zeros_like(input);
  at::Tensor grad_offset = at::zeros_like(offset);
  at::Tensor grad_mask = at::zeros_like(mask);
  at::Tensor grad_weight = at::zeros_like(weight);
  const at::Tensor grad_bias = at::ones_like(bias) * grad.sum({0, 2, 3});
  if (batch == 0) {
    return {grad_input, grad_weight, grad_offset, grad_mask, grad_bias};
  }
  const int64_t blocks = batch / g.block;
  // grad per block and group: [blocks, groups, out channels of the group, images in block, out_h, out_w]
  const at::Tensor grad_blocks =
      grad.reshape({blocks, g.block, groups, out_channels / groups, g.out_h, g.out_w}).permute({0, 2, 3, 1, 4, 5});
  const at::Tensor grouped_weight =
      weight.view({groups, out_channels / groups, weight.size(1), g.kernel_h, g.kernel_w});
  const int64_t rows = static_cast<int64_t>(g.channels) * g.kernel_h * g.kernel_w;
  const int64_t cols = static_cast<int64_t>(g.block) * g.out_h * g.out_w;

  // Input, offset and mask gradients: columns = weight^T x grad, then back onto the input.
  at::Tensor columns = at::empty({groups, rows / groups, cols}, input.options());
  for (int64_t b = 0; b < blocks; ++b) {
    columns.zero_();
    for (int64_t k = 0; k < groups; ++k) {
      columns[k].addmm_(grouped_weight[k].flatten(1).transpose(0, 1), grad_blocks[b][k].flatten(1));
    }
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(input.scalar_type(), "deformable_col2im", [&] {
      const scalar_t* block_offset = block_of(offset, g.block, b).const_data_ptr<scalar_t>();
      const scalar_t* block_mask = use_mask ? block_of(mask, g.block, b).const_data_ptr<scalar_t>() : nullptr;
      col2im_coordinates<scalar_t>(g, columns.const_data_ptr<scalar_t>(),
                                   block_of(input, g.block, b).const_data_ptr<scalar_t>(), block_offset, block_mask,
                                   block_of(grad_offset, g.block, b).data_ptr<scalar_t>(),
                                   use_mask ? block_of(grad_mask, g.block, b).data_ptr<scalar_t>() : nullptr);
      col2im<scalar_t>(g, columns.const_data_ptr<scalar_t>(), block_offset, block_mask,
                       block_of(grad_input, g.block, b).data_ptr<scalar_t>());
    });
  }

  // Weight gradient: grad x columns^T, with the columns of the forward.
  const at::Tensor grad_buf = grad_blocks.contiguous();
  const at::Tensor grouped_grad_weight =
      grad_weight.view({groups, out_channels / groups, weight.size(1), g.kernel_h, g.kernel_w});
  for (int64_t b = 0; b < blocks; ++b) {
    block_im2col(g, input, offset, mask, b, columns);
    for (int64_t k = 0; k < groups; ++k) {
      grouped_grad_weight[k].flatten(1).addmm_(grad_buf[b][k].flatten(1), columns[k].transpose(1, 0));
    }
  }
  return {grad_input, grad_weight, grad_offset, grad_mask, grad_bias};
}

}  // namespace vnpu::vision
