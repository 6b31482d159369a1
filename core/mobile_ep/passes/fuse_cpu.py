"""Fuse the CPU part: onnxruntime's full optimizations for the nodes no backend keeps.

The EP-aware model keeps every node a backend claims as a plain ONNX op (ORT's fusions, such as
``Conv`` + ``Relu`` into ``com.microsoft:FusedConv``, would make them unclaimable) while the rest gets
ORT's extended-level fusions.  :func:`fuse_and_write` writes the model and makes sure fusing did not cost
the backend a node it keeps: the written file is partitioned again as ORT would see it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import re

import onnx_ir as ir

from mobile_ep import model_io as mir
from mobile_ep import sessions
from mobile_ep.contract import Backend
from mobile_ep.options import Options
from mobile_ep.passes import fold_constants
from mobile_ep.passes.partition import PartitionPass
from mobile_ep.passes.tidy import tidied

__all__ = ["CpuFusion", "fuse_cpu_nodes", "fuse_and_write", "partition_written", "save_work_copy", "weights_folder"]

log = logging.getLogger(__name__)
#: The prefix of names the CPU fusion gives.
_PREFIX = "cpu_fused/"


def partition_written(path: pathlib.Path, backend: Backend, work: pathlib.Path, strict: bool | Options, *,
                      beside: bool = False) -> tuple[PartitionPass, ir.Model]:
    """What *backend* takes of a written model, after the basic optimizations every ORT session applies;
    its partitions judged as *strict* (the run's :class:`Options`, or only whether a backend's failure is an
    error) asks: the cost model, ``max_partitions``, ``min_nodes``.  *beside*: *path* is a work file, the
    optimized model is written next to it (its weights referenced, not written again), else into *work*."""
    work.mkdir(parents=True, exist_ok=True)
    optimized = fold_constants.ort_optimized(path, work, inspected=True, backends=[backend],  # (our own file)
                                             at=path.with_name(f"{path.stem}.seen.onnx") if beside else None)
    # (read once per command while unchanged: an option variant's conversion may have written the same file;
    # the partition below is an analysis, the model is not changed)
    model = sessions.derived(("written", sessions.file_stamp(optimized)), [optimized],
                             lambda: fold_constants.load_optimized(optimized))
    partition = PartitionPass(backend, strict if isinstance(strict, Options) else Options(strict=strict))
    partition(model)
    return partition, model


def fuse_and_write(model: ir.Model, partition: PartitionPass, options: Options, target: pathlib.Path,
                   work: pathlib.Path, *, by_reference: bool = False
                   ) -> tuple[CpuFusion | None, tuple[PartitionPass, ir.Model] | None]:
    """Write *model* to *target*, the CPU part fused where that keeps what *partition* found.

    *by_reference*: the files are work copies (check's after-convert result), read only by onnxruntime: the
    weights *model* reads from files in *target*'s folder stay there and are referenced, not copied
    (:func:`save_work_copy`).

    First try: fuse every node outside the partitions the cost model keeps (fusing a rejected partition's
    nodes can make them unclaimable, which realizes the cost model's decision on ORT's EP).  If that costs a
    kept partition a node or adds partitions, second try: only the nodes no partition holds.  Else the model
    is written unfused.  Returns the fusion (None: none) and, when deciding took it, what the backend takes
    of the written file (:func:`partition_written`); else the caller works that out when it needs it.
    """
    backend = partition.backend
    assert partition.proposal is not None
    _rename_reused_initializers(model)
    claimed = {n.name or "" for p in partition.proposal.partitions for n in p.nodes}
    kept = partition.kept_nodes()
    total = len(model.graph)
    save = tidied(save_work_copy if by_reference else mir.save)  # (no dead weights or opsets written)
    if not options.fuse_cpu or len(claimed) == total:
        save(model, target)
        return None, None
    unfused = work / f"{target.stem}.unfused.onnx"  # (work files named after the target: several share *work*)
    if by_reference:  # (written once per model in a command: an option variant's conversion may write it again)
        sessions.derived(("unfused", id(model), len(model.graph)), [unfused],  # (the model held: its id stays its own)
                         lambda: (save_work_copy(model, unfused), model))
    else:
        mir.save(model, unfused, external_data=unfused.name + ".data")  # (a work file: weights streamed beside it)
    source = sessions.file_stamp(unfused)
    for attempt, keep in enumerate([kept, claimed] if kept != claimed else [claimed]):
        fusion = sessions.derived(("cpu_fused", source, frozenset(keep), by_reference), [target],
                                  lambda keep=keep: fuse_cpu_nodes(unfused, keep, target, work, save=save))
        if fusion is None:
            continue
        written, written_model = partition_written(target, backend, work / f"{target.stem}.fused{attempt}", options,
                                                   beside=by_reference)
        assert written.proposal is not None
        now_claimed = {n.name for p in written.proposal.partitions for n in p.nodes}
        if keep <= now_claimed and len(written.proposal.partitions) <= len(partition.proposal.partitions):
            return fusion, (written, written_model)
        log.info("CPU fusion of %d nodes would change what %s takes; trying less", total - len(keep), backend.name)
    save(mir.load(unfused, check=False), target)
    return None, None


def weights_folder(model: ir.Model, default: pathlib.Path) -> pathlib.Path:
    """The folder of the files *model* reads its external weights from, if there is exactly one; else *default*.
    Work files written there with :func:`save_work_copy` reference those weights instead of copying them."""
    folders = _weight_folders(model)
    return folders.pop() if len(folders) == 1 else default


def save_work_copy(model: ir.Model, path: pathlib.Path) -> pathlib.Path:
    """Write *model* as a work file that references, rather than copies, the weights it reads from files:
    those files must be in *path*'s folder (external data is located relative to the model), else they are
    copied beside it.  For files only onnxruntime reads, during the run."""
    if _weight_folders(model) - {path.parent.resolve()}:
        return mir.save(model, path, external_data=path.name + ".data")  # (weights from elsewhere: a copy)
    mir.prepare_for_save(model)
    with mir.atomic_path(path) as tmp:
        ir.save(model, tmp)
    return path


def _weight_folders(model: ir.Model) -> set[pathlib.Path]:
    return {pathlib.Path(t.base_dir).resolve() for g in model.graphs() for v in g.initializers.values()
            if isinstance(t := v.const_value, ir.ExternalTensor)}


#: Initializer names onnxruntime's fusions give what they add (MatMulAddFusion's Reshape shapes) from a node-name
#: generator, which does not see initializers: a model already holding one cannot be loaded where the fusion
#: applies again ("Attempt to replace the existing tensor").
_REUSED_NAMES = re.compile(r"gemm_(input|output)_shape(_token_\d+)?")


def _rename_reused_initializers(model: ir.Model) -> None:
    """Give initializers named as onnxruntime names the tensors its fusions add (left by the basic-level
    optimization of the input) a name of ours."""
    for graph in model.graphs():
        taken = set(graph.initializers)
        for value in list(graph.initializers.values()):
            if value.name and _REUSED_NAMES.fullmatch(value.name):
                new, count = f"{_PREFIX}{value.name}", 0
                while new in taken:
                    count += 1
                    new = f"{_PREFIX}{value.name}_{count}"
                taken.add(new)
                value.name = new


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
                   workdir: str | os.PathLike, *, save=None) -> CpuFusion | None:
    """Apply onnxruntime's full (extended-level) optimizations to the nodes NOT named in *keep*.

    The nodes outside *keep* (those no backend claims) are cut out as a sub-model, optimized by
    onnxruntime at level "all" (its fusions: FusedConv, FusedGemm, GELU, LayerNorm, ...; NCHWc
    disabled, as for any ARM target) and spliced back; the kept nodes stay plain ONNX ops for the EP.
    Writes the result to *out_path* (with *save*: :func:`mobile_ep.model_io.save` unless told) and returns what
    changed, or ``None`` if nothing could be fused.
    """
    import onnx
    import onnx.utils

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
    stem = pathlib.Path(out_path).stem
    sub_path, opt_path = work / f"{stem}.cpu_region.onnx", work / f"{stem}.cpu_region.opt.onnx"
    onnx.save(sub, str(sub_path))
    so = sessions.options(level="all", write=opt_path, lean=True, config={
        "session.optimized_model_external_initializers_file_name": opt_path.name + ".data",
        "session.optimized_model_external_initializers_min_size_in_bytes": "1048576"})
    try:
        sessions.optimize_into(sub_path, so, opt_path, disabled_optimizers=["NchwcTransformer"])
    except Exception:
        return None
    fused = onnx.load(str(opt_path), load_external_data=False)
    boundary = set(inputs) | set(outputs)
    prefix = _PREFIX
    kept_nodes = [n for n in graph.node if n.name in keep]
    # Names the fused part defines that the kept part also uses (onnxruntime may reuse names) are
    # renamed, everywhere they are read, subgraphs included; other names stay as they were.
    taken = {name for n in kept_nodes for name in (*_all_inputs(n), *n.output)} | {n.name for n in kept_nodes}
    defined = {o for n in fused.graph.node for o in n.output} | {t.name for t in fused.graph.initializer}
    clashes = {name: prefix + name for name in (defined & taken) - boundary if name}
    # Initializers onnxruntime made while fusing (``gemm_input_shape``, ...) are renamed too: a session on
    # the written model runs the same fusions on the kept nodes and adds those names again, which
    # onnxruntime refuses ("Attempt to replace the existing tensor") when the name is already taken.
    sub_names = {t.name for t in sub.graph.initializer} | {o for n in sub.graph.node for o in n.output} | \
        {i.name for i in sub.graph.input}
    in_use = taken | defined | initializer_names | set(clashes.values())
    for t in fused.graph.initializer:
        if t.name in sub_names or t.name in clashes:
            continue
        new_name, count = prefix + t.name, 0
        while new_name in in_use:
            count += 1
            new_name = f"{prefix}{t.name}_{count}"
        clashes[t.name] = new_name
        in_use.add(new_name)

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
    (save or mir.save)(model, pathlib.Path(out_path))
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
