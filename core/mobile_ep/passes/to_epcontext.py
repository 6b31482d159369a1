"""Compiled-partition models: each partition replaced by one ``com.microsoft:EPContext`` node carrying a
backend's compiled payload.  Backend-neutral: the NNAPI and Core ML backends (and any plugin implementing
the compile contract of :mod:`mobile_ep.contract.compile`) go through the same functions.

**The node** follows ONNX Runtime's EPContext convention (contrib op ``com.microsoft:EPContext`` v1):

=================  =================================================================================
attribute          value
=================  =================================================================================
``main_context``   1 (the node holds its partition's whole payload)
``embed_mode``     1 (the payload is embedded, not a file next to the model)
``ep_cache_context``  :meth:`CompiledPartition.to_bytes` of the payload (backend, format, run-time inputs
                   and outputs with dtypes and shapes, metadata, then the backend's bytes)
``source``         the backend's name (``nnapi``, ``coreml``, ...): which emulator / adapter runs it
``partition_name`` ``<backend>_<n>``, unique in the model
``ep_sdk_version`` ``<backend> <backend version>``
``notes``          the payload format (``nnapi-model/1``, ...)
=================  =================================================================================

Its inputs are the partition's run-time inputs in the payload's order (weights are inside the payload)
and its outputs the partition's outputs, which keep their names, element types and shapes.  Stock
onnxruntime cannot run such a node without the backend's execution provider; :func:`mobile_ep.runtime.run`
runs the model on this machine (onnxruntime for the CPU nodes, each backend's ``emulate`` for the
partitions) and :func:`mobile_ep.runtime.plan_compiled` splits it into those steps.

**API.**

- :func:`compile_partitions` (IR level): replace given partitions of a model by EPContext nodes; a
  partition whose ``compile`` raises :class:`CompileError` stays as plain ONNX nodes (CPU) and is listed
  in :attr:`CompileResult.failures` (``strict`` raises instead);
- :func:`compile_model` (file level, what ``mobile-ep convert --compile`` calls): load a model as an
  ORT session sees it, partition it for the backend (ORT's algorithm and the cost model, as
  ``convert`` does), compile the kept partitions and write ``<model>.<ep>.compiled.onnx`` atomically;
- :func:`write_bundle`: the compiled model split for an app (``plan.json``, the CPU segments as ONNX
  models, each partition's payload bytes): what the runtime adapters' glue executes on a device, and
  exactly the steps :func:`mobile_ep.runtime.run_compiled` runs on this machine;
- :func:`write_adapter`: a backend's runtime-adapter sources into a folder;
- :func:`payload_of`, :func:`is_context_node`: read EPContext nodes back.

Payload metadata may carry ``rtol`` / ``atol`` (strings): the tolerances a verification should allow
for that partition (for example reduced-precision arithmetic), and ``quantized="true"``: integer
outputs may be one quantization step off (requantization rounding); ``mobile_ep.runtime`` honours them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pathlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from mobile_ep import model_io as mir
from mobile_ep.contract import Backend, RuleContext, op_label
from mobile_ep.contract.compile import CompiledPartition, CompileError, is_compiling, partition_view
from mobile_ep.errors import BackendError, UsageError
from mobile_ep.partitioning.units import build_node_units
from mobile_ep.passes import export, fold_constants
from mobile_ep.reports import interface
from mobile_ep.runtime import plan_compiled, read_context_file

__all__ = [
    "EP_CONTEXT_DOMAIN",
    "EP_CONTEXT_OP",
    "CompiledNode",
    "CompileFailure",
    "CompileResult",
    "compile_partitions",
    "compile_model",
    "compile_into",
    "compiled_path",
    "is_context_node",
    "payload_of",
    "save_compiled",
    "write_bundle",
    "write_adapter",
    "bundle_path",
    "BUNDLE_FORMAT",
]

#: ``format`` of a bundle's ``plan.json``.
BUNDLE_FORMAT = "mobile-ep-plan/1"

log = logging.getLogger(__name__)

EP_CONTEXT_DOMAIN = "com.microsoft"
EP_CONTEXT_OP = "EPContext"


@dataclasses.dataclass
class CompiledNode:
    """One partition that became an EPContext node."""

    name: str
    partition_name: str
    backend: str
    format: str
    nodes: list[str]
    inputs: list[str]
    outputs: list[str]
    payload_bytes: int
    metadata: dict[str, str]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class CompileFailure:
    """A partition the backend could not compile: its nodes stay in the model and run on the CPU."""

    partition: int
    nodes: list[str]
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class CompileResult:
    backend: str
    compiled: list[CompiledNode] = dataclasses.field(default_factory=list)
    failures: list[CompileFailure] = dataclasses.field(default_factory=list)
    #: Nodes of the model before compiling, and how many of them went into compiled partitions.
    nodes: int = 0
    path: str = ""
    bundle: str = ""
    adapter: str = ""

    @property
    def compiled_nodes(self) -> int:
        return sum(len(c.nodes) for c in self.compiled)

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend, "path": self.path, "bundle": self.bundle, "adapter": self.adapter,
            "nodes": self.nodes, "compiled_nodes": self.compiled_nodes,
            "partitions": [c.as_dict() for c in self.compiled], "failures": [f.as_dict() for f in self.failures],
        }


# --------------------------------------------------------------------------------------------------
# Reading EPContext nodes
# --------------------------------------------------------------------------------------------------
def is_context_node(node: ir.Node) -> bool:
    return node.domain == EP_CONTEXT_DOMAIN and node.op_type == EP_CONTEXT_OP


def _attribute_bytes(node: ir.Node, name: str) -> bytes | None:
    attribute = node.attributes.get(name)
    if attribute is None:
        return None
    value = attribute.value
    return value if isinstance(value, bytes) else str(value).encode("utf-8") if value is not None else None


def payload_of(node: ir.Node, model_dir: str | os.PathLike | None = None) -> CompiledPartition:
    """The payload an EPContext node carries (embedded, or with ``embed_mode=0`` a file in *model_dir*)."""
    if not is_context_node(node):
        raise CompileError(f"{op_label(node)} node {node.name!r} is not an EPContext node")
    data = _attribute_bytes(node, "ep_cache_context")
    if data is None:
        raise CompileError(f"EPContext node {node.name!r} has no ep_cache_context")
    embed = node.attributes.get("embed_mode")
    if embed is not None and int(embed.value) == 0:
        data = read_context_file(data.decode("utf-8", errors="replace"), model_dir)
    return CompiledPartition.from_bytes(data)


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------
def _context_node(payload: CompiledPartition, inputs: Sequence[ir.Value], partition_name: str, version: str,
                  count: int) -> ir.Node:
    attributes = [
        ir.AttrInt64("main_context", 1),
        ir.AttrInt64("embed_mode", 1),
        ir.AttrString("ep_cache_context", payload.to_bytes()),  # type: ignore[arg-type]  # bytes, as ORT stores it
        ir.AttrString("source", payload.backend),
        ir.AttrString("partition_name", partition_name),
        ir.AttrString("ep_sdk_version", f"{payload.backend} {version}"),
        ir.AttrString("notes", payload.format),
    ]
    return ir.Node(EP_CONTEXT_DOMAIN, EP_CONTEXT_OP, list(inputs), attributes, num_outputs=count,
                   name=f"{partition_name}/EPContext", version=1)


def compile_partitions(model: ir.Model, backend: Backend, partitions: Sequence[Sequence[ir.Node]], *,
                       strict: bool = False) -> CompileResult:
    """Replace each partition (a sequence of nodes of ``model.graph``) by an EPContext node, in place.

    The backend's ``compile`` gets a :class:`~mobile_ep.PartitionView` and a :class:`~mobile_ep.RuleContext`
    over the unchanged model.  Initializers only the compiled partitions used are removed.
    """
    if not is_compiling(backend):
        raise UsageError(f"backend {backend.name!r} does not compile partitions (no compile/emulate/runtime_adapter)")
    graph = model.graph
    result = CompileResult(backend.name, nodes=len(list(graph)))
    ctx = RuleContext(model, backend)
    ctx.units = build_node_units(graph, backend.qdq_ops())
    replacements: list[tuple[list[ir.Node], CompiledPartition, list[ir.Value], list[ir.Value]]] = []
    for index, nodes in enumerate(partitions):
        names = [n.name or "" for n in nodes]
        try:
            view = partition_view(ctx, nodes)
            payload = backend.compile(view, ctx)  # type: ignore[attr-defined]
            if not isinstance(payload, CompiledPartition):
                raise BackendError(f"{backend.name}.compile returned {type(payload).__name__}, not a CompiledPartition")
            payload.validate()
            by_name = {v.name: v for v in view.inputs}
            inputs = []
            for spec in payload.inputs:
                if spec.name not in by_name:
                    raise BackendError(f"{backend.name}: payload input {spec.name!r} is not an input of the partition")
                inputs.append(by_name[spec.name])
            outputs_by_name = {v.name: v for v in view.outputs}
            if sorted(s.name for s in payload.outputs) != sorted(outputs_by_name):
                raise BackendError(f"{backend.name}: payload outputs {[s.name for s in payload.outputs]} are not the "
                                   f"partition's outputs {sorted(outputs_by_name)}")
            outputs = [outputs_by_name[s.name] for s in payload.outputs]
        except CompileError as exc:
            if strict:
                raise
            log.warning("%s: partition %d (%d nodes) not compiled, left on the CPU: %s", backend.name, index,
                        len(nodes), exc)
            result.failures.append(CompileFailure(index, names, str(exc)))
            continue
        except BackendError:
            raise
        except Exception as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            if strict:
                raise BackendError(f"backend {backend.name!r} raised {type(exc).__name__} compiling partition "
                                   f"{index}: {message}") from exc
            log.warning("%s raised %s compiling partition %d: %s", backend.name, type(exc).__name__, index, message)
            result.failures.append(CompileFailure(index, names, f"{type(exc).__name__}: {message}"))
            continue
        replacements.append((list(view.nodes), payload, inputs, outputs))
    used_before = {v for v in graph.initializers.values()}
    replaced: dict[ir.Value, ir.Value] = {}  # outputs of earlier partitions -> their EPContext outputs
    for number, (nodes, payload, inputs, outputs) in enumerate(replacements):
        partition_name = f"{backend.name}_{number}"
        inputs = [replaced.get(v, v) for v in inputs]  # a partition may read another partition's outputs
        node = _context_node(payload, inputs, partition_name, backend.version, len(outputs))
        for new, old in zip(node.outputs, outputs, strict=True):
            new.name, new.type, new.shape = old.name, old.type, old.shape
            replaced[old] = new
        graph.append(node)
        for new, old in zip(node.outputs, outputs, strict=True):
            for position, value in enumerate(graph.outputs):
                if value is old:
                    graph.outputs[position] = new
            ir.convenience.replace_all_uses_with(old, new)
        graph.remove(nodes, safe=True)
        result.compiled.append(CompiledNode(
            node.name or "", partition_name, payload.backend, payload.format, [n.name or "" for n in nodes],
            [s.name for s in payload.inputs], [s.name for s in payload.outputs], len(payload.data),
            dict(payload.metadata)))
    for value in used_before:
        if not value.uses() and not value.is_graph_output() and not value.is_graph_input() and value.name:
            graph.initializers.pop(value.name, None)
    if replacements:
        model.opset_imports.setdefault(EP_CONTEXT_DOMAIN, 1)
    return result


@contextlib.contextmanager
def _binary_attributes_allowed() -> Iterator[None]:
    """onnx_ir warns that a STRING attribute holds bytes; EPContext payloads are bytes by design."""

    class _Filter(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            message = record.getMessage()
            return "should be a string but is instead bytes" not in message and "invalid UTF-8 bytes" not in message

    logger = logging.getLogger("onnx_ir.serde")
    f = _Filter()
    logger.addFilter(f)
    try:
        yield
    finally:
        logger.removeFilter(f)


def save_compiled(model: ir.Model, path: str | os.PathLike) -> pathlib.Path:
    """Save a compiled-partition model atomically (IR version set as for every model mobile-ep writes)."""
    # Weights still memory-mapped from the work files are copied in first: the compiler may hold views of
    # them, and the save's read-and-release of an external tensor fails on a mapping with views (BufferError).
    for graph in model.graphs():
        for value in graph.initializers.values():
            if isinstance(value.const_value, ir.ExternalTensor):
                value.const_value = ir.Tensor(np.array(value.const_value.numpy()), name=value.name)
    with _binary_attributes_allowed():
        return mir.save(model, path)


def compiled_path(model_path: str | os.PathLike, backend: str, out_dir: str | os.PathLike) -> pathlib.Path:
    """``<out_dir>/<stem>.<backend>.compiled.onnx``."""
    name = pathlib.Path(model_path).name
    stem = name[:-5] if name.endswith(".onnx") else pathlib.Path(name).stem
    return pathlib.Path(out_dir) / f"{stem}.{export.file_label(backend)}.compiled.onnx"


def compile_model(source: str | os.PathLike, backend: Backend, target: str | os.PathLike,
                  workdir: str | os.PathLike, *, strict: bool = False, use_cost: bool = True,
                  max_partitions: int | None = None, min_nodes: int | None = None) -> CompileResult:
    """Compile the model at *source* for *backend* and write the compiled-partition model to *target*.

    The model is seen as an ONNX Runtime session sees it (basic optimizations), partitioned with ORT's
    algorithm; the partitions the cost model keeps (with ``max_partitions``/``min_nodes``) are compiled.
    """
    from mobile_ep.options import Options
    from mobile_ep.passes.partition import PartitionPass

    work = pathlib.Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    model = mir.load(fold_constants.ort_optimized(source, work, backends=[backend]), check=False)
    _keep_initializer_metadata(mir.load(source, check=False), model)
    partition = PartitionPass(backend, Options(cost_model=use_cost, max_partitions=max_partitions,
                                               min_nodes=min_nodes, strict=strict))
    partition(model)
    assert partition.proposal is not None
    kept = [p.nodes for p, cost in zip(partition.proposal.partitions, partition.costs, strict=True) if cost.kept]
    result = compile_partitions(model, backend, kept, strict=strict)
    result.path = str(save_compiled(model, target))
    return result


def compile_into(paths: dict[str, pathlib.Path], backend: Backend, out_dir: pathlib.Path, workdir: pathlib.Path,
                 options: Any) -> CompileResult:
    """``convert --compile``: compile the written ``paths["onnx"]`` into ``<model>.<ep>.compiled.onnx`` (added to
    *paths* as ``"compiled"``), its app bundle beside it and the runtime adapter's sources in ``adapter/``."""
    label = export.file_label(backend.name)
    stem = paths["onnx"].name[: -len(f".{label}.onnx")]
    # the EP itself writes the artifact (its own EPContext model and context files) and checks it
    by_ep = backend.compile_with_ep(paths["onnx"], out_dir / f"{stem}.{label}.compiled.onnx", workdir, options)
    if by_ep is not None:
        return by_ep
    if not is_compiling(backend):
        raise UsageError(f"backend {backend.name!r} does not compile partitions: --compile needs a backend with "
                         "compile/emulate/runtime_adapter")
    onnx_path = paths["onnx"]
    target = out_dir / f"{stem}.{label}.compiled.onnx"
    result = compile_model(onnx_path, backend, target, workdir, strict=options.strict, use_cost=options.cost_model,
                           max_partitions=options.max_partitions, min_nodes=options.min_nodes)
    result.bundle = str(write_bundle(target))
    result.adapter = str(write_adapter(backend, out_dir / "adapter", adapter_names(onnx_path, target, paths.get("ort"))))
    paths["compiled"] = target
    return result


def bundle_path(compiled: str | os.PathLike) -> pathlib.Path:
    """``model.nnapi.compiled.onnx`` -> ``model.nnapi.compiled/``."""
    p = pathlib.Path(compiled)
    return p.with_name(p.name[:-5] if p.name.endswith(".onnx") else p.name + ".d")


def _spec(value: ir.Value) -> dict[str, Any]:
    shape = None if value.shape is None else [d if isinstance(d, int) else None for d in value.shape]
    return {"name": value.name, "dtype": value.dtype.name if value.dtype is not None else "UNDEFINED", "shape": shape}


def _write(path: pathlib.Path, data: bytes) -> None:
    with mir.atomic_path(path) as tmp:
        tmp.write_bytes(data)


def _write_unzipped(folder: pathlib.Path, data: bytes) -> None:
    """Unpack a zipped directory payload into *folder* (replaced if present); paths stay inside it."""
    import io
    import shutil
    import zipfile

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise CompileError(f"a payload to unpack as {folder.name} is not a zip: {exc}") from None
    with archive:
        if folder.exists():
            shutil.rmtree(folder)
        for info in archive.infolist():
            parts = pathlib.PurePosixPath(info.filename).parts
            if not parts:
                continue
            if pathlib.PurePosixPath(info.filename).is_absolute() or ".." in parts:
                raise CompileError(f"a payload to unpack as {folder.name} holds an unsafe path {info.filename!r}")
            if info.is_dir():  # kept even when empty (a package's manifest may list it)
                folder.joinpath(*parts).mkdir(parents=True, exist_ok=True)
                continue
            _write(folder.joinpath(*parts), archive.read(info))


def write_bundle(compiled: str | os.PathLike, folder: str | os.PathLike | None = None) -> pathlib.Path:
    """Split the compiled model at *compiled* into an app bundle in *folder* (default: :func:`bundle_path`).

    ``plan.json`` (format ``mobile-ep-plan/1``) lists the model's inputs and outputs and its steps in
    order: ``{"kind": "onnx", "file": "segment_<k>.onnx", "inputs": [...], "outputs": [...]}`` for a CPU
    segment (run it with an onnxruntime session) and ``{"kind": "partition", "backend", "format", "file",
    "inputs": [specs], "outputs": [specs], "metadata"}`` for a partition (``file`` holds the payload's
    bytes, e.g. a serialized NNAPI model, for the backend's runtime adapter; a payload whose metadata has
    ``unpack_as: EXT`` is a zipped directory, written unpacked as ``<partition>.EXT/``, e.g. a Core ML
    ``.mlpackage``).  Values pass between steps by name.
    """
    import json


    source = pathlib.Path(compiled)
    target = pathlib.Path(folder) if folder is not None else bundle_path(source)
    with _binary_attributes_allowed():
        model = mir.load(source, check=False, shapes=False)
    steps = plan_compiled(source)
    entries = []
    segment = 0
    for step in steps:
        if step.kind == "onnx":
            name = f"segment_{segment}.onnx"
            segment += 1
            _write(target / name, step.model.SerializeToString())
            entries.append({"kind": "onnx", "file": name, "inputs": step.inputs, "outputs": step.outputs})
        else:
            payload = step.payload
            attributes = {a.name: a for a in step.node.attribute}
            partition = attributes["partition_name"].s.decode() if "partition_name" in attributes else step.node.name
            suffix = payload.format.split("/")[0].split("-")[0] or "bin"
            name = f"{partition}.{suffix}"
            unpack_as = payload.metadata.get("unpack_as", "")
            if unpack_as:  # the payload is a zipped directory (a Core ML .mlpackage): the app gets it unpacked
                name = f"{partition}.{unpack_as}"
                _write_unzipped(target / name, payload.data)
            else:
                _write(target / name, payload.data)
            entries.append({"kind": "partition", "backend": payload.backend, "format": payload.format, "file": name,
                            "inputs": [s.as_dict() for s in payload.inputs],
                            "outputs": [s.as_dict() for s in payload.outputs], "metadata": dict(payload.metadata)})
    plan = {"format": BUNDLE_FORMAT, "model": source.name,
            "inputs": [_spec(v) for v in model.graph.inputs if not v.is_initializer()],
            "outputs": [_spec(v) for v in model.graph.outputs], "steps": entries}
    _write(target / "plan.json", (json.dumps(plan, indent=2) + "\n").encode())
    return target


def adapter_names(model: str | os.PathLike, compiled: str | os.PathLike, ort: str | os.PathLike | None = None
                  ) -> dict[str, str]:
    """The names the adapter's README and examples use: ``bundle`` (the app bundle's folder name of the compiled
    model at *compiled*), ``ort`` (the .ort file's name), ``input`` and ``output`` (the first graph input and
    output of the converted *model*, which the compiled one shares), ``input_shape`` (the input's dims, ``1``
    for a dynamic one, comma-separated), ``inputs`` (every input the app feeds, with dtype and dims)."""
    graph = mir.load(model, shapes=False, check=False).graph
    inputs = [v for v in graph.inputs if not v.is_initializer()]
    names = {"bundle": bundle_path(compiled).name, "ort": pathlib.Path(ort).name if ort else ""}
    if inputs:
        names["input"] = inputs[0].name or ""
        dims = inputs[0].shape if inputs[0].shape is not None else []
        names["input_shape"] = ", ".join(str(d) if isinstance(d, int) else "1" for d in dims)
    if graph.outputs:
        names["output"] = graph.outputs[0].name or ""
    names["inputs"] = interface.describe(model)
    return names


def write_adapter(backend: Backend, folder: str | os.PathLike, names: dict[str, str] | None = None, *,
                  files: dict[str, bytes] | None = None) -> pathlib.Path:
    """Write the backend's ``runtime_adapter()`` files under *folder* (each atomically).

    In its text files, ``{{mobile_ep:KEY}}`` becomes the model's own name for KEY (:func:`adapter_names`:
    ``bundle``, ``ort``, ``input``, ``input_shape``, ``inputs``, ``output``), so READMEs and examples name the model's
    files, inputs and outputs.  *files*: other files than the backend's ``runtime_adapter()`` (a backend whose
    EP writes the compiled artifact itself ships its app snippet this way)."""
    target = pathlib.Path(folder)
    files = backend.runtime_adapter() if files is None else files  # type: ignore[attr-defined]
    for relative, data in sorted(files.items()):
        parts = pathlib.PurePosixPath(relative).parts
        if pathlib.PurePosixPath(relative).is_absolute() or ".." in parts or not parts:
            raise BackendError(f"{backend.name}: runtime adapter path {relative!r} is not a relative path")
        if names and b"{{mobile_ep:" in data:
            text = data.decode("utf-8")
            for key, value in names.items():
                text = text.replace("{{mobile_ep:" + key + "}}", value)
            data = text.encode("utf-8")
        _write(target.joinpath(*parts), data)
    return target


def _keep_initializer_metadata(source: ir.Model, optimized: ir.Model) -> None:
    """Copy the initializers' metadata (onnxruntime drops it when it writes the optimized model) by name: a
    backend may have left notes for its compiler there (Core ML's folded quantized weights)."""
    notes = {name: dict(v.const_value.metadata_props) for name, v in source.graph.initializers.items()
             if v.const_value is not None and v.const_value.metadata_props}
    if not notes:
        return
    for name, value in optimized.graph.initializers.items():
        if name in notes and value.const_value is not None:
            value.const_value.metadata_props.update(notes[name])
