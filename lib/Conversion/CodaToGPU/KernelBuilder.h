//===- KernelBuilder.h - conveniences for building kernels ------*- C++ -*-===//
//
// Internal to coda-to-gpu: an ImplicitLocOpBuilder with short names for the
// i32 index arithmetic, shared-memory pointers and structured ifs that the
// main loop and the epilogue are made of.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_KERNELBUILDER_H
#define CODA_LIB_CONVERSION_CODATOGPU_KERNELBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::coda {

/// Builds the ops of a kernel body at one location.
class KernelBuilder : public ImplicitLocOpBuilder {
public:
  KernelBuilder(Location loc, OpBuilder &builder)
      : ImplicitLocOpBuilder(loc, builder) {}

  Value i16(int64_t value) {
    return arith::ConstantIntOp::create(*this, value, 16);
  }
  Value i32(int64_t value) {
    return arith::ConstantIntOp::create(*this, value, 32);
  }
  Value i64(int64_t value) {
    return arith::ConstantIntOp::create(*this, value, 64);
  }
  Value f32(double value) {
    return arith::ConstantOp::create(*this, getF32FloatAttr(value));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(*this, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(*this, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(*this, x, y); }
  Value divu(Value x, Value y) { return arith::DivUIOp::create(*this, x, y); }
  Value remu(Value x, Value y) { return arith::RemUIOp::create(*this, x, y); }
  Value andi(Value x, Value y) { return arith::AndIOp::create(*this, x, y); }
  Value ori(Value x, Value y) { return arith::OrIOp::create(*this, x, y); }
  Value xori(Value x, Value y) { return arith::XOrIOp::create(*this, x, y); }
  Value shru(Value x, Value y) { return arith::ShRUIOp::create(*this, x, y); }
  Value shl(Value x, Value y) { return arith::ShLIOp::create(*this, x, y); }
  Value cmp(arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(*this, pred, x, y);
  }
  /// Unsigned x < y.
  Value ult(Value x, Value y) { return cmp(arith::CmpIPredicate::ult, x, y); }
  Value eq(Value x, Value y) { return cmp(arith::CmpIPredicate::eq, x, y); }
  /// Zero-extends an i32 to i64.
  Value wide(Value x) { return arith::ExtUIOp::create(*this, getI64Type(), x); }
  /// An index (a thread or block id, say) as an i32.
  Value index32(Value index) {
    return arith::IndexCastUIOp::create(*this, getI32Type(), index);
  }

  /// `base` (a pointer) advanced by `offset` elements of `elementType`.
  Value gep(Value base, Type elementType, Value offset) {
    return LLVM::GEPOp::create(*this, base.getType(), elementType, base,
                               ValueRange{offset});
  }
  /// `base` advanced by `bytes` bytes.
  Value byteGep(Value base, Value bytes) {
    return gep(base, getI8Type(), bytes);
  }

  /// Builds `if (cond) { body }`.
  void ifThen(Value cond, function_ref<void()> body) {
    auto ifOp = scf::IfOp::create(*this, cond, /*withElseRegion=*/false);
    InsertionGuard guard(*this);
    setInsertionPoint(ifOp.thenBlock()->getTerminator());
    body();
  }
  /// Builds `cond ? thenValue() : elseValue()` as an scf.if, so that only the
  /// taken side runs (a guarded load, say).
  Value ifThenElse(Value cond, Type type, function_ref<Value()> thenValue,
                   function_ref<Value()> elseValue) {
    auto ifOp = scf::IfOp::create(*this, TypeRange{type}, cond,
                                  /*withElseRegion=*/true);
    InsertionGuard guard(*this);
    setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(*this, thenValue());
    setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(*this, elseValue());
    return ifOp.getResult(0);
  }
};

} // namespace mlir::coda

#endif // CODA_LIB_CONVERSION_CODATOGPU_KERNELBUILDER_H
