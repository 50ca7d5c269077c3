// CPU kernels of torchvision's operators (torchvision::nms, roi_align, roi_pool, ps_roi_align,
// ps_roi_pool, deform_conv2d and their backwards), for machines where torchvision's own C++
// extension cannot load beside the CPU build of torch (PyPI's x86_64 torchvision wheels are CUDA
// builds). They follow the arithmetic of torchvision's CPU kernels step for step, so results are
// the ones torchvision computes on the CPU. npu tensors reach them through the redirect, like every
// other CPU kernel.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace vnpu::vision {

at::Tensor nms(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold);

at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, double spatial_scale, int64_t pooled_height,
                     int64_t pooled_width, int64_t sampling_ratio, bool aligned);
at::Tensor roi_align_backward(const at::Tensor& grad, const at::Tensor& rois, double spatial_scale,
                              int64_t pooled_height, int64_t pooled_width, int64_t batch_size, int64_t channels,
                              int64_t height, int64_t width, int64_t sampling_ratio, bool aligned);
std::tuple<at::Tensor, at::Tensor> ps_roi_align(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                                                int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio);
at::Tensor ps_roi_align_backward(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& channel_mapping,
                                 double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                                 int64_t sampling_ratio, int64_t batch_size, int64_t channels, int64_t height,
                                 int64_t width);

std::tuple<at::Tensor, at::Tensor> roi_pool(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                                            int64_t pooled_height, int64_t pooled_width);
at::Tensor roi_pool_backward(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& argmax,
                             double spatial_scale, int64_t pooled_height, int64_t pooled_width, int64_t batch_size,
                             int64_t channels, int64_t height, int64_t width);
std::tuple<at::Tensor, at::Tensor> ps_roi_pool(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                                               int64_t pooled_height, int64_t pooled_width);
at::Tensor ps_roi_pool_backward(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& channel_mapping,
                                double spatial_scale, int64_t pooled_height, int64_t pooled_width, int64_t batch_size,
                                int64_t channels, int64_t height, int64_t width);

at::Tensor deform_conv2d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offset,
                         const at::Tensor& mask, const at::Tensor& bias, int64_t stride_h, int64_t stride_w,
                         int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w, int64_t groups,
                         int64_t offset_groups, bool use_mask);
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offset,
    const at::Tensor& mask, const at::Tensor& bias, int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
    int64_t dilation_h, int64_t dilation_w, int64_t groups, int64_t offset_groups, bool use_mask);

// Defines the torchvision operator schemas with these CPU kernels (the quantized variants refuse
// with a clear error). Returns the number of operators defined.
int64_t define_torchvision_operators();

}  // namespace vnpu::vision
