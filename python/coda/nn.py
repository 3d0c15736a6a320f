"""coda modules: layers a model uses directly, trained through coda's
derived backward programs (coda.autograd)."""

import math

import torch
from torch import nn

from .autograd import ProgramFamily, run

_PLAIN = "EPILOGUE linear(bias: f32[N]) {\n  output = input + bias;\n}\n"


class Linear(nn.Module):
    """y = epilogue(x W^T, inputs): nn.Linear's parameters (`weight`
    [out_features, in_features], `bias` [out_features] when the epilogue
    declares an input named `bias`, as nn.Linear initializes them), and any
    epilogue in the DSL. Other epilogue inputs are keyword arguments of
    forward; a program with dropout draws its seed from PyTorch's default
    generator at each call, as F.dropout (or takes `seed=`). Returns the
    output `output`, or a dict when the program has several outputs."""

    def __init__(self, in_features, out_features, epilogue=_PLAIN, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.family = ProgramFamily(epilogue)
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device,
                                               dtype=dtype))
        probe = self.family.program("", torch.device("cpu"), torch.float64)
        self._inputs = [arg for arg in probe.arguments if arg["role"] == "input"]
        self._outputs = [output["name"] for output in probe.outputs]
        if any(arg["name"] == "bias" for arg in self._inputs):
            self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x, seed=None, **inputs):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features).contiguous()
        tensors, names, scalars, scalar_names = [], [], [], []
        for arg in self._inputs:
            name = arg["name"]
            if name == "seed" and arg["type"] == "i64":
                continue
            value = self.bias if name == "bias" and self.bias is not None else inputs.pop(name)
            if arg["tensor"]:
                if arg["dims"] == 3:
                    value = value.reshape(-1, self.out_features)
                tensors.append(value.contiguous())
                names.append(name)
            else:
                scalars.append(float(value))
                scalar_names.append(name)
        if inputs:
            raise TypeError(f"unexpected epilogue inputs {sorted(inputs)}")
        if seed is None:
            seed = int(torch.empty((), dtype=torch.int64).random_())
        # Tensors in the program's types: the forward casts (and autograd
        # casts the gradients back).
        outputs = run(self.family.key, "", x2, self.weight, tensors, ",".join(names), scalars,
                      ",".join(scalar_names), seed)
        results = {}
        for name, value in zip(self._outputs, outputs):
            results[name] = value.reshape(*lead, -1) if value.dim() == 2 else value
        return results["output"] if list(results) == ["output"] else results

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"
