//===- Npy.cpp - host arrays and the .npy file format ---------------------===//
//
// The .npy format: the magic "\x93NUMPY", a version (1.0, 2.0 or 3.0), the
// header length (2 bytes in 1.0, 4 bytes after), and an ASCII Python dict
// literal with 'descr', 'fortran_order' and 'shape', padded so that the data
// starts on a 64-byte boundary.
//
//===----------------------------------------------------------------------===//

#include "coda/Support/Npy.h"
#include "coda/Support/Float.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mlir::coda;
using llvm::StringRef;

unsigned mlir::coda::getElementSize(ElementType type) {
  return type == ElementType::F32 ? 4 : 2;
}

StringRef mlir::coda::getElementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  }
  return "?";
}

HostArray::HostArray(ElementType elementType, llvm::ArrayRef<int64_t> shape)
    : elementType(elementType), shape(shape.begin(), shape.end()) {
  data.resize(getNumElements() * getElementSize(elementType));
}

int64_t HostArray::getNumElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

float HostArray::getAsFloat(int64_t i) const {
  if (elementType == ElementType::F32) {
    float v;
    std::memcpy(&v, data.data() + 4 * i, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, data.data() + 2 * i, 2);
  return elementType == ElementType::F16 ? f16ToFloat(bits) : bf16ToFloat(bits);
}

void HostArray::setFromFloat(int64_t i, float value) {
  if (elementType == ElementType::F32) {
    std::memcpy(data.data() + 4 * i, &value, 4);
    return;
  }
  uint16_t bits =
      elementType == ElementType::F16 ? floatToF16(value) : floatToBF16(value);
  std::memcpy(data.data() + 2 * i, &bits, 2);
}

HostArray HostArray::convertTo(ElementType type) const {
  if (type == elementType)
    return *this;
  HostArray result(type, shape);
  for (int64_t i = 0, e = getNumElements(); i < e; ++i)
    result.setFromFloat(i, getAsFloat(i));
  return result;
}

std::string HostArray::getShapeString() const {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Finds `'key':` in a header dict and returns the text after it.
static std::optional<StringRef> findKey(StringRef header, StringRef key) {
  std::string quoted = "'" + key.str() + "'";
  size_t pos = header.find(quoted);
  if (pos == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(pos + quoted.size()).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  return rest.ltrim();
}

llvm::Expected<HostArray> mlir::coda::readNpy(StringRef path) {
  auto fail = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + message);
  };
  // A device or a pipe (/dev/zero, say) could be read without end.
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return fail("cannot read: " + ec.message());
  if (!llvm::sys::fs::is_regular_file(status))
    return fail("not a regular file: arrays are read from .npy files that "
                "numpy.save writes");
  auto bufferOrError =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!bufferOrError)
    return fail("cannot read: " + bufferOrError.getError().message());
  StringRef bytes = (*bufferOrError)->getBuffer();
  if (!bytes.consume_front("\x93NUMPY") || bytes.size() < 4)
    return fail("not a .npy file (no \\x93NUMPY magic)");
  uint8_t major = bytes[0];
  bytes = bytes.drop_front(2);
  size_t headerLength;
  if (major == 1) {
    headerLength =
        static_cast<uint8_t>(bytes[0]) | (static_cast<uint8_t>(bytes[1]) << 8);
    bytes = bytes.drop_front(2);
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 4)
      return fail("truncated .npy header");
    headerLength = 0;
    for (int i = 3; i >= 0; --i)
      headerLength = (headerLength << 8) | static_cast<uint8_t>(bytes[i]);
    bytes = bytes.drop_front(4);
  } else {
    return fail("unsupported .npy version " + llvm::Twine(int(major)));
  }
  if (bytes.size() < headerLength)
    return fail("truncated .npy header");
  StringRef header = bytes.take_front(headerLength);
  bytes = bytes.drop_front(headerLength);

  // numpy reads the header as a Python dict, where a repeated key takes
  // its last value: refuse one rather than read another value than numpy.
  for (StringRef key : {"descr", "fortran_order", "shape"})
    if (header.count(("'" + key + "'").str()) > 1)
      return fail("the .npy header gives '" + key + "' twice");
  std::optional<StringRef> descr = findKey(header, "descr");
  std::optional<StringRef> fortran = findKey(header, "fortran_order");
  std::optional<StringRef> shapeText = findKey(header, "shape");
  // The values numpy writes: a quoted string and a parenthesized tuple.
  if (!descr || !fortran || !shapeText || !descr->consume_front("'") ||
      !descr->contains('\'') || !shapeText->consume_front("(") ||
      !shapeText->contains(')'))
    return fail("malformed .npy header '" + header.rtrim() + "'");
  StringRef dtype = descr->take_until([](char c) { return c == '\''; });
  ElementType type;
  if (dtype == "<f4" || dtype == "f4")
    type = ElementType::F32;
  else if (dtype == "<f2" || dtype == "f2")
    type = ElementType::F16;
  else
    return fail("unsupported dtype '" + dtype +
                "'; expected float32 or float16 (little-endian): convert "
                "with a.astype(np.float32)");
  StringRef order = fortran->take_while(llvm::isAlpha);
  if (order == "True")
    return fail("Fortran-order arrays are not supported; save "
                "np.ascontiguousarray(a)");
  if (order != "False")
    return fail("'fortran_order' must be True or False, got '" +
                fortran->take_until([](char c) { return c == ',' || c == '}'; })
                    .rtrim() +
                "'");

  HostArray array;
  array.elementType = type;
  StringRef dims = shapeText->take_until([](char c) { return c == ')'; });
  // A tuple: `()`, `(8,)`, `(8, 32)` or `(8, 32,)`; an empty element only
  // after the last comma of a non-empty tuple.
  llvm::SmallVector<StringRef> parts;
  dims.split(parts, ',', -1, /*KeepEmpty=*/true);
  for (auto [i, part] : llvm::enumerate(parts)) {
    part = part.trim();
    bool last = i + 1 == parts.size();
    if (part.empty() && last && (i > 0 || parts.size() == 1))
      continue;
    int64_t d;
    if (part.getAsInteger(10, d) || d < 0)
      return fail("malformed shape '(" + dims + ")'");
    array.shape.push_back(d);
  }
  // A header may claim any shape: its size in bytes must not overflow.
  int64_t expected = getElementSize(type);
  for (int64_t d : array.shape)
    if (llvm::MulOverflow(expected, d, expected))
      return fail("shape " + array.getShapeString() + " is too large");
  if (bytes.size() != static_cast<uint64_t>(expected))
    return fail("holds " + llvm::Twine(bytes.size()) + " data bytes, but " +
                array.getShapeString() + " " + getElementTypeName(type) +
                " needs " + llvm::Twine(expected));
  array.data.assign(bytes.begin(), bytes.end());
  return array;
}

llvm::Error mlir::coda::writeNpy(StringRef path, const HostArray &array) {
  const HostArray &out = array.elementType == ElementType::BF16
                             ? array.convertTo(ElementType::F32)
                             : array;
  std::string header = "{'descr': '";
  header += out.elementType == ElementType::F32 ? "<f4" : "<f2";
  header += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < out.shape.size(); ++i)
    header += (i ? ", " : "") + std::to_string(out.shape[i]);
  if (out.shape.size() == 1)
    header += ","; // a Python 1-tuple
  header += "), }";
  // Pad with spaces so that magic + version + length + header ends at a
  // multiple of 64 bytes, then a newline.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(ec,
                                   path + ": cannot write: " + ec.message());
  os << "\x93NUMPY" << char(1) << char(0) << char(header.size() & 0xFF)
     << char((header.size() >> 8) & 0xFF) << header;
  os.write(reinterpret_cast<const char *>(out.data.data()), out.data.size());
  os.close();
  if (os.has_error()) {
    ec = os.error();
    os.clear_error();
    return llvm::createStringError(ec,
                                   path + ": cannot write: " + ec.message());
  }
  return llvm::Error::success();
}
