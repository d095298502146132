"""python/edgert/_native.py — libedgert through ctypes: finding the library,
checking its version, and the C declarations of include/edgert/*.h this
package calls. Nothing here is public; edgert/__init__.py wraps it.

The structs are declared field for field as the headers have them, and
each struct the caller fills carries struct_size = its ctypes size, which
the library checks against its named *_V1_SIZE (the headers' growth rule):
a field appended to a header is appended here, never inserted.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int,
                    c_size_t, c_uint, c_uint32, c_uint64, c_void_p)

from . import _build

c_uint8_p = POINTER(ctypes.c_uint8)
c_float_p = POINTER(c_float)
c_uint32_p = POINTER(ctypes.c_uint32)


class Device(Structure):
    _fields_ = [("planned", c_int), ("source", c_char * 512), ("name", c_char * 128),
                ("arch", c_int), ("device_class", c_int), ("cpu_flags", c_uint64),
                ("cpu_flags_os_disabled", c_uint64), ("logical_cores", c_uint),
                ("mem_total_bytes", c_uint64), ("mem_available_bytes", c_uint64),
                ("bf16", c_int), ("bf16_source", c_char * 160), ("accelerator", c_char * 160),
                ("class_evidence", c_char * 256), ("cpu_id", c_char * 96)]


class Layout(Structure):
    _fields_ = [("format", c_char_p), ("weight_bits", c_int), ("group_size", c_int),
                ("symmetric", c_int), ("activation_dtype", c_char_p),
                ("activation_bits", c_int), ("bits_per_weight", c_double),
                ("fallback_dtype", c_char_p)]


class Figures(Structure):
    _fields_ = [("decode_tokens_per_s", c_double), ("prefill_gflops", c_double),
                ("top1_agreement", c_double), ("kl_mean", c_double), ("where", c_char_p)]


class Candidate(Structure):
    _fields_ = [("name", c_char_p), ("version", c_char_p), ("vendor", c_char_p),
                ("manifest_path", c_char_p), ("library_path", c_char_p),
                ("processor", c_char_p), ("rationale", c_char_p), ("notes", c_char_p),
                ("layout", Layout), ("runs_in_process", c_int), ("verified", c_int),
                ("reference", c_int), ("abi_min", c_uint32), ("abi_max", c_uint32),
                ("declared", Figures), ("measured", Figures), ("eligible", c_int),
                ("loaded", c_int), ("reason_count", c_size_t),
                ("reasons", POINTER(c_char_p)), ("detail", c_char_p),
                ("path_chosen", c_char_p), ("effective_activation_dtype", c_char_p),
                # appended
                ("checksum", c_char_p), ("checksum_verified", c_int),
                ("abi_version", c_uint32), ("plugin_name", c_char_p),
                ("measured_decode_min", c_double), ("measured_decode_max", c_double),
                ("first_contact_decode_tokens_per_s", c_double),
                ("measured_series", c_char_p), ("first_contact_decode_min", c_double),
                ("first_contact_decode_max", c_double),
                ("first_contact_prefill_gflops", c_double), ("measured_top1_tokens", c_uint),
                ("measured_workload", c_char_p), ("first_contact_read_gbs", c_double),
                ("measured_fidelity_source", c_char_p), ("arithmetic_checked", c_uint),
                ("first_contact_contention", c_char_p), ("first_contact_wait_share", c_double),
                ("first_contact_attempts", c_uint), ("measured_rounds_repeated", c_uint)]


class Diag(Structure):
    _fields_ = [("level", c_int), ("file", c_char_p), ("line", c_uint), ("column", c_uint),
                ("message", c_char_p)]


LOG_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class Options(Structure):
    _fields_ = [("struct_size", c_uint32), ("sysroot", c_char_p), ("device_profile", c_char_p),
                ("manifest_paths", POINTER(c_char_p)), ("manifest_path_count", c_size_t),
                ("ignore_env", c_int), ("disable", c_char_p), ("strict", c_int),
                ("no_evidence", c_int), ("evidence_file", c_char_p), ("threads", c_uint),
                ("log", LOG_FN), ("log_user", c_void_p), ("log_level", c_int),
                # version 2
                ("no_env_selection", c_int), ("defer_load", c_int),
                # version 3
                ("weights", c_char_p)]


class RankReason(Structure):
    _fields_ = [("struct_size", c_size_t), ("candidate", c_size_t), ("tier", c_int),
                ("decider", c_int), ("group", c_int), ("group_first", c_size_t),
                ("group_last", c_size_t), ("decode", c_double), ("decode_measured", c_int),
                ("source", c_char_p), ("quick", c_int), ("decode_lo", c_double),
                ("decode_hi", c_double), ("read_gbs", c_double), ("calibrated", c_int),
                ("series", c_char_p), ("prefill", c_double), ("prefill_measured", c_int),
                ("top1", c_double), ("top1_measured", c_int), ("kl", c_double),
                ("kl_measured", c_int), ("split", c_int), ("split_rank", c_size_t)]


class QWeights(Structure):
    _fields_ = [("struct_size", c_uint32), ("n", c_uint32), ("k", c_uint32),
                ("group", c_uint32), ("codes", c_uint8_p), ("scales", c_float_p),
                ("zeros", c_uint8_p), ("name", c_char_p),
                ("perm", c_uint32_p)]  # version 2 (EDGERT_QWEIGHTS_V2_SIZE)


class QTensor(Structure):
    _fields_ = [("codes", c_uint8_p), ("scales", c_float_p), ("zeros", c_uint8_p),
                ("view", QWeights)]


class GemmArgs(Structure):
    # x and y are `const float *` and `float *`: void pointers here, which
    # take an address as an int without a cast (a cast costs microseconds
    # per call, a GEMM's budget)
    _fields_ = [("struct_size", c_uint32), ("m", c_uint32), ("x", c_void_p), ("ldx", c_size_t),
                ("y", c_void_p), ("ldy", c_size_t)]


STEP_FN = CFUNCTYPE(c_int, c_void_p, c_size_t)


class StepOp(Structure):
    _fields_ = [("struct_size", c_uint32), ("weights", c_void_p),
                ("args", POINTER(GemmArgs)), ("after", STEP_FN), ("user", c_void_p)]


class Layer(Structure):
    _fields_ = [("name", c_char_p), ("n", c_uint32), ("k", c_uint32), ("group", c_uint32),
                ("symmetric", c_int), ("format", c_char_p)]


class QuantizeOptions(Structure):
    _fields_ = [("struct_size", c_uint32), ("symmetric", c_int), ("group", c_uint32),
                ("threads", c_uint)]


# (name, restype, argtypes) of every call this package makes.
_CALLS = [
    ("edgert_version", c_char_p, []),
    ("edgert_status_name", c_char_p, [c_int]),
    ("edgert_arch_name", c_char_p, [c_int]),
    ("edgert_device_class_name", c_char_p, [c_int]),
    ("edgert_priority_name", c_char_p, [c_int]),
    ("edgert_cpu_flag_name", c_char_p, [c_int]),
    ("edgert_decider_name", c_char_p, [c_int]),
    ("edgert_open", c_int, [POINTER(Options), POINTER(c_void_p), c_char_p, c_size_t]),
    ("edgert_close", None, [c_void_p]),
    ("edgert_device_facts", POINTER(Device), [c_void_p]),
    ("edgert_candidate_count", c_size_t, [c_void_p]),
    ("edgert_candidate_at", POINTER(Candidate), [c_void_p, c_size_t]),
    ("edgert_diag_count", c_size_t, [c_void_p]),
    ("edgert_diag_at", POINTER(Diag), [c_void_p, c_size_t]),
    ("edgert_thread_count", c_uint, [c_void_p]),
    ("edgert_evidence_path", c_char_p, [c_void_p]),
    ("edgert_select", c_int, [c_void_p, c_int, c_char_p, POINTER(c_void_p), c_char_p, c_size_t]),
    ("edgert_selection_selected", POINTER(Candidate), [c_void_p]),
    ("edgert_selection_priority", c_int, [c_void_p]),
    ("edgert_selection_evidence", c_char_p, [c_void_p]),
    ("edgert_selection_count", c_size_t, [c_void_p]),
    ("edgert_selection_index", c_size_t, [c_void_p, c_size_t]),
    ("edgert_selection_reason", c_int, [c_void_p, c_size_t, POINTER(RankReason)]),
    ("edgert_selection_free", None, [c_void_p]),
    ("edgert_backend_open", c_int, [c_void_p, c_char_p, c_char_p, POINTER(c_void_p), c_char_p,
                                    c_size_t]),
    ("edgert_backend_close", None, [c_void_p]),
    ("edgert_backend_name", c_char_p, [c_void_p]),
    ("edgert_backend_describe", c_char_p, [c_void_p]),
    ("edgert_pack", c_int, [c_void_p, POINTER(QWeights), POINTER(c_void_p), c_char_p, c_size_t]),
    ("edgert_packed_bytes", c_size_t, [c_void_p]),
    ("edgert_packed_free", None, [c_void_p]),
    ("edgert_gemm", c_int, [c_void_p, c_void_p, POINTER(GemmArgs), c_char_p, c_size_t]),
    ("edgert_step", c_int, [c_void_p, POINTER(StepOp), c_size_t, c_char_p, c_size_t]),
    ("edgert_quantize_rtn", c_int, [c_float_p, c_uint32, c_uint32, c_uint32, c_int,
                                    POINTER(QTensor)]),
    ("edgert_qtensor_free", None, [POINTER(QTensor)]),
    ("edgert_dequantize", None, [POINTER(QWeights), c_float_p]),
    ("edgert_checkpoint_open", c_int, [c_char_p, POINTER(c_void_p), c_char_p, c_size_t]),
    ("edgert_checkpoint_close", None, [c_void_p]),
    ("edgert_checkpoint_kind", c_char_p, [c_void_p]),
    ("edgert_checkpoint_config_source", c_char_p, [c_void_p]),
    ("edgert_checkpoint_layer_count", c_size_t, [c_void_p]),
    ("edgert_checkpoint_layer_at", POINTER(Layer), [c_void_p, c_size_t]),
    ("edgert_checkpoint_layer_weights", c_int, [c_void_p, c_size_t, POINTER(QTensor), c_char_p,
                                                c_size_t]),
    ("edgert_checkpoint_layer_weights_v2", c_int, [c_void_p, c_size_t, POINTER(QTensor), c_char_p,
                                                c_size_t]),
    ("edgert_checkpoint_layer_dense", c_int, [c_void_p, c_size_t, c_uint32, c_uint32, c_float_p,
                                              c_char_p, c_size_t]),
    ("edgert_checkpoint_layer_release", None, [c_void_p, c_size_t]),
    ("edgert_checkpoint_pack_check", c_int, [c_void_p, c_void_p, c_char_p, c_char_p, c_size_t]),
    ("edgert_checkpoint_pack", c_int, [c_void_p, c_void_p, c_char_p, c_char_p, c_size_t]),
    ("edgert_checkpoint_layer_packed", c_int, [c_void_p, c_size_t, c_void_p, POINTER(c_void_p),
                                               c_char_p, c_size_t]),
    ("edgert_checkpoint_quantize", c_int, [c_char_p, c_char_p, POINTER(QuantizeOptions), c_char_p,
                                           c_size_t]),
]

LIBRARY = "libedgert.so." + _build.SOVERSION


class LibraryNotFound(OSError):
    """No libedgert this package can use; the message says where it looked."""


def _candidates():
    """Where libedgert is looked for, in order, with why each place."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    env = os.environ.get("EDGERT_LIBRARY")
    if env:
        out.append((env, "EDGERT_LIBRARY"))
    out.append((os.path.join(here, LIBRARY), "next to the package"))
    for d, why in _build.LIBRARY_DIRS:  # a relative folder is the package's
        out.append((os.path.normpath(os.path.join(here, d, LIBRARY)), why))
    return out


def _declare(lib, calls):
    """Each call's result and argument types on `lib`."""
    for name, res, args in calls:
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def load():
    """The library, its calls declared; LibraryNotFound saying where it
    looked, or naming both versions when the one found is not the one this
    package was built for."""
    tried = []
    for path, why in _candidates():
        if not os.path.exists(path):
            tried.append(f"{path} ({why}: no such file)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({why}: {e})")
            continue
        _declare(lib, _CALLS)
        have = lib.edgert_version().decode()
        if have != _build.VERSION:
            raise LibraryNotFound(
                f"{path} is libedgert {have}, but this edgert package was built for "
                f"{_build.VERSION}: install the package that came with that library, or "
                f"point EDGERT_LIBRARY at libedgert {_build.VERSION}")
        return lib, path
    raise LibraryNotFound("libedgert was not found; looked at: " + "; ".join(tried))


# ---- the model runner (libedgert-runner, runner/include/edgert/runner.h) ----


class ModelOptions(Structure):
    _fields_ = [("struct_size", c_uint32), ("backend", c_char_p), ("priority", c_int),
                ("backend_options", c_char_p), ("context", c_uint32), ("group", c_uint32),
                ("packed", c_char_p), ("kv_cache_bits", c_uint32)]


class ModelInfo(Structure):
    _fields_ = [("model_type", c_char_p), ("backend", c_char_p), ("backend_path", c_char_p),
                ("weights", c_char_p), ("layers", c_uint32), ("hidden", c_uint32),
                ("heads", c_uint32), ("kv_heads", c_uint32), ("head_dim", c_uint32),
                ("mlp", c_uint32), ("vocab", c_uint32), ("context", c_uint32),
                ("group", c_uint32), ("symmetric", c_int), ("tied", c_int),
                ("fused_qkv", c_int), ("fused_gate_up", c_int),
                ("step_weight_bytes", c_uint64), ("kv_cache_bytes", c_uint64),
                ("gemms_per_step", c_uint), ("eos", ctypes.c_int32), ("passed_over", c_char_p),
                ("kv_cache_bits", c_uint32)]


_RUNNER_CALLS = [
    ("edgert_model_open", c_int, [c_void_p, c_char_p, POINTER(ModelOptions), POINTER(c_void_p),
                                  c_char_p, c_size_t]),
    ("edgert_model_close", None, [c_void_p]),
    ("edgert_model_get_info", POINTER(ModelInfo), [c_void_p]),
    ("edgert_model_reset", None, [c_void_p]),
    ("edgert_model_position", c_uint32, [c_void_p]),
    ("edgert_model_forward", c_int, [c_void_p, POINTER(ctypes.c_int32), c_uint32, c_float_p,
                                     c_int, c_char_p, c_size_t]),
]


def load_runner(edgert_path):
    """libedgert-runner beside the libedgert loaded (the two are built and
    installed together); LibraryNotFound saying where it looked."""
    path = os.path.join(os.path.dirname(edgert_path), "libedgert-runner.so." + _build.SOVERSION)
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise LibraryNotFound(f"the model runner's library was not found beside libedgert: "
                              f"{path}: {e}") from None
    _declare(lib, _RUNNER_CALLS)
    return lib
