"""coda programs as PyTorch operators with autograd.

``torch.ops.coda.run`` runs a registered program (a ``ProgramFamily``) on CPU
or CUDA tensors; its backward runs the programs coda derives from it
(docs/autodiff.md): the epilogue gradient on the recomputed GEMM, which gives
``grad_acc`` and the gradients of the epilogue's tensor inputs, then the
operand gradients ``grad_a`` and ``grad_b`` as coda GEMMs. CUDA tensors run
the fused kernels (coda.Program); CPU tensors the CPU reference
(coda.reference), in float64 when they are float64, so that
torch.autograd.gradcheck can check the derived backward.
"""

import itertools

import torch

from .reference import ReferenceProgram
from .runtime import CodaError, Program

_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32",
           torch.float64: "f32"}
_TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
          "f64": torch.float64}
_families = {}
_keys = itertools.count()


class ProgramFamily:
    """A program (coda IR text or a DSL epilogue, A stored [M, K], B as an
    nn.Linear weight [N, K]) and the programs derived from it, compiled per
    device and dtype on first use. `key` names it to torch.ops.coda.run."""

    def __init__(self, source, **options):
        self.source = source
        self.options = options
        self.key = f"family{next(_keys)}"
        self._programs = {}
        _families[self.key] = self

    def program(self, derive, device, dtype):
        """The program `derive` ("" for the forward) for tensors of `dtype` on
        `device`."""
        key = (derive, str(device), dtype)
        if key not in self._programs:
            options = dict(self.options, dtype=_DTYPES[dtype], derive=derive)
            if device.type == "cuda":
                program = Program(self.source, device=device.index, **options)
            else:
                program = ReferenceProgram(self.source, widen_to_f64=dtype == torch.float64,
                                           **options)
            self._programs[key] = program
        return self._programs[key]


def _outputs(program, a, b):
    """The (shape, dtype) of each output of `program` on operands a, b."""
    m = a.shape[-1] if program.transpose_a else a.shape[-2]
    n = b.shape[-2] if program.transpose_b else b.shape[-1]
    result = []
    for output in program.outputs:
        shape = [size for bit, size in ((2, m), (1, n)) if output["dims"] & bit]
        dtype = torch.float64 if a.dtype == torch.float64 else _TORCH[output["type"]]
        result.append((shape, dtype))
    return result


def _split(names):
    """The names a comma-separated string lists (custom ops take no lists
    of strings)."""
    return names.split(",") if names else []


def _call(program, a, b, tensors, names, scalars, scalar_names, seed):
    named = dict(zip(_split(names), tensors))
    named.update(zip(_split(scalar_names), scalars))
    if any(arg["name"] == "seed" and arg["type"] == "i64" for arg in program.arguments):
        named["seed"] = seed
    results = program(a, b, inputs=named)
    return [results[output["name"]] for output in program.outputs]


@torch.library.custom_op("coda::run", mutates_args=())
def run(key: str, derive: str, a: torch.Tensor, b: torch.Tensor, tensors: list[torch.Tensor],
        names: str, scalars: list[float], scalar_names: str,
        seed: int) -> list[torch.Tensor]:
    """Runs program `derive` of family `key` on A, B and the epilogue inputs
    `tensors` (named by the comma-separated `names`) and scalars; returns its
    outputs in order."""
    program = _families[key].program(derive, a.device, a.dtype)
    return _call(program, a, b, tensors, names, scalars, scalar_names, seed)


@run.register_fake
def _(key, derive, a, b, tensors, names, scalars, scalar_names, seed):
    program = _families[key].program(derive, a.device, a.dtype)
    return [a.new_empty(shape, dtype=dtype) for shape, dtype in _outputs(program, a, b)]


def _setup_context(ctx, inputs, output):
    key, derive, a, b, tensors, names, scalars, scalar_names, seed = inputs
    ctx.save_for_backward(a, b, *tensors)
    ctx.key, ctx.derive, ctx.names = key, derive, names
    ctx.scalars, ctx.scalar_names, ctx.seed = scalars, scalar_names, seed


def _backward(ctx, grads):
    if ctx.derive:
        raise CodaError(f"the derived program '{ctx.derive}' has no backward")
    a, b, *tensors = ctx.saved_tensors
    family = _families[ctx.key]
    forward = family.program("", a.device, a.dtype)
    names, grad_names, grad_tensors = _split(ctx.names), [], []
    for output, grad in zip(forward.outputs, grads):
        if output["dims"] == 3:
            shape, dtype = _outputs(forward, a, b)[forward.outputs.index(output)]
            grad_names.append("grad_" + output["name"])
            grad_tensors.append((grad if grad is not None
                                 else a.new_zeros(shape, dtype=dtype)).to(dtype).contiguous())
    backward = run(ctx.key, "backward", a, b, tensors + grad_tensors,
                   ",".join(names + grad_names), ctx.scalars, ctx.scalar_names, ctx.seed)
    grad_acc, input_grads = backward[0], backward[1:]
    grad_a = grad_b = None
    if ctx.needs_input_grad[2]:
        grad_a = _operand_gradient(ctx.key, "grad_a", grad_acc, b, "b").to(a.dtype)
    if ctx.needs_input_grad[3]:
        grad_b = _operand_gradient(ctx.key, "grad_b", grad_acc, a, "a").to(b.dtype)
    tensor_grads = [g.to(t.dtype) for g, t in zip(input_grads, tensors)]
    # PyTorch's structure of the inputs: a list of floats is one leaf, an
    # empty one an empty list.
    scalars = None if ctx.scalars else []
    return None, None, grad_a, grad_b, tensor_grads, None, scalars, None, None


def _operand_gradient(key, derive, grad_acc, other, other_name):
    program = _families[key].program(derive, grad_acc.device, grad_acc.dtype)
    first = program.arguments[0]["name"]
    x, y = (grad_acc, other) if first == "grad_acc" else (other, grad_acc)
    return run(key, derive, x, y, [], "", [], "", 0)[0]


run.register_autograd(_backward, setup_context=_setup_context)
