"""Captures to disk: one ``.safetensors`` file of tensors plus a ``.json`` sidecar describing each record."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from hookwidgets.core.capture.store import CaptureStore, Record
from hookwidgets.core.display import quoted

FORMAT = "hookwidgets-captures"
VERSION = "1"
SUFFIX = ".safetensors"


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    """The JSON sidecar that goes with a capture file: ``caps.safetensors`` -> ``caps.safetensors.json``."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def export_captures(store: CaptureStore, path: str | os.PathLike[str], *, labels: dict[str, Any] | None = None) -> Path:
    """Write every record of ``store``, oldest first, to ``path`` and its JSON sidecar; returns ``path``.

    ``labels`` (``tokens``, ``decoder_tokens``: one list per item; ``generations``) go into the sidecar where they are
    not None.

    Tensor keys are ``"{record index:06d}/{tensor name}"``. Tensors are saved contiguous, on the CPU,
    in their own dtype; tensors sharing memory with an earlier one are copied so each key has its own.
    """
    path = _checked_path(path)
    records, summary = store.snapshot()
    tensors: dict[str, torch.Tensor] = {}
    entries = []
    seen_storages: set[tuple[torch.device, int]] = set()
    for index, record in enumerate(records):
        entry = _record_entry(record)
        for name, t in record.tensors.items():
            key = f"{index:06d}/{name}"
            if t.is_meta:
                raise ValueError(
                    f"the {record.kind} capture {name!r} of {quoted(record.path or '(model)')} (step {record.step}) "
                    "is on the meta device, which holds shapes and no values, so it has none to write: the model's "
                    "weights are meta; load them and run again, or clear those captures (ex.captures.clear())"
                )
            t = _savable(t)
            storage = (t.device, t.untyped_storage().data_ptr())
            if storage in seen_storages:
                t = t.clone()  # safetensors refuses tensors that share memory (aliased captures do)
            seen_storages.add((t.device, t.untyped_storage().data_ptr()))
            tensors[key] = t
            entry["tensors"].append({"name": name, "key": key, "shape": list(t.shape), "dtype": _dtype_name(t.dtype)})
        entries.append(entry)

    sidecar = sidecar_path(path)
    document = {"format": FORMAT, "version": VERSION, "file": path.name, "summary": summary, "records": entries}
    document.update({key: value for key, value in (labels or {}).items() if value is not None})
    metadata = {"hookwidgets": json.dumps({"format": FORMAT, "version": VERSION, "sidecar": sidecar.name})}
    # Both files are written under temporary names and renamed at the end, so a failed export never
    # leaves a capture file paired with another export's sidecar.
    from safetensors.torch import save_file  # only here: importing hookwidgets must not pull safetensors

    tmp_data = _temp_beside(path)
    tmp_sidecar = None
    try:
        save_file(tensors, tmp_data, metadata=metadata)
        tmp_sidecar = _temp_beside(sidecar)
        with open(tmp_sidecar, "w", encoding="utf-8") as f:
            json.dump(_json_safe(document), f, indent=1, allow_nan=False)
        os.replace(tmp_data, path)
        os.replace(tmp_sidecar, sidecar)
    finally:
        for tmp in (tmp_data, tmp_sidecar):
            if tmp is not None and os.path.exists(tmp):
                os.remove(tmp)
    return path


def load_captures(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a capture file and its sidecar back: one dict per record, in store order.

    Each dict has ``path``, ``kind``, ``step``, ``call``, ``recompute``, ``generation``
    (``{"call", "index"}`` or None), ``stale``, ``nbytes``, ``stats`` (None for records without) and ``tensors``, a
    list of ``{name, key, shape, dtype, tensor}``.
    """
    path = _checked_path(path)
    sidecar = sidecar_path(path)
    try:
        with open(sidecar, encoding="utf-8") as f:
            document = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no sidecar {str(sidecar)!r} beside {str(path)!r}: export_captures writes both files; keep them together"
        ) from None
    if document.get("format") != FORMAT or document.get("version") != VERSION:
        raise ValueError(
            f"{str(sidecar)!r} is not a {FORMAT} version {VERSION} sidecar "
            f"(format {document.get('format')!r}, version {document.get('version')!r})"
        )
    if not path.exists():
        raise FileNotFoundError(f"no capture file {str(path)!r} beside its sidecar {str(sidecar)!r}")
    records: list[dict[str, Any]] = document["records"]
    from safetensors import safe_open  # only here: importing hookwidgets must not pull safetensors

    with safe_open(path, framework="pt", device="cpu") as f:
        keys = set(f.keys())
        missing = [t["key"] for r in records for t in r["tensors"] if t["key"] not in keys]
        if missing:
            raise ValueError(
                f"{str(path)!r} does not match its sidecar: {len(missing)} tensors missing, first {missing[0]!r}; "
                "export again to write both files together"
            )
        for record in records:
            if record.get("stats"):  # the floats the sidecar spells as "nan", "inf", "-inf"
                record["stats"] = {k: _float_back(v) for k, v in record["stats"].items()}
            for entry in record["tensors"]:
                entry["tensor"] = f.get_tensor(entry["key"])
    return records


def _checked_path(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if path.suffix != SUFFIX:
        fixed = path.with_suffix(SUFFIX)
        raise ValueError(f"capture file must end in {SUFFIX!r}, got {str(path)!r}; use {str(fixed)!r}")
    return path


def _record_entry(record: Record) -> dict[str, Any]:
    return {
        "path": record.path,
        "kind": record.kind,
        "step": record.step,
        "call": record.call,
        "recompute": record.recompute,
        "generation": record.generation._asdict() if record.generation is not None else None,
        "stale": record.stale,
        "nbytes": record.nbytes,
        "stats": record.stats,
        "scope": record.scope,
        "tensors": [],
    }


def _savable(t: torch.Tensor) -> torch.Tensor:
    """``t`` as safetensors can store it: dense, on the CPU, contiguous, conjugate and negation bits applied."""
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.to("cpu").resolve_conj().resolve_neg().contiguous()


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _temp_beside(path: Path) -> str:
    """An empty temporary file in ``path``'s folder; an unwritable folder raises OSError here."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return tmp


def plain_number(value: Any) -> Any:
    """A JSON-safe number: NaN and Inf, which JSON lacks, become the strings ``"nan"``, ``"inf"``, ``"-inf"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    return value


def _json_safe(value: Any) -> Any:
    """``value`` with every number made JSON-safe (strict parsers reject a whole file for one NaN): the
    statistics of a NaN activation are what a sidecar is read for."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return plain_number(value)


def _float_back(value: Any) -> Any:
    return float(value) if value in ("nan", "inf", "-inf") else value
