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
   "i64"), "dims" (bit 2 batch, bit 1 m, bit 0 n), "period" (p of an input
   that spans n mod p, else 0), "tensor" (bool)}, ...],
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

/* A function of a module that calls coda programs (coda-run --entry; an
   exported function once raised and outlined), compiled for the host CPU
   with each program call a launch. */
typedef struct coda_reference_host coda_reference_host;

/* Runs program `index` (as the description's "programs" lists them) of a host
   function: arguments and outputs as coda_reference_run takes them (host
   memory; each output of the shape its problem gives it). On failure, writes
   a message of at most `capacity` bytes (with its NUL) to `message` and
   returns CODA_ERROR. */
typedef coda_status (*coda_reference_launch_fn)(void *user, int32_t index,
                                                const coda_value *arguments,
                                                size_t num_arguments,
                                                const coda_tensor *outputs,
                                                size_t num_outputs,
                                                char *message, size_t capacity);

/* Parses coda IR holding function `function` and the programs it calls,
   makes each coda.gemm outside a program one (coda-outline-programs), and
   compiles the function for the host (its arguments and results ranked
   tensors of f32, f16 or bf16), unless it is a program graph (calls of
   programs only), which runs its programs in turn with no host code. */
coda_status coda_reference_host_load(const char *source, size_t length,
                                     const char *function,
                                     coda_reference_host **host);
void coda_reference_host_destroy(coda_reference_host *host);

/* The host function's interface as JSON: {"arguments": [{"type", "shape"
   (-1 where dynamic)}, ...], "results": [...], "programs": [{"name", then a
   program's interface as coda_reference_describe gives it}, ...],
   "program_source": the coda IR of the programs (and the host code), from
   which coda_program_load compiles a program by its name (and
   coda_graph_load the function, when it is a graph), "graph": the program
   graph as coda_graph_describe gives its calls and results, or null, and
   "graph_violation": why it is not one ("" when it is)}. A handle runs one
   call at a time: calls on it from several threads must not overlap. */
const char *coda_reference_host_describe(const coda_reference_host *host);

/* Runs the host function on `arguments` (host tensors of its argument types),
   each program launched by `launch(user, ...)`, or on the CPU reference when
   `launch` is NULL. Its results are then those of coda_reference_host_result,
   until the next run. */
coda_status coda_reference_host_run(coda_reference_host *host,
                                    const coda_tensor *arguments,
                                    size_t num_arguments,
                                    coda_reference_launch_fn launch,
                                    void *user);

/* Result `index` of the last run, in host memory the host function owns. */
coda_status coda_reference_host_result(const coda_reference_host *host,
                                       size_t index, coda_tensor *result);

#ifdef __cplusplus
}
#endif

#endif /* CODA_RUNNER_CODA_REFERENCE_H */
