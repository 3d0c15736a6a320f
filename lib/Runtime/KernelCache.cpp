//===- KernelCache.cpp - the on-disk cache of compiled kernels ------------===//

#include "KernelCache.h"
#include "Launch.h"

#include "mlir/AsmParser/AsmParser.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::runtime;

/// The SHA-256 of a kernel's PTX, which its cached ABI carries.
static std::string hashPtx(StringRef ptx) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(ptx)),
                     /*LowerCase=*/true);
}

/// Whether `abi` can describe a kernel of the program `signature`: every
/// parameter made from an argument or output that exists and has the kind's
/// type, a tile of at least one element. A cache entry is checked so before
/// the launch trusts it.
static bool describesProgram(const KernelABI &abi,
                             const ProgramSignature &signature) {
  if (abi.tileM < 1 || abi.tileN < 1 || abi.clusterM < 1 || abi.kernel.empty())
    return false;
  for (const KernelParam &param : abi.params) {
    bool sized = param.role == KernelParamRole::M ||
                 param.role == KernelParamRole::N ||
                 param.role == KernelParamRole::K ||
                 param.role == KernelParamRole::Batch;
    if (sized) {
      if (param.kind != KernelParamKind::I32)
        return false;
      continue;
    }
    if (param.role == KernelParamRole::RowReduction) {
      if (param.index < 0 || param.kind != KernelParamKind::RowPartials)
        return false;
      continue;
    }
    if (param.role == KernelParamRole::Output) {
      if (param.index < 0 ||
          param.index >= static_cast<int64_t>(signature.outputs.size()) ||
          (param.kind != KernelParamKind::GlobalPtr &&
           param.kind != KernelParamKind::AtomicPtr &&
           param.kind != KernelParamKind::Partials))
        return false;
      continue;
    }
    if (param.index < 0 ||
        param.index >= static_cast<int64_t>(signature.arguments.size()))
      return false;
    Type type = signature.arguments[param.index].type;
    auto tensor = dyn_cast<RankedTensorType>(type);
    switch (param.kind) {
    case KernelParamKind::TensorMap:
      // B in halves: a rank-2 tensor read through a rank-3 map.
      if (!tensor || !tensorMapType(tensor.getElementType()) ||
          (param.halves && tensor.getRank() != 2) ||
          static_cast<int64_t>(param.box.size()) !=
              tensor.getRank() + (param.halves ? 1 : 0))
        return false;
      break;
    case KernelParamKind::GlobalPtr:
      // A tensor, or the seed given by its address.
      if (!tensor && param.index != signature.findSeed())
        return false;
      break;
    case KernelParamKind::F32:
      if (!type.isF32())
        return false;
      break;
    case KernelParamKind::I64:
      if (!type.isInteger(64))
        return false;
      break;
    case KernelParamKind::AtomicPtr:
    case KernelParamKind::Partials:
    case KernelParamKind::RowPartials:
    case KernelParamKind::I32:
      return false;
    }
  }
  return true;
}

/// The paths of a cache entry: <key>.ptx and <key>.abi (the PTX's SHA-256 on
/// the first line, then the ABI dictionary).
static std::pair<std::string, std::string> cachePaths(StringRef directory,
                                                      StringRef key) {
  llvm::SmallString<256> base(directory);
  llvm::sys::path::append(base, key);
  return {(base + ".ptx").str(), (base + ".abi").str()};
}

void runtime::removeCache(StringRef directory, StringRef key) {
  auto [ptxPath, abiPath] = cachePaths(directory, key);
  llvm::sys::fs::remove(ptxPath);
  llvm::sys::fs::remove(abiPath);
}

bool runtime::readCache(MLIRContext &context, StringRef directory,
                        StringRef key, const ProgramSignature &signature,
                        Kernel &kernel) {
  if (directory.empty())
    return false;
  auto [ptxPath, abiPath] = cachePaths(directory, key);
  auto ptx = llvm::MemoryBuffer::getFile(ptxPath);
  auto abiText = llvm::MemoryBuffer::getFile(abiPath);
  if (!ptx && !abiText)
    return false;
  std::optional<KernelABI> abi;
  if (ptx && abiText) {
    auto [hash, dictionary] = (*abiText)->getBuffer().split('\n');
    auto attr =
        dyn_cast_or_null<DictionaryAttr>(parseAttribute(dictionary, &context));
    if (attr && hash == hashPtx((*ptx)->getBuffer()))
      abi = KernelABI::fromAttr(attr);
  }
  if (!abi || !describesProgram(*abi, signature)) {
    removeCache(directory, key);
    return false;
  }
  kernel.ptx = (*ptx)->getBuffer().str();
  kernel.abi = std::move(*abi);
  return true;
}

void runtime::writeAtomically(const Twine &path, StringRef contents) {
  llvm::SmallString<256> target;
  path.toVector(target);
  if (llvm::sys::fs::create_directories(llvm::sys::path::parent_path(target)))
    return;
  int fd = -1;
  llvm::SmallString<256> temporary;
  if (llvm::sys::fs::createUniqueFile(target + ".tmp-%%%%%%%%", fd, temporary))
    return;
  bool written = false;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << contents;
    os.close();
    written = !os.has_error();
    // A failed write (a full disk) only costs the cache entry.
    os.clear_error();
  }
  if (!written || llvm::sys::fs::rename(temporary, target))
    llvm::sys::fs::remove(temporary);
}

void runtime::writeCache(MLIRContext &context, StringRef directory,
                         StringRef key, const Kernel &kernel) {
  if (directory.empty())
    return;
  auto [ptxPath, abiPath] = cachePaths(directory, key);
  std::string abiText = hashPtx(kernel.ptx) + "\n";
  llvm::raw_string_ostream os(abiText);
  os << kernel.abi.toAttr(&context);
  writeAtomically(ptxPath, kernel.ptx);
  writeAtomically(abiPath, abiText);
}
