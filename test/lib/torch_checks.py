"""What the PyTorch tests share: the comparison the GPU tests make (a tensor
against its float64 reference by relative error in the 2-norm, finite
everywhere), and the memory a call leaves held."""

import torch


def report(failures, what, got, want, tolerance=2e-2):
    """Prints `what`'s relative error; appends `what` to `failures` when it
    is not below `tolerance` or `got` is not finite."""
    got, want = got.double(), want.double()
    error = ((got - want).norm() / want.norm()).item()
    finite = bool(torch.isfinite(got).all())
    print(f"{what}: relative error {error:.2e}{'' if finite else ' (not finite)'}")
    if not (finite and error < tolerance):
        failures.append(what)


def poison_allocations():
    """Every tensor PyTorch allocates from now on (a kernel's outputs
    included) is filled with NaN first, so that an element a kernel leaves
    unwritten fails the comparison."""
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True


def held_after(fn):
    """(fn(), the bytes of the CPU allocations made during the call that are
    still held after it), by torch.profiler's memory accounting: what a
    forward keeps for its backward."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as trace:
        result = fn()
    return result, sum(event.self_cpu_memory_usage for event in trace.events())
