"""Run coda programs on PyTorch CUDA tensors.

    import torch, coda
    program = coda.Program(open("mlp.mlir").read())
    out = program(x, w, bias=b, residual=r, seed=1234)     # dict of outputs
    out["output"]                                         # a torch tensor

The program is compiled when first called (and cached in memory and on disk),
then launched on PyTorch's current stream, on the tensors' memory: nothing is
copied. Inputs must be contiguous CUDA tensors of the dtypes the program
declares; outputs are allocated with torch.empty. The library is
libcoda_runtime.so, found through $CODA_RUNTIME_LIBRARY or in the build
folders of the source tree.
"""

import ctypes
import os

_DIMS_B, _DIMS_M, _DIMS_N = 4, 2, 1


class CodaError(RuntimeError):
    """A failure reported by coda's runtime (compilation, checks, CUDA)."""


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 3)]


class _Value(ctypes.Structure):
    _fields_ = [("tensor", _Tensor), ("f32", ctypes.c_float), ("i64", ctypes.c_int64)]


class _Options(ctypes.Structure):
    _fields_ = [("tile_n", ctypes.c_int64), ("stages", ctypes.c_int64),
                ("function", ctypes.c_char_p), ("epilogue", ctypes.c_int32),
                ("dtype", ctypes.c_char_p), ("layout_a", ctypes.c_char_p),
                ("layout_b", ctypes.c_char_p), ("with_c", ctypes.c_int32),
                ("with_alpha", ctypes.c_int32), ("tile_m", ctypes.c_int64),
                ("schedule", ctypes.c_char_p), ("autotune", ctypes.c_int32),
                ("cluster_m", ctypes.c_int64), ("group_rows", ctypes.c_int64),
                ("fast_activations", ctypes.c_int32)]


def _is_epilogue(source):
    """Whether `source` is written in the epilogue DSL (it starts with EPILOGUE
    after comments) rather than in coda IR."""
    for line in source.splitlines():
        line = line.split("//")[0].split("#")[0].strip()
        if line:
            return line.startswith("EPILOGUE")
    return False


def _find_library():
    explicit = os.environ.get("CODA_RUNTIME_LIBRARY")
    if explicit:
        return explicit
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for build in ("build", "build-static"):
        path = os.path.join(root, build, "lib", "libcoda_runtime.so")
        if os.path.exists(path):
            return path
    return "libcoda_runtime.so"


_lib = None


def _library():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(_find_library())
        P, I, C = ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p
        sig = {
            "coda_last_error": (C, []),
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
            "coda_program_argument_kind": (I, [P, I]),
            "coda_program_num_outputs": (I, [P]),
            "coda_program_output_name": (C, [P, I]),
            "coda_program_output_type": (C, [P, I]),
            "coda_program_output_dims": (I, [P, I]),
            "coda_program_layouts": (None, [P, ctypes.POINTER(I), ctypes.POINTER(I)]),
            "coda_program_kernel_shape": (None, [P, ctypes.POINTER(ctypes.c_int64),
                                                 ctypes.POINTER(ctypes.c_int64),
                                                 ctypes.POINTER(C),
                                                 ctypes.POINTER(ctypes.c_int64),
                                                 ctypes.POINTER(ctypes.c_int64)]),
            "coda_program_prepare": (I, [P]),
            "coda_program_launch": (I, [P, ctypes.POINTER(_Value), ctypes.c_size_t,
                                        ctypes.POINTER(_Tensor), ctypes.c_size_t, P]),
        }
        for name, (restype, argtypes) in sig.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        _lib = lib
    return _lib


def _check(status):
    if status != 0:
        raise CodaError(_library().coda_last_error().decode())


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
    each problem shape and keeps the fastest (cached with the kernels)."""

    def __init__(self, source, function="", device=None, tile_n=0, stages=0,
                 dtype="bf16", layout_a="mk", layout_b="nk", with_c=False,
                 with_alpha=False, tile_m=0, schedule="", autotune=False,
                 cluster_m=0, group_rows=0, fast_activations=False):
        import torch

        torch.cuda.init()  # the runtime shares PyTorch's primary context
        if device is None:
            device = torch.cuda.current_device()
        self.device = device
        lib = _library()
        options = _Options(tile_n, stages, function.encode() or None,
                           int(_is_epilogue(source)), dtype.encode(), layout_a.encode(),
                           layout_b.encode(), int(with_c), int(with_alpha), tile_m,
                           schedule.encode() or None, int(autotune), cluster_m, group_rows,
                           int(fast_activations))
        handle = ctypes.c_void_p()
        text = source.encode()
        _check(lib.coda_program_load(_runtime(device), text, len(text),
                                     ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle
        self.arguments = []
        for i in range(lib.coda_program_num_arguments(handle)):
            self.arguments.append({
                "name": lib.coda_program_argument_name(handle, i).decode(),
                "role": lib.coda_program_argument_role(handle, i).decode(),
                "type": lib.coda_program_argument_type(handle, i).decode(),
                "dims": lib.coda_program_argument_dims(handle, i),
                "tensor": lib.coda_program_argument_kind(handle, i) == 0,
            })
        self.outputs = []
        for i in range(lib.coda_program_num_outputs(handle)):
            self.outputs.append({
                "name": lib.coda_program_output_name(handle, i).decode(),
                "type": lib.coda_program_output_type(handle, i).decode(),
                "dims": lib.coda_program_output_dims(handle, i),
            })
        ta, tb = ctypes.c_int32(), ctypes.c_int32()
        lib.coda_program_layouts(handle, ctypes.byref(ta), ctypes.byref(tb))
        self.transpose_a, self.transpose_b = bool(ta.value), bool(tb.value)

    def __del__(self):
        if getattr(self, "_handle", None):
            _library().coda_program_destroy(self._handle)

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

    def prepare(self):
        """Compiles (or fetches from a cache) now rather than at the first call:
        the kernel of the compile options. Unless they pin the tile shape, a
        problem that fills the GPU better with another tile width gets that
        kernel, compiled at its first call."""
        _check(_library().coda_program_prepare(self._handle))

    def __call__(self, a, b, c=None, *, gemm_alpha=None, gemm_beta=None, seed=None, out=None,
                 inputs=None, **named):
        """Launches the program; returns {output name: tensor}.

        Epilogue inputs are keyword arguments by name (an epilogue may have
        an input named alpha: the GEMM's own scalars are gemm_alpha and
        gemm_beta, default 1), or entries of `inputs`, a dict, which also
        takes inputs named like this call's own parameters (a, b, c, out,
        ...); `out` may give preallocated outputs by name.
        """
        import torch

        inputs = dict(inputs or {})
        for name, value in named.items():
            if name in inputs:
                raise CodaError(f"epilogue input '{name}' was given twice")
            inputs[name] = value

        dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
        given = {"a": a, "b": b, "c": c, "alpha": gemm_alpha, "beta": gemm_beta}
        values = (_Value * len(self.arguments))()
        for i, arg in enumerate(self.arguments):
            if arg["role"] == "input":
                if arg["name"] == "seed" and arg["type"] == "i64" and "seed" not in inputs:
                    value = 0 if seed is None else seed
                else:
                    if arg["name"] not in inputs:
                        raise CodaError(f"missing epilogue input '{arg['name']}'")
                    value = inputs.pop(arg["name"])
            else:
                value = given[arg["role"]]
                if value is None:
                    if arg["role"] in ("alpha", "beta"):
                        value = 1.0
                    else:
                        raise CodaError(f"missing '{arg['role']}'")
            if arg["tensor"]:
                values[i].tensor = self._tensor(arg, value, dtypes[arg["type"]])
            elif arg["type"] == "i64":
                # A 64-bit seed, passed as the signed integer with its bits.
                bits = int(value) & 0xFFFFFFFFFFFFFFFF
                values[i].i64 = bits - (1 << 64) if bits >= 1 << 63 else bits
            else:
                values[i].f32 = float(value)
        if inputs:
            raise CodaError(f"the program has no epilogue inputs named {sorted(inputs)}")

        ta, tb = self.transpose_a, self.transpose_b
        m = a.shape[-1] if ta else a.shape[-2]
        n = b.shape[-2] if tb else b.shape[-1]
        batch = a.shape[0] if a.dim() == 3 else (b.shape[0] if b.dim() == 3 else None)
        results = {}
        tensors = (_Tensor * len(self.outputs))()
        for i, output in enumerate(self.outputs):
            shape = [size for bit, size in ((_DIMS_B, batch), (_DIMS_M, m), (_DIMS_N, n))
                     if output["dims"] & bit]
            tensor = (out or {}).get(output["name"])
            if tensor is None:
                tensor = torch.empty(shape, dtype=dtypes[output["type"]], device=a.device)
            tensors[i] = self._tensor(output, tensor, dtypes[output["type"]])
            results[output["name"]] = tensor
        stream = torch.cuda.current_stream(a.device).cuda_stream
        _check(_library().coda_program_launch(self._handle, values, len(self.arguments),
                                              tensors, len(self.outputs),
                                              ctypes.c_void_p(stream)))
        return results

    def _tensor(self, spec, tensor, dtype):
        import torch

        name = spec["name"]
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
        t = _Tensor()
        t.data = tensor.data_ptr()
        t.rank = tensor.dim()
        for d, size in enumerate(tensor.shape):
            t.shape[d] = size
        return t
