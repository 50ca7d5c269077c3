// The fused LSTM and GRU cells ATen uses for accelerator devices.
//
// ATen's RNN layers call _thnn_fused_lstm_cell / _thnn_fused_gru_cell (and their backward
// operators) whenever the input is not on the CPU, and PyTorch ships them for CUDA only. These are
// the same cell equations, element for element in the CUDA kernels' order, written with ATen
// operators on npu tensors:
//
//   LSTM: gates = (input_gates + hidden_gates) + input_bias + hidden_bias, split i, f, g, o;
//         i, f, o = sigmoid, g = tanh; cy = f * cx + i * g; hy = o * tanh(cy);
//         workspace = [i, f, g, o] after the nonlinearities.
//   GRU:  r = sigmoid(ir + b_ir + hr + b_hr), z = sigmoid(ii + b_ii + hi + b_hi),
//         n = tanh(in + b_in + r * (hn + b_hn)), hy = n + z * (hx - n);
//         workspace = [r, z, n, hx, hn + b_hn].
//
// Recurrent layers and cells take the CPU's path on npu (HostRecurrent.cpp); these cells serve the
// per-step path that remains (training with dropout between layers), which agrees with the CPU to
// rounding: the CPU folds the biases into its matmuls (or runs oneDNN).
#include <ATen/ATen.h>
#include <torch/library.h>

namespace vnpu {
namespace {

using OptTensor = std::optional<at::Tensor>;

bool has(const OptTensor& t) {
  return t.has_value() && t->defined();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                         const at::Tensor& cx, const OptTensor& input_bias,
                                                         const OptTensor& hidden_bias) {
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(),
              "_thnn_fused_lstm_cell: gate sizes differ: ", input_gates.sizes(), " vs ", hidden_gates.sizes());
  at::Tensor gates = input_gates + hidden_gates;
  if (has(input_bias)) {
    gates = gates + *input_bias;
  }
  if (has(hidden_bias)) {
    gates = gates + *hidden_bias;
  }
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid();
  at::Tensor f = chunks[1].sigmoid();
  at::Tensor g = chunks[2].tanh();
  at::Tensor o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward(const OptTensor& grad_hy, const OptTensor& grad_cy,
                                                                  const at::Tensor& cx, const at::Tensor& cy,
                                                                  const at::Tensor& workspace, bool has_bias) {
  if (!has(grad_hy) && !has(grad_cy)) {
    return {at::Tensor(), at::Tensor(), at::Tensor()};
  }
  auto chunks = workspace.chunk(4, 1);
  const at::Tensor& i = chunks[0];
  const at::Tensor& f = chunks[1];
  const at::Tensor& g = chunks[2];
  const at::Tensor& o = chunks[3];
  at::Tensor tanh_cy = cy.tanh();
  at::Tensor gcx = has(grad_cy) ? grad_cy->clone() : at::zeros_like(cy);
  at::Tensor go = at::zeros_like(o);
  if (has(grad_hy)) {
    gcx = gcx + *grad_hy * o * (1 - tanh_cy * tanh_cy);
    go = *grad_hy * tanh_cy * o * (1 - o);
  }
  at::Tensor gi = gcx * g * i * (1 - i);
  at::Tensor gf = gcx * cx * f * (1 - f);
  at::Tensor gg = gcx * i * (1 - g * g);
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  at::Tensor grad_cx = gcx * f;
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                            const at::Tensor& hx, const OptTensor& input_bias,
                                            const OptTensor& hidden_bias) {
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(),
              "_thnn_fused_gru_cell: gate sizes differ: ", input_gates.sizes(), " vs ", hidden_gates.sizes());
  auto in = input_gates.chunk(3, 1);
  auto hid = hidden_gates.chunk(3, 1);
  at::Tensor ir = in[0], ii = in[1], inn = in[2];
  at::Tensor hr = hid[0], hi = hid[1], hn = hid[2];
  if (has(input_bias)) {
    auto b = input_bias->chunk(3, 0);
    ir = ir + b[0];
    ii = ii + b[1];
    inn = inn + b[2];
  }
  if (has(hidden_bias)) {
    auto b = hidden_bias->chunk(3, 0);
    hr = hr + b[0];
    hi = hi + b[1];
    hn = hn + b[2];
  }
  at::Tensor r = (ir + hr).sigmoid();
  at::Tensor z = (ii + hi).sigmoid();
  at::Tensor n = (inn + r * hn).tanh();
  at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hn}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(const at::Tensor& grad_hy,
                                                                                         const at::Tensor& workspace,
                                                                                         bool has_bias) {
  auto chunks = workspace.chunk(5, 1);
  const at::Tensor& r = chunks[0];
  const at::Tensor& z = chunks[1];
  const at::Tensor& n = chunks[2];
  const at::Tensor& hx = chunks[3];
  const at::Tensor& hn = chunks[4];
  at::Tensor gz = grad_hy * (hx - n) * (1 - z) * z;
  at::Tensor ghx = grad_hy * z;
  at::Tensor gn = grad_hy * (1 - z) * (1 - n * n);
  at::Tensor ghn = gn * r;
  at::Tensor gr = gn * hn * (1 - r) * r;
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, ghn}, 1);
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, ghx, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", &lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", &lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", &gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", &gru_cell_backward);
}

}  // namespace vnpu
