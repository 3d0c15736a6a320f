"""Run coda programs on PyTorch CUDA tensors.

    import torch, coda
    program = coda.Program(open("mlp.mlir").read())
    out = program(x, w, bias=b, residual=r, seed=1234)     # dict of outputs
    out["output"]                                         # a torch tensor

The program is compiled when first called (and cached in memory and on disk),
then launched on PyTorch's current stream, on the tensors' memory: nothing is
copied. Inputs must be contiguous CUDA tensors of the dtypes the program
declares; outputs are allocated with torch.empty. Launches can be captured
in a CUDA graph once the program has run on the problem shape outside one,
with its seed given the same way; a replay keeps the scalars of the capture
(alpha, beta, a seed given as an int or drawn), while a seed given as a CUDA
int64 tensor is read at each launch. The
library is libcoda_runtime.so, found through $CODA_RUNTIME_LIBRARY, in the
installed package (pip install ./python) or in the build folders of the source
tree.
"""

import atexit
import ctypes
import os
import struct
import weakref

_DIMS_B, _DIMS_M, _DIMS_N = 4, 2, 1
# With _DIMS_N: an output of the even columns only, N // 2 wide ([m, n/2]).
_DIMS_HALF_N = 8
# The GEMM's own arguments by role index (a program argument's role is one of
# these or "input"), the kinds of arguments a launch packs, and the padding
# of a shape to coda_tensor's three dims.
_ROLES = ("a", "b", "c", "alpha", "beta")
_TENSOR, _F32, _I64, _SEED = range(4)
_MISSING = object()
_PAD = ((0, 0, 0), (0, 0), (0,), ())
# coda_output_source: what an output is when the GEMM plays no part in it
# (an output's "source", with "source_argument" the argument's index).
_OUTPUT_SOURCES = ("computed", "argument", "column_sum")


def _output_space(program, a, b):
    """(batch, M, N) of `program` (a Program or ReferenceProgram) on
    operands a and b (tensors or shapes): batch None unless one is batched,
    N twice B's columns when the accumulator spans [m, n/2]."""
    a, b = getattr(a, "shape", a), getattr(b, "shape", b)
    m = a[-1] if program.transpose_a else a[-2]
    n = b[-2] if program.transpose_b else b[-1]
    batch = a[0] if len(a) == 3 else (b[0] if len(b) == 3 else None)
    return batch, m, 2 * n if program.accumulator_half_n else n


def _tensor_struct(tensor, shape):
    """The coda_tensor fields (data, rank, shape[3]) of `tensor`, whose shape
    is `shape`."""
    return (tensor.data_ptr(), len(shape), *shape) + _PAD[len(shape)]


def _output_shape(dims, batch, m, n):
    """The shape of an output spanning `dims` (a DimsAttr mask) of a problem."""
    columns = n // 2 if dims & _DIMS_HALF_N else n
    return [size for bit, size in ((_DIMS_B, batch), (_DIMS_M, m), (_DIMS_N, columns))
            if dims & bit]


# The programs alive, released by an atexit handler when the interpreter
# exits, before its finalization starts. Released during the finalization
# (each takes a while: its MLIR context and JIT, or its CUDA module), they
# made room for an abort at exit ("terminate called without an active
# exception") in about one two-process gloo run of 15 under
# torch.distributed; a thread that asks for the GIL then is ended, which a
# C++ thread does not survive.
_live_programs = weakref.WeakSet()


@atexit.register
def _release_live_programs():
    for program in list(_live_programs):
        program._release()


def _check_live(program):
    if not program._handle:
        raise CodaError("the program was released: the interpreter is exiting")


class CodaError(RuntimeError):
    """A failure reported by coda's runtime (compilation, checks, CUDA)."""


# coda_tensor {uint64_t data; int32_t rank; int64_t shape[3];} and coda_value
# {coda_tensor tensor; float f32; int64_t i64;} of coda_runtime.h, as struct
# formats with the C compiler's alignment: a launch packs its arguments and
# outputs into one buffer each.
_TENSOR = "Qi3q"
_VALUE = _TENSOR + "fq"
# Standard size: packing refuses a finite value beyond f32's range (the
# native format would make it inf).
_F32 = struct.Struct("<f")


class _Options(ctypes.Structure):
    _fields_ = [("tile_n", ctypes.c_int64), ("stages", ctypes.c_int64),
                ("function", ctypes.c_char_p), ("epilogue", ctypes.c_int32),
                ("dtype", ctypes.c_char_p), ("layout_a", ctypes.c_char_p),
                ("layout_b", ctypes.c_char_p), ("with_c", ctypes.c_int32),
                ("with_alpha", ctypes.c_int32), ("tile_m", ctypes.c_int64),
                ("schedule", ctypes.c_char_p), ("autotune", ctypes.c_int32),
                ("cluster_m", ctypes.c_int64), ("group_rows", ctypes.c_int64),
                ("fast_activations", ctypes.c_int32), ("derive", ctypes.c_char_p),
                ("deterministic", ctypes.c_int32)]


def _options_layout(options=_Options):
    """The layout of `options` as coda_compile_options_layout spells the C
    struct's: "size S, NAME OFFSET SIZE, ..." in bytes."""
    fields = [f"{name} {getattr(options, name).offset} {getattr(options, name).size}"
              for name, _ in options._fields_]
    return ", ".join([f"size {ctypes.sizeof(options)}"] + fields)


def _check_options_layout(lib, options=_Options):
    """Raises CodaError unless `options` mirrors the coda_compile_options of
    the runtime library `lib` field for field."""
    theirs, ours = lib.coda_compile_options_layout().decode(), _options_layout(options)
    if theirs != ours:
        raise CodaError(f"{lib._name}: its coda_compile_options ({theirs}) does not "
                        f"match the python package's ({ours}); install the package "
                        "and the library from the same build")


def _is_epilogue(source):
    """Whether `source` is written in the epilogue DSL (it starts with EPILOGUE
    after comments) rather than in coda IR."""
    for line in source.splitlines():
        line = line.split("//")[0].split("#")[0].strip()
        if line:
            return line.startswith("EPILOGUE")
    return False


def _find_library(name="coda_runtime", variable="CODA_RUNTIME_LIBRARY"):
    """lib<name>.so: $<variable>, else the one installed with the package
    (pip install ./python), else the one in the build folders of the source
    tree, else the dynamic loader's search path."""
    explicit = os.environ.get(variable)
    if explicit:
        return explicit
    package = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(package))
    for folder in (os.path.join(package, "lib"), os.path.join(root, "build", "lib"),
                   os.path.join(root, "build-static", "lib")):
        path = os.path.join(folder, f"lib{name}.so")
        if os.path.exists(path):
            return path
    return f"lib{name}.so"


def _load_library(name, variable):
    """Loads lib<name>.so (see _find_library), or says where it was looked
    for."""
    path = _find_library(name, variable)
    try:
        return ctypes.CDLL(path)
    except OSError as error:
        raise CodaError(f"cannot load lib{name}.so ({error}); install coda with its libraries "
                        f"(cmake --build build && pip install ./python) or set ${variable} to "
                        "the library's path") from None


def _require_torch(what):
    """Imports torch, or raises an ImportError that says `what` needs it."""
    try:
        import torch
    except ImportError:
        raise ImportError(f"{what} runs on PyTorch tensors, and PyTorch is not installed "
                          "(pip install torch)") from None
    return torch


_lib = None


def _library():
    global _lib
    if _lib is None:
        lib = _load_library("coda_runtime", "CODA_RUNTIME_LIBRARY")
        P, I, C = ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p
        sig = {
            "coda_last_error": (C, []),
            "coda_compile_options_layout": (C, []),
            "coda_runtime_create": (I, [ctypes.c_int, ctypes.POINTER(P)]),
            "coda_runtime_destroy": (None, [P]),
            "coda_program_load": (I, [P, C, ctypes.c_size_t, ctypes.POINTER(_Options),
                                      ctypes.POINTER(P)]),
            "coda_program_destroy": (None, [P]),
            "coda_program_num_arguments": (I, [P]),
            "coda_program_argument_name": (C, [P, I]),
            "coda_program_argument_role": (C, [P, I]),
            "coda_program_argument_type": (C, [P, I]),
            "coda_program_argument_dims": (I, [P, I]),
            "coda_program_argument_period": (I, [P, I]),
            "coda_program_argument_kind": (I, [P, I]),
            "coda_program_num_outputs": (I, [P]),
            "coda_program_output_name": (C, [P, I]),
            "coda_program_output_type": (C, [P, I]),
            "coda_program_output_dims": (I, [P, I]),
            "coda_program_output_source": (I, [P, I, ctypes.POINTER(I)]),
            "coda_program_layouts": (None, [P, ctypes.POINTER(I), ctypes.POINTER(I)]),
            "coda_program_accumulator_half_n": (I, [P]),
            "coda_program_kernel_shape": (None, [P, ctypes.POINTER(ctypes.c_int64),
                                                 ctypes.POINTER(ctypes.c_int64),
                                                 ctypes.POINTER(C),
                                                 ctypes.POINTER(ctypes.c_int64),
                                                 ctypes.POINTER(ctypes.c_int64)]),
            "coda_program_prepare": (I, [P]),
            "coda_program_prepare_problem": (I, [P, ctypes.c_int64, ctypes.c_int64,
                                                 ctypes.c_int64, ctypes.c_int64, I]),
            "coda_program_launch": (I, [P, P, ctypes.c_size_t, P, ctypes.c_size_t, P]),
            "coda_program_launch_device_seed": (I, [P, P, ctypes.c_size_t, P, ctypes.c_size_t,
                                                    ctypes.c_uint64, P]),
            "coda_graph_load": (I, [P, C, ctypes.c_size_t, ctypes.POINTER(_Options),
                                    ctypes.POINTER(P)]),
            "coda_graph_destroy": (None, [P]),
            "coda_graph_describe": (C, [P]),
            "coda_graph_plan": (I, [P, P, ctypes.c_size_t, P, ctypes.c_size_t,
                                    ctypes.POINTER(ctypes.c_uint64)]),
            "coda_graph_prepare": (I, [P, P, ctypes.c_size_t]),
            "coda_graph_launch": (I, [P, P, ctypes.c_size_t, P, ctypes.c_size_t,
                                      ctypes.c_uint64, ctypes.c_uint64, P]),
        }
        _check_options_layout(_declare(lib, sig))
        _lib = lib
    return _lib


def _declare(lib, signatures):
    """`lib` with the C signatures {name: (restype, argtypes)} set."""
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def _check(status, library=None, last_error="coda_last_error"):
    """Raises CodaError with the library's last message unless `status` is 0."""
    if status != 0:
        lib = library or _library()
        raise CodaError(getattr(lib, last_error)().decode())


_runtimes = {}


def _runtime(device):
    if device not in _runtimes:
        handle = ctypes.c_void_p()
        _check(_library().coda_runtime_create(device, ctypes.byref(handle)))
        _runtimes[device] = handle
    return _runtimes[device]


class Program:
    """A coda program bound to a CUDA device (by default PyTorch's current
    one, torch.cuda.current_device()): coda IR text, or an epilogue in
    the DSL (docs/dsl.md), whose GEMM is set up by dtype ("bf16", "f16",
    "f32"), layout_a ("mk", "km"), layout_b ("nk", "kn"), with_c and
    with_alpha. tile_m, tile_n, stages, schedule, cluster_m (blocks per
    cluster along M, 1 or 2) and group_rows (the tile order: row blocks walked
    column by column before the next group) pin the kernel shape;
    fast_activations=True runs GELU(tanh), SiLU and sigmoid on the GPU's
    tanh.approx.f32 (faster, less accurate: as cuBLASLt's fused GELU);
    autotune=True instead times the candidate shapes at the first call of
    each problem shape and keeps the fastest (cached with the kernels).
    derive="backward", "saving", "backward_saved" ("backward_saved_nk": the
    next layer's weight stored [in, out]), "backward_from_saved" (the
    epilogue gradient on the saved accumulator, no product), "grad_a" or
    "grad_b"
    loads the program derived from the source's for training
    (docs/autodiff.md); "inference", "row_statistics" and "row_apply" the
    others it lists. deterministic=True merges column reductions (a bias
    gradient) in a fixed order instead of with f32 atomics, so that they are
    bit-identical from run to run; None (the default) follows
    torch.are_deterministic_algorithms_enabled() when the program is made."""

    def __init__(self, source, function="", device=None, tile_n=0, stages=0,
                 dtype="bf16", layout_a="mk", layout_b="nk", with_c=False,
                 with_alpha=False, tile_m=0, schedule="", autotune=False,
                 cluster_m=0, group_rows=0, fast_activations=False, derive="",
                 deterministic=None):
        torch = _require_torch("coda.Program")
        if deterministic is None:
            deterministic = torch.are_deterministic_algorithms_enabled()
        self.deterministic = bool(deterministic)
        torch.cuda.init()  # the runtime shares PyTorch's primary context
        if device is None:
            device = torch.cuda.current_device()
        self.device = device
        lib = _library()
        options = _Options(tile_n, stages, function.encode() or None,
                           int(_is_epilogue(source)), dtype.encode(), layout_a.encode(),
                           layout_b.encode(), int(with_c), int(with_alpha), tile_m,
                           schedule.encode() or None, int(autotune), cluster_m, group_rows,
                           int(fast_activations), derive.encode() or None,
                           int(self.deterministic))
        handle = ctypes.c_void_p()
        text = source.encode()
        _check(lib.coda_program_load(_runtime(device), text, len(text),
                                     ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle
        _live_programs.add(self)
        self.arguments = []
        for i in range(lib.coda_program_num_arguments(handle)):
            self.arguments.append({
                "name": lib.coda_program_argument_name(handle, i).decode(),
                "role": lib.coda_program_argument_role(handle, i).decode(),
                "type": lib.coda_program_argument_type(handle, i).decode(),
                "dims": lib.coda_program_argument_dims(handle, i),
                "period": lib.coda_program_argument_period(handle, i),
                "tensor": lib.coda_program_argument_kind(handle, i) == 0,
            })
        self.outputs = []
        for i in range(lib.coda_program_num_outputs(handle)):
            argument = ctypes.c_int32()
            source = lib.coda_program_output_source(handle, i, ctypes.byref(argument))
            self.outputs.append({
                "name": lib.coda_program_output_name(handle, i).decode(),
                "type": lib.coda_program_output_type(handle, i).decode(),
                "dims": lib.coda_program_output_dims(handle, i),
                "source": _OUTPUT_SOURCES[source],
                "source_argument": argument.value,
            })
        ta, tb = ctypes.c_int32(), ctypes.c_int32()
        lib.coda_program_layouts(handle, ctypes.byref(ta), ctypes.byref(tb))
        self.transpose_a, self.transpose_b = bool(ta.value), bool(tb.value)
        self.accumulator_half_n = bool(lib.coda_program_accumulator_half_n(handle))
        self._plan = None

    def _release(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _library().coda_program_destroy(handle)

    def __del__(self):
        self._release()

    @property
    def kernel_shape(self):
        """(tile_m, tile_n, schedule, cluster_m, group_rows) of the kernel prepared or
        launched last: the tile rule's or autotuning's choice for the last
        problem; None before any."""
        tm, tn, schedule = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_char_p()
        cm, gr = ctypes.c_int64(), ctypes.c_int64()
        _library().coda_program_kernel_shape(self._handle, ctypes.byref(tm), ctypes.byref(tn),
                                             ctypes.byref(schedule), ctypes.byref(cm),
                                             ctypes.byref(gr))
        return ((tm.value, tn.value, schedule.value.decode(), cm.value, gr.value)
                if tm.value else None)

    def prepare(self, a=None, b=None, *, device_seed=False):
        """Compiles (or fetches from a cache) now rather than at the first call:
        without operands, the kernel of the compile options (unless they pin
        the tile shape, a problem that fills the GPU better with another tile
        width gets that kernel, compiled at its first call); with operands a
        and b (tensors or their shapes), the kernel that calls on them use
        (with `device_seed`, calls given the dropout seed as a CUDA tensor).
        Threads may prepare and call programs at once: kernels compile in
        parallel (the GIL released), each once."""
        _check_live(self)
        if a is None and b is None:
            _check(_library().coda_program_prepare(self._handle))
            return
        if a is None or b is None:
            raise CodaError("prepare takes both operands, a and b, or neither")
        batch, m, n = _output_space(self, a, b)
        k = getattr(a, "shape", a)[-2 if self.transpose_a else -1]
        _check(_library().coda_program_prepare_problem(self._handle, batch or 1, m, n, k,
                                                       int(device_seed)))

    def __call__(self, a, b, c=None, *, gemm_alpha=None, gemm_beta=None, seed=None, out=None,
                 inputs=None, **named):
        """Launches the program; returns {output name: tensor}.

        Epilogue inputs are keyword arguments by name (an epilogue may have
        an input named alpha: the GEMM's own scalars are gemm_alpha and
        gemm_beta, default 1), or entries of `inputs`, a dict, which also
        takes inputs named like this call's own parameters (a, b, c, out,
        ...); `out` may give preallocated outputs by name (on the GPU an
        output may be an epilogue input's own tensor, written in place, but
        overlaps no other output, A, B or other input). `seed` is an int,
        or a CUDA int64 tensor of one element that the kernel reads as it
        starts: a CUDA graph that captured the call replays with the seed
        the tensor holds then (advance it, in the graph or between replays,
        for a new dropout mask each time). Without it, a program that draws
        dropout masks takes a seed from PyTorch's default (CPU) generator: a
        new mask at each call, as F.dropout, reproducible under
        torch.manual_seed (under CUDA graph capture, drawn once: give a tensor
        seed there); give it to regenerate a mask (coda.dropout_mask).
        """
        if inputs:
            inputs = dict(inputs)
            for name, value in named.items():
                if name in inputs:
                    raise CodaError(f"epilogue input '{name}' was given twice")
                inputs[name] = value
        else:
            inputs = named
        _check_live(self)
        plan = self._plan or self._make_plan()
        torch = plan["torch"]
        given = (a, b, c, gemm_alpha, gemm_beta)
        fields = []
        used = 0
        seed_address = 0
        for name, role, kind, dtype in plan["arguments"]:
            if role < 0:
                value = inputs.get(name, _MISSING)
                if value is not _MISSING:
                    used += 1
                elif kind == _SEED:
                    # As F.dropout: unless given, from PyTorch's default
                    # generator (reproducible under torch.manual_seed).
                    value = seed if seed is not None else int(
                        torch.empty((), dtype=torch.int64).random_())
                else:
                    raise CodaError(f"missing epilogue input '{name}'")
            else:
                value = given[role]
                if value is None:
                    if kind != _F32:
                        raise CodaError(f"missing '{_ROLES[role]}'")
                    value = 1.0
            if kind == _TENSOR:
                fields += self._tensor_fields(name, value, dtype)
                fields += (0.0, 0)
            elif kind == _SEED and isinstance(value, torch.Tensor) and value.is_cuda:
                seed_address = self._seed_address(name, value)
                fields += (0, 0, 0, 0, 0, 0.0, 0)
            elif kind != _F32:
                # A 64-bit seed, passed as the signed integer with its bits.
                bits = int(value) & 0xFFFFFFFFFFFFFFFF
                fields += (0, 0, 0, 0, 0, 0.0, bits - (1 << 64) if bits >= 1 << 63 else bits)
            else:
                value = float(value)
                try:
                    _F32.pack(value)
                except OverflowError:
                    raise CodaError(f"'{name}' = {value} is out of the range of f32 (at most "
                                    "3.40282347e38 in magnitude)") from None
                fields += (0, 0, 0, 0, 0, value, 0)
        if used != len(inputs):
            names = {name for name, role, _, _ in plan["arguments"] if role < 0}
            raise CodaError("the program has no epilogue inputs named "
                            f"{sorted(set(inputs) - names)}")
        values = plan["values"].pack(*fields)

        space = _output_space(self, a, b)
        shapes = plan["shapes"].get(space)
        if shapes is None:
            if len(plan["shapes"]) >= 64:
                plan["shapes"].clear()
            shapes = plan["shapes"][space] = [_output_shape(dims, *space)
                                              for _, dims, _ in plan["outputs"]]
        results = {}
        fields = []
        for (name, _, dtype), shape in zip(plan["outputs"], shapes):
            tensor = out.get(name) if out else None
            if tensor is None:
                # Made here as the kernel needs it: nothing to check.
                tensor = torch.empty(shape, dtype=dtype, device=plan["device"])
                fields += _tensor_struct(tensor, shape)
            else:
                fields += self._tensor_fields(name, tensor, dtype)
            results[name] = tensor
        outputs = plan["outputs_struct"].pack(*fields)
        stream = plan["stream"](self.device)
        if seed_address:
            _check(plan["launch_device_seed"](self._handle, values, len(self.arguments),
                                              outputs, len(self.outputs), seed_address, stream))
        else:
            _check(plan["launch"](self._handle, values, len(self.arguments), outputs,
                                  len(self.outputs), stream))
        return results

    def _seed_address(self, name, tensor):
        """The device address of a seed given as a tensor, once it is checked."""
        import torch

        self._check_tensor(name, tensor, torch.int64)
        if tensor.numel() != 1:
            raise CodaError(f"'{name}' given as a tensor must have one element, it has "
                            f"{tensor.numel()}")
        return tensor.data_ptr()

    def _make_plan(self):
        """What every launch needs from the program's signature, worked out
        at the first: each argument's (name, role (an index into _ROLES, -1
        for an epilogue input), kind (_TENSOR, _F32, _I64 or _SEED), torch
        dtype), each output's (name, dims, torch dtype), the structs their C
        values pack into, the function that finds PyTorch's current stream
        and the C launches."""
        import torch

        dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        arguments = []
        for arg in self.arguments:
            if arg["tensor"]:
                kind = _TENSOR
            elif arg["type"] == "i64":
                kind = _SEED if arg["name"] == "seed" and arg["role"] == "input" else _I64
            else:
                kind = _F32
            role = -1 if arg["role"] == "input" else _ROLES.index(arg["role"])
            arguments.append((arg["name"], role, kind, dtypes.get(arg["type"])))
        lib = _library()
        self._plan = {
            "torch": torch,
            "device": torch.device("cuda", self.device),
            "arguments": arguments,
            "outputs": [(output["name"], output["dims"], dtypes[output["type"]])
                        for output in self.outputs],
            # The outputs' shapes by (batch, M, N), the last problems'.
            "shapes": {},
            "values": struct.Struct("@" + _VALUE * len(self.arguments)),
            "outputs_struct": struct.Struct("@" + _TENSOR * len(self.outputs)),
            "stream": raw or (lambda device: torch.cuda.current_stream(device).cuda_stream),
            "launch": lib.coda_program_launch,
            "launch_device_seed": lib.coda_program_launch_device_seed,
        }
        return self._plan

    def _tensor_fields(self, name, tensor, dtype):
        """The coda_tensor fields (data, rank, shape[3]) of a tensor argument
        or output, once it is checked."""
        try:
            shape = tensor.shape
            if (tensor.dtype is dtype and len(shape) <= 3 and tensor.is_contiguous()
                    and tensor.get_device() == self.device):
                return _tensor_struct(tensor, shape)
        except AttributeError:
            pass
        self._check_tensor(name, tensor, dtype)
        return _tensor_struct(tensor, tensor.shape)

    def _check_tensor(self, name, tensor, dtype):
        import torch

        if not isinstance(tensor, torch.Tensor) or not tensor.is_cuda:
            raise CodaError(f"'{name}' must be a CUDA tensor")
        if tensor.device.index != self.device:
            raise CodaError(f"'{name}' is on {tensor.device}, but the program runs on "
                            f"cuda:{self.device} (coda.Program(device=...))")
        if tensor.dtype != dtype:
            raise CodaError(f"'{name}' must be {dtype}, got {tensor.dtype}")
        if not tensor.is_contiguous():
            raise CodaError(f"'{name}' must be contiguous")
        if tensor.dim() > 3:
            raise CodaError(f"'{name}' has {tensor.dim()} dims; at most 3 are supported")
