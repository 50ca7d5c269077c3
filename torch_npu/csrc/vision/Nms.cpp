// torchvision::nms on the CPU: greedy non-maximum suppression in descending score order.
#include "vision/VisionKernels.h"

#include <ATen/Dispatch.h>

#include <algorithm>

namespace vnpu::vision {
namespace {

template <typename T>
at::Tensor suppress(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  const at::Tensor x1_t = dets.select(1, 0).contiguous();
  const at::Tensor y1_t = dets.select(1, 1).contiguous();
  const at::Tensor x2_t = dets.select(1, 2).contiguous();
  const at::Tensor y2_t = dets.select(1, 3).contiguous();
  const at::Tensor areas_t = (x2_t - x1_t) * (y2_t - y1_t);
  const at::Tensor order_t = std::get<1>(scores.sort(0, /*descending=*/true));

  const int64_t count = dets.size(0);
  std::vector<uint8_t> suppressed(static_cast<size_t>(count), 0);
  at::Tensor keep_t = at::zeros({count}, dets.options().dtype(at::kLong));
  int64_t* keep = keep_t.data_ptr<int64_t>();
  const int64_t* order = order_t.const_data_ptr<int64_t>();
  const T* x1 = x1_t.const_data_ptr<T>();
  const T* y1 = y1_t.const_data_ptr<T>();
  const T* x2 = x2_t.const_data_ptr<T>();
  const T* y2 = y2_t.const_data_ptr<T>();
  const T* areas = areas_t.const_data_ptr<T>();

  int64_t kept = 0;
  for (int64_t a = 0; a < count; ++a) {
    const int64_t i = order[a];
    if (suppressed[i]) {
      continue;
    }
    keep[kept++] = i;
    for (int64_t b = a + 1; b < count; ++b) {
      const int64_t j = order[b];
      if (suppressed[j]) {
        continue;
      }
      const T w = std::max(static_cast<T>(0), std::min(x2[i], x2[j]) - std::max(x1[i], x1[j]));
      const T h = std::max(static_cast<T>(0), std::min(y2[i], y2[j]) - std::max(y1[i], y1[j]));
      const T inter = w * h;
      const T iou = inter / (areas[i] + areas[j] - inter);
      if (iou > iou_threshold) {
        suppressed[j] = 1;
      }
    }
  }
  return keep_t.narrow(0, 0, kept);
}

}  // namespace

at::Tensor nms(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  TORCH_CHECK(dets.dim() == 2, "boxes should be a 2d tensor, got ", dets.dim(), "D");
  TORCH_CHECK(dets.size(1) == 4, "boxes should have 4 elements in dimension 1, got ", dets.size(1));
  TORCH_CHECK(scores.dim() == 1, "scores should be a 1d tensor, got ", scores.dim(), "D");
  TORCH_CHECK(dets.size(0) == scores.size(0),
              "boxes and scores should have same number of elements in dimension 0, got ", dets.size(0), " and ",
              scores.size(0));
  TORCH_CHECK(dets.scalar_type() == scores.scalar_type(), "dets should have the same type as scores");
  if (dets.numel() == 0) {
    return at::empty({0}, dets.options().dtype(at::kLong));
  }
  at::Tensor result;
  AT_DISPATCH_FLOATING_TYPES(dets.scalar_type(), "nms_kernel",
                             [&] { result = suppress<scalar_t>(dets, scores, iou_threshold); });
  return result;
}

}  // namespace vnpu::vision
