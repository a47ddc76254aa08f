"""Type stubs of jitk: CuPy's user-kernel classes over libjitk."""

import os
from typing import Any, IO, Mapping, Sequence

__version__: str

class JitkError(RuntimeError): ...

class PerformanceWarning(RuntimeWarning): ...

class CompileError(JitkError):
    log: str
    source: str | None
    options: tuple[str, ...] | None
    name: str | None

class ElementwiseKernel:
    name: str
    in_params: str
    out_params: str
    operation: str
    preamble: str
    loop_prep: str
    after_loop: str
    options: tuple[str, ...]
    params: tuple[tuple[str, bool, bool, str], ...]
    nin: int
    nout: int
    nargs: int
    reduce_dims: int
    no_return: int
    return_tuple: int
    def __init__(
        self,
        in_params: str,
        out_params: str,
        operation: str,
        name: str = ...,
        reduce_dims: bool = ...,
        preamble: str = ...,
        no_return: bool = ...,
        return_tuple: bool = ...,
        loop_prep: str = ...,
        after_loop: str = ...,
        options: Sequence[str] = ...,
    ) -> None: ...
    def __call__(
        self, *args: Any, size: int | None = ..., block_size: int | None = ..., stream: Any = ...
    ) -> Any: ...
    def compile(self, types: str, *, arch: str | None = ..., ndim: int = ..., index_bits: int = ...) -> str: ...

class ReductionKernel:
    name: str
    in_params: str
    out_params: str
    map_expr: str
    reduce_expr: str
    post_map_expr: str
    identity: str | None
    reduce_type: str | None
    preamble: str
    options: tuple[str, ...]
    params: tuple[tuple[str, bool, bool, str], ...]
    nin: int
    nout: int
    nargs: int
    def __init__(
        self,
        in_params: str,
        out_params: str,
        map_expr: str,
        reduce_expr: str,
        post_map_expr: str,
        identity: object,
        name: str = ...,
        reduce_type: Any = ...,
        reduce_dims: bool = ...,
        preamble: str = ...,
        options: Sequence[str] = ...,
    ) -> None: ...
    def __call__(
        self,
        *args: Any,
        axis: int | Sequence[int] | None = ...,
        keepdims: bool = ...,
        out: Any = ...,
        stream: Any = ...,
    ) -> Any: ...
    def autotune(
        self,
        *args: Any,
        axis: int | Sequence[int] | None = ...,
        keepdims: bool = ...,
        out: Any = ...,
        stream: Any = ...,
    ) -> Any: ...
    def compile(
        self,
        types: str,
        *,
        arch: str | None = ...,
        kept_ndim: int = ...,
        reduced_ndim: int = ...,
        index_bits: int = ...,
    ) -> str: ...

class RawModule:
    code: str | None
    path: str | None
    file_path: str | None
    options: tuple[str, ...]
    name_expressions: tuple[str, ...] | None
    backend: str
    enable_cooperative_groups: bool
    link: tuple[tuple[str, bytes | None, str | None], ...]
    link_options: tuple[str, ...]
    lto: bool | None
    def __init__(
        self,
        *,
        code: str | None = ...,
        path: str | None = ...,
        options: Sequence[str] = ...,
        backend: str = ...,
        translate_cucomplex: bool = ...,
        enable_cooperative_groups: bool = ...,
        name_expressions: Sequence[str] | None = ...,
        jitify: bool = ...,
        link: Sequence[str | os.PathLike[str] | tuple[str, str | bytes | None]] = ...,
        link_options: Sequence[str] = ...,
        lto: bool | None = ...,
    ) -> None: ...
    def get_function(self, name: str) -> RawKernel: ...
    def get_global(self, name: str) -> Any: ...
    def compile(self, log_stream: IO[str] | None = ..., *, arch: str | None = ...) -> None: ...

class RawKernel:
    name: str
    __name__: str
    code: str
    file_path: str | None
    options: tuple[str, ...]
    backend: str
    enable_cooperative_groups: bool
    attributes: dict[str, int]
    max_threads_per_block: int
    shared_size_bytes: int
    const_size_bytes: int
    local_size_bytes: int
    num_regs: int
    ptx_version: int
    binary_version: int
    cache_mode_ca: int
    preferred_shared_memory_carveout: int
    max_dynamic_shared_size_bytes: int
    def __init__(
        self,
        code: str,
        name: str,
        options: Sequence[str] = ...,
        backend: str = ...,
        *,
        translate_cucomplex: bool = ...,
        enable_cooperative_groups: bool = ...,
        jitify: bool = ...,
    ) -> None: ...
    def __call__(
        self,
        grid: int | tuple[int, ...],
        block: int | tuple[int, ...],
        args: Sequence[Any],
        shared_mem: int = ...,
        stream: Any = ...,
        enable_cooperative_groups: bool = ...,
        *,
        cluster: int | tuple[int, ...] | None = ...,
        programmatic_dependent_launch: bool = ...,
    ) -> None: ...
    def compile(self, log_stream: IO[str] | None = ..., *, arch: str | None = ...) -> None: ...

class MatmulPlan:
    m: int
    n: int
    k: int
    batch: int
    out_dtype: str
    def __init__(
        self,
        a: Any,
        b: Any,
        c: Any = ...,
        *,
        alpha: float = ...,
        beta: float = ...,
        epilogue: str | None = ...,
        epilogue_inputs: Mapping[str, Any] | None = ...,
        out: Any = ...,
        out_dtype: str | None = ...,
        compute: str | None = ...,
        preamble: str | None = ...,
        outputs: Mapping[str, tuple[str, str]] | None = ...,
        reductions: Mapping[str, tuple[str, str, str, str]] | None = ...,
        scales: tuple[str, ...] = ...,
        amax_d: bool = ...,
    ) -> None: ...
    def execute(
        self, a: Any, b: Any, c: Any = ..., *, epilogue_inputs: Mapping[str, Any] | None = ..., out: Any = ..., stream: Any = ...,
        alpha: float | None = ..., beta: float | None = ..., a_scale: Any = ..., b_scale: Any = ...,
        d_scale: Any = ...
    ) -> Any: ...
    def autotune(
        self, a: Any, b: Any, c: Any = ..., *, epilogue_inputs: Mapping[str, Any] | None = ..., out: Any = ..., stream: Any = ...
    ) -> MatmulPlan: ...
    def describe(self) -> str: ...
    @property
    def source(self) -> str: ...

def matmul(
    a: Any,
    b: Any,
    c: Any = ...,
    *,
    alpha: float = ...,
    beta: float = ...,
    epilogue: str | None = ...,
    epilogue_inputs: Mapping[str, Any] | None = ...,
    out: Any = ...,
    stream: Any = ...,
    compute: str | None = ...,
    out_dtype: str | None = ...,
    preamble: str | None = ...,
) -> Any: ...
def cache_stats() -> dict[str, Any]: ...
def device_count() -> int: ...
def device_arch(device: int = ...) -> str: ...
def nvrtc_version() -> tuple[int, int]: ...
