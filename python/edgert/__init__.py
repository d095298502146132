"""edgert from Python: probe the device, rank the backends for a priority,
and run one — pack 4-bit weights, GEMMs, decode steps — over the installed
libedgert (ctypes; numpy is the one requirement).

    import edgert
    with edgert.open() as ctx:
        sel = ctx.select(priority="fidelity")
        print(sel)                       # the choice, the ranking and why
        be = ctx.backend(sel.selected.name)
        w = edgert.quantize_rtn(dense, group=128)   # float32 [n, k]
        packed = be.pack(w)
        y = be.gemm(packed, x)           # x float32 [m, k] or [k]

Errors are edgert.Error, carrying the status name, its code and the
library's message. Every handle closes with `with`, with close(), or when
collected, and in order: closing a context closes its backends, closing a
backend frees its packed weights. docs/python.md is the manual.
"""
from __future__ import annotations

import ctypes
import dataclasses
import math
import threading
import weakref
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import _native as _n

__all__ = ["Error", "LibraryNotFound", "Device", "Layout", "Figures", "Candidate", "Rank",
           "Selection", "Context", "Backend", "Packed", "QWeights", "StepOp", "PreparedStep",
           "Checkpoint",
           "Layer", "Model", "ModelInfo", "Comparison", "compare", "open", "probe",
           "quantize_rtn", "quantize",
           "library_version",
           "library_path", "__version__"]

LibraryNotFound = _n.LibraryNotFound
_lib, _path = _n.load()
__version__ = _lib.edgert_version().decode()

_ERR_LEN = 2048
_gemm = _lib.edgert_gemm
_PRIORITIES = {"speed": 0, "fidelity": 1}


def library_version() -> str:
    """The running libedgert's version, e.g. "0.1.0"."""
    return __version__


def library_path() -> str:
    """The libedgert file this package loaded."""
    return _path


class Error(Exception):
    """A libedgert call failed: `status` is its name ("E_USAGE"), `code` its
    number (edgert/status.h) and `message` the library's words."""

    def __init__(self, code: int, message: str):
        self.code = int(code)
        self.status = _s(_lib.edgert_status_name(self.code)) or f"E_{self.code}"
        self.message = message
        super().__init__(f"{self.status}: {message}" if message else self.status)


def _s(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else b.decode("utf-8", "replace")


def _num(v: float) -> Optional[float]:
    return None if math.isnan(v) else float(v)


def _check(st: int, err: Any) -> None:
    if st != 0:
        raise Error(st, err.value.decode("utf-8", "replace") if err is not None else "")


def _usage(msg: str) -> Error:
    return Error(1, msg)


# ---- what the handle knows -----------------------------------------------------------


def _asdict(obj: Any) -> dict:
    return dataclasses.asdict(obj)


@dataclasses.dataclass(frozen=True)
class Device:
    """The device facts a selection is made for (edgert_device)."""
    planned: bool
    source: str
    name: str
    cpu_id: str
    arch: str
    device_class: str
    cpu_flags: tuple
    cpu_flags_os_disabled: tuple
    logical_cores: int
    mem_total_bytes: int
    mem_available_bytes: int
    bf16: bool
    accelerator: str
    class_evidence: str
    to_dict = _asdict


def _flags(bits: int) -> tuple:
    out = []
    for i in range(64):
        if bits >> i & 1:
            name = _s(_lib.edgert_cpu_flag_name(i))
            out.append(name if name else f"bit{i}")
    return tuple(out)


def _device(d: _n.Device) -> Device:
    return Device(planned=bool(d.planned), source=_s(d.source), name=_s(d.name),
                  cpu_id=_s(d.cpu_id), arch=_s(_lib.edgert_arch_name(d.arch)),
                  device_class=_s(_lib.edgert_device_class_name(d.device_class)),
                  cpu_flags=_flags(d.cpu_flags), cpu_flags_os_disabled=_flags(
                      d.cpu_flags_os_disabled), logical_cores=d.logical_cores,
                  mem_total_bytes=d.mem_total_bytes, mem_available_bytes=d.mem_available_bytes,
                  bf16=bool(d.bf16), accelerator=_s(d.accelerator),
                  class_evidence=_s(d.class_evidence))


@dataclasses.dataclass(frozen=True)
class Layout:
    """A backend's weight and activation layout, from its manifest."""
    format: Optional[str]
    weight_bits: int
    group_size: int
    symmetric: bool
    activation_dtype: Optional[str]
    activation_bits: int
    bits_per_weight: float
    fallback_dtype: Optional[str]
    to_dict = _asdict


@dataclasses.dataclass(frozen=True)
class Figures:
    """Decode tokens/s, prefill GFLOP/s, top-1 agreement, mean KL (None:
    unknown) and where they come from."""
    decode_tokens_per_s: Optional[float]
    prefill_gflops: Optional[float]
    top1_agreement: Optional[float]
    kl_mean: Optional[float]
    where: Optional[str]
    to_dict = _asdict


def _figures(f: _n.Figures) -> Figures:
    return Figures(_num(f.decode_tokens_per_s), _num(f.prefill_gflops), _num(f.top1_agreement),
                   _num(f.kl_mean), _s(f.where))


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One manifest found, with its verdict: eligible, or the reasons it is
    not (stable codes such as "MISSING_CPU_FLAG(amx_tile)")."""
    name: str
    version: Optional[str]
    vendor: Optional[str]
    processor: Optional[str]
    manifest: Optional[str]
    library: Optional[str]
    layout: Layout
    activation_dtype: Optional[str]
    verified: bool
    reference: bool
    runs_in_process: bool
    eligible: bool
    loaded: bool
    arithmetic_checked: int
    reasons: tuple
    detail: Optional[str]
    path_chosen: Optional[str]
    rationale: Optional[str]
    declared: Figures
    measured: Figures
    first_contact_decode_tokens_per_s: Optional[float]
    # why first contact's figures were set aside (measured under contention), else None
    first_contact_contention: Optional[str]
    to_dict = _asdict


def _candidate(c: _n.Candidate) -> Candidate:
    lay = c.layout
    return Candidate(
        name=_s(c.name), version=_s(c.version), vendor=_s(c.vendor), processor=_s(c.processor),
        manifest=_s(c.manifest_path), library=_s(c.library_path),
        layout=Layout(_s(lay.format), lay.weight_bits, lay.group_size, bool(lay.symmetric),
                      _s(lay.activation_dtype), lay.activation_bits, lay.bits_per_weight,
                      _s(lay.fallback_dtype)),
        activation_dtype=_s(c.effective_activation_dtype), verified=bool(c.verified),
        reference=bool(c.reference), runs_in_process=bool(c.runs_in_process),
        eligible=bool(c.eligible), loaded=bool(c.loaded),
        arithmetic_checked=int(c.arithmetic_checked),
        reasons=tuple(_s(c.reasons[i]) for i in range(c.reason_count)), detail=_s(c.detail),
        path_chosen=_s(c.path_chosen), rationale=_s(c.rationale),
        declared=_figures(c.declared), measured=_figures(c.measured),
        first_contact_decode_tokens_per_s=_num(c.first_contact_decode_tokens_per_s),
        first_contact_contention=_s(c.first_contact_contention))


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """What opening found wrong or worth saying, at file:line:column."""
    level: int
    file: Optional[str]
    line: int
    column: int
    message: str
    to_dict = _asdict

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}: " if self.file else ""
        return where + self.message


_SPLITS = {0: None, 1: "median outside", 2: "range excludes"}
_TIERS = {0: "accelerator", 1: "cpu", 2: "reference"}


@dataclasses.dataclass(frozen=True)
class Rank:
    """The selector's account of one rank (edgert_selection_reason): the
    key that put it below the rank above (`decided_by`: "none" for the
    first, else "tier", "decode", "prefill", "cost", "top1", "kl", "bits",
    "specialization" or "name"), its group's ranks, and the figures it was
    compared by, each measured here (True) or declared (False, None: no
    figure)."""
    rank: int
    candidate: Candidate
    tier: str
    decided_by: str
    group: int
    group_ranks: tuple
    decode_tokens_per_s: Optional[float]
    decode_measured: Optional[bool]
    decode_source: str
    decode_range: Optional[tuple]
    prefill_gflops: Optional[float]
    top1_agreement: Optional[float]
    kl_mean: Optional[float]
    split: Optional[str]
    split_rank: Optional[int]
    to_dict = _asdict


def _measured(v: int) -> Optional[bool]:
    return None if v < 0 else bool(v)


@dataclasses.dataclass(frozen=True)
class Selection:
    """A ranking for a priority: the chosen backend (None when nothing is
    eligible), where its deciding figure came from ("measured" here or
    "declared" by its manifest), every ranked candidate with the selector's
    reasons, and every candidate found with its verdict."""
    priority: str
    selected: Optional[Candidate]
    evidence: str
    ranking: tuple
    candidates: tuple
    to_dict = _asdict

    def __str__(self) -> str:
        lines = [f"priority {self.priority}: "
                 + (f"{self.selected.name} ({self.evidence})" if self.selected else "nothing")]
        for r in self.ranking:
            c = r.candidate
            fig = "speed unknown" if r.decode_tokens_per_s is None else (
                f"{r.decode_tokens_per_s:.1f} tok/s "
                f"{'measured' if r.decode_measured else 'declared'}")
            why = "" if r.rank == 1 else f"; below rank {r.rank - 1} by {r.decided_by}"
            lines.append(f"  {r.rank}. {c.name:<16} {c.layout.weight_bits}-bit weights, "
                         f"{c.layout.activation_bits}-bit activations, {fig}{why}")
        for c in self.candidates:
            if not c.eligible:
                lines.append(f"  -  {c.name:<16} not eligible: {' '.join(c.reasons)}")
        return "\n".join(lines)


def _rank(ctx_p: int, sel_p: int, r: int, cands: list) -> Rank:
    w = _n.RankReason(struct_size=ctypes.sizeof(_n.RankReason))
    _check(_lib.edgert_selection_reason(sel_p, r, ctypes.byref(w)), None)
    return Rank(
        rank=r + 1, candidate=cands[w.candidate], tier=_TIERS.get(w.tier, str(w.tier)),
        decided_by=_s(_lib.edgert_decider_name(w.decider)) or str(w.decider), group=w.group,
        group_ranks=(w.group_first + 1, w.group_last + 1),
        decode_tokens_per_s=_num(w.decode), decode_measured=_measured(w.decode_measured),
        decode_source=_s(w.source),
        decode_range=None if math.isnan(w.decode_lo) else (w.decode_lo, w.decode_hi),
        prefill_gflops=_num(w.prefill), top1_agreement=_num(w.top1), kl_mean=_num(w.kl),
        split=_SPLITS.get(w.split), split_rank=w.split_rank + 1 if w.split else None)


# ---- handles ---------------------------------------------------------------------------


class _Handle:
    """A C handle, closed once: by close(), `with`, its owner's close, or
    when collected (weakref.finalize, so never after the owner's)."""

    def __init__(self, ptr: int, closer: Callable[[int], None], owner: Optional["_Handle"],
                 *more_owners: "_Handle"):
        self._ptr = ptr
        self._children: "weakref.WeakSet[_Handle]" = weakref.WeakSet()
        self._owner = owner  # keeps its owners alive while this lives
        self._owners = tuple(o for o in (owner,) + more_owners if o is not None)
        self._fin = weakref.finalize(self, closer, ptr)
        for o in self._owners:
            o._children.add(self)

    @property
    def closed(self) -> bool:
        return not self._fin.alive

    def _p(self) -> int:
        if not self._fin.alive:
            raise _usage(f"this {type(self).__name__.lower()} is closed")
        return self._ptr

    def close(self) -> None:
        """Close it (and what it made first); closing twice does nothing."""
        for child in list(self._children):
            child.close()
        self._fin()

    def __enter__(self):
        return self

    def __repr__(self) -> str:
        what = "closed" if self.closed else self._describe()
        return f"<edgert.{type(self).__name__} {what}>"

    def _describe(self) -> str:
        return f"at 0x{self._ptr:x}"

    def __exit__(self, *exc) -> None:
        self.close()


def _options(kw: dict) -> tuple:
    o = _n.Options(struct_size=ctypes.sizeof(_n.Options))
    keep = []  # the bytes o points at, alive until edgert_open returns
    known = {"sysroot", "device_profile", "manifest_paths", "ignore_env", "disable", "strict",
             "no_evidence", "evidence_file", "threads", "log_level", "no_env_selection",
             "defer_load", "weights"}
    for k in kw:
        if k not in known:
            raise TypeError(f"edgert.open() got an unexpected keyword argument '{k}' "
                            f"(it takes {', '.join(sorted(known))})")

    def text(v: Any) -> bytes:
        b = str(v).encode()
        keep.append(b)
        return b
    for k in ("sysroot", "device_profile", "evidence_file", "weights"):
        if kw.get(k) is not None:
            setattr(o, k, text(kw[k]))
    if kw.get("disable") is not None:
        d = kw["disable"]
        o.disable = text(d if isinstance(d, str) else ",".join(d))
    paths = kw.get("manifest_paths")
    if paths is not None:
        if isinstance(paths, (str, bytes)):
            paths = [paths]
        arr = (ctypes.c_char_p * max(1, len(paths)))(*[text(p) for p in paths])
        keep.append(arr)
        o.manifest_paths = arr
        o.manifest_path_count = len(paths)
    for k in ("ignore_env", "strict", "no_evidence", "no_env_selection", "defer_load"):
        setattr(o, k, 1 if kw.get(k) else 0)
    o.threads = int(kw.get("threads") or 0)
    levels = {None: 0, "error": 1, "warn": 2, "info": 3, "debug": 4}
    lvl = kw.get("log_level")
    o.log_level = levels[lvl] if lvl in levels else int(lvl)
    return o, keep


class Context(_Handle):
    """An open handle (edgert_open): the device, the candidates and their
    verdicts, diagnostics; select() ranks, backend() runs one."""

    def __init__(self, **options: Any):
        o, keep = _options(options)
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_LEN)
        _check(_lib.edgert_open(ctypes.byref(o), ctypes.byref(out), err, _ERR_LEN), err)
        del keep
        super().__init__(out.value, _lib.edgert_close, None)

    def _describe(self) -> str:
        d = self.device
        n = sum(c.eligible for c in self.candidates)
        return f"{d.name} ({d.device_class}, {'plan' if d.planned else 'live'}), {n} eligible"

    @property
    def device(self) -> Device:
        return _device(_lib.edgert_device_facts(self._p()).contents)

    @property
    def candidates(self) -> list:
        p = self._p()
        return [_candidate(_lib.edgert_candidate_at(p, i).contents)
                for i in range(_lib.edgert_candidate_count(p))]

    @property
    def diagnostics(self) -> list:
        p = self._p()
        out = []
        for i in range(_lib.edgert_diag_count(p)):
            d = _lib.edgert_diag_at(p, i).contents
            out.append(Diagnostic(d.level, _s(d.file), d.line, d.column, _s(d.message)))
        return out

    @property
    def threads(self) -> int:
        return int(_lib.edgert_thread_count(self._p()))

    @property
    def evidence_path(self) -> Optional[str]:
        return _s(_lib.edgert_evidence_path(self._p()))

    def select(self, priority: str = "speed", backend: Optional[str] = None) -> Selection:
        """Rank the eligible backends for `priority` ("speed" or "fidelity");
        `backend` forces one (it must be eligible). Error E_NOT_ELIGIBLE or
        E_NOT_FOUND carries the reasons; EDGERT_PRIORITY and EDGERT_BACKEND
        override the arguments unless the context ignores the environment."""
        if priority not in _PRIORITIES:
            raise _usage(f"priority must be 'speed' or 'fidelity', not {priority!r}")
        p = self._p()
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_LEN)
        st = _lib.edgert_select(p, _PRIORITIES[priority],
                                backend.encode() if backend else None, ctypes.byref(out), err,
                                _ERR_LEN)
        try:
            _check(st, err)
            cands = self.candidates
            sel = out.value
            chosen = _lib.edgert_selection_selected(sel)
            return Selection(
                priority=_s(_lib.edgert_priority_name(_lib.edgert_selection_priority(sel))),
                selected=_candidate(chosen.contents) if chosen else None,
                evidence=_s(_lib.edgert_selection_evidence(sel)),
                ranking=tuple(_rank(p, sel, r, cands)
                              for r in range(_lib.edgert_selection_count(sel))),
                candidates=tuple(cands))
        finally:
            _lib.edgert_selection_free(out)

    def backend(self, name: Optional[str] = None, options: Optional[str] = None) -> "Backend":
        """A fresh instance of backend `name` (None: the speed selection's
        choice); `options` go to its init, e.g. "prefetch=near"."""
        if name is None:
            sel = self.select("speed")
            name = sel.selected.name
        return Backend(self, name, options)


def open(**options: Any) -> Context:  # noqa: A001 - the library's own verb
    """edgert_open with the options as keyword arguments: sysroot,
    device_profile (plan for another device), manifest_paths (a folder, a
    file or a list of them), ignore_env, disable ("a,b" or a list), strict,
    no_evidence, evidence_file, threads (0: every core), log_level ("error",
    "warn", "info", "debug"), no_env_selection, defer_load, weights (a
    checkpoint the selection is for)."""
    return Context(**options)


def probe(**options: Any) -> Device:
    """The device as edgert sees it (the probe, or `device_profile`),
    without running any plugin code (defer_load)."""
    options.setdefault("defer_load", True)
    with Context(**options) as ctx:
        return ctx.device


@dataclasses.dataclass
class QWeights:
    """Canonical 4-bit weights W[n][k]: `codes` uint8 [n, ceil(k/2)] two per
    byte, low nibble first; `scales` float32 [n, groups]; `zeros` uint8
    [n, groups] in 0..15, or None for symmetric (zero point 8); W = s (q - z)
    in groups of `group` along k. `perm`, uint32 [k] or None: an act-order
    layer's order, column j being the model's input perm[j] (a permutation
    of 0..k-1); gemm and dequantize then take and give the model's order."""
    codes: np.ndarray
    scales: np.ndarray
    zeros: Optional[np.ndarray]
    n: int
    k: int
    group: int
    name: Optional[str] = None
    perm: Optional[np.ndarray] = None

    def _c(self) -> tuple:
        n, k, g = int(self.n), int(self.k), int(self.group)
        if n <= 0 or k <= 0 or g <= 0:
            raise _usage(f"QWeights: n, k and group must be positive (got {n}, {k}, {g})")
        groups = -(-k // g)
        codes = _array(self.codes, np.uint8, (n, (k + 1) // 2), "codes")
        scales = _array(self.scales, np.float32, (n, groups), "scales")
        zeros = None if self.zeros is None else _array(self.zeros, np.uint8, (n, groups), "zeros")
        perm = None if self.perm is None else _array(self.perm, np.uint32, (k,), "perm")
        name = self.name.encode() if self.name else None
        w = _n.QWeights(struct_size=ctypes.sizeof(_n.QWeights), n=n, k=k, group=g,
                        codes=codes.ctypes.data_as(_n.c_uint8_p),
                        scales=scales.ctypes.data_as(_n.c_float_p),
                        zeros=zeros.ctypes.data_as(_n.c_uint8_p) if zeros is not None else None,
                        name=name,
                        perm=perm.ctypes.data_as(_n.c_uint32_p) if perm is not None else None)
        return w, (codes, scales, zeros, name, perm)

    def dequantize(self) -> np.ndarray:
        """W as float32 [n, k], as the library computes it."""
        w, keep = self._c()
        out = np.empty((self.n, self.k), np.float32)
        _lib.edgert_dequantize(ctypes.byref(w), out.ctypes.data_as(_n.c_float_p))
        del keep
        return out


def _array(a: Any, dtype: Any, shape: tuple, what: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype != dtype:
        raise _usage(f"{what}: dtype {arr.dtype}, expected {np.dtype(dtype)}")
    if arr.shape != shape:
        raise _usage(f"{what}: shape {arr.shape}, expected {shape}")
    return np.ascontiguousarray(arr)


def quantize_rtn(w: Any, group: int = 128, symmetric: bool = True,
                 name: Optional[str] = None) -> QWeights:
    """Round-to-nearest 4-bit quantization of dense float32 W [n, k]
    (edgert_quantize_rtn)."""
    arr = np.ascontiguousarray(np.asarray(w, dtype=np.float32))
    if arr.ndim != 2:
        raise _usage(f"quantize_rtn: W must be 2-D [n, k], not of shape {arr.shape}")
    n, k = arr.shape
    t = _n.QTensor()
    _check(_lib.edgert_quantize_rtn(arr.ctypes.data_as(_n.c_float_p), n, k, group,
                                    1 if symmetric else 0, ctypes.byref(t)), None)
    try:
        return _qweights_of(t, name)
    finally:
        _lib.edgert_qtensor_free(ctypes.byref(t))


class Backend(_Handle):
    """An instance of a backend (edgert_backend_open): pack weights, run
    GEMMs and decode steps. One instance may be shared by threads: gemm
    releases the GIL, and calls on distinct outputs run at once."""

    def __init__(self, ctx: Context, name: str, options: Optional[str] = None):
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_LEN)
        _check(_lib.edgert_backend_open(ctx._p(), name.encode(),
                                        options.encode() if options else None,
                                        ctypes.byref(out), err, _ERR_LEN), err)
        super().__init__(out.value, _lib.edgert_backend_close, ctx)

    def _describe(self) -> str:
        return f"{self.name}: {self.path}"

    @property
    def name(self) -> str:
        return _s(_lib.edgert_backend_name(self._p()))

    @property
    def path(self) -> str:
        """The instance's description of the code path it runs."""
        return _s(_lib.edgert_backend_describe(self._p()))

    def pack(self, w: QWeights) -> "Packed":
        """w in this instance's packed layout (a copy: w may go)."""
        qw, keep = w._c()
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_LEN)
        _check(_lib.edgert_pack(self._p(), ctypes.byref(qw), ctypes.byref(out), err, _ERR_LEN),
               err)
        del keep
        return Packed(self, out.value, w.n, w.k)

    def gemm(self, packed: "Packed", x: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
        """y = x W^T: x float32 [m, k] (rows may be strided; columns must be
        contiguous) or [k], a numpy array or anything numpy views without a
        copy (DLPack CPU tensors, the buffer protocol, __array_interface__);
        out a float32 numpy array [m, n] (or [n]) to write into, else a new
        one. The GIL is released during the call."""
        args, x_arr, y = _gemm_args(packed, x, out)
        err = _err_buf()
        st = _gemm(self._p(), packed._p_of(self), ctypes.byref(args), err, _ERR_LEN)
        if st:
            _check(st, err)
        del x_arr
        return y

    def prepare_step(self, ops: Sequence["StepOp"]) -> "PreparedStep":
        """ops checked and laid out once for edgert_step, to run many times
        with step(): a decode loop writes new values into the same x arrays
        and reads the same y arrays each token. Building the ops costs a few
        microseconds each, a step of 113 GEMMs about 0.4 ms."""
        return PreparedStep(self, ops)

    def step(self, ops: Any) -> None:
        """Run ops in order (edgert_step): each op's GEMM, then its `after`
        callback (a Python function of the op's index; an exception in it
        ends the step and is raised here). `ops`: a list of StepOp, or what
        prepare_step made of one."""
        if isinstance(ops, PreparedStep):
            prep = ops
            if prep.backend is not self:
                raise _usage("this step was prepared for another backend instance")
            prep._check_alive()  # a packed matrix freed since: refused, never run
        else:
            prep = PreparedStep(self, ops)
        prep.raised.clear()
        err = _err_buf()
        st = _lib.edgert_step(self._p(), prep.arr, prep.n, err, _ERR_LEN)
        if prep.raised:
            raise prep.raised[0]
        if st:
            _check(st, err)


class PreparedStep:
    """StepOps laid out for edgert_step once (Backend.prepare_step). It
    keeps its arrays and packed weights alive; freeing a packed matrix it
    names makes running it an error."""

    def __init__(self, backend: Backend, ops: Sequence["StepOp"]):
        self.backend = backend
        self.n = len(ops)
        self.arr = (_n.StepOp * max(1, self.n))()
        self.raised: list = []
        self._keep: list = []
        self._ops = list(ops)
        for i, op in enumerate(self._ops):
            args, x_arr, _ = _gemm_args(op.weights, op.x, op.y)
            cb = _NO_CALLBACK if op.after is None else _n.STEP_FN(
                _step_callback(op.after, self.raised))
            self._keep.append((args, x_arr, cb))
            self.arr[i] = _n.StepOp(_STEP_OP_SIZE, op.weights._p_of(backend),
                                    ctypes.pointer(args), cb, None)

    def _check_alive(self) -> None:
        for op in self._ops:
            op.weights._p()  # E_USAGE "this packed is closed"


_STEP_OP_SIZE = ctypes.sizeof(_n.StepOp)
_NO_CALLBACK = _n.STEP_FN(0)


def _step_callback(fn: Callable[[int], Any], raised: list) -> Callable[[Any, int], int]:
    def call(_user: Any, index: int) -> int:
        try:
            fn(index)
            return 0
        except BaseException as e:  # carried out of the C frames, raised by step()
            raised.append(e)
            return 10  # EDGERT_E_INTERNAL ends the step; step() raises e instead
    return call


@dataclasses.dataclass
class StepOp:
    """One GEMM of a step: y = x W^T with `weights` (packed by the backend
    the step runs on), then `after(index)` if given. x and y as for gemm;
    y must be given (the step writes into it)."""
    weights: "Packed"
    x: np.ndarray
    y: np.ndarray
    after: Optional[Callable[[int], Any]] = None


_GEMM_ARGS_SIZE = ctypes.sizeof(_n.GemmArgs)
_tls = threading.local()


def _err_buf() -> Any:
    """This thread's error buffer, reused: a new one per GEMM costs more
    than the C call on a small matrix."""
    b = getattr(_tls, "err", None)
    if b is None:
        b = _tls.err = ctypes.create_string_buffer(_ERR_LEN)
    return b


_F32 = np.dtype(np.float32)


def _gemm_args(packed: "Packed", x: Any, out: Optional[np.ndarray]) -> tuple:
    """GemmArgs for y = x W^T, the x array it points into (kept alive by the
    caller across the call) and y. Written for the per-call cost: a GEMM
    of one token on a small matrix takes a few microseconds in C."""
    if not isinstance(packed, Packed):
        raise _usage(f"weights must be an edgert.Packed, not {type(packed).__name__}")
    if type(x) is not np.ndarray:  # DLPack (a CPU tensor), the buffer protocol,
        # __array_interface__: numpy's view of it, no copy where the layout allows
        x = np.from_dlpack(x) if hasattr(x, "__dlpack__") else np.asarray(x)
    if x.dtype != _F32:
        raise _usage(f"x: dtype {x.dtype}, expected float32")
    k, n = packed.k, packed.n
    shape, strides = x.shape, x.strides
    if len(shape) == 1:
        m, kx, row, col = 1, shape[0], 4 * k, strides[0]
    elif len(shape) == 2:
        (m, kx), (row, col) = shape, strides
    else:
        m = kx = row = col = 0
    if kx != k or m == 0:
        raise _usage(f"x: shape {shape}, expected [m, {k}] or [{k}] with m >= 1")
    if col != 4 or (m > 1 and (row % 4 or row < 4 * k)):
        raise _usage("x: its columns must be contiguous and its rows at least k floats apart "
                     f"(strides {strides})")
    if out is None:
        y = np.empty((n,) if len(shape) == 1 else (m, n), _F32)
        ldy = n
    else:
        y = out
        if type(y) is not np.ndarray or y.dtype != _F32:
            raise _usage("out: must be a float32 numpy array")
        if not y.flags.writeable:
            raise _usage("out: is read-only")
        yshape, ystrides = y.shape, y.strides
        if yshape != ((n,) if len(shape) == 1 and len(yshape) == 1 else (m, n)):
            raise _usage(f"out: shape {yshape}, expected [{m}, {n}]")
        ldy = ystrides[0] // 4 if len(yshape) == 2 and m > 1 else n
        if ystrides[-1] != 4 or (m > 1 and (ystrides[0] % 4 or ldy < n)):
            raise _usage(f"out: its columns must be contiguous (strides {ystrides})")
    args = _n.GemmArgs(_GEMM_ARGS_SIZE, m, _address(x), row // 4 if m > 1 else k, _address(y),
                       ldy)
    return args, x, y


def _address(a: np.ndarray) -> int:
    """The address of a's first element. numpy's own (a.ctypes.data) costs
    1-3 microseconds, as much as a small GEMM, so a thread remembers the
    addresses of the arrays it last used (a decode loop passes the same x
    and y each token): by a weak reference, which keeps nothing alive, and
    with the shape, since a.resize() may move the data but never keeps the
    shape when it does. (Assigning a.data, which numpy deprecates and
    numpy 2 refuses, would not be seen.)"""
    cache = getattr(_tls, "addr", None)
    if cache is None:
        cache = _tls.addr = {}
    hit = cache.get(id(a))
    if hit is not None and hit[0]() is a and hit[2] == a.shape:
        return hit[1]
    ptr = a.ctypes.data
    if len(cache) >= 16:
        cache.clear()
    cache[id(a)] = (weakref.ref(a), ptr, a.shape)
    return ptr


class Packed(_Handle):
    """Weights packed by one backend instance (freed before it closes, and
    before the checkpoint they are mapped from)."""

    def __init__(self, backend: Backend, ptr: int, n: int, k: int,
                 checkpoint: Optional["Checkpoint"] = None):
        super().__init__(ptr, _lib.edgert_packed_free, backend, *(
            (checkpoint,) if checkpoint is not None else ()))
        self.n, self.k = int(n), int(k)

    def _describe(self) -> str:
        return f"[{self.n}, {self.k}], {self.nbytes} bytes"

    @property
    def nbytes(self) -> int:
        return int(_lib.edgert_packed_bytes(self._p()))

    def _p_of(self, backend: Backend) -> int:
        if self._owner is not backend:
            raise _usage("these weights were packed by another backend instance")
        return self._p()


# ---- checkpoints ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Layer:
    """One linear layer of a checkpoint: W [n, k], its group (0: dense),
    symmetric (True, False; None: dense) and format ("gptq-v1", "gptq-v2",
    "dense-f32", "dense-f16", "dense-bf16" or "packed")."""
    index: int
    name: str
    n: int
    k: int
    group: int
    symmetric: Optional[bool]
    format: str
    to_dict = _asdict


def _qweights_of(t: _n.QTensor, name: Optional[str]) -> QWeights:
    """A copy of an owning edgert_qtensor's buffers, which the caller frees."""
    v = t.view
    n, k, g = v.n, v.k, v.group
    groups = -(-k // g)
    codes = np.ctypeslib.as_array(t.codes, (n * ((k + 1) // 2),)).reshape(n, -1).copy()
    scales = np.ctypeslib.as_array(t.scales, (n * groups,)).reshape(n, groups).copy()
    zeros = None if not t.zeros else np.ctypeslib.as_array(
        t.zeros, (n * groups,)).reshape(n, groups).copy()
    perm = None
    if v.struct_size >= ctypes.sizeof(_n.QWeights) and v.perm:
        perm = np.ctypeslib.as_array(v.perm, (k,)).copy()
    return QWeights(codes, scales, zeros, n, k, g, name, perm)


class Checkpoint(_Handle):
    """A weights file opened and validated (edgert_checkpoint_open): GPTQ
    int4, dense F32/F16/BF16 safetensors, or a file `pack` wrote for one
    backend. Layers by index or name."""

    def __init__(self, path: str):
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_LEN)
        _check(_lib.edgert_checkpoint_open(str(path).encode(), ctypes.byref(out), err,
                                           _ERR_LEN), err)
        super().__init__(out.value, _lib.edgert_checkpoint_close, None)
        self.path = str(path)

    @property
    def kind(self) -> str:
        """"gptq", "dense" or "packed"."""
        return _s(_lib.edgert_checkpoint_kind(self._p()))

    @property
    def config_source(self) -> str:
        return _s(_lib.edgert_checkpoint_config_source(self._p()))

    @property
    def layers(self) -> list:
        p = self._p()
        out = []
        for i in range(_lib.edgert_checkpoint_layer_count(p)):
            c = _lib.edgert_checkpoint_layer_at(p, i).contents
            out.append(Layer(i, _s(c.name), c.n, c.k, c.group,
                             None if c.symmetric < 0 else bool(c.symmetric), _s(c.format)))
        return out

    def _index(self, layer: Any) -> int:
        if isinstance(layer, Layer):
            return layer.index
        if isinstance(layer, str):
            for x in self.layers:
                if x.name == layer:
                    return x.index
            raise Error(5, f"{self.path}: no layer named '{layer}'")
        return int(layer)

    def weights(self, layer: Any) -> QWeights:
        """The layer as canonical 4-bit weights (a dense layer quantized by
        round to nearest; an act-order layer with its perm)."""
        i = self._index(layer)
        t = _n.QTensor()
        err = ctypes.create_string_buffer(_ERR_LEN)
        _check(_lib.edgert_checkpoint_layer_weights_v2(self._p(), i, ctypes.byref(t), err,
                                                       _ERR_LEN), err)
        try:
            return _qweights_of(t, self.layers[i].name)
        finally:
            _lib.edgert_qtensor_free(ctypes.byref(t))

    def dense(self, layer: Any, rows: Optional[tuple] = None) -> np.ndarray:
        """Rows [first, last) of the layer as float32 (a GPTQ layer
        dequantized); all rows when `rows` is None."""
        i = self._index(layer)
        lay = self.layers[i]
        r0, r1 = rows if rows is not None else (0, lay.n)
        out = np.empty((max(0, r1 - r0), lay.k), np.float32)
        err = ctypes.create_string_buffer(_ERR_LEN)
        _check(_lib.edgert_checkpoint_layer_dense(self._p(), i, r0, r1 - r0,
                                                  out.ctypes.data_as(_n.c_float_p), err,
                                                  _ERR_LEN), err)
        return out

    def packed(self, layer: Any, backend: Backend) -> Packed:
        """The layer packed for `backend`: mapped in place from a packed
        file (checked to be this backend's), else converted and packed."""
        i = self._index(layer)
        lay = self.layers[i]
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_LEN)
        _check(_lib.edgert_checkpoint_layer_packed(self._p(), i, backend._p(),
                                                   ctypes.byref(out), err, _ERR_LEN), err)
        return Packed(backend, out.value, lay.n, lay.k, self)

    def pack(self, backend: Backend, path: str) -> None:
        """Every layer packed for `backend` into the file `path` (written
        whole, then renamed), which a later Checkpoint(path).packed maps."""
        err = ctypes.create_string_buffer(_ERR_LEN)
        _check(_lib.edgert_checkpoint_pack(backend._p(), self._p(), str(path).encode(), err,
                                           _ERR_LEN), err)

    def pack_matches(self, backend: Backend, path: str) -> bool:
        """Whether the packed file `path` is what pack() would write now;
        False when there is no file; Error saying which key differs."""
        err = ctypes.create_string_buffer(_ERR_LEN)
        st = _lib.edgert_checkpoint_pack_check(backend._p(), self._p(), str(path).encode(), err,
                                               _ERR_LEN)
        if st == 5:  # EDGERT_E_NOT_FOUND: no file
            return False
        _check(st, err)
        return True


def quantize(src: str, dst: str, group: int = 128, symmetric: bool = False,
             threads: int = 0) -> None:
    """A dense safetensors checkpoint to a GPTQ int4 one by round to
    nearest (edgert_checkpoint_quantize, as `edgert quantize`)."""
    o = _n.QuantizeOptions(ctypes.sizeof(_n.QuantizeOptions), 1 if symmetric else 0, group,
                           threads)
    err = ctypes.create_string_buffer(_ERR_LEN)
    _check(_lib.edgert_checkpoint_quantize(str(src).encode(), str(dst).encode(),
                                           ctypes.byref(o), err, _ERR_LEN), err)


# ---- the model runner -----------------------------------------------------------------------

_runner = None


def _runner_lib() -> Any:
    global _runner
    if _runner is None:
        _runner = _n.load_runner(_path)
    return _runner


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What edgert_model_open loaded (edgert/runner.h): the architecture,
    the backend and its path, the weights' kind, the shapes, the KV cache."""
    model_type: str
    backend: str
    backend_path: str
    weights: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int
    context: int
    group: int
    step_weight_bytes: int
    kv_cache_bytes: int
    kv_cache_bits: int
    gemms_per_step: int
    eos: Optional[int]
    passed_over: str
    to_dict = _asdict


class Model(_Handle):
    """A whole model on a backend (`edgert run`'s runner): a Hugging Face
    folder (config.json and safetensors, dense or GPTQ), on `ctx` (None: a
    handle of its own, edgert.open()'s defaults). backend None: the one
    ranked first for `priority` among those whose layout takes the weights;
    "fp32": the dense reference."""

    def __init__(self, path: str, *, ctx: Optional[Context] = None,
                 backend: Optional[str] = None, priority: str = "speed",
                 backend_options: Optional[str] = None, context: int = 0, group: int = 0,
                 packed: Optional[str] = None, kv_cache_bits: int = 0):
        if priority not in _PRIORITIES:
            raise _usage(f"priority must be 'speed' or 'fidelity', not {priority!r}")
        lib = _runner_lib()
        own = ctx is None  # a handle of its own, closed with the model
        if own:
            ctx = Context()
        keep = [str(path).encode()] + [v.encode() if v else None
                                        for v in (backend, backend_options, packed)]
        o = _n.ModelOptions(ctypes.sizeof(_n.ModelOptions), keep[1], _PRIORITIES[priority],
                            keep[2], context, group, keep[3], kv_cache_bits)
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_LEN)
        st = lib.edgert_model_open(ctx._p(), keep[0], ctypes.byref(o), ctypes.byref(out), err,
                                   _ERR_LEN)
        if st and own:
            ctx.close()
        _check(st, err)
        super().__init__(out.value, lib.edgert_model_close, ctx)
        self._own_ctx = ctx if own else None
        i = lib.edgert_model_get_info(out.value).contents
        self.info = ModelInfo(
            _s(i.model_type), _s(i.backend), _s(i.backend_path), _s(i.weights), i.layers,
            i.hidden, i.heads, i.kv_heads, i.head_dim, i.mlp, i.vocab, i.context, i.group,
            i.step_weight_bytes, i.kv_cache_bytes, i.kv_cache_bits, i.gemms_per_step,
            None if i.eos < 0 else i.eos, _s(i.passed_over) or "")

    def close(self) -> None:
        """Close the model, and the handle it opened for itself if any."""
        super().close()
        own, self._own_ctx = self._own_ctx, None  # once: the handle's close closes this too
        if own is not None:
            own.close()

    def _describe(self) -> str:
        i = self.info
        return f"{i.model_type}, {i.layers} layers, {i.weights} on {i.backend}"

    @property
    def position(self) -> int:
        """Positions held in the KV cache: the next token's position."""
        return int(_runner_lib().edgert_model_position(self._p()))

    def reset(self) -> None:
        """Forget every position."""
        _runner_lib().edgert_model_reset(self._p())

    def forward(self, ids: Sequence[int], all_logits: bool = False) -> np.ndarray:
        """Run `ids` at the next positions: the logits after the last one
        (float32 [vocab]), or after each ([len(ids), vocab])."""
        arr = np.ascontiguousarray(np.asarray(ids, dtype=np.int32).reshape(-1))
        if arr.size == 0:
            raise _usage("forward: no token ids")
        v = self.info.vocab
        out = np.empty((arr.size, v) if all_logits else (v,), np.float32)
        err = ctypes.create_string_buffer(_ERR_LEN)
        _check(_runner_lib().edgert_model_forward(
            self._p(), arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), arr.size,
            out.ctypes.data_as(_n.c_float_p), 1 if all_logits else 0, err, _ERR_LEN), err)
        return out

    def generate(self, ids: Sequence[int], max_new_tokens: int = 32,
                 stop_at_eos: bool = True) -> list:
        """Greedy continuation of `ids` from position 0 (the cache is reset
        first): the new token ids, as `edgert run` prints them."""
        self.reset()
        logits = self.forward(ids)
        new: list = []
        while len(new) < max_new_tokens:
            t = int(np.argmax(logits))
            new.append(t)
            if stop_at_eos and self.info.eos is not None and t == self.info.eos:
                break
            if len(new) == max_new_tokens or self.position >= self.info.context:
                break
            logits = self.forward([t])
        return new


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One backend against the fp32 reference over the prompts, as `edgert
    run --compare` measures it: greedy runs reproduced exactly, tokens to
    the first divergence (mean), and teacher-forced on the reference's
    tokens, top-1 agreement and mean KL(reference || backend) in nats."""
    backend: str
    prompts: int
    tokens: int
    exact_reproductions: int
    mean_tokens_to_divergence: float
    top1_forced: float
    mean_kl: float
    to_dict = _asdict


def _log_softmax(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.float64)
    m = v.max(axis=-1, keepdims=True)
    return v - (m + np.log(np.exp(v - m).sum(axis=-1, keepdims=True)))


def _greedy_steps(m: Model, ids: Sequence[int], t: int) -> tuple:
    """t greedy tokens after `ids`, and the logits each was chosen from."""
    m.reset()
    lg = m.forward(ids)
    toks, logits = [], []
    for i in range(t):
        toks.append(int(np.argmax(lg)))
        logits.append(lg)
        if i + 1 < t:
            lg = m.forward([toks[-1]])
    return toks, np.stack(logits)


def compare(folder: str, prompts: Sequence[Sequence[int]],
            backends: Optional[Sequence[str]] = None, tokens: int = 64,
            ctx: Optional[Context] = None, **model_options: Any) -> list:
    """Each backend (None: every eligible in-process one) against the fp32
    reference on `prompts` (lists of token ids), `tokens` tokens each: a
    Comparison per backend. On `ctx` (None: a handle of its own);
    model_options go to every Model (context, group, kv_cache_bits, ...)."""
    if tokens < 1 or not prompts:
        raise _usage("compare: needs at least one prompt and one token")
    if ctx is None:
        with Context() as own:
            return compare(folder, prompts, backends, tokens, own, **model_options)
    with Model(folder, ctx=ctx, backend="fp32", **model_options) as ref:
        runs = [_greedy_steps(ref, p, tokens) for p in prompts]
    ref_logp = [_log_softmax(lg) for _, lg in runs]
    if backends is None:
        backends = [c.name for c in ctx.candidates if c.eligible and c.runs_in_process]
    out = []
    for name in backends:
        with Model(folder, ctx=ctx, backend=name, **model_options) as m:
            exact, div, top1, kl = 0, 0, 0, 0.0
            for p, (want, _), rlp in zip(prompts, runs, ref_logp):
                mine, _ = _greedy_steps(m, p, tokens)
                d = next((i for i, (a, b) in enumerate(zip(mine, want)) if a != b), tokens)
                exact += d == tokens
                div += d
                m.reset()  # teacher forcing: the prompt, then the reference's tokens
                if len(p) > 1:
                    m.forward(list(p)[:-1])
                lg = m.forward([list(p)[-1]] + want[:-1], all_logits=True)
                top1 += int((lg.argmax(axis=-1) == np.asarray(want)).sum())
                q = _log_softmax(lg)
                kl += float((np.exp(rlp) * (rlp - q)).sum())
            n = len(prompts) * tokens
            out.append(Comparison(m.info.backend, len(prompts), tokens, exact,
                                  div / len(prompts), top1 / n, kl / n))
    return out
