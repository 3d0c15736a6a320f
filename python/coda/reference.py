"""Run coda programs on PyTorch CPU tensors, through coda's CPU reference.

    program = coda.reference.ReferenceProgram(source, dtype="f32")
    out = program(x, w, bias=b)                 # dict of CPU tensors

The reference lowering is the semantics every GPU kernel is checked against.
With widen_to_f64=True every float argument and output is float64 and the
program computes in double precision (for torch.autograd.gradcheck). The
library is libcoda_reference.so, found as coda.Program finds its own
(through $CODA_REFERENCE_LIBRARY).
"""

import ctypes
import json

from .runtime import (CodaError, _Options, _check_live, _declare, _is_epilogue, _live_programs,
                      _load_library, _output_shape, _output_space, _require_torch)
from .runtime import _check as _runtime_check

_lib = None


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 3)]


class _Value(ctypes.Structure):
    _fields_ = [("tensor", _Tensor), ("f32", ctypes.c_float), ("i64", ctypes.c_int64)]


def _library():
    global _lib
    if _lib is None:
        lib = _load_library("coda_reference", "CODA_REFERENCE_LIBRARY")
        P, I, C = ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p
        sig = {
            "coda_reference_last_error": (C, []),
            "coda_reference_load": (I, [C, ctypes.c_size_t, ctypes.POINTER(_Options), I,
                                        ctypes.POINTER(P)]),
            "coda_reference_destroy": (None, [P]),
            "coda_reference_describe": (C, [P]),
            "coda_reference_run": (I, [P, ctypes.POINTER(_Value), ctypes.c_size_t,
                                       ctypes.POINTER(_Tensor), ctypes.c_size_t]),
        }
        _lib = _declare(lib, sig)
    return _lib


def _check(status):
    _runtime_check(status, _library(), "coda_reference_last_error")


class ReferenceProgram:
    """A coda program compiled for the host CPU: coda IR text, or an epilogue
    in the DSL whose GEMM is set up by dtype, layout_a, layout_b, with_c and
    with_alpha (as coda.Program); derive loads a derived program
    (docs/autodiff.md); widen_to_f64 computes in float64 on float64 tensors."""

    def __init__(self, source, function="", dtype="bf16", layout_a="mk", layout_b="nk",
                 with_c=False, with_alpha=False, derive="", widen_to_f64=False):
        options = _Options(function=function.encode() or None,
                           epilogue=int(_is_epilogue(source)), dtype=dtype.encode(),
                           layout_a=layout_a.encode(), layout_b=layout_b.encode(),
                           with_c=int(with_c), with_alpha=int(with_alpha),
                           derive=derive.encode() or None)
        handle = ctypes.c_void_p()
        text = source.encode()
        _check(_library().coda_reference_load(text, len(text), ctypes.byref(options),
                                              int(widen_to_f64), ctypes.byref(handle)))
        self._handle = handle
        _live_programs.add(self)
        interface = json.loads(_library().coda_reference_describe(handle).decode())
        self.arguments = interface["arguments"]
        self.outputs = interface["outputs"]
        self.transpose_a = interface["transpose_a"]
        self.transpose_b = interface["transpose_b"]
        self.accumulator_half_n = interface["accumulator_half_n"]

    def _release(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _library().coda_reference_destroy(handle)

    def __del__(self):
        self._release()

    def __call__(self, a, b, c=None, *, gemm_alpha=None, gemm_beta=None, seed=0, inputs=None,
                 **named):
        """Runs the program on contiguous CPU tensors of the declared types;
        returns {output name: tensor}. Epilogue inputs by name, as
        coda.Program takes them."""
        torch = _require_torch("coda.reference.ReferenceProgram")
        _check_live(self)
        inputs = dict(inputs or {}, **named)
        given = {"a": a, "b": b, "c": c, "alpha": gemm_alpha, "beta": gemm_beta}
        dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
                  "f64": torch.float64}
        values = (_Value * max(len(self.arguments), 1))()
        keep = []
        for i, arg in enumerate(self.arguments):
            name = arg["name"]
            if arg["role"] == "input":
                if name == "seed" and arg["type"] == "i64":
                    value = inputs.pop(name, seed)
                elif name in inputs:
                    value = inputs.pop(name)
                else:
                    raise CodaError(f"missing epilogue input '{name}'")
            else:
                value = given[arg["role"]]
                if value is None:
                    if arg["role"] not in ("alpha", "beta"):
                        raise CodaError(f"missing '{arg['role']}'")
                    value = 1.0
            if arg["tensor"]:
                if (not isinstance(value, torch.Tensor) or value.device.type != "cpu"
                        or value.dtype != dtypes[arg["type"]] or not value.is_contiguous()):
                    raise CodaError(f"'{name}' must be a contiguous CPU tensor of "
                                    f"{dtypes[arg['type']]}")
                keep.append(value)
                values[i].tensor = self._tensor(value)
            elif arg["type"] == "i64":
                bits = int(value) & 0xFFFFFFFFFFFFFFFF
                values[i].i64 = bits - (1 << 64) if bits >= 1 << 63 else bits
            else:
                values[i].f32 = float(value)
        if inputs:
            raise CodaError(f"the program has no epilogue inputs named {sorted(inputs)}")
        batch, m, n = _output_space(self, a, b)
        results = {}
        outputs = (_Tensor * max(len(self.outputs), 1))()
        for i, output in enumerate(self.outputs):
            shape = _output_shape(output["dims"], batch, m, n)
            tensor = torch.empty(shape, dtype=dtypes[output["type"]])
            results[output["name"]] = tensor
            outputs[i] = self._tensor(tensor)
        _check(_library().coda_reference_run(self._handle, values, len(self.arguments),
                                             outputs, len(self.outputs)))
        return results

    @staticmethod
    def _tensor(tensor):
        shape = tuple(tensor.shape) + (0,) * (3 - tensor.dim())
        return _Tensor(tensor.data_ptr(), tensor.dim(), (ctypes.c_int64 * 3)(*shape))
