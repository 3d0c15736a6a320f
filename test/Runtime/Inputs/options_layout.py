"""Compares the python package's _Options with coda_compile_options: the
header's fields, then (when the runtime library is built) the library's
layout, and a mismatched structure, which must be refused."""

import ctypes
import os
import re
import sys

header, package, library = sys.argv[1:4]
sys.path.insert(0, package)
from coda import runtime  # noqa: E402

C_TYPES = {"int64_t": ctypes.c_int64, "int32_t": ctypes.c_int32,
           "const char *": ctypes.c_char_p}

text = open(header).read()
body = re.search(r"typedef struct coda_compile_options \{(.*?)\} coda_compile_options;",
                 text, re.S).group(1)
body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
fields = [(m.group(2), C_TYPES[m.group(1).strip()])
          for m in re.finditer(r"((?:const )?\w+\s*\*?)\s*(\w+);", body)]
ours = list(runtime._Options._fields_)
if fields != ours:
    sys.exit(f"header fields {fields} != python fields {ours}")
print(f"header: {len(fields)} fields match")

if not os.path.exists(library):
    print("runtime library: not built")
    print("reordered fields: not built")
    sys.exit(0)
os.environ["CODA_RUNTIME_LIBRARY"] = library
runtime._library()
print("runtime library: layout matches")


class Reordered(ctypes.Structure):
    _fields_ = [ours[1], ours[0]] + ours[2:]


try:
    runtime._check_options_layout(runtime._library(), Reordered)
    print("reordered fields: accepted")
except runtime.CodaError as error:
    print(f"reordered fields: CodaError: {error}")
