"""Runs kernels produced by coda-gpu-pipeline on an NVIDIA GPU.

Reads the PTX and the launch contract (coda.kernel_abi, see
include/coda/Conversion/CodaToGPU/KernelABI.h) out of the pipeline's output,
and launches the kernel through the CUDA Driver API (ctypes, libcuda.so.1) on
torch tensors, building the TMA tensor maps with cuTensorMapEncodeTiled.
"""

import ctypes
import math
import re
import struct

# --- Reading the pipeline's output -------------------------------------------


def extract_ptx(mlir_text):
    """The PTX of every gpu.binary (format=isa), by binary name."""
    out = {}
    pattern = re.compile(r'gpu\.binary @(\w+)\s.*?assembly = "(.*?)"', re.S)
    for name, escaped in pattern.findall(mlir_text):
        # gpu.binary escapes bytes as \XX hex pairs.
        out[name] = re.sub(r'\\([0-9A-Fa-f]{2})',
                           lambda m: chr(int(m.group(1), 16)), escaped)
    return out


class _AttrParser:
    """Parses the subset of MLIR attribute syntax coda.kernel_abi uses."""

    TOKEN = re.compile(r'\s*(array<i64:[^>]*>|"[^"]*"'
                       r'|(?:0x[0-9A-Fa-f]+|-?[\d.]+(?:e[-+]?\d+)?)\s*:\s*[if]64'
                       r'|[{}\[\]=,]|[A-Za-z_][\w.]*)')

    def __init__(self, text):
        self.tokens = self.TOKEN.findall(text)
        self.pos = 0

    def next(self):
        self.pos += 1
        return self.tokens[self.pos - 1]

    def value(self):
        tok = self.next()
        if tok == '{':
            d = {}
            while self.tokens[self.pos] != '}':
                key = self.next()
                assert self.next() == '='
                d[key] = self.value()
                if self.tokens[self.pos] == ',':
                    self.pos += 1
            self.pos += 1
            return d
        if tok == '[':
            items = []
            while self.tokens[self.pos] != ']':
                items.append(self.value())
                if self.tokens[self.pos] == ',':
                    self.pos += 1
            self.pos += 1
            return items
        if tok.startswith('array<'):
            body = tok[len('array<i64:'):-1].strip()
            return [int(x) for x in body.split(',')] if body else []
        if tok.startswith('"'):
            return tok[1:-1]
        number, kind = [t.strip() for t in tok.split(':')]
        if kind == 'i64':
            return int(number)
        if number.startswith('0x'):  # a float printed by its bits
            return struct.unpack('>d', bytes.fromhex(number[2:]))[0]
        return float(number)


def extract_abis(mlir_text):
    """Every coda.kernel_abi of the host declarations, by kernel name."""
    abis = {}
    for m in re.finditer(r'func\.func private @\w+\(.*?coda\.kernel_abi = ',
                         mlir_text):
        abi = _AttrParser(mlir_text[m.end():]).value()
        abis[abi['kernel']] = abi
    return abis


# --- The CUDA Driver API -----------------------------------------------------

_TMA_DTYPES = {'float16': 6, 'float32': 7, 'bfloat16': 9}
_SWIZZLE_128B = 3
_L2_PROMOTION_256B = 3
_MAX_DYNAMIC_SHARED = 8
_MULTIPROCESSOR_COUNT = 16  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT


class CudaError(RuntimeError):
    pass


class Driver:
    """The CUDA driver, in the primary context of device 0 (the one torch
    uses)."""

    def __init__(self):
        self.lib = ctypes.CDLL('libcuda.so.1')
        self._check(self.lib.cuInit(0), 'cuInit')
        dev = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(dev), 0), 'cuDeviceGet')
        ctx = ctypes.c_void_p()
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                    'cuDevicePrimaryCtxRetain')
        self._check(self.lib.cuCtxSetCurrent(ctx), 'cuCtxSetCurrent')
        count = ctypes.c_int()
        self._check(self.lib.cuDeviceGetAttribute(
            ctypes.byref(count), _MULTIPROCESSOR_COUNT, dev),
            'cuDeviceGetAttribute')
        self.multiprocessors = count.value

    def _check(self, result, what):
        if result != 0:
            msg = ctypes.c_char_p()
            self.lib.cuGetErrorString(result, ctypes.byref(msg))
            raise CudaError('%s failed: %s (%d)' % (
                what, (msg.value or b'unknown error').decode(), result))

    def load(self, ptx, name, shared_bytes):
        module, func = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.lib.cuModuleLoadData(ctypes.byref(module),
                                              ptx.encode() + b'\0'),
                    'cuModuleLoadData')
        self._check(self.lib.cuModuleGetFunction(ctypes.byref(func), module,
                                                 name.encode()),
                    'cuModuleGetFunction')
        self._check(self.lib.cuFuncSetAttribute(func, _MAX_DYNAMIC_SHARED,
                                                shared_bytes),
                    'cuFuncSetAttribute')
        return func

    def tensor_map(self, tensor, box):
        """A CUtensorMap over a dense row-major torch tensor, as the ABI
        describes it."""
        assert tensor.is_contiguous()
        rank = tensor.dim()
        elem = tensor.element_size()
        dims = (ctypes.c_uint64 * rank)(*reversed(tensor.shape))
        strides = (ctypes.c_uint64 * max(rank - 1, 1))(
            *[s * elem for s in reversed(tensor.stride()[:-1])])
        boxes = (ctypes.c_uint32 * rank)(*box)
        ones = (ctypes.c_uint32 * rank)(*([1] * rank))
        storage = ctypes.create_string_buffer(128 + 64)
        address = ctypes.addressof(storage)
        aligned = (address + 63) // 64 * 64
        dtype = _TMA_DTYPES[str(tensor.dtype).split('.')[-1]]
        self._check(self.lib.cuTensorMapEncodeTiled(
            ctypes.c_void_p(aligned), dtype, rank,
            ctypes.c_void_p(tensor.data_ptr()), dims, strides, boxes, ones,
            0, _SWIZZLE_128B, _L2_PROMOTION_256B, 0),
            'cuTensorMapEncodeTiled')
        return storage, aligned

    def launch(self, func, grid, block, shared_bytes, params, stream=0):
        """`params`: ctypes objects (or raw addresses) in ABI order."""
        keep, addresses = [], []
        for p in params:
            if isinstance(p, tuple):  # a tensor map: (storage, address)
                keep.append(p[0])
                addresses.append(p[1])
            else:
                keep.append(p)
                addresses.append(ctypes.addressof(p))
        array = (ctypes.c_void_p * len(addresses))(*addresses)
        self._check(self.lib.cuLaunchKernel(
            func, *[ctypes.c_uint(g) for g in grid],
            *[ctypes.c_uint(b) for b in block], ctypes.c_uint(shared_bytes),
            ctypes.c_void_p(stream), array, None), 'cuLaunchKernel')

    def synchronize(self):
        self._check(self.lib.cuCtxSynchronize(), 'cuCtxSynchronize')


class Kernel:
    """A generated kernel, ready to run on torch tensors."""

    def __init__(self, driver, ptx, abi):
        self.driver, self.abi = driver, abi
        self.func = driver.load(ptx, abi['kernel'], abi['shared_memory_bytes'])

    def params(self, args, results, m, n, k, batch=1):
        """The kernel parameters for program arguments `args` (torch tensors
        and python scalars, by argument index) and results `results`."""
        sizes = {'m': m, 'n': n, 'k': k, 'batch': batch}
        params = []
        for p in self.abi['params']:
            kind, role, index = p['kind'], p['role'], p['index']
            if kind == 'tensor_map':
                params.append(self.driver.tensor_map(args[index], p['box']))
            elif kind in ('global_ptr', 'atomic_ptr'):
                t = results[index] if role == 'output' else args[index]
                params.append(ctypes.c_uint64(t.data_ptr()))
            elif kind == 'f32':
                params.append(ctypes.c_float(args[index]))
            elif kind == 'i64':
                params.append(ctypes.c_int64(args[index]))
            else:
                params.append(ctypes.c_int32(sizes[role]))
        return params

    def grid(self, m, n, batch=1):
        """Persistent blocks: one per SM, or one per tile when fewer."""
        tile_m, tile_n, _ = self.abi['tile']
        tiles = math.ceil(n / tile_n) * math.ceil(m / tile_m) * batch
        return (max(1, min(tiles, self.driver.multiprocessors)), 1, 1)

    def prepare(self, args, results, m, n, k, batch=1, stream=0):
        """A function that launches the kernel on these arguments (the
        parameters, tensor maps included, are built once)."""
        if self.abi['max_n'] and n > self.abi['max_n']:
            raise ValueError('N = %d exceeds the kernel limit %d'
                             % (n, self.abi['max_n']))
        params = self.params(args, results, m, n, k, batch)
        grid = self.grid(m, n, batch)
        # Outputs the kernel accumulates into start from their fill value.
        fills = [(results[p['index']], p['fill']) for p in self.abi['params']
                 if 'fill' in p]

        def launch():
            for tensor, value in fills:
                tensor.fill_(value)
            self.driver.launch(self.func, grid, self.abi['block'],
                               self.abi['shared_memory_bytes'], params, stream)
        return launch

    def __call__(self, args, results, m, n, k, batch=1, stream=0):
        self.prepare(args, results, m, n, k, batch, stream)()
