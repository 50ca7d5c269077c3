// Defines torchvision's operators with vnpu's CPU kernels, for a torchvision whose own extension
// could not be loaded. The schemas are torchvision's, so its Python code (meta kernels, autograd
// registrations, torchvision.ops) works unchanged on top of them.
#include "vision/VisionKernels.h"

#include <torch/library.h>

#include <memory>

namespace vnpu::vision {
namespace {

[[noreturn]] void refuse_quantized(const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "torchvision::", op,
                              " works on quantized tensors, which vnpu does not provide: torchvision's own C++ "
                              "extension could not be loaded on this machine, and vnpu's replacement kernels cover "
                              "float operators only");
}

at::Tensor qnms(const at::Tensor&, const at::Tensor&, double) {
  refuse_quantized("qnms");
}

at::Tensor qroi_align(const at::Tensor&, const at::Tensor&, double, int64_t, double, int64_t, double, int64_t, int64_t,
                      int64_t, bool) {
  refuse_quantized("qroi_align");
}

// torchvision asks its extension which CUDA it was built with; these kernels have none.
int64_t cuda_version() {
  return -1;
}

}  // namespace

int64_t define_torchvision_operators() {
  static std::unique_ptr<torch::Library> schemas;
  static std::unique_ptr<torch::Library> cpu;
  static std::unique_ptr<torch::Library> quantized;
  if (schemas != nullptr) {
    return 0;
  }
  schemas = std::make_unique<torch::Library>(torch::Library::FRAGMENT, "torchvision", std::nullopt, __FILE__, __LINE__);
  cpu =
      std::make_unique<torch::Library>(torch::Library::IMPL, "torchvision", c10::DispatchKey::CPU, __FILE__, __LINE__);
  quantized = std::make_unique<torch::Library>(torch::Library::IMPL, "torchvision", c10::DispatchKey::QuantizedCPU,
                                               __FILE__, __LINE__);
  auto& m = *schemas;
  m.def("_cuda_version() -> int", TORCH_FN(cuda_version));
  m.def("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor");
  m.def("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor");
  m.def(
      "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
      "int sampling_ratio, bool aligned) -> Tensor");
  m.def(
      "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
      "SymInt batch_size, SymInt channels, SymInt height, SymInt width, int sampling_ratio, bool aligned) -> Tensor");
  m.def(
      "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point, float rois_scale, "
      "int rois_zero_point, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, "
      "bool aligned) -> Tensor");
  m.def(
      "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
      "int sampling_ratio) -> (Tensor, Tensor)");
  m.def(
      "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
      "SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size, SymInt channels, "
      "SymInt height, SymInt width) -> Tensor");
  m.def(
      "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) -> "
      "(Tensor, Tensor)");
  m.def(
      "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, SymInt pooled_height, "
      "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor");
  m.def(
      "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) -> "
      "(Tensor, Tensor)");
  m.def(
      "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
      "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) "
      "-> Tensor");
  m.def(
      "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, "
      "SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, "
      "SymInt offset_groups, bool use_mask) -> Tensor");
  m.def(
      "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
      "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, "
      "SymInt groups, SymInt offset_groups, bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");

  auto& k = *cpu;
  k.impl("nms", TORCH_FN(nms));
  k.impl("roi_align", TORCH_FN(roi_align));
  k.impl("_roi_align_backward", TORCH_FN(roi_align_backward));
  k.impl("ps_roi_align", TORCH_FN(ps_roi_align));
  k.impl("_ps_roi_align_backward", TORCH_FN(ps_roi_align_backward));
  k.impl("roi_pool", TORCH_FN(roi_pool));
  k.impl("_roi_pool_backward", TORCH_FN(roi_pool_backward));
  k.impl("ps_roi_pool", TORCH_FN(ps_roi_pool));
  k.impl("_ps_roi_pool_backward", TORCH_FN(ps_roi_pool_backward));
  k.impl("deform_conv2d", TORCH_FN(deform_conv2d));
  k.impl("_deform_conv2d_backward", TORCH_FN(deform_conv2d_backward));
  quantized->impl("qnms", TORCH_FN(qnms));
  quantized->impl("qroi_align", TORCH_FN(qroi_align));
  return 14;
}

}  // namespace vnpu::vision
