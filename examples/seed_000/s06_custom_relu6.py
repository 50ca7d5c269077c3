# context
import torch
import torch_npu


class CustomReLU6(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return torch_npu.npu_relu6(input)
    
    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * (input > 0) * (input < 6)


# context: use it
x = torch.tensor([-2.0, 1.0, 5.0, 8.0], device="npu", requires_grad=True)
y = CustomReLU6.apply(x)
y.sum().backward()
print(y.detach().cpu().tolist(), x.grad.cpu().tolist())
