//===- CodaInterfaces.td - coda op interfaces --------------*- tablegen -*-===//

#ifndef CODA_DIALECT_CODA_IR_CODAINTERFACES_TD
#define CODA_DIALECT_CODA_IR_CODAINTERFACES_TD

include "mlir/IR/OpBase.td"

def Coda_EpilogueOpInterface : OpInterface<"EpilogueOpInterface"> {
  let cppNamespace = "::mlir::coda";
  let description = [{
    An op that holds a GEMM epilogue: a single block run once per element of
    the output space on the accumulator and one value per epilogue input,
    ending with `coda.yield` of one value per output. `coda.gemm` holds one
    on tensors; `coda.tile_epilogue` the same epilogue inside a GPU kernel,
    on accumulator registers. The epilogue ops, the dims analysis
    (EpilogueDims) and the epilogue's verifier work on either.
  }];
  let methods = [
    InterfaceMethod<"The epilogue's single block.", "::mlir::Block &",
                    "getEpilogueBlock">,
    InterfaceMethod<"The number of epilogue inputs.", "unsigned",
                    "getNumEpilogueInputs">,
    InterfaceMethod<"The type of epilogue input `i` (a tensor, or a scalar).",
                    "::mlir::Type", "getEpilogueInputType",
                    (ins "unsigned":$i)>,
    InterfaceMethod<"The dims epilogue input `i` spans.",
                    "::mlir::coda::DimsAttr", "getInputDimsAt",
                    (ins "unsigned":$i)>,
    InterfaceMethod<"The number of outputs.", "unsigned",
                    "getNumEpilogueOutputs">,
    InterfaceMethod<"The tensor type of output `i`.", "::mlir::Type",
                    "getEpilogueOutputType", (ins "unsigned":$i)>,
    InterfaceMethod<"The dims output `i` spans.", "::mlir::coda::DimsAttr",
                    "getResultDimsAt", (ins "unsigned":$i)>,
    InterfaceMethod<"The dims of the output space ([b, m, n] or [m, n]).",
                    "::mlir::coda::DimsAttr", "getOutputSpaceDims">,
    InterfaceMethod<"The tensor type of C, or null when there is no C.",
                    "::mlir::Type", "getEpilogueCType">,
  ];
  let extraSharedClassDeclaration = [{
    /// The block argument that holds the accumulator.
    ::mlir::BlockArgument getAccumulator() {
      return $_op.getEpilogueBlock().getArgument(0);
    }
    /// The block argument that holds epilogue input `i`.
    ::mlir::BlockArgument getInputArg(unsigned i) {
      return $_op.getEpilogueBlock().getArgument(i + 1);
    }
  }];
}

#endif // CODA_DIALECT_CODA_IR_CODAINTERFACES_TD
