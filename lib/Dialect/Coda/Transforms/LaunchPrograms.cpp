//===- LaunchPrograms.cpp - the coda-launch-programs pass -----------------===//
//
// Replaces the body of every coda program of a module by a launch through
// the host runtime (coda/Program/HostLaunch.h), leaving host code that the
// CPU pipeline compiles while the programs run as kernels of their own.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/Transforms/Passes.h"
#include "coda/Program/HostLaunch.h"
#include "coda/Program/ProgramSignature.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODALAUNCHPROGRAMS
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::host_launch;

namespace {

/// Builds the launch that replaces a program's body.
class LaunchBuilder {
public:
  LaunchBuilder(OpBuilder &b, Location loc, Value packed)
      : b(b), loc(loc), packed(packed) {}

  /// Stores `value` (an i64) at word `word` of the packed buffer.
  void store(Value value, int64_t word) {
    memref::StoreOp::create(b, loc, value, packed, index(word));
  }
  void store(int64_t value, int64_t word) { store(i64(value), word); }

  /// The i64 at word `word`, as an index.
  Value loadIndex(int64_t word) {
    Value value = memref::LoadOp::create(b, loc, packed, index(word));
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), value);
  }

  /// Stores the address, rank and sizes of `buffer` (an identity-layout
  /// memref) as value `slot`.
  void storeBuffer(Value buffer, int64_t slot) {
    auto type = cast<MemRefType>(buffer.getType());
    int64_t base = slot * kWordsPerValue;
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
    store(toI64(address), base);
    store(type.getRank(), base + kRankWord);
    for (int64_t d = 0; d < type.getRank(); ++d)
      store(toI64(memref::DimOp::create(b, loc, buffer, d)),
            base + kFirstSizeWord + d);
  }

  /// Stores the bits of scalar `value` (f32 or i64) as value `slot`.
  void storeScalar(Value value, int64_t slot) {
    if (value.getType().isF32()) {
      value = arith::BitcastOp::create(b, loc, b.getI32Type(), value);
      value = arith::ExtUIOp::create(b, loc, b.getI64Type(), value);
    }
    store(value, slot * kWordsPerValue);
  }

  Value i64(int64_t value) {
    return arith::ConstantIntOp::create(b, loc, value, 64);
  }
  Value index(int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }
  Value toI64(Value index) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
  }

private:
  OpBuilder &b;
  Location loc;
  Value packed;
};

/// The external function `name` of the launch contract, declared in
/// `module` when it is not yet.
func::FuncOp declareLaunchFunction(ModuleOp module, StringRef name) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto type = b.getFunctionType(
      {b.getI64Type(), MemRefType::get({ShapedType::kDynamic}, b.getI64Type())},
      {});
  auto func = func::FuncOp::create(b, module.getLoc(), name, type);
  func.setPrivate();
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  return func;
}

/// Replaces the body of `program` (the index-th of its module) by its
/// launch.
void replaceByLaunch(func::FuncOp program, int64_t index,
                     func::FuncOp shapesFunction, func::FuncOp launchFunction) {
  Location loc = program.getLoc();
  program.getBody().getBlocks().clear();
  Block *body = program.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(body);
  unsigned numArguments = program.getNumArguments();
  unsigned numOutputs = program.getNumResults();
  int64_t words = (numArguments + numOutputs) * kWordsPerValue;
  Value packed = memref::AllocaOp::create(
      b, loc, MemRefType::get({words}, b.getI64Type()));
  // Words a value does not use (a scalar's rank and sizes, the sizes past
  // a tensor's rank) are not read.
  LaunchBuilder launch(b, loc, packed);

  for (auto [i, arg] : llvm::enumerate(body->getArguments())) {
    auto tensor = dyn_cast<RankedTensorType>(arg.getType());
    if (!tensor) {
      launch.storeScalar(arg, i);
      continue;
    }
    auto bufferType =
        MemRefType::get(tensor.getShape(), tensor.getElementType());
    auto buffer = bufferization::ToBufferOp::create(b, loc, bufferType, arg,
                                                    /*read_only=*/true);
    launch.storeBuffer(buffer, i);
  }

  Value indexValue = launch.i64(index);
  Value dynamicPacked = memref::CastOp::create(
      b, loc, shapesFunction.getArgumentTypes()[1], packed);
  func::CallOp::create(b, loc, shapesFunction,
                       ValueRange{indexValue, dynamicPacked});

  SmallVector<Value> results;
  for (unsigned i = 0; i < numOutputs; ++i) {
    auto tensor = cast<RankedTensorType>(program.getResultTypes()[i]);
    int64_t slot = numArguments + i;
    SmallVector<Value> sizes;
    for (int64_t d = 0; d < tensor.getRank(); ++d)
      if (tensor.isDynamicDim(d))
        sizes.push_back(
            launch.loadIndex(slot * kWordsPerValue + kFirstSizeWord + d));
    Value buffer = memref::AllocOp::create(
        b, loc, MemRefType::get(tensor.getShape(), tensor.getElementType()),
        sizes);
    launch.storeBuffer(buffer, slot);
    results.push_back(buffer);
  }
  func::CallOp::create(b, loc, launchFunction,
                       ValueRange{indexValue, dynamicPacked});
  for (Value &result : results)
    result = bufferization::ToTensorOp::create(
        b, loc, memref::getTensorTypeFromMemRefType(result.getType()), result,
        /*restrict=*/true, /*writable=*/true);
  func::ReturnOp::create(b, loc, results);
}

struct LaunchPrograms
    : public coda::impl::CodaLaunchProgramsBase<LaunchPrograms> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // A coda.gemm left in a function that is not a program cannot be
    // launched.
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func.getOps<GemmOp>().empty())
        continue;
      if (std::optional<std::string> why = getProgramViolation(func)) {
        func.emitError() << "'" << func.getName()
                         << "' holds a coda.gemm but is not a coda program ("
                         << *why
                         << "); run coda-outline-programs first, which makes "
                            "each such coda.gemm a program of its own";
        return signalPassFailure();
      }
    }
    SmallVector<func::FuncOp> programs = getPrograms(module);
    if (programs.empty())
      return;
    func::FuncOp shapes = declareLaunchFunction(module, kShapesFunction);
    func::FuncOp launch = declareLaunchFunction(module, kLaunchFunction);
    for (auto [index, program] : llvm::enumerate(programs))
      replaceByLaunch(program, index, shapes, launch);
  }
};

} // namespace
