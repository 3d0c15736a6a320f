/*===- coda_runtime.h - the C API of coda's GPU runtime -----------*- C -*-===*\
|*                                                                            *|
|* Compile coda programs for a CUDA GPU and launch them on device memory and *|
|* a stream the caller owns. Every function returns CODA_OK or CODA_ERROR;   *|
|* coda_last_error() then describes the failure (per thread).                *|
|*                                                                            *|
|*   coda_runtime *rt;        coda_runtime_create(0, &rt);                    *|
|*   coda_program *program;   coda_program_load(rt, text, len, NULL,
&program);*|
|*   coda_program_launch(program, args, nargs, outs, nouts, stream);         *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef CODA_RUNTIME_CODA_RUNTIME_H
#define CODA_RUNTIME_CODA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum coda_status { CODA_OK = 0, CODA_ERROR = 1 } coda_status;

typedef struct coda_runtime coda_runtime;
typedef struct coda_program coda_program;
typedef struct coda_graph coda_graph;

/* A tensor in device memory: a CUdeviceptr to dense row-major data. */
typedef struct coda_tensor {
  uint64_t data;
  int32_t rank;
  int64_t shape[3];
} coda_tensor;

/* The value of one program argument: `tensor` for tensors, `f32` or `i64`
   for scalars. */
typedef struct coda_value {
  coda_tensor tensor;
  float f32;
  int64_t i64;
} coda_value;

/* What a program argument is. */
typedef enum coda_argument_kind {
  CODA_ARGUMENT_TENSOR = 0,
  CODA_ARGUMENT_F32 = 1,
  CODA_ARGUMENT_I64 = 2
} coda_argument_kind;

/* What an output is when the GEMM plays no part in it: an argument itself,
   or an [m, n] argument summed over M (as a derived backward program's
   gradients of a residual and of a bias are: docs/autodiff.md). */
typedef enum coda_output_source {
  CODA_OUTPUT_COMPUTED = 0,
  CODA_OUTPUT_ARGUMENT = 1,
  CODA_OUTPUT_COLUMN_SUM = 2
} coda_output_source;

/* How a program is read and compiled; NULL selects the defaults (all zero).
   Zero-initialize it and set the fields wanted (zero is each field's
   default). The struct has no size field: build against the header of the
   library you load. */
typedef struct coda_compile_options {
  /* Output columns per tile (64, 128, 192, 256) and pipeline stages; 0:
     default. */
  int64_t tile_n;
  int64_t stages;
  /* coda IR: the function that is the program, when the module holds
     several (NULL: the only one). */
  const char *function;
  /* Nonzero: the source is an epilogue in the DSL (docs/dsl.md), whose GEMM
     has operands of `dtype` ("bf16" when NULL, "f16", "f32"), A stored as
     `layout_a` ("mk" when NULL, "km"), B as `layout_b` ("nk" when NULL, "kn"),
     C and beta arguments when `with_c`, an alpha argument when `with_alpha`. */
  int32_t epilogue;
  const char *dtype;
  const char *layout_a;
  const char *layout_b;
  int32_t with_c;
  int32_t with_alpha;
  /* Output rows per tile (64, 128, 256); 0: default. */
  int64_t tile_m;
  /* "cooperative" or "pingpong"; NULL or "": default. */
  const char *schedule;
  /* Nonzero: the first launch of each problem shape times the candidate
     kernel shapes on its arguments (into scratch outputs) and keeps the
     fastest, cached with the kernels; excludes tile_m, tile_n, stages,
     schedule, cluster_m and group_rows. */
  int32_t autotune;
  /* Blocks per cluster along M (1, or 2: vertically adjacent tiles share
     their B tile by TMA multicast); 0: default. */
  int64_t cluster_m;
  /* The tile order: row blocks walked column by column before the next
     group (1: row by row; a multiple of cluster_m, at most 1024); 0:
     default. */
  int64_t group_rows;
  /* Nonzero: GELU(tanh), SiLU and sigmoid run on the GPU's tanh.approx.f32
     instruction (faster; tanh within 2^-11 relative error, as cuBLASLt's
     fused GELU). */
  int32_t fast_activations;
  /* Non-NULL: load the program derived from the source's for training
     (docs/autodiff.md): "backward" (the epilogue gradient on the recomputed
     GEMM), "saving" (the forward, also writing its accumulator),
     "backward_saved" (the epilogue gradient on the GEMM producing the output
     gradient; "backward_saved_nk" when that GEMM's weight is stored [N, K]),
     "backward_from_saved" (the epilogue gradient on the saved accumulator,
     no product), "grad_a" or "grad_b" (the operand gradients), "inference"
     (dropout the identity), "row_statistics" or "row_apply" (the row split,
     which the runtime launches itself for rows too wide for a cluster of
     tiles). */
  const char *derive;
  /* Nonzero: column reductions (a bias gradient, say) are merged in a fixed
     order instead of with f32 atomics, bit-identical from run to run (a
     merge kernel runs after the GEMM). */
  int32_t deterministic;
} coda_compile_options;

/* The layout of coda_compile_options in this library, for bindings that
   mirror the struct to check theirs against: "size S" (sizeof), then for
   each field, in order, ", NAME OFFSET SIZE" (in bytes). */
const char *coda_compile_options_layout(void);

/* The message of the last failed call on this thread ("" if none). */
const char *coda_last_error(void);

/* Opens CUDA device `device` (its primary context, which the CUDA runtime and
   PyTorch share). Calls that work on the device make that context current
   for their duration and leave the calling thread's current context as they
   found it. */
coda_status coda_runtime_create(int device, coda_runtime **runtime);
/* Releases the caller's runtime; the device's resources go once the runtime
   and every program loaded into it are destroyed, in any order. */
void coda_runtime_destroy(coda_runtime *runtime);

/* Parses and verifies a program: coda IR (MLIR text), or an epilogue in the
   DSL (options->epilogue), `length` bytes at `source` (no NUL needed). It is
   compiled when first launched, and cached in memory and on disk. */
coda_status coda_program_load(coda_runtime *runtime, const char *source,
                              size_t length,
                              const coda_compile_options *options,
                              coda_program **program);
void coda_program_destroy(coda_program *program);

/* The program's interface: its arguments and outputs, in order. For a NULL
   program or an index out of range, names and types are NULL, kinds
   CODA_ARGUMENT_TENSOR, dims and counts 0. */
int32_t coda_program_num_arguments(const coda_program *program);
const char *coda_program_argument_name(const coda_program *program,
                                       int32_t index);
coda_argument_kind coda_program_argument_kind(const coda_program *program,
                                              int32_t index);
/* "a", "b", "c", "alpha", "beta" or "input". */
const char *coda_program_argument_role(const coda_program *program,
                                       int32_t index);
/* The element type of a tensor argument, or the type of a scalar one:
   "bf16", "f16", "f32" or "i64". */
const char *coda_program_argument_type(const coda_program *program,
                                       int32_t index);
/* The dims a tensor argument spans: bit 2 batch, bit 1 m, bit 0 n (0 for A,
   B and scalars). */
int32_t coda_program_argument_dims(const coda_program *program, int32_t index);
/* The period p of an input that spans n mod p (its p columns repeat along
   the row), else 0. */
int32_t coda_program_argument_period(const coda_program *program,
                                     int32_t index);
int32_t coda_program_num_outputs(const coda_program *program);
const char *coda_program_output_name(const coda_program *program,
                                     int32_t index);
/* "bf16", "f16" or "f32". */
const char *coda_program_output_type(const coda_program *program,
                                     int32_t index);
/* The dims an output spans (bits as for arguments). */
int32_t coda_program_output_dims(const coda_program *program, int32_t index);
/* Whether the output is an argument's value or column sum, and which
   argument (*argument, -1 when computed; argument may be NULL). A caller
   can take or sum that argument instead of launching the program for it. */
coda_output_source coda_program_output_source(const coda_program *program,
                                              int32_t index, int32_t *argument);
/* Whether A is stored [K, M] and B [N, K] (0 for a NULL program). */
void coda_program_layouts(const coda_program *program, int32_t *transpose_a,
                          int32_t *transpose_b);
/* Whether the accumulator spans [m, n/2]: B has N / 2 columns, the outputs
   N (0 for a NULL program). */
int32_t coda_program_accumulator_half_n(const coda_program *program);

/* The output tile (rows, columns), schedule ("cooperative" or "pingpong"),
   blocks per cluster and row blocks per group of the tile order of the kernel
   the program prepared or launched last: the one the tile rule or autotuning
   chose for the last problem; 0, 0, "", 0 and 0 before any. The string is
   static. */
void coda_program_kernel_shape(const coda_program *program, int64_t *tile_m,
                               int64_t *tile_n, const char **schedule,
                               int64_t *cluster_m, int64_t *group_rows);

/* Compiles or fetches the kernel of the program's compile options now instead
   of at the first launch. When the options leave the tile shape open, a
   launch whose problem fills the GPU better with another tile width compiles
   that kernel at its first launch (see GpuProgram::launch in Runtime.h). */
coda_status coda_program_prepare(coda_program *program);

/* Compiles or fetches now the kernel that launches of a problem of these
   sizes use (batch 1 unless the program is batched; m, n and k as
   coda_program_launch infers them from the argument shapes; with
   seed_in_memory non-zero, the kernel of coda_program_launch_device_seed
   when the program draws a dropout mask). Not for an autotuned program, whose
   first launch of a problem times the candidate kernels. Threads may call it
   and launch at once: different kernels compile in parallel, each kernel
   once, and a launch that needs a kernel being compiled waits for it. */
coda_status coda_program_prepare_problem(coda_program *program, int64_t batch,
                                         int64_t m, int64_t n, int64_t k,
                                         int32_t seed_in_memory);

/* Launches the program on `stream` (a CUstream, NULL for the default stream).
   Shapes, alignment and counts are checked before anything is launched, and
   that no output overlaps another output, A, B or an input, unless it is
   exactly that epilogue input's (or C's) memory, written in place. */
coda_status coda_program_launch(coda_program *program,
                                const coda_value *arguments,
                                size_t num_arguments,
                                const coda_tensor *outputs, size_t num_outputs,
                                void *stream);

/* As coda_program_launch, but the kernel reads the dropout seed (the i64
   argument named "seed", whose `i64` is then ignored) as it starts, from the
   8 bytes at `seed_address` (a CUdeviceptr, 8-byte aligned): a CUDA graph that
   captured the launch replays with the seed held there then, so a graph that
   also advances it draws a new mask at each replay. The first such launch of
   a problem shape compiles the kernel for it, beside coda_program_launch's. */
coda_status coda_program_launch_device_seed(
    coda_program *program, const coda_value *arguments, size_t num_arguments,
    const coda_tensor *outputs, size_t num_outputs, uint64_t seed_address,
    void *stream);

/* Program graphs: a function of coda IR that calls coda programs and nothing
   else (each coda.gemm outside a program is made one first), such as a chain
   of GEMMs passing tensors along, launched whole in one call on one stream
   (docs/gpu.md#program-graphs). */

/* Loads function `options->function` of the module `source` (NULL: its only
   function that is not a program, else its only program) as a program graph,
   each of its programs with `options` (whose `epilogue` and `derive` must be
   unset). */
coda_status coda_graph_load(coda_runtime *runtime, const char *source,
                            size_t length, const coda_compile_options *options,
                            coda_graph **graph);
void coda_graph_destroy(coda_graph *graph);

/* The graph as JSON, valid while it lives: {"function": NAME, "arguments":
   [{"type": "bf16" | "f16" | "f32" | "i64", "tensor": BOOL, "shape": [SIZE,
   -1 where dynamic]}...], "result_types": [{"type", "shape"}...], "calls":
   [{"program": NAME, "arguments": [VALUE...]}...], "results": [VALUE...]},
   each VALUE ["argument", I] or ["call", J, OUTPUT]. */
const char *coda_graph_describe(const coda_graph *graph);

/* For arguments of the shapes in `arguments` (scalars' ignored): writes each
   result's rank and shape into `results` (their `data` untouched) and the
   workspace the values between calls need, in bytes. */
coda_status coda_graph_plan(const coda_graph *graph,
                            const coda_value *arguments, size_t num_arguments,
                            coda_tensor *results, size_t num_results,
                            uint64_t *workspace_bytes);

/* Compiles (or reads from the caches) and loads every call's kernel for
   arguments of these shapes, the calls in parallel. */
coda_status coda_graph_prepare(coda_graph *graph, const coda_value *arguments,
                               size_t num_arguments);

/* Launches every call in turn on `stream`, the results into `results`, the
   values between calls into `workspace` (a device address aligned to 256
   bytes, of `workspace_bytes`, at least coda_graph_plan's). Shapes and the
   workspace are checked before anything is launched. */
coda_status coda_graph_launch(coda_graph *graph, const coda_value *arguments,
                              size_t num_arguments, const coda_tensor *results,
                              size_t num_results, uint64_t workspace,
                              uint64_t workspace_bytes, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CODA_RUNTIME_CODA_RUNTIME_H */
