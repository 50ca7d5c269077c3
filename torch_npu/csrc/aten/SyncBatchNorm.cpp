// The batch-norm statistics operators torch.nn.SyncBatchNorm uses (PyTorch ships them for CUDA only),
// written with ATen operators on npu tensors. Statistics are computed in float32 (float64 for float64
// input), as the CUDA kernels accumulate; per channel c over every other dimension:
//
//   batch_norm_stats:       mean_c, invstd_c = 1 / sqrt(var_c + eps) (biased variance)
//   batch_norm_gather_stats_with_counts: the global mean / invstd of per-rank statistics weighted by
//                           their element counts; running_mean / running_var move by momentum, the
//                           running variance unbiased (total / (total - 1))
//   batch_norm_elemt:       (x - mean) * invstd * weight + bias
//   batch_norm_backward_reduce: sum_dy = sum(dy), sum_dy_xmu = sum(dy * (x - mean)),
//                           grad_weight = sum_dy_xmu * invstd, grad_bias = sum_dy
//   batch_norm_backward_elemt:  dx = (dy - sum_dy / N - (x - mean) * invstd^2 * sum_dy_xmu / N) * invstd * w,
//                           N = sum(counts)
#include <ATen/ATen.h>
#include <torch/library.h>

namespace vnpu {
namespace {

std::vector<int64_t> reduce_dims(const at::Tensor& input) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d != 1) {
      dims.push_back(d);
    }
  }
  return dims;
}

// A per-channel vector shaped to broadcast against input ([1, C, 1, ...]).
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& input) {
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = v.numel();
  return v.view(shape);
}

at::ScalarType stats_type(const at::Tensor& input) {
  return input.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

std::tuple<at::Tensor, at::Tensor> batch_norm_stats(const at::Tensor& input, double eps) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm_stats: input must have at least 2 dimensions, got ", input.dim());
  const at::Tensor x = input.to(stats_type(input));
  const auto dims = reduce_dims(x);
  const at::Tensor mean = x.mean(dims);
  const at::Tensor var = (x - per_channel(mean, x)).pow(2).mean(dims);
  return {mean, (var + eps).rsqrt()};
}

std::tuple<at::Tensor, at::Tensor> gather_stats(const at::Tensor& mean, const at::Tensor& invstd,
                                                const std::optional<at::Tensor>& running_mean,
                                                const std::optional<at::Tensor>& running_var, double momentum,
                                                double eps, const at::Tensor& counts) {
  const at::Tensor n = counts.to(mean.scalar_type()).view({-1, 1});
  const at::Tensor total = n.sum();
  const at::Tensor global_mean = (mean * n).sum(0) / total;
  const at::Tensor var_each = invstd.pow(-2) - eps;
  const at::Tensor var = ((var_each + (mean - global_mean).pow(2)) * n).sum(0) / total;
  if (running_mean.has_value() && running_mean->defined()) {
    running_mean->mul_(1 - momentum).add_(global_mean.to(running_mean->scalar_type()), momentum);
  }
  if (running_var.has_value() && running_var->defined()) {
    const at::Tensor unbiased = var * total / (total - 1);
    running_var->mul_(1 - momentum).add_(unbiased.to(running_var->scalar_type()), momentum);
  }
  return {global_mean, (var + eps).rsqrt()};
}

std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_with_counts(const at::Tensor& /*input*/,
                                                                       const at::Tensor& mean, const at::Tensor& invstd,
                                                                       const std::optional<at::Tensor>& running_mean,
                                                                       const std::optional<at::Tensor>& running_var,
                                                                       double momentum, double eps,
                                                                       const at::Tensor& counts) {
  return gather_stats(mean, invstd, running_mean, running_var, momentum, eps, counts);
}

std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats(const at::Tensor& /*input*/, const at::Tensor& mean,
                                                           const at::Tensor& invstd,
                                                           const std::optional<at::Tensor>& running_mean,
                                                           const std::optional<at::Tensor>& running_var,
                                                           double momentum, double eps, int64_t count) {
  const at::Tensor counts = at::full({mean.size(0)}, static_cast<double>(count), mean.options());
  return gather_stats(mean, invstd, running_mean, running_var, momentum, eps, counts);
}

at::Tensor batch_norm_elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, const at::Tensor& mean, const at::Tensor& invstd,
                            double /*eps*/) {
  at::Tensor out = (input.to(mean.scalar_type()) - per_channel(mean, input)) * per_channel(invstd, input);
  if (weight.has_value() && weight->defined()) {
    out = out * per_channel(weight->to(out.scalar_type()), input);
  }
  if (bias.has_value() && bias->defined()) {
    out = out + per_channel(bias->to(out.scalar_type()), input);
  }
  return out.to(input.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& weight, bool input_g, bool weight_g, bool bias_g) {
  const auto dims = reduce_dims(input);
  const at::Tensor dy = grad_out.to(mean.scalar_type());
  const at::Tensor xmu = input.to(mean.scalar_type()) - per_channel(mean, input);
  const at::Tensor sum_dy = dy.sum(dims);
  const at::Tensor sum_dy_xmu = (dy * xmu).sum(dims);
  const auto param_type = weight.has_value() && weight->defined() ? weight->scalar_type() : input.scalar_type();
  at::Tensor grad_weight = weight_g ? (sum_dy_xmu * invstd).to(param_type) : at::Tensor();
  at::Tensor grad_bias = bias_g ? sum_dy.to(param_type) : at::Tensor();
  return {input_g ? sum_dy : at::Tensor(), input_g ? sum_dy_xmu : at::Tensor(), grad_weight, grad_bias};
}

at::Tensor batch_norm_backward_elemt(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                                     const at::Tensor& invstd, const std::optional<at::Tensor>& weight,
                                     const at::Tensor& sum_dy, const at::Tensor& sum_dy_xmu, const at::Tensor& count) {
  const at::Tensor n = count.to(mean.scalar_type()).sum();
  const at::Tensor xmu = input.to(mean.scalar_type()) - per_channel(mean, input);
  const at::Tensor inv = per_channel(invstd, input);
  at::Tensor scale = inv;
  if (weight.has_value() && weight->defined()) {
    scale = scale * per_channel(weight->to(mean.scalar_type()), input);
  }
  const at::Tensor dx = (grad_out.to(mean.scalar_type()) - per_channel(sum_dy / n, input) -
                         xmu * inv * inv * per_channel(sum_dy_xmu / n, input)) *
                        scale;
  return dx.to(input.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("batch_norm_stats", &batch_norm_stats);
  m.impl("batch_norm_gather_stats_with_counts", &batch_norm_gather_stats_with_counts);
  m.impl("batch_norm_gather_stats", &batch_norm_gather_stats);
  m.impl("batch_norm_elemt", &batch_norm_elemt);
  m.impl("batch_norm_backward_reduce", &batch_norm_backward_reduce);
  m.impl("batch_norm_backward_elemt", &batch_norm_backward_elemt);
}

}  // namespace vnpu
