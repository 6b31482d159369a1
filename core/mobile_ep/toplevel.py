"""``mobile_ep.check``, ``mobile_ep.convert`` and ``mobile_ep.explain``: the command line, from Python.

Each function takes what the command takes, in Python form, and returns the typed report the command
prints (:class:`~mobile_ep.pipeline.CheckReport`, :class:`~mobile_ep.pipeline.ConvertReport`,
:class:`~mobile_ep.reports.explain.ExplainReport`); errors are the exceptions of :mod:`mobile_ep.errors`
(``ModelError``, ``UsageError``, ``VerificationError``, ...), whose ``exit_code`` is the command's.

==========================================  ==============================================================
command line                                Python
==========================================  ==============================================================
``--ep nnapi,coreml``                       ``ep="nnapi,coreml"`` or ``ep=["nnapi", "coreml"]``
``-O nnapi.api_level=29``                   ``options={"nnapi.api_level": 29}`` or ``{"nnapi": {"api_level": 29}}``
``--shape x=1,3,224,224``                   ``shape={"x": (1, 3, 224, 224)}`` (or ``(1, 3, 224, 224)`` for one input)
``--dim batch=1``                           ``dim={"batch": 1}``
``--html report.html``                      ``html="report.html"``
``--max-partitions``, ``--no-legalize``...  ``max_partitions=``, ``legalize=False``, ...
==========================================  ==============================================================

The heavy modules are imported on first call, so ``import mobile_ep`` stays light for plugin authors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from mobile_ep.contract.plugins import Plugins
    from mobile_ep.pipeline import CheckReport, ConvertReport, PipelineOptions
    from mobile_ep.reports.explain import ExplainReport

__all__ = ["check", "convert", "explain"]

Shape = Mapping[str, Sequence[int]] | Sequence[int] | str | Sequence[str] | None
_Report = TypeVar("_Report")


def _names(ep: str | Sequence[str] | None) -> list[str]:
    if ep is None:
        return []
    items = ep.split(",") if isinstance(ep, str) else list(ep)
    return [name.strip() for name in items if name and name.strip()]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(v) for v in value)
    return str(value)


def _options(options: Mapping[str, Any] | None, names: Sequence[str]) -> dict[str, dict[str, str]]:
    """``{"nnapi": {"api_level": 29}}``, ``{"nnapi.api_level": 29}`` or (one backend) ``{"api_level": 29}``."""
    from mobile_ep.errors import UsageError

    result: dict[str, dict[str, str]] = {}
    for key, value in (options or {}).items():
        if isinstance(value, Mapping):
            for option, inner in value.items():
                result.setdefault(key, {})[str(option)] = _text(inner)
        elif "." in key:
            backend, option = key.split(".", 1)
            result.setdefault(backend, {})[option] = _text(value)
        elif len(names) == 1:
            result.setdefault(names[0], {})[key] = _text(value)
        else:
            raise UsageError(f"option {key!r}: name the backend, e.g. 'nnapi.{key}'")
    return result


def _pipeline(shape: Shape, dim: Mapping[str, int] | str | Sequence[str] | None, max_partitions: int | None,
              min_nodes: int | None, legalize: bool, cost_model: bool) -> PipelineOptions:
    from mobile_ep.errors import UsageError
    from mobile_ep.passes import parse_dim, parse_shape
    from mobile_ep.pipeline import PipelineOptions

    shapes: dict[str | None, tuple[int, ...]] = {}
    if isinstance(shape, str):
        shape = [shape]
    if isinstance(shape, Mapping):
        for name, dims in shape.items():
            shapes[name or None] = tuple(int(d) for d in dims)
    elif shape is not None and len(shape) and all(isinstance(d, str) for d in shape):
        for text in shape:
            name, dims = parse_shape(str(text))
            if name in shapes:
                raise UsageError(f"shape of {name or '(the input)'} given twice")
            shapes[name] = dims
    elif shape is not None and len(shape):
        shapes[None] = tuple(int(d) for d in shape)  # type: ignore[union-attr]
    dims: dict[str, int] = {}
    if isinstance(dim, str):
        dim = [dim]
    if isinstance(dim, Mapping):
        dims = {str(k): int(v) for k, v in dim.items()}
    elif dim is not None:
        dims = dict(parse_dim(str(text)) for text in dim)
    for name, value in [*((n or "", d) for n, ds in shapes.items() for d in ds), *dims.items()]:
        if value <= 0:
            raise UsageError(f"dims must be positive ({name or 'shape'}: {value})")
    return PipelineOptions(shapes, dims, legalize, cost_model, max_partitions, min_nodes)


def _with_html(html: str | os.PathLike | None, run: Callable[..., _Report], *args: Any,
               **kwargs: Any) -> _Report:
    """``run(*args, **kwargs)``; with *html*, the run records every graph node by node (what the HTML report
    draws) and the report is then written there."""
    from mobile_ep.reports import nodegraph

    with nodegraph.recording(html is not None):
        report = run(*args, **kwargs)
    if html is not None:
        from mobile_ep.reports.html import write_html

        write_html(report, html)
    return report


def check(
    model: str | os.PathLike,
    ep: str | Sequence[str] | None = None,
    *,
    options: Mapping[str, Any] | None = None,
    shape: Shape = None,
    dim: Mapping[str, int] | str | Sequence[str] | None = None,
    max_partitions: int | None = None,
    min_nodes: int | None = None,
    legalize: bool = True,
    cost_model: bool = True,
    after_convert: bool = True,
    html: str | os.PathLike | None = None,
    strict: bool = False,
    plugins: Plugins | None = None,
) -> CheckReport:
    """``mobile-ep check``: how ORT Mobile's EPs partition *model* today, and after ``convert``.

    *ep*: backend names in priority order (default: every installed backend).  With *html*, also writes
    the HTML report there; the returned report then carries each graph node by node (``report.backends[
    name].graph``).
    """
    from mobile_ep import pipeline as api

    names = _names(ep)
    return _with_html(html, api.check, model, names or None, options=_options(options, names),
                      plugins=plugins, strict=strict,
                      pipeline=_pipeline(shape, dim, max_partitions, min_nodes, legalize, cost_model),
                      after_convert=after_convert)


def convert(
    model: str | os.PathLike,
    ep: str,
    output: str | os.PathLike = "out",
    *,
    options: Mapping[str, Any] | None = None,
    shape: Shape = None,
    dim: Mapping[str, int] | str | Sequence[str] | None = None,
    max_partitions: int | None = None,
    min_nodes: int | None = None,
    legalize: bool = True,
    cost_model: bool = True,
    verify: bool = True,
    seed: int = 0,
    compile: bool = False,
    html: str | os.PathLike | None = None,
    strict: bool = False,
    plugins: Plugins | None = None,
) -> ConvertReport:
    """``mobile-ep convert``: write the EP-aware model for backend *ep* into *output* and verify it.

    Raises :class:`~mobile_ep.errors.VerificationError` when the converted model's outputs differ (the
    files and ``report.json`` stay for inspection).  With *html*, also writes the HTML report there.
    """
    from mobile_ep import pipeline as api

    names = _names(ep)
    if len(names) != 1:
        from mobile_ep.errors import UsageError

        raise UsageError(f"convert targets one backend, got {ep!r}")
    return _with_html(html, api.convert, model, names[0], output, options=_options(options, names),
                      plugins=plugins, verify=verify, seed=seed, strict=strict, compile=compile,
                      pipeline=_pipeline(shape, dim, max_partitions, min_nodes, legalize, cost_model))


def explain(
    model: str | os.PathLike,
    node: str,
    ep: str | Sequence[str] | None = None,
    *,
    options: Mapping[str, Any] | None = None,
    shape: Shape = None,
    dim: Mapping[str, int] | str | Sequence[str] | None = None,
    strict: bool = False,
    plugins: Plugins | None = None,
) -> ExplainReport:
    """``mobile-ep explain``: why *node* runs where it does, per backend, and what would change that.

    ``report.text()`` is what the command prints; ``report.backends[i].alternatives`` are the computed
    changes (``change``, ``runs_on``, ``outcome``).
    """
    from mobile_ep.reports.explain import explain as run

    names = _names(ep)
    return run(model, node, names or None, options=_options(options, names), plugins=plugins, strict=strict,
               pipeline=_pipeline(shape, dim, None, None, True, True))
