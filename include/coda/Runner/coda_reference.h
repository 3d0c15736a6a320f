/*===- coda_reference.h - the C API of coda's CPU reference -------*- C -*-===*\
|*                                                                            *|
|* Run coda programs on the host CPU through the reference lowering (the    *|
|* semantics every GPU kernel is checked against), on host memory the       *|
|* caller owns; optionally in f64, every float widened, for gradient checks.*|
|* Every function returns CODA_OK or CODA_ERROR; coda_reference_last_error()*|
|* then describes the failure (per thread).                                 *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef CODA_RUNNER_CODA_REFERENCE_H
#define CODA_RUNNER_CODA_REFERENCE_H

#include "coda/Runtime/coda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct coda_reference_program coda_reference_program;

/* The message of the last failed call on this thread ("" if none). */
const char *coda_reference_last_error(void);

/* Parses, verifies and compiles a program as coda_program_load does (coda IR,
   or an epilogue in the DSL, and the program `options->derive` names derived
   from it; the kernel-shape options are ignored). `widen_to_f64` nonzero:
   every float tensor and scalar argument and output is f64, computed in f64
   (coda-cpu-pipeline{widen-to-f64}). */
coda_status coda_reference_load(const char *source, size_t length,
                                const coda_compile_options *options,
                                int32_t widen_to_f64,
                                coda_reference_program **program);
void coda_reference_destroy(coda_reference_program *program);

/* The program's interface as JSON: {"arguments": [{"name", "role" ("a", "b",
   "c", "alpha", "beta", "input"), "type" ("bf16", "f16", "f32", "f64",
   "i64"), "dims" (bit 2 batch, bit 1 m, bit 0 n), "tensor" (bool)}, ...],
   "outputs": [{"name", "type", "dims"}, ...], "transpose_a", "transpose_b"}.
   The string lives as long as the program. */
const char *coda_reference_describe(const coda_reference_program *program);

/* Runs the program. Tensors are host pointers to dense row-major data of the
   argument's type (`data` of coda_tensor); scalar f32 arguments are taken
   from `f32` (widened to f64 in a widened program), seeds from `i64`. Each
   output is written into
   `outputs[i]`, which must have the shape the problem gives it. */
coda_status coda_reference_run(const coda_reference_program *program,
                               const coda_value *arguments,
                               size_t num_arguments, const coda_tensor *outputs,
                               size_t num_outputs);

#ifdef __cplusplus
}
#endif

#endif /* CODA_RUNNER_CODA_REFERENCE_H */
