//===- SourceFile.cpp - read a program's source, bounded ------------------===//

#include "coda/Support/SourceFile.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

using namespace mlir;

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
coda::readSourceFile(llvm::StringRef path, uint64_t limit) {
  bool standardInput = path == "-";
  std::string name = standardInput ? "<stdin>" : path.str();
  auto cannotRead = [&](llvm::Error error) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "cannot read '" + name +
            "': " + llvm::errorToErrorCode(std::move(error)).message());
  };
  auto tooLarge = [&](const llvm::Twine &size) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "'" + name + "' holds " + size +
            ": a program is read whole, and may hold at most " +
            llvm::Twine(limit >> 20) + " MiB");
  };
  llvm::sys::fs::file_t file;
  if (standardInput) {
    file = llvm::sys::fs::getStdinHandle();
  } else {
    llvm::Expected<llvm::sys::fs::file_t> opened =
        llvm::sys::fs::openNativeFileForRead(path);
    if (!opened)
      return cannotRead(opened.takeError());
    file = *opened;
  }
  llvm::scope_exit close([&] {
    if (!standardInput)
      llvm::sys::fs::closeFile(file);
  });
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(file, status) &&
      llvm::sys::fs::is_regular_file(status) && status.getSize() > limit)
    return tooLarge(llvm::Twine(status.getSize() >> 20) + " MiB");

  llvm::SmallString<0> text;
  constexpr size_t kChunk = 1 << 16;
  while (true) {
    size_t used = text.size();
    text.resize_for_overwrite(used + kChunk);
    llvm::Expected<size_t> read = llvm::sys::fs::readNativeFile(
        file, llvm::MutableArrayRef<char>(text.data() + used, kChunk));
    if (!read)
      return cannotRead(read.takeError());
    text.truncate(used + *read);
    if (*read == 0)
      break;
    if (text.size() > limit)
      return tooLarge("more than " + llvm::Twine(limit >> 20) +
                      " MiB (a device or an endless stream?)");
  }
  return llvm::MemoryBuffer::getMemBufferCopy(text, name);
}
