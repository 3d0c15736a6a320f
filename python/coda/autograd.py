"""coda programs as PyTorch operators with autograd.

``run`` runs a registered program (a ``ProgramFamily``) on CPU or CUDA
tensors; its backward runs the programs coda derives from it
(docs/autodiff.md): the epilogue gradient on the recomputed GEMM, which gives
``grad_acc`` and the gradients of the epilogue's tensor inputs, then the
operand gradients ``grad_a`` and ``grad_b`` as coda GEMMs. ``mlp`` runs two
programs as a Transformer MLP whose backward puts fc1's epilogue gradient
into the epilogue of fc2's dgrad GEMM.

Each is a ``torch.library.custom_op`` (``torch.ops.coda.run``,
``torch.ops.coda.mlp``, with fake implementations and autograd), which is
what torch.compile traces; in eager mode the same implementation and
backward run through a ``torch.autograd.Function``, which costs the host a
fraction of a custom op's dispatch.

CUDA tensors run the fused kernels (coda.Program); CPU tensors the CPU
reference (coda.reference), in float64 when they are float64, so that
torch.autograd.gradcheck can check the derived backward. The dropout seed is
an int64 tensor of one element on the tensors' device, read when a kernel
starts: the ops trace under torch.compile(fullgraph=True) and replay in CUDA
graphs with a seed drawn inside the graph.
"""

import concurrent.futures
import functools
import itertools
import os
import threading
from typing import Optional

from .reference import ReferenceProgram
from .runtime import CodaError, Program, _output_shape, _output_space, _require_torch

torch = _require_torch("coda.autograd")

_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32",
           torch.float64: "f32"}
_TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
          "f64": torch.float64}
_families = {}
_keys = itertools.count()


class ProgramFamily:
    """A program (coda IR text or a DSL epilogue, A stored [M, K], B as an
    nn.Linear weight [N, K]) and the programs derived from it, compiled per
    device and dtype on first use. `source` is the text, or a function of the
    operand type's name ("bf16", "f16", "f32") that returns it (for inputs
    declared in the operand type). `key` names it to torch.ops.coda.run."""

    def __init__(self, source, **options):
        self.source = source
        self.options = options
        self.key = f"family{next(_keys)}"
        self._programs = {}
        _families[self.key] = self

    def __deepcopy__(self, memo):
        """Itself: a copied module shares its programs (nothing in a family
        changes once it is made but the programs it has compiled)."""
        return self

    def __reduce__(self):
        """Pickled as its text for each operand type and its options (a
        module saved whole, torch.save(module)); loaded, a family of its
        own in the loading process."""
        texts = {name: self.source(name) if callable(self.source) else self.source
                 for name in ("bf16", "f16", "f32")}
        return _restore_family, (texts, self.options)

    def program(self, derive, device, dtype):
        """The program `derive` ("" for the forward) for tensors of `dtype` on
        `device`; on the GPU, with column reductions merged in a fixed order
        while torch.use_deterministic_algorithms(True) is in effect."""
        deterministic = device.type == "cuda" and torch.are_deterministic_algorithms_enabled()
        key = (derive, device, dtype, deterministic)
        if key not in self._programs:
            name = _DTYPES[dtype]
            source = self.source(name) if callable(self.source) else self.source
            options = dict(self.options, dtype=name, derive=derive)
            if device.type == "cuda":
                program = Program(source, device=device.index, deterministic=deterministic,
                                  **options)
            else:
                program = ReferenceProgram(source, widen_to_f64=dtype == torch.float64,
                                           **options)
            self._programs[key] = program
        return self._programs[key]

    def describe(self):
        """The forward program's arguments and outputs (as coda.Program
        lists them), read from the GPU runtime when there is a GPU (loading
        compiles nothing until a launch), else from the CPU reference."""
        if torch.cuda.is_available():
            return self.program("", torch.device("cuda", torch.cuda.current_device()),
                                torch.float32)
        return self.program("", torch.device("cpu"), torch.float64)

    def inputs(self):
        """The epilogue inputs of the forward program, the dropout seed left
        out."""
        return [arg for arg in self.describe().arguments
                if arg["role"] == "input" and not _is_seed(arg)]

    def has_dropout(self):
        return any(_is_seed(arg) for arg in self.describe().arguments)


def _restore_family(texts, options):
    """A ProgramFamily of the texts `texts` (by operand type's name), as one
    pickled."""
    return ProgramFamily(functools.partial(dict.__getitem__, texts), **options)


def draw_seed(device, count=None):
    """A dropout seed from PyTorch's generator of `device`, as F.dropout
    draws its mask: reproducible under torch.manual_seed, traced by
    torch.compile, drawn again at each replay of a CUDA graph. With
    `count`, that many in one draw (one kernel), as one tensor."""
    return torch.randint(0, 2**63 - 1, () if count is None else (count,), dtype=torch.int64,
                         device=device)


def _is_seed(arg):
    return arg["name"] == "seed" and arg["type"] == "i64"


def _type(program, a, arg):
    """The torch dtype of `arg` (an argument or output) for operands like
    `a`: float64 throughout on the widened CPU reference."""
    return torch.float64 if a.dtype == torch.float64 else _TORCH[arg["type"]]


def _autocast(*tensors):
    """`tensors` (a GEMM's operands) in torch.autocast's type when it is on
    for their device, cast as F.linear casts its own, else as they are."""
    device = tensors[0].device.type
    if not torch.is_autocast_enabled(device):
        return tensors
    dtype = torch.get_autocast_dtype(device)
    return tuple(t.to(dtype) for t in tensors)


def _as(tensor, dtype):
    """`tensor` in `dtype`: itself when it already is (a no-op .to() still
    costs a dispatch on the host)."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def _output_shapes(program, a, b):
    """The shape of each output of `program` on operands a, b (tensors or
    shapes)."""
    _, m, n = _output_space(program, a, b)
    return [_output_shape(output["dims"], None, m, n) for output in program.outputs]


def _outputs(program, a, b):
    """The (shape, dtype) of each output of `program` on operands a, b."""
    return [(shape, _type(program, a, output))
            for shape, output in zip(_output_shapes(program, a, b), program.outputs)]


@functools.lru_cache(maxsize=None)
def _split(names):
    """The names a comma-separated string lists (custom ops take no lists
    of strings), as a tuple."""
    return tuple(names.split(",")) if names else ()


def _signature(program):
    """What _call reads of `program`'s signature, worked out at its first
    call: its arguments by name, whether it draws a dropout mask, its output
    names."""
    signature = getattr(program, "_autograd_signature", None)
    if signature is None:
        signature = ({arg["name"]: arg for arg in program.arguments},
                     any(_is_seed(arg) for arg in program.arguments),
                     [output["name"] for output in program.outputs])
        program._autograd_signature = signature
    return signature


def _call(program, a, b, tensors, names, scalars, scalar_names, seed):
    """Runs `program`, each tensor input converted to the type it declares;
    returns its outputs in order."""
    declared, has_seed, outputs = _signature(program)
    named = {}
    for name, tensor in zip(_split(names), tensors):
        arg = declared.get(name)
        if arg:
            dtype = _type(program, a, arg)
            if tensor.dtype != dtype:
                tensor = tensor.to(dtype)
            tensor = tensor.contiguous()
        named[name] = tensor
    named.update(zip(_split(scalar_names), scalars))
    if has_seed:
        named["seed"] = seed
    results = program(a, b, inputs=named)
    return [results[name] for name in outputs]


def _run(key, derive, a, b, tensors, names, scalars, scalar_names, seed):
    program = _families[key].program(derive, a.device, a.dtype)
    return _call(program, a, b, tensors, names, scalars, scalar_names, seed)


def _runner():
    """What runs a program as `run` runs it, for functions that call the
    programs of their own backward: the coda::run op under torch.compile,
    which traces it, else `_run` directly (less host time than the op's
    dispatch)."""
    return _run_op if torch.compiler.is_compiling() else _run


def _program_for(key, derive, like):
    """Program `derive` of family `key` for tensors like `like`."""
    return _families[key].program(derive, like.device, like.dtype)


def _reads_rows(key, a):
    """Whether family `key`'s backward reads the row statistics its saving
    program writes (a loss over rows: docs/autodiff.md)."""
    return _backward_reads_rows(key, a.device, a.dtype)


@functools.lru_cache(maxsize=None)
def _backward_reads_rows(key, device, dtype):
    try:
        backward = _families[key].program("backward", device, dtype)
    except CodaError:
        # No backward with the GEMM recomputed (an output of the even
        # columns trains through its saved accumulator only): no row loss.
        return False
    return any(name.startswith("saved_row") for name in _signature(backward)[0])


def _row_names(key, a):
    """The names of the row statistics that family `key`'s saving program
    writes for its recomputed backward (a loss over rows: docs/autodiff.md),
    among what it writes for its backward (_saved_names)."""
    return [name for name in _saved_names(key, a) if name.startswith("saved_row")]


def _saved_rows(key, derive, a, outputs):
    """What of `outputs` (of program `derive` of family `key`) the backward
    reads besides the inputs: of a saving program, what it writes after the
    forward's outputs: a row loss's row statistics (its recomputed backward
    reads them), or the accumulator and row statistics that the backward
    from them reads (backward_from_saved)."""
    if derive != "saving":
        return []
    names = _saved_names(key, a)
    written = outputs[len(outputs) - len(names):]
    if not _reads_rows(key, a):
        return written
    return [t for t, name in zip(written, names) if name.startswith("saved_row")]


def _run_backward(call, key, derive, names, scalars, scalar_names, saved, needs, grads):
    """The gradients of A, B and the tensor inputs of `run` (`needs` says
    which of A and B), the derived programs run by `call` (`_run` or the
    custom op). `saved`: A, B, the seed, the tensor inputs, then what
    _saved_rows kept."""
    a, b, seed, *rest = saved
    # A row loss trains through its saving program, whose row statistics its
    # recomputed backward reads; any other saving program through its saved
    # accumulator (backward_from_saved: no GEMM again); any other derived
    # program has no backward here.
    if derive not in ("", "saving"):
        what = ("the inference form of a program (a module in eval mode)"
                if derive == "inference" else f"the derived program '{derive}'")
        raise CodaError(f"{what} has no backward")
    reads_rows = _reads_rows(key, a)
    if reads_rows and not derive:
        raise CodaError("the backward of a loss over rows reads the row statistics its saving "
                        "program writes: run the program 'saving', not the forward, to train it")
    count = len(_split(names))
    tensors, rows = rest[:count], rest[count:]
    backward = "backward_from_saved" if derive == "saving" and not reads_rows else "backward"
    grad_acc, *input_grads = _epilogue_gradient(call, key, a, b, tensors, names, scalars,
                                                scalar_names, seed, rows, grads, backward)
    grad_a = grad_b = None
    if needs[0]:
        grad_a = _as(_operand_gradient(call, key, "grad_a", grad_acc, b, seed), a.dtype)
    if needs[1]:
        grad_b = _as(_operand_gradient(call, key, "grad_b", grad_acc, a, seed), b.dtype)
    return grad_a, grad_b, _in_input_types(input_grads, tensors)


def _epilogue_gradient(call, key, a, b, tensors, names, scalars, scalar_names, seed, rows,
                       grads, derive="backward"):
    """[grad_acc, the gradient of each tensor input (None for one that spans
    n mod p, which takes none)] of family `key`'s forward on A, B and the
    epilogue inputs, given the gradients `grads` of
    its outputs (and `rows`: a row loss's saved row statistics, or for
    `derive` "backward_from_saved" everything its saving program saved): its
    derived program `derive` ("backward": the GEMM recomputed), or, when the
    derivation found every one of its outputs to be a gradient given or that
    gradient's column sum (an epilogue affine in the accumulator with unit
    slope: a bias, a residual), those tensors, with no kernel launched."""
    forward = _families[key].program("", a.device, a.dtype)
    backward = _families[key].program(derive, a.device, a.dtype)
    declared, _, _ = _signature(backward)
    # An input's gradient in the input's own type, which the caller converts
    # it to (one reduction kernel for a bias).
    types = {"grad_" + name: t.dtype for name, t in zip(_split(names), tensors)}
    extra_names = []
    if rows:
        # A copy: the gradients' names are appended to it below.
        extra_names = list(_saved_names(key, a) if derive != "backward" else _row_names(key, a))
    extra_tensors = list(rows)
    # The gradients of the outputs the backward takes ([m, n] outputs, a row
    # loss's [m] outputs).
    for (shape, dtype), output, grad in zip(_outputs(forward, a, b), forward.outputs, grads):
        if "grad_" + output["name"] in declared:
            extra_names.append("grad_" + output["name"])
            extra_tensors.append(grad if grad is not None else a.new_zeros(shape, dtype=dtype))
    input_names = _split(names)
    names = [*input_names, *extra_names]
    tensors = tensors + extra_tensors
    results = _given_outputs(backward, a, dict(zip(names, tensors)), types)
    if results is None:
        results = call(key, derive, a, b, tensors, ",".join(names), scalars, scalar_names, seed)
    return _gradients(backward, results, input_names)


def _gradients(program, results, input_names):
    """[grad_acc, the gradient of each input `input_names` names] among the
    outputs `results` of the derived backward `program`, by name: an input
    that spans n mod p has none (None)."""
    by_name = dict(zip(_signature(program)[2], results))
    return [by_name["grad_acc"], *(by_name.get("grad_" + name) for name in input_names)]


def _in_input_types(grads, tensors):
    """Each gradient of `grads` (or None) in the type of its input."""
    return [None if g is None else _as(g, t.dtype) for g, t in zip(grads, tensors)]


def _given_outputs(program, a, named, types):
    """The outputs of `program` taken from its tensor arguments `named` (by
    name), when each one is an argument itself or an argument's column sum
    (coda_output_source), in the dtypes `types` gives by output name (else
    the declared ones); None when any is computed."""
    results = []
    for output in program.outputs:
        if output["source"] == "computed":
            return None
        tensor = named.get(program.arguments[output["source_argument"]]["name"])
        if tensor is None:
            return None
        dtype = types.get(output["name"]) or _type(program, a, output)
        if output["source"] == "column_sum":
            tensor = tensor.sum(0, dtype=dtype)
        results.append(_as(tensor, dtype))
    return results


def _operand_gradient(call, key, derive, grad_acc, other, seed):
    """grad_a (`other` is B) or grad_b (`other` is A) of family `key`'s GEMM,
    its arguments bound by their names. grad_acc is an operand of a GEMM:
    contiguous (the output's gradient as autograd gives it, where no kernel
    computes grad_acc, may be a broadcast view: a sum's)."""
    grad_acc = grad_acc.contiguous()
    x, y = _operands(key, derive, grad_acc, other, grad_acc)
    return call(key, derive, x, y, [], "", [], "", seed)[0]


def _operands(key, derive, grad_acc, other, like):
    """(A, B) of family `key`'s operand gradient `derive` ("grad_a" or
    "grad_b", for tensors like `like`): grad_acc and `other` in the order its
    arguments name them."""
    program = _program_for(key, derive, like)
    return (grad_acc, other) if program.arguments[0]["name"] == "grad_acc" else (other, grad_acc)


# The kernels a backward will launch, compiled on background threads while
# the forward runs (at the first forward of each problem): the forward calls
# and kernels submitted, the threads, and their work (until it is done).
_ahead = set()
_compiler = None
_compiling = []


def _compile_ahead(call, jobs, like, *args):
    """Compiles, on background threads, the kernels of `jobs(like, *args)`:
    (family key, derived program, shape of operand A, shape of operand B),
    for tensors like `like` (its device and dtype) when they are CUDA
    tensors, once per `call` (a tuple naming the forward and its problem).
    `run`, `mlp` and `tail` call it in eager mode with gradients enabled,
    before their first launch, with what their later forward programs and
    their backward launch, so that the first training step compiles those
    kernels in parallel with each other and with the first; a launch that
    needs a kernel still compiling waits for it. A failed job is left for
    its launch to report. Not while a CUDA graph is being captured."""
    global _compiler
    if call in _ahead or not like.is_cuda or torch.cuda.is_current_stream_capturing():
        return
    _ahead.add(call)
    try:
        jobs = jobs(like, *args)
    except CodaError:
        return  # a backward that cannot be derived says so when it runs
    for key, derive, a, b in jobs:
        program = _program_for(key, derive, like)
        job = (id(program), tuple(a), tuple(b))
        if job in _ahead:
            continue
        _ahead.add(job)
        if _compiler is None:
            _compiler = concurrent.futures.ThreadPoolExecutor(
                max_workers=max(1, min(8, (os.cpu_count() or 2) - 1)),
                thread_name_prefix="coda-compile")
            # At exit, before the executor's own hook waits for its threads:
            # the compiles not started yet are dropped.
            threading._register_atexit(_compiler.shutdown, wait=False, cancel_futures=True)
        _compiling[:] = [f for f in _compiling if not f.done()]
        _compiling.append(_compiler.submit(_prepare_quietly, program, job[1], job[2]))


def _prepare_quietly(program, a, b):
    try:
        program.prepare(a, b, device_seed=True)
    except CodaError:
        pass  # its launch compiles the kernel again and reports the error


def _saved_derive(next_key):
    """The derived program that runs a saved accumulator's epilogue gradient
    on the dgrad GEMM of family `next_key`, whose weight it reads as stored:
    [K, N] for an nn.Linear weight, [N, K] for one stored [in, out]."""
    nk = _families[next_key].options.get("layout_b") == "kn"
    return "backward_saved_nk" if nk else "backward_saved"


def _mlp_shapes(like, up, down, x, w1, w2):
    """The shapes of `mlp`'s h and y on x, w1, w2 (shapes)."""
    h = _output_shapes(_program_for(up, "saving", like), x, w1)[0]
    return h, _output_shapes(_program_for(down, "", like), h, w2)[0]


def _mlp_jobs(like, up, down, x, w1, w2, needs, input_gradient=False):
    """The jobs (_compile_ahead) of `mlp` on x, w1, w2 (shapes; `needs`: the
    gradients of x, w1, b1, w2, b2, residual asked for; `input_gradient`:
    x's gradient computed by the caller, not by fc1's grad_a): fc2's
    forward, which compiles while fc1's does, then the backward's."""
    h, y = _mlp_shapes(like, up, down, x, w1, w2)
    jobs = [(down, "", h, w2)] + _backward_jobs(like, down, h, w2, (False, needs[3]))
    if needs[0] or needs[1] or needs[2]:
        jobs += _backward_jobs(like, up, x, w1, (needs[0] and not input_gradient, needs[1]),
                               (_saved_derive(down), y, w2))
    return jobs


def _tail_jobs(like, proj, up, down, x, w0, w1, w2, needs):
    """The jobs (_compile_ahead) of `tail` on x, w0, w1, w2 (shapes; `needs`:
    the gradients of x, w0, w1, b1, w2, b2 asked for): the MLP's forward
    kernels, which compile while the projection's does, and the backward as
    _tail_backward runs it: the MLP's, with fc1's dgrad GEMM carrying the
    projection's epilogue gradient."""
    normed = _output_shapes(_program_for(proj, "saving", like), x, w0)[0]
    _, y = _mlp_shapes(like, up, down, normed, w1, w2)
    # fc1's epilogue gradient ([m, 2h] for a gated MLP), which fc1's dgrad
    # GEMM multiplies by w1 with the projection's epilogue gradient.
    grad_acc1 = _output_shapes(_program_for(up, _saved_derive(down), like), y, w2)[0]
    return ([(up, "saving", normed, w1)]
            + _mlp_jobs(like, up, down, normed, w1, w2, (True, *needs[2:6], True),
                        input_gradient=True)
            + _backward_jobs(like, proj, x, w0, needs[0:2],
                             (_saved_derive(up), grad_acc1, w1)))


def _run_jobs(like, key, derive, a, b, needs):
    """The jobs (_compile_ahead) of `run`'s backward on a and b (shapes):
    for a saving program whose backward reads no row statistics, the
    backward from its saved accumulator (_run_backward)."""
    if derive == "saving" and not _reads_rows(key, like):
        return _backward_jobs(like, key, a, b, needs, ("backward_from_saved", a, b))
    return _backward_jobs(like, key, a, b, needs)


def _backward_jobs(like, key, a, b, needs, saved_next=None):
    """The jobs (_compile_ahead) of the backward of family `key`'s forward on
    operands of shapes a and b (tensors like `like`): its epilogue gradient
    (with `saved_next` = (derived program, grad_output's shape, the next
    weight's shape), the saved accumulator's on the next GEMM, else the
    recomputed one, unless no kernel computes it), then grad_a and grad_b as
    `needs` (of A, of B) asks."""
    if saved_next is None:
        derive, x, y = "backward", a, b
    else:
        derive, x, y = saved_next
    program = _program_for(key, derive, like)
    jobs = []
    if saved_next or any(output["source"] == "computed" for output in program.outputs):
        jobs.append((key, derive, x, y))
    return jobs + operand_jobs(like, key, _output_shapes(program, x, y)[0], a, b, needs)


def operand_jobs(like, key, grad_acc, a, b, needs):
    """The jobs (_compile_ahead) of family `key`'s grad_a and grad_b as
    `needs` (of A, of B) asks, on grad_acc, A and B of these shapes."""
    return [(key, derive, *_operands(key, derive, grad_acc, other, like))
            for derive, other, needed in (("grad_a", b, needs[0]), ("grad_b", a, needs[1]))
            if needed]


@torch.library.custom_op("coda::run", mutates_args=())
def _run_op(key: str, derive: str, a: torch.Tensor, b: torch.Tensor,
            tensors: list[torch.Tensor], names: str, scalars: list[float], scalar_names: str,
            seed: torch.Tensor) -> list[torch.Tensor]:
    return _run(key, derive, a, b, tensors, names, scalars, scalar_names, seed)


def _run_fake(key, derive, a, b, tensors, names, scalars, scalar_names, seed):
    """Empty tensors shaped as `run`'s outputs (nothing launched)."""
    program = _families[key].program(derive, a.device, a.dtype)
    return [a.new_empty(shape, dtype=dtype) for shape, dtype in _outputs(program, a, b)]


_run_op.register_fake(_run_fake)


def _run_op_setup_context(ctx, inputs, output):
    key, derive, a, b, tensors, names, scalars, scalar_names, seed = inputs
    ctx.save_for_backward(a, b, seed, *tensors, *_saved_rows(key, derive, a, output))
    ctx.meta = key, derive, names, scalars, scalar_names


def _run_op_backward(ctx, grads):
    grad_a, grad_b, tensor_grads = _run_backward(_run_op, *ctx.meta, ctx.saved_tensors,
                                                 ctx.needs_input_grad[2:4], grads)
    # PyTorch's structure of the inputs: a list of floats is one leaf, an
    # empty one an empty list.
    scalars = None if ctx.meta[3] else []
    return None, None, grad_a, grad_b, tensor_grads, None, scalars, None, None


_run_op.register_autograd(_run_op_backward, setup_context=_run_op_setup_context)


class _Run(torch.autograd.Function):
    """`run` in eager mode."""

    @staticmethod
    def forward(ctx, meta, a, b, seed, *tensors):
        key, derive, names, scalars, scalar_names = meta
        ctx.meta = meta
        outputs = _run(key, derive, a, b, list(tensors), names, scalars, scalar_names, seed)
        ctx.save_for_backward(a, b, seed, *tensors, *_saved_rows(key, derive, a, outputs))
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        grad_a, grad_b, tensor_grads = _run_backward(_run, *ctx.meta, ctx.saved_tensors,
                                                     ctx.needs_input_grad[1:3], grads)
        return None, grad_a, grad_b, None, *tensor_grads


def run(key, derive, a, b, tensors, names, scalars, scalar_names, seed):
    """Runs program `derive` ("" for the forward; "saving" for the forward
    that also writes what its backward reads: a row loss's row statistics,
    or the accumulator (and row statistics) from which its backward runs
    without the GEMM again, backward_from_saved) of family `key`
    on A, B and the epilogue inputs `tensors` (named by the comma-separated
    `names`) and scalars; returns its outputs in order, differentiable
    through the derived backward. `seed`: an int64 tensor of one element on
    A's device. Under torch.autocast, A and B are cast to its type."""
    a, b = _autocast(a, b)
    if torch.compiler.is_compiling():
        return _run_op(key, derive, a, b, tensors, names, scalars, scalar_names, seed)
    if torch.is_grad_enabled() and derive in ("", "saving"):
        needs = (a.requires_grad, b.requires_grad)
        if needs[0] or needs[1] or any(t.requires_grad for t in tensors):
            _compile_ahead(("run", key, derive, a.dtype, a.shape, b.shape, needs), _run_jobs, a,
                           key, derive, a.shape, b.shape, needs)
    meta = key, derive, names, list(scalars), scalar_names
    return list(_Run.apply(meta, a, b, seed, *tensors))


def down_inputs(bias, residual):
    """The epilogue inputs of an MLP's second GEMM that are given, and their
    names: `bias` and `residual`, each when not None."""
    named = [(n, t) for n, t in (("bias", bias), ("residual", residual)) if t is not None]
    return [t for _, t in named], [n for n, _ in named]


def _saved_names(key, x):
    """The names of what program family `key`'s saving program writes for
    its backward (its accumulator, then its row statistics): its outputs
    after the forward's, worked out at the first call."""
    saving = _families[key].program("saving", x.device, x.dtype)
    names = getattr(saving, "_saved_names", None)
    if names is None:
        forward = _families[key].program("", x.device, x.dtype)
        # A tuple: the callers extend copies of it, never the cached one.
        names = saving._saved_names = tuple(output["name"] for output in
                                            saving.outputs[len(forward.outputs):])
    return names


def _mlp(call, up, down, x, w1, b1, w2, b2, residual, seed, output_seed):
    """The forward of `mlp`, its programs run by `call`: [y, h, then what
    fc1's saving program writes for its backward (_saved_names)]."""
    h, *saved = call(up, "saving", x, w1, [] if b1 is None else [b1],
                     "" if b1 is None else "bias", [], "", seed)
    tensors, names = down_inputs(b2, residual)
    (y,) = call(down, "", h, w2, tensors, ",".join(names), [], "", output_seed)
    return [y, h, *saved]


def _mlp_backward(call, up, down, saved_tensors, needs, grad_y, input_gradient=None):
    """The gradients of x, w1, b1, w2, b2 and the residual (`needs` says
    which): fc2's epilogue gradient (for `input + bias + residual`, no
    kernel: its gradients are grad_y and grad_y's column sum; with dropout,
    its derived backward, the mask regenerated from `output_seed`), then
    fc1's epilogue gradient on the dgrad GEMM of fc2 (grad_acc2 w2), reading
    the saved accumulator. `input_gradient(grad_acc1, grad_residual)`, when
    given, replaces fc1's dgrad GEMM (grad_acc1 w1) for x's gradient."""
    x, w1, b1, w2, b2, residual, h, seed, output_seed, *saved = saved_tensors
    if grad_y is None:
        return None, None, None, None, None, None
    grad_y = _as(grad_y, h.dtype).contiguous()
    tensors, names = down_inputs(b2, residual)
    grad_acc2, *input_grads = _epilogue_gradient(call, down, h, w2, tensors, ",".join(names),
                                                 [], "", output_seed, [], [grad_y])
    grads = dict(zip(names, input_grads))
    grad_b2 = _as(grads["bias"], b2.dtype) if needs[4] else None
    grad_residual = _as(grads["residual"], residual.dtype) if needs[5] else None
    grad_w2 = (_as(_operand_gradient(call, down, "grad_b", grad_acc2, h, output_seed), w2.dtype)
               if needs[3] else None)
    grad_x = grad_w1 = grad_b1 = None
    if needs[0] or needs[1] or needs[2]:
        backward = call(up, _saved_derive(down), grad_acc2, w2,
                        saved + ([] if b1 is None else [b1]),
                        ",".join(_saved_names(up, x) + (() if b1 is None else ("bias",))), [],
                        "", seed)
        grad_acc = backward[0]
        if needs[2]:
            grad_b1 = _as(backward[1], b1.dtype)
        if needs[0] and input_gradient is not None:
            grad_x = input_gradient(grad_acc, grad_residual)
        elif needs[0]:
            grad_x = _as(_operand_gradient(call, up, "grad_a", grad_acc, w1, seed), x.dtype)
        if needs[1]:
            grad_w1 = _as(_operand_gradient(call, up, "grad_b", grad_acc, x, seed), w1.dtype)
    return grad_x, grad_w1, grad_b1, grad_w2, grad_b2, grad_residual


@torch.library.custom_op("coda::mlp", mutates_args=())
def _mlp_op(up: str, down: str, x: torch.Tensor, w1: torch.Tensor, b1: Optional[torch.Tensor],
            w2: torch.Tensor, b2: Optional[torch.Tensor], residual: Optional[torch.Tensor],
            seed: torch.Tensor, output_seed: torch.Tensor) -> list[torch.Tensor]:
    return _mlp(_run, up, down, x, w1, b1, w2, b2, residual, seed, output_seed)


@_mlp_op.register_fake
def _(up, down, x, w1, b1, w2, b2, residual, seed, output_seed):
    return _mlp_fake(up, down, x, w1, w2)


def _mlp_fake(up, down, x, w1, w2):
    """Empty tensors shaped as `mlp`'s outputs."""
    fc1 = _families[up].program("saving", x.device, x.dtype)
    fc2 = _families[down].program("", x.device, x.dtype)
    h, *saved = [x.new_empty(shape, dtype=dtype) for shape, dtype in _outputs(fc1, x, w1)]
    ((y_shape, y_type),) = _outputs(fc2, h, w2)
    return [x.new_empty(y_shape, dtype=y_type), h, *saved]


def _mlp_op_setup_context(ctx, inputs, output):
    up, down, x, w1, b1, w2, b2, residual, seed, output_seed = inputs
    _, h, *saved = output
    ctx.mark_non_differentiable(*output[1:])
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, w1, b1, w2, b2, residual, h, seed, output_seed, *saved)
    ctx.meta = up, down


def _mlp_op_backward(ctx, grads):
    up, down = ctx.meta
    return (None, None, *_mlp_backward(_run_op, up, down, ctx.saved_tensors,
                                       ctx.needs_input_grad[2:8], grads[0]), None, None)


_mlp_op.register_autograd(_mlp_op_backward, setup_context=_mlp_op_setup_context)


class _Mlp(torch.autograd.Function):
    """`mlp` in eager mode."""

    @staticmethod
    def forward(ctx, up, down, x, w1, b1, w2, b2, residual, seed, output_seed):
        y, h, *saved = _mlp(_run, up, down, x, w1, b1, w2, b2, residual, seed, output_seed)
        ctx.mark_non_differentiable(h, *saved)
        # h and what the backward reads have no gradient: no zeros made for
        # them.
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, w1, b1, w2, b2, residual, h, seed, output_seed, *saved)
        ctx.meta = up, down
        return (y, h, *saved)

    @staticmethod
    def backward(ctx, grad_y, *unused):
        up, down = ctx.meta
        return (None, None, *_mlp_backward(_run, up, down, ctx.saved_tensors,
                                           ctx.needs_input_grad[2:8], grad_y), None, None)


def mlp(up, down, x, w1, b1, w2, b2, residual, seed, output_seed):
    """A Transformer MLP of two program families: `up` (fc1, its epilogue
    of inputs `bias` and the dropout seed `seed`) on x [M, D] and w1 [H, D],
    whose program `saving` also writes the accumulator, then `down` (fc2:
    `input + bias`, dropout of it with the seed `output_seed`, and
    `residual`, each when given) on w2 [D, H]. Returns [y, h, saved_acc and
    the row statistics fc1's epilogue reads, if any]: the output, then what
    the backward reads. Under torch.autocast, x, w1 and w2 are cast to its
    type."""
    x, w1, w2 = _autocast(x, w1, w2)
    if torch.compiler.is_compiling():
        return _mlp_op(up, down, x, w1, b1, w2, b2, residual, seed, output_seed)
    if torch.is_grad_enabled():
        needs = tuple(t is not None and t.requires_grad for t in (x, w1, b1, w2, b2, residual))
        if any(needs):
            _compile_ahead(("mlp", up, down, x.dtype, x.shape, w1.shape, w2.shape, needs),
                           _mlp_jobs, x, up, down, x.shape, w1.shape, w2.shape, needs)
    return list(_Mlp.apply(up, down, x, w1, b1, w2, b2, residual, seed, output_seed))


def _tail(call, proj, up, down, x, w0, tensors, names, w1, b1, w2, b2, seed0, seed,
          output_seed):
    """The forward of `tail`, its programs run by `call`: [y, norm(h), h, what
    fc1's backward reads, then what the projection's does (its accumulator
    and row statistics)]."""
    normed, h, *saved0 = call(proj, "saving", x, w0, tensors, names, [], "", seed0)
    y, g, *saved1 = _mlp(call, up, down, normed, w1, b1, w2, b2, h, seed, output_seed)
    return [y, normed, h, g, *saved1, *saved0]


def _tail_backward(call, proj, up, down, names, saved_tensors, needs, grad_y):
    """The gradients of x, w0, w1, b1, w2, b2 and the projection's tensor
    inputs (`needs` says which): the MLP's backward on its input `normed`
    and residual `h`, in which the projection's epilogue gradient (the
    norm's backward, the residual's and the parameters' gradients) runs on
    fc1's dgrad GEMM (grad_acc1 w1), given h's gradient through the residual;
    then the projection's operand gradients."""
    x, w0, seed0, normed, h, w1, b1, w2, b2, g, seed, output_seed, *rest = saved_tensors
    saved_names = _saved_names(proj, x)
    fc1_saved = len(_saved_names(up, x))
    saved1, rest = rest[:fc1_saved], rest[fc1_saved:]
    saved0, tensors = rest[:len(saved_names)], rest[len(saved_names):]
    if grad_y is None:
        return None, None, None, None, None, None, [None] * len(tensors)
    result = {}

    def through_projection(grad_acc1, grad_h):
        derive = _saved_derive(up)
        outputs = call(proj, derive, grad_acc1, w1, tensors + saved0 + [_as(grad_h, h.dtype)],
                       ",".join([*_split(names), *saved_names, "grad_h"]), [], "", seed0)
        grad_acc0, *input_grads = _gradients(_program_for(proj, derive, x), outputs,
                                             _split(names))
        result["inputs"] = _in_input_types(input_grads, tensors)
        result["w0"] = (_as(_operand_gradient(call, proj, "grad_b", grad_acc0, x, seed0), w0.dtype)
                        if needs[1] else None)
        return (_as(_operand_gradient(call, proj, "grad_a", grad_acc0, w0, seed0), x.dtype)
                if needs[0] else None)

    grad_x, grad_w1, grad_b1, grad_w2, grad_b2, _ = _mlp_backward(
        call, up, down, (normed, w1, b1, w2, b2, h, g, seed, output_seed, *saved1),
        (True, *needs[2:6], True), grad_y, through_projection)
    return (grad_x, result["w0"], grad_w1, grad_b1, grad_w2, grad_b2, result["inputs"])


@torch.library.custom_op("coda::tail", mutates_args=())
def _tail_op(proj: str, up: str, down: str, x: torch.Tensor, w0: torch.Tensor,
             tensors: list[torch.Tensor], names: str, w1: torch.Tensor,
             b1: Optional[torch.Tensor], w2: torch.Tensor, b2: Optional[torch.Tensor],
             seed0: torch.Tensor, seed: torch.Tensor,
             output_seed: torch.Tensor) -> list[torch.Tensor]:
    return _tail(_run, proj, up, down, x, w0, tensors, names, w1, b1, w2, b2, seed0, seed,
                 output_seed)


@_tail_op.register_fake
def _(proj, up, down, x, w0, tensors, names, w1, b1, w2, b2, seed0, seed, output_seed):
    saving = _families[proj].program("saving", x.device, x.dtype)
    normed, h, *saved0 = [x.new_empty(shape, dtype=dtype)
                          for shape, dtype in _outputs(saving, x, w0)]
    y, g, *saved1 = _mlp_fake(up, down, normed, w1, w2)
    return [y, normed, h, g, *saved1, *saved0]


def _tail_op_setup_context(ctx, inputs, output):
    proj, up, down, x, w0, tensors, names, w1, b1, w2, b2, seed0, seed, output_seed = inputs
    _, normed, h, g, *saved = output
    ctx.mark_non_differentiable(*output[1:])
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, w0, seed0, normed, h, w1, b1, w2, b2, g, seed, output_seed, *saved,
                          *tensors)
    ctx.meta = proj, up, down, names


def _tail_op_backward(ctx, grads):
    proj, up, down, names = ctx.meta
    needs = ctx.needs_input_grad
    grad_x, grad_w0, grad_w1, grad_b1, grad_w2, grad_b2, grad_tensors = _tail_backward(
        _run_op, proj, up, down, names, ctx.saved_tensors,
        (needs[3], needs[4], needs[7], needs[8], needs[9], needs[10]), grads[0])
    return (None, None, None, grad_x, grad_w0, grad_tensors, None, grad_w1, grad_b1, grad_w2,
            grad_b2, None, None, None)


_tail_op.register_autograd(_tail_op_backward, setup_context=_tail_op_setup_context)


class _Tail(torch.autograd.Function):
    """`tail` in eager mode."""

    @staticmethod
    def forward(ctx, meta, x, w0, w1, b1, w2, b2, seed0, seed, output_seed, *tensors):
        proj, up, down, names = meta
        outputs = _tail(_run, proj, up, down, x, w0, list(tensors), names, w1, b1, w2, b2,
                        seed0, seed, output_seed)
        _, normed, h, g, *saved = outputs
        ctx.mark_non_differentiable(*outputs[1:])
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, w0, seed0, normed, h, w1, b1, w2, b2, g, seed, output_seed,
                              *saved, *tensors)
        ctx.meta = meta
        return tuple(outputs)

    @staticmethod
    def backward(ctx, grad_y, *unused):
        proj, up, down, names = ctx.meta
        needs = ctx.needs_input_grad
        grad_x, grad_w0, grad_w1, grad_b1, grad_w2, grad_b2, grad_tensors = _tail_backward(
            _run, proj, up, down, names, ctx.saved_tensors, needs[1:7], grad_y)
        return (None, grad_x, grad_w0, grad_w1, grad_b1, grad_w2, grad_b2, None, None, None,
                *grad_tensors)


def tail(proj, up, down, x, w0, tensors, names, w1, b1, w2, b2, seed0, seed, output_seed):
    """The second half of a pre-norm Transformer block, three programs:
    `proj` on x [M, D] and w0 (an attention output projection whose epilogue,
    of tensor inputs `tensors` named by `names` and the dropout seed
    `seed0`, writes norm(h), then h, the residual stream), then an `mlp` of
    `up` and `down` on norm(h) with h as fc2's residual. Backward: the
    MLP's, with the projection's epilogue gradient (the norm's backward)
    on fc1's dgrad GEMM, reading the projection's saved accumulator and row
    statistics. Returns [y, norm(h), h, and what the backward reads]. Under
    torch.autocast, x and the weights are cast to its type."""
    x, w0, w1, w2 = _autocast(x, w0, w1, w2)
    if torch.compiler.is_compiling():
        return _tail_op(proj, up, down, x, w0, tensors, names, w1, b1, w2, b2, seed0, seed,
                        output_seed)
    if torch.is_grad_enabled():
        needs = tuple(t is not None and t.requires_grad for t in (x, w0, w1, b1, w2, b2))
        if any(needs) or any(t.requires_grad for t in tensors):
            _compile_ahead(("tail", proj, up, down, x.dtype, x.shape, w0.shape, w1.shape,
                            w2.shape, needs), _tail_jobs, x, proj, up, down, x.shape, w0.shape,
                           w1.shape, w2.shape, needs)
    meta = proj, up, down, names
    return list(_Tail.apply(meta, x, w0, w1, b1, w2, b2, seed0, seed, output_seed, *tensors))
