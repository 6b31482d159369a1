"""The one options object of ``check``, ``convert`` and ``explain``, built the same way by the CLI and Python.

:meth:`Options.build` takes what the command line takes, as text or in Python form, and is the only place
either is parsed:

==========================================  ==============================================================
command line                                Python (``mobile_ep.check(model, ...)`` / ``Options.build(...)``)
==========================================  ==============================================================
``--ep nnapi,coreml``                       ``ep="nnapi,coreml"`` or ``ep=["nnapi", "coreml"]``
``-O nnapi.api_level=29``                   ``options={"nnapi.api_level": 29}``, ``{"nnapi": {"api_level": 29}}``
                                            or ``options=["nnapi.api_level=29"]``
``--shape x=1,3,224,224``                   ``shape={"x": (1, 3, 224, 224)}``, ``shape="x=1,3,224,224"``
                                            (or ``(1, 3, 224, 224)`` for a one-input model)
``--dim batch=1``                           ``dim={"batch": 1}`` or ``dim="batch=1"``
``--const sr=16000``                        ``const={"sr": 16000}`` or ``const="sr=16000"``
``--max-partitions``, ``--no-legalize``...  ``max_partitions=``, ``legalize=False``, ...
``--strict``                                ``strict=True``
==========================================  ==============================================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mobile_ep.errors import BackendError, UsageError

if TYPE_CHECKING:
    from mobile_ep.contract import Backend
    from mobile_ep.contract.plugins import Plugins

__all__ = ["Options", "parse_shape", "parse_dim", "parse_const", "resolve_backends"]

Shape = Mapping[str | None, Sequence[int]] | Sequence[int] | str | Sequence[str] | None
Dims = Mapping[str, int] | str | Sequence[str] | None


@dataclasses.dataclass(frozen=True)
class Options:
    """What a run does: which backends, configured how, and what ``convert`` changes beyond ORT's own work."""

    #: Backend names in priority order (empty: every installed backend).
    backends: tuple[str, ...] = ()
    #: Options per backend, as text: ``{"nnapi": {"api_level": "29"}}`` (each backend parses its own).
    backend_options: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    #: Input shapes by input name (``None``: the model's only input).
    shapes: Mapping[str | None, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    #: Values of named symbolic dims.
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: Apply the backend's legalizing rewrites.
    legalize: bool = True
    #: Judge partitions with the cost model.
    cost_model: bool = True
    #: Keep at most this many partitions (by estimated saving), as TFLite's delegates do.
    max_partitions: int | None = None
    #: Drop partitions with fewer nodes.
    min_nodes: int | None = None
    #: Apply onnxruntime's full optimizations (fusions) to the nodes no partition keeps.
    fuse_cpu: bool = True
    #: A backend that raises is an error (else it only loses the nodes it raised on).
    strict: bool = False
    #: Inputs fixed to constant values by name (``--const sr=16000``): their arithmetic folds away.
    consts: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)

    @property
    def fixes_shapes(self) -> bool:
        return bool(self.shapes or self.dims)

    @property
    def fixes_inputs(self) -> bool:
        """Whether ``convert`` changes the model's inputs (their shapes, or some into constants)."""
        return self.fixes_shapes or bool(self.consts)

    @classmethod
    def build(cls, ep: str | Sequence[str] | None = None, *, options: Any = None, shape: Shape = None,
              dim: Dims = None, max_partitions: int | None = None, min_nodes: int | None = None,
              legalize: bool = True, cost_model: bool = True, fuse_cpu: bool = True,
              strict: bool = False, const: Mapping[str, Any] | str | Sequence[str] | None = None) -> Options:
        """Options from the command line's values or their Python forms (see the module's table).

        *options* may also be an :class:`Options` already built: it is returned as it is (with *ep*, if
        given, as its backends).
        """
        if isinstance(options, Options):
            return dataclasses.replace(options, backends=tuple(_names(ep))) if ep is not None else options
        backends = _names(ep)
        for name, value in (("max_partitions", max_partitions), ("min_nodes", min_nodes)):
            if value is not None and int(value) < 1:
                raise UsageError(f"{name.replace('_', '-')} must be at least 1 (got {value})")
        return cls(tuple(backends), _backend_options(options, backends), _shapes(shape), _dims(dim),
                   bool(legalize), bool(cost_model), max_partitions, min_nodes, bool(fuse_cpu), bool(strict),
                   _consts(const))

    def for_backends(self, names: Sequence[str]) -> Options:
        """The same options for other backends (each keeps only its own backend options)."""
        return dataclasses.replace(self, backends=tuple(names), backend_options={
            name: opts for name, opts in self.backend_options.items() if name in names})


def parse_shape(text: str) -> tuple[str | None, tuple[int, ...]]:
    """``x=1,3,224,224`` -> ("x", (1, 3, 224, 224)); ``1,3,224,224`` -> (None, ...) for the only input."""
    name, _, dims = text.rpartition("=")
    try:
        separator = "," if "," in dims or "x" not in dims else "x"  # 1,3,224,224 or 1x3x224x224
        values = tuple(int(d) for d in dims.split(separator) if d.strip())
    except ValueError:
        raise UsageError(f"--shape {text!r}: expected NAME=D1,D2,... with integer dims") from None
    if not values and dims.strip() not in ("", "[]"):
        raise UsageError(f"--shape {text!r}: expected NAME=D1,D2,...")
    if any(v <= 0 for v in values):
        raise UsageError(f"--shape {text!r}: dims must be positive")
    return (name or None), values


def parse_dim(text: str) -> tuple[str, int]:
    """``batch=1`` -> ("batch", 1)."""
    name, sep, value = text.rpartition("=")
    if not sep or not name:
        raise UsageError(f"--dim {text!r}: expected PARAM=VALUE")
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"--dim {text!r}: the value must be an integer") from None
    if number <= 0:
        raise UsageError(f"--dim {text!r}: the value must be positive")
    return name, number


def parse_const(text: str) -> tuple[str, tuple[float, ...]]:
    """``sr=16000`` -> ("sr", (16000.0,)); ``mask=1,1,0`` -> ("mask", (1.0, 1.0, 0.0))."""
    name, sep, values = text.partition("=")
    try:
        numbers = tuple(float(v) for v in values.split(",") if v.strip())
    except ValueError:
        raise UsageError(f"--const {text!r}: expected NAME=VALUE or NAME=V1,V2,... with numbers") from None
    if not sep or not name or not numbers:
        raise UsageError(f"--const {text!r}: expected NAME=VALUE or NAME=V1,V2,...")
    return name, numbers


def _consts(const: Mapping[str, Any] | str | Sequence[str] | None) -> dict[str, tuple[float, ...]]:
    if const is None:
        return {}
    if isinstance(const, Mapping):
        return {str(k): tuple(float(v) for v in (list(v) if isinstance(v, (list, tuple)) else [v]))
                for k, v in const.items()}
    return dict(parse_const(item) for item in ([const] if isinstance(const, str) else const))


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


def _backend_options(options: Any, backends: Sequence[str]) -> dict[str, dict[str, str]]:
    """``{"nnapi": {"api_level": 29}}``, ``{"nnapi.api_level": 29}``, ``["nnapi.api_level=29"]`` (as ``-O``
    takes them) or, with one backend selected, the same without the backend's name."""
    if options is None:
        return {}
    if isinstance(options, str):
        options = [options]
    if not isinstance(options, Mapping):
        pairs = []
        for item in options:
            if "=" not in item:
                raise UsageError(f"--option {item!r}: expected BACKEND.KEY=VALUE")
            pairs.append(tuple(item.split("=", 1)))
        options = dict(pairs)
    result: dict[str, dict[str, str]] = {}
    for key, value in options.items():
        key = str(key).strip()
        if isinstance(value, Mapping):
            for option, inner in value.items():
                result.setdefault(key, {})[str(option).strip()] = _text(inner)
        elif "." in key:
            backend, option = key.split(".", 1)
            result.setdefault(backend.strip(), {})[option.strip()] = _text(value)
        elif len(backends) == 1:
            result.setdefault(backends[0], {})[key] = _text(value)
        else:
            raise UsageError(f"option {key!r}: name the backend, e.g. -O nnapi.{key}={_text(value)}")
    return result


def _shapes(shape: Shape) -> dict[str | None, tuple[int, ...]]:
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
                raise UsageError(f"--shape {name or '(the input)'} given twice")
            shapes[name] = dims
    elif shape is not None and len(shape):
        shapes[None] = tuple(int(d) for d in shape)  # type: ignore[union-attr]
    for name, dims in shapes.items():
        if any(d <= 0 for d in dims):
            raise UsageError(f"--shape {name or '(the input)'}: dims must be positive")
    return shapes


def _dims(dim: Dims) -> dict[str, int]:
    if isinstance(dim, str):
        dim = [dim]
    if isinstance(dim, Mapping):
        dims = {str(k): int(v) for k, v in dim.items()}
    else:
        dims = dict(parse_dim(str(text)) for text in dim or ())
    for name, value in dims.items():
        if value <= 0:
            raise UsageError(f"--dim {name}: the value must be positive")
    return dims


def resolve_backends(options: Options, plugins: Plugins | None = None) -> list[Backend]:
    """The backends *options* name (if none, every installed one a command uses unnamed: ``selected_by_default``),
    configured with their options."""
    from mobile_ep.contract.plugins import guarded, make_plugins

    plugins = plugins or make_plugins()
    names = [plugins.canonical_name(name) for name in options.backends] or \
        [name for name, b in plugins.backends().items() if b.selected_by_default]
    if not names:
        raise BackendError("no backends are installed (install mobile-ep-nnapi or mobile-ep-coreml)")
    given = {plugins.canonical_name(name, strict=False): values for name, values in options.backend_options.items()}
    options = dataclasses.replace(options, backends=tuple(names), backend_options=given)  # (names as installed)
    unknown = set(options.backend_options) - set(names)
    if unknown:
        raise UsageError(f"options given for backend(s) not selected: {', '.join(sorted(unknown))}")
    if len(set(names)) != len(names):
        raise UsageError(f"backend {next(n for n in names if names.count(n) > 1)!r} given twice")
    return [guarded(plugins.backend(name).configure(options.backend_options.get(name, {})), plugin=plugins.origin(name),
                    strict=options.strict) for name in names]  # (the plugin contract kept, per model)
