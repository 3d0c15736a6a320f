"""Whole functions of a module that call coda programs, on PyTorch tensors.

    forward = coda.HostFunction(open("outlined.mlir").read(), "forward")
    y, = forward(x, w)

The module is coda IR as ``coda-opt --coda-raise-linalg`` leaves an
exported model function: host code around coda.gemm ops, each made a coda
program of its own (coda-outline-programs). The function (and what it
calls) is compiled for the host CPU, each program call a launch
(coda-launch-programs): on CPU tensors every program runs on the CPU
reference; on CUDA tensors each runs as its fused kernel (coda.Program), its
arguments copied to the GPU and its outputs back, while the host code runs
on the CPU (docs/raising.md). A function that calls programs and nothing
else (``graph``: a chain of GEMMs passing tensors along, say) has no host
code: on CUDA tensors it runs whole in one call of the GPU runtime
(coda_graph_launch), every program in turn on PyTorch's current stream, the
tensors between them in a workspace from PyTorch's allocator, nothing
copied (docs/gpu.md#program-graphs).
Arguments and results are ranked tensors (rank 0 to 3) of float32, float16
or bfloat16; an argument of another float type is converted to the declared
one, and results come back on the arguments' device. A HostFunction runs one
call at a time (calls from several threads wait for each other).
"""

import ctypes
import json
import threading

from . import reference
from .reference import _Tensor, _Value
from . import runtime
from .runtime import CodaError, Program, _check_live, _live_programs, _require_torch

_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32,
                           ctypes.POINTER(_Value), ctypes.c_size_t,
                           ctypes.POINTER(_Tensor), ctypes.c_size_t,
                           ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)
_declared = False


def _library():
    global _declared
    lib = reference._library()
    if not _declared:
        P, I, C = ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p
        for name, restype, argtypes in (
                ("coda_reference_host_load",
                 I, [C, ctypes.c_size_t, C, ctypes.POINTER(P)]),
                ("coda_reference_host_destroy", None, [P]),
                ("coda_reference_host_describe", C, [P]),
                ("coda_reference_host_run",
                 I, [P, ctypes.POINTER(_Tensor), ctypes.c_size_t, _LAUNCH, P]),
                ("coda_reference_host_result",
                 I, [P, ctypes.c_size_t, ctypes.POINTER(_Tensor)])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        _declared = True
    return lib


def _dtypes(torch):
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def _from_host(torch, tensor, dtype):
    """A CPU tensor of `dtype` copied from the host buffer `tensor` (a
    coda_tensor)."""
    shape = list(tensor.shape[:tensor.rank])
    result = torch.empty(shape, dtype=dtype)
    if result.numel():
        ctypes.memmove(result.data_ptr(), tensor.data, result.numel() * result.element_size())
    return result


class HostFunction:
    """Function `function` of the coda IR module `source`, run as host code
    that launches the coda programs it calls (see the module's docstring)."""

    def __init__(self, source, function):
        torch = _require_torch("coda.HostFunction")
        self.source = source
        handle = ctypes.c_void_p()
        text = source.encode()
        reference._check(_library().coda_reference_host_load(text, len(text), function.encode(),
                                                             ctypes.byref(handle)))
        self._handle = handle
        _live_programs.add(self)
        interface = json.loads(_library().coda_reference_host_describe(handle).decode())
        dtypes = _dtypes(torch)
        self.arguments = [(dtypes[a["type"]], a["shape"]) for a in interface["arguments"]]
        self.results = [(dtypes[r["type"]], r["shape"]) for r in interface["results"]]
        self.programs = interface["programs"]
        # The calls and results of a program graph, or None (and why not).
        self.graph = interface["graph"]
        self.graph_violation = interface["graph_violation"]
        # The programs' coda IR (a function raised whole into one program is
        # renamed there, its name taken by the host function that calls it).
        self._program_source = interface["program_source"]
        self.function = function
        self._gpu_programs = {}
        self._gpu_graphs = {}
        self._lock = threading.Lock()

    def _release(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _library().coda_reference_host_destroy(handle)

    def __del__(self):
        self._release()

    def __call__(self, *args):
        """Runs the function on `args`, CPU tensors (every program on the CPU
        reference) or CUDA tensors of one device (every program a fused
        kernel there); returns its results as a tuple of tensors."""
        torch = _require_torch("coda.HostFunction")
        _check_live(self)
        if len(args) != len(self.arguments):
            raise CodaError(f"'{self.function}' takes {len(self.arguments)} arguments, "
                            f"got {len(args)}")
        for i, arg in enumerate(args):
            if not isinstance(arg, torch.Tensor):
                raise CodaError(f"argument #{i} of '{self.function}' must be a tensor, got "
                                f"{type(arg).__name__}")
        devices = {arg.device for arg in args}
        if len(devices) > 1:
            raise CodaError("the arguments must be tensors on one device, got "
                            f"{sorted(str(d) for d in devices) or 'no tensors'}")
        device = devices.pop() if devices else torch.device("cpu")
        if device.type not in ("cpu", "cuda"):
            raise CodaError(f"the arguments are on {device}; coda runs on CPU or CUDA tensors")
        for i, (arg, (dtype, shape)) in enumerate(zip(args, self.arguments)):
            if arg.dim() != len(shape) or any(s not in (-1, d) for s, d in zip(shape, arg.shape)):
                raise CodaError(f"argument #{i} of '{self.function}' must have shape "
                                f"{[None if s < 0 else s for s in shape]}, got {list(arg.shape)}")
        if self.graph is not None and device.type == "cuda":
            return self._graph(torch, device).run(
                torch, [arg.detach().to(dtype=dtype).contiguous()
                        for arg, (dtype, _) in zip(args, self.arguments)],
                [dtype for dtype, _ in self.results])
        host = [arg.detach().to("cpu", dtype).contiguous()
                for arg, (dtype, _) in zip(args, self.arguments)]
        with self._lock:
            return self._run(torch, host, device, callback=device.type == "cuda")

    def _run(self, torch, host, device, callback):
        """Runs the function on the CPU tensors `host`, each program launched
        through _launch when `callback`, else on the CPU reference; returns
        the results on `device`."""
        tensors = (_Tensor * max(len(host), 1))(*[reference.ReferenceProgram._tensor(t)
                                                  for t in host])
        errors = []
        launch = (_LAUNCH(lambda *a: self._launch(torch, device, errors, *a)) if callback
                  else _LAUNCH())
        status = _library().coda_reference_host_run(self._handle, tensors, len(host), launch,
                                                    None)
        if status != 0:
            if errors:
                raise errors[0]
            reference._check(status)
        results = []
        for i, (dtype, _) in enumerate(self.results):
            tensor = _Tensor()
            reference._check(_library().coda_reference_host_result(self._handle, i,
                                                                   ctypes.byref(tensor)))
            results.append(_from_host(torch, tensor, dtype).to(device))
        return tuple(results)

    def _graph(self, torch, device):
        """The function as a program graph in the GPU runtime of `device`,
        loaded at its first call there."""
        with self._lock:
            graph = self._gpu_graphs.get(device.index)
            if graph is None:
                graph = self._gpu_graphs[device.index] = _DeviceGraph(
                    torch, self._program_source, self.function, device)
            return graph

    def _program(self, index, device):
        """Program `index` as a fused kernel on `device`, made at its first
        launch there."""
        key = index, device.index
        program = self._gpu_programs.get(key)
        if program is None:
            program = self._gpu_programs[key] = Program(
                self._program_source, function=self.programs[index]["name"],
                device=device.index)
        return program

    def _launch(self, torch, device, errors, user, index, arguments, num_arguments, outputs,
                num_outputs, message, capacity):
        """Runs program `index` as its fused kernel on `device` (the launch
        callback of a run on CUDA tensors)."""
        try:
            interface = self.programs[index]
            program = self._program(index, device)
            dtypes = _dtypes(torch)
            given, named = {}, {}
            for i, arg in enumerate(interface["arguments"]):
                value = arguments[i]
                if arg["tensor"]:
                    value = _from_host(torch, value.tensor, dtypes[arg["type"]]).to(device)
                elif arg["type"] == "i64":
                    value = value.i64
                else:
                    value = value.f32
                if arg["role"] == "input":
                    named[arg["name"]] = value
                else:
                    given[arg["role"]] = value
            results = program(given["a"], given["b"], given.get("c"),
                              gemm_alpha=given.get("alpha"), gemm_beta=given.get("beta"),
                              inputs=named)
            for j, output in enumerate(interface["outputs"]):
                result = results[output["name"]].cpu().contiguous()
                if result.numel():
                    ctypes.memmove(outputs[j].data, result.data_ptr(),
                                   result.numel() * result.element_size())
            return 0
        except BaseException as error:  # raised by _run once the run stops
            errors.append(error)
            text = str(error).encode()[:capacity - 1]
            ctypes.memmove(message, text + b"\0", len(text) + 1)
            return 1


class _DeviceGraph:
    """A program graph loaded into the GPU runtime of one device
    (coda_graph_load)."""

    def __init__(self, torch, source, function, device):
        lib = runtime._library()
        options = runtime._Options()
        options.function = function.encode()
        # As coda.Program's default.
        options.deterministic = int(torch.are_deterministic_algorithms_enabled())
        handle = ctypes.c_void_p()
        text = source.encode()
        runtime._check(lib.coda_graph_load(runtime._runtime(device.index), text, len(text),
                                           ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle
        _live_programs.add(self)
        self.device = device

    def _release(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            runtime._library().coda_graph_destroy(handle)

    def __del__(self):
        self._release()

    def run(self, torch, args, dtypes):
        """Launches the graph on `args` (contiguous CUDA tensors of its
        argument types) on the current stream; returns its results, of
        `dtypes`."""
        _check_live(self)
        lib = runtime._library()
        values = (_Value * max(len(args), 1))(
            *[_Value(reference.ReferenceProgram._tensor(arg), 0.0, 0) for arg in args])
        results = (_Tensor * max(len(dtypes), 1))()
        workspace_bytes = ctypes.c_uint64()
        runtime._check(lib.coda_graph_plan(self._handle, values, len(args), results, len(dtypes),
                                           ctypes.byref(workspace_bytes)))
        outputs = []
        for result, dtype in zip(results, dtypes):
            tensor = torch.empty(list(result.shape[:result.rank]), dtype=dtype, device=self.device)
            result.data = tensor.data_ptr()
            outputs.append(tensor)
        workspace = torch.empty(workspace_bytes.value, dtype=torch.uint8, device=self.device)
        stream = torch.cuda.current_stream(self.device).cuda_stream
        runtime._check(lib.coda_graph_launch(self._handle, values, len(args), results, len(dtypes),
                                             workspace.data_ptr(), workspace_bytes.value, stream))
        return tuple(outputs)
