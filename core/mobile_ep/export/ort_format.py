"""Exporters: the EP-aware model as ONNX and as ORT format (through onnxruntime's own conversion)."""

from __future__ import annotations

import dataclasses
import os
import pathlib

import onnx_ir as ir

from mobile_ep import model_io as mir
from mobile_ep.errors import ModelError

__all__ = ["write_onnx", "write_ort", "ort_format_ops", "fuse_cpu_nodes", "CpuFusion"]


def write_onnx(model: ir.Model, path: str | os.PathLike) -> pathlib.Path:
    """Save the model atomically with an IR version onnxruntime accepts."""
    return mir.save(model, path)


def write_ort(onnx_path: str | os.PathLike, ort_path: str | os.PathLike) -> pathlib.Path:
    """Convert to ORT format the way ``convert_onnx_models_to_ort --optimization_style Runtime`` does.

    All optimization levels run, but ORT's minimal-build optimizations (Conv+activation fusion, QDQ
    fusions, ...) are only *recorded*, not applied: on the device they are replayed for the nodes the
    execution provider did not take.  So every node the EP can claim stays a plain ONNX op, and the CPU
    part still gets ORT's fusions.  The NCHWc transformer is disabled as for any non-x86 target.
    """
    import onnxruntime as ort

    target = pathlib.Path(ort_path)
    with mir.atomic_path(target) as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.optimized_model_filepath = str(tmp)
        so.log_severity_level = 3
        so.add_session_config_entry("session.save_model_format", "ORT")
        so.add_session_config_entry("optimization.minimal_build_optimizations", "save")
        # Mobile targets are ARM: keep int8 QDQ as is (ORT's converter sets this for --target_platform arm).
        so.add_session_config_entry("session.qdqisint8allowed", "1")
        mir.lean_session_options(so)  # only written, never run: same file, less time and memory
        try:
            ort.InferenceSession(
                str(onnx_path), so, providers=["CPUExecutionProvider"], disabled_optimizers=["NchwcTransformer"]
            )
        except Exception as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"onnxruntime could not convert {onnx_path} to ORT format: {message}") from None
        mir.canonicalize_ort_file(tmp)  # onnxruntime's hash-map order differs per process: same model, same bytes
    mir.release_memory()
    return target


def ort_format_ops(ort_path: str | os.PathLike) -> set[str]:
    """The op types (``domain:op`` for non-default domains) an ORT format model's main graph holds."""
    from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs import InferenceSession

    data = pathlib.Path(ort_path).read_bytes()
    session = InferenceSession.InferenceSession.GetRootAsInferenceSession(data, 0)
    graph = session.Model().Graph()
    ops = set()
    for i in range(graph.NodesLength()):
        node = graph.Nodes(i)
        domain = node.Domain().decode() if node.Domain() else ""
        op = node.OpType().decode()
        ops.add(op if domain in ("", "ai.onnx") else f"{domain}:{op}")
    return ops


@dataclasses.dataclass
class CpuFusion:
    """What fusing the CPU-only nodes changed."""

    nodes_before: int
    nodes_after: int
    ops_before: dict[str, int]
    ops_after: dict[str, int]

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _count_ops(nodes) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in nodes:
        label = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"
        counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))


def fuse_cpu_nodes(onnx_path: str | os.PathLike, keep: set[str], out_path: str | os.PathLike,
                   workdir: str | os.PathLike) -> CpuFusion | None:
    """Apply onnxruntime's full (extended-level) optimizations to the nodes NOT named in *keep*.

    The nodes outside *keep* (those no backend claims) are cut out as a sub-model, optimized by
    onnxruntime at level "all" (its fusions: FusedConv, FusedGemm, GELU, LayerNorm, ...; NCHWc
    disabled, as for any ARM target) and spliced back; the kept nodes stay plain ONNX ops for the EP.
    Writes the result to *out_path* and returns what changed, or ``None`` if nothing could be fused.
    """
    import onnx
    import onnx.utils
    import onnxruntime as ort

    # Weights stay in their files (external data beside *onnx_path*, which is in *workdir*, where the cut-out
    # region is written): only the graph is read.
    proto = onnx.load(str(onnx_path), load_external_data=False)
    if pathlib.Path(onnx_path).parent.resolve() != pathlib.Path(workdir).resolve():
        onnx.external_data_helper.load_external_data_for_model(proto, str(pathlib.Path(onnx_path).parent))
    graph = proto.graph
    region = [n for n in graph.node if n.name not in keep]
    if not region:
        return None
    region_names = {n.name for n in region}
    produced_in_region = {o for n in region for o in n.output if o}
    initializer_names = {t.name for t in graph.initializer}
    graph_outputs = {o.name for o in graph.output}
    consumers_outside = {i for n in graph.node if n.name not in region_names for i in _all_inputs(n) if i}
    inputs, seen = [], set()
    for n in region:
        for name in _all_inputs(n):
            if name and name not in produced_in_region and name not in initializer_names and name not in seen:
                seen.add(name)
                inputs.append(name)
    outputs = [o for n in region for o in n.output if o and (o in consumers_outside or o in graph_outputs)]
    if not outputs:
        return None
    sub = onnx.utils.Extractor(proto).extract_model(inputs, outputs)
    if {n.name for n in sub.graph.node} != region_names:
        return None  # the region is not closed under the extraction: leave the model as it is
    work = pathlib.Path(workdir)
    sub_path, opt_path = work / "cpu_region.onnx", work / "cpu_region.opt.onnx"
    onnx.save(sub, str(sub_path))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(opt_path)
    so.log_severity_level = 3
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", opt_path.name + ".data")
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1048576")
    mir.lean_session_options(so)
    try:
        ort.InferenceSession(str(sub_path), so, providers=["CPUExecutionProvider"],
                             disabled_optimizers=["NchwcTransformer"])
    except Exception:
        return None
    fused = onnx.load(str(opt_path), load_external_data=False)
    boundary = set(inputs) | set(outputs)
    prefix = "cpu_fused/"
    kept_nodes = [n for n in graph.node if n.name in keep]
    # Names the fused part defines that the kept part also uses (onnxruntime may reuse names) are
    # renamed, everywhere they are read, subgraphs included; other names stay as they were.
    taken = {name for n in kept_nodes for name in (*_all_inputs(n), *n.output)} | {n.name for n in kept_nodes}
    defined = {o for n in fused.graph.node for o in n.output} | {t.name for t in fused.graph.initializer}
    clashes = {name: prefix + name for name in (defined & taken) - boundary if name}

    new_nodes = []
    for n in fused.graph.node:
        _rename_refs(n, clashes)
        if n.name in taken or not n.name:
            n.name = prefix + (n.name or n.op_type)
        new_nodes.append(n)
    for t in fused.graph.initializer:
        t.name = clashes.get(t.name, t.name)

    def rename(name: str) -> str:
        return clashes.get(name, name)

    used_by_kept = {i for n in kept_nodes for i in _all_inputs(n)}
    kept_inits = [t for t in graph.initializer if t.name in used_by_kept or t.name in graph_outputs]
    del graph.node[:]
    graph.node.extend(kept_nodes + new_nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept_inits + list(fused.graph.initializer))
    # Keep the shapes of every value that survives, and take those onnxruntime knows for the fused ops
    # (ONNX shape inference cannot infer com.microsoft ops; the EP's rules need the shapes after them).
    surviving = {o for n in graph.node for o in n.output}
    infos = [vi for vi in graph.value_info if vi.name in surviving]
    known = {vi.name for vi in infos}
    for vi in fused.graph.value_info:
        vi.name = rename(vi.name)
        if vi.name not in known:
            infos.append(vi)
            known.add(vi.name)
    del graph.value_info[:]
    graph.value_info.extend(infos)
    for opset in fused.opset_import:
        if opset.domain not in {o.domain for o in proto.opset_import}:
            proto.opset_import.append(opset)
    model = mir.from_proto(proto, base_dir=work, shapes=True)  # external weights read from *work*
    mir.save(model, out_path)
    return CpuFusion(len(region), len(new_nodes), _count_ops(region), _count_ops(new_nodes))


def _rename_refs(node, mapping: dict[str, str]) -> None:
    """Rename a node's inputs and outputs, and its subgraphs' reads of outer names, by *mapping*."""
    if not mapping:
        return
    node.input[:] = [mapping.get(i, i) for i in node.input]
    node.output[:] = [mapping.get(o, o) for o in node.output]
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
        for g in graphs:
            inner = {o for n in g.node for o in n.output} | {i.name for i in g.input} | {t.name for t in g.initializer}
            outer = {k: v for k, v in mapping.items() if k not in inner}
            for n in g.node:
                _rename_refs(n, outer)
            for o in g.output:
                o.name = outer.get(o.name, o.name)


def _all_inputs(node) -> list[str]:
    """A node's inputs, including the outer-scope names its subgraphs read."""
    names = list(node.input)
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
        for g in graphs:
            inner_defined = {o for n in g.node for o in n.output} | {i.name for i in g.input} | \
                {t.name for t in g.initializer}
            for n in g.node:
                names.extend(i for i in _all_inputs(n) if i and i not in inner_defined)
    return names
