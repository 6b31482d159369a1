"""Node data for Google's Model Explorer: where each node of the model runs, as an overlay on its graph.

``mobile-ep check/convert MODEL --node-data FILE.json`` writes one node-data file per backend in Model
Explorer's ``GraphNodeData`` format (the schema of ``model_explorer.node_data_builder``): for each node of
the original model, keyed by its name (the node id Model Explorer's ONNX adapter, ``model-explorer-onnx``,
gives it) or, for a node without a name, by its first output's name (node data may name a node by an
output tensor), a label — the backend and partition that take it, or
``CPU: <the reason>`` — and a colour.  Open it with::

    model-explorer model.onnx --extensions=model_explorer_onnx --node_data_paths=FILE.json

The report describes the graph an ONNX Runtime session partitions (after its basic optimizations, and
with ``--shape``/``--dim`` or ``convert`` after those changes), so each original node is matched to the
node of that graph with its name, or else to the node that now produces one of its outputs; nodes that
onnxruntime folded away are labelled so.  When ``model_explorer`` is installed (``pip install
ai-edge-model-explorer``), the file is built with its own ``node_data_builder``; otherwise the same JSON is
written from the dataclasses below, which follow that schema.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from collections.abc import Mapping, Sequence

from mobile_ep import model_io
from mobile_ep.reports.model import BackendReport, CheckReport, ConvertReport

__all__ = ["node_labels", "graph_node_data", "write_node_data", "node_data_paths"]

#: Partition colours (a partition's index picks one, in turn), and the CPU's.
PARTITION_COLOURS = ("#8dd3c7", "#80b1d3", "#b3de69", "#fdb462", "#bebada", "#fccde5", "#ccebc5", "#ffed6f")
CPU_COLOUR = "#fb8072"
FOLDED_COLOUR = "#d9d9d9"


def _labels(report: BackendReport) -> dict[str, tuple[str, str]]:
    """(label, colour) of each node of the graph *report* describes, by node name."""
    result: dict[str, tuple[str, str]] = {}
    count = len(report.partitions)
    for i, partition in enumerate(report.partitions):
        label = f"{report.backend}: partition {i + 1} of {count} ({len(partition.nodes)} nodes)"
        colour = PARTITION_COLOURS[i % len(PARTITION_COLOURS)]
        for name in partition.nodes:
            result[name] = (label, colour)
    for item in report.unsupported:
        reason = item.reason[len(item.op) + 2:] if item.reason.startswith(item.op + ": ") else item.reason
        result[item.node] = (f"CPU: {reason}", CPU_COLOUR)
    return result


def node_labels(report: BackendReport, model) -> dict[str, tuple[str, str]]:
    """(label, colour) of every node of the main graph of *model* (the original ``onnx.ModelProto``), keyed
    by name as Model Explorer's ONNX adapter keys nodes; an unnamed node by its first output's name."""
    labels = _labels(report)
    produced_by: dict[str, str] = {}
    if report.graph is not None:
        for node in report.graph.nodes:
            for output in node.outputs:
                produced_by[output] = node.name
    result = {}
    for index, node in enumerate(model.graph.node):
        key = node.name or next((o for o in node.output if o), f"<node_{index}>")
        found = labels.get(node.name) if node.name else None
        if found is None:  # merged (a fusion) or renamed: the node that produces its output now
            owner = next((produced_by[o] for o in node.output if o in produced_by), None)
            found = labels.get(owner) if owner is not None else None
        if found is None and node.name:  # rewritten by convert into nodes named after it
            parts = [label for name, label in labels.items() if name.startswith(node.name + "/")]
            if parts:
                label, colour = parts[0]
                found = (f"rewritten by mobile-ep convert; {label}", colour)
        if found is None:
            found = ("removed by onnxruntime's optimizations (folded into a constant or fused)", FOLDED_COLOUR)
        result[key] = found
    return result


@dataclasses.dataclass
class _Result:
    """``node_data_builder.NodeDataResult``: a value (here a label) and its colours."""

    value: str
    bgColor: str | None = None  # noqa: N815 -- Model Explorer's field names
    textColor: str | None = None  # noqa: N815


@dataclasses.dataclass
class _GraphNodeData:
    """``node_data_builder.GraphNodeData`` (the fields mobile-ep fills)."""

    results: dict[str, _Result]
    name: str | None = None
    showExpandedSummaryOnGroupNode: bool = True  # noqa: N815
    showLabelCountColumnsInChildrenStatsTable: bool = True  # noqa: N815

    def to_json_string(self, indent: int | None = None) -> str:
        def drop_none(value):
            if isinstance(value, dict):
                return {k: drop_none(v) for k, v in value.items() if v is not None}
            return value

        return json.dumps(drop_none(dataclasses.asdict(self)), indent=indent)


def graph_node_data(labels: Mapping[str, tuple[str, str]], name: str):
    """The node data of *labels* (:func:`node_labels`), built with ``model_explorer.node_data_builder``
    when it is installed (else with the same schema's dataclasses here)."""
    try:
        from model_explorer import node_data_builder as ndb
    except ImportError:
        results = {key: _Result(label, colour) for key, (label, colour) in labels.items()}
        return _GraphNodeData(results, name)
    results = {key: ndb.NodeDataResult(value=label, bgColor=colour) for key, (label, colour) in labels.items()}
    return ndb.GraphNodeData(results=results, name=name, showExpandedSummaryOnGroupNode=True,
                             showLabelCountColumnsInChildrenStatsTable=True)


def _subjects(result: CheckReport | ConvertReport) -> list[BackendReport]:
    """The views written: convert's partitioned model; check's fixed model with --shape/--dim, else as is."""
    if isinstance(result, ConvertReport):
        return [result.check]
    if result.shape_changes:
        return [result.after_convert.get(name, report) for name, report in result.backends.items()]
    return list(result.backends.values())


def node_data_paths(path: str | os.PathLike, backends: Sequence[str]) -> list[pathlib.Path]:
    """*path* for one backend; ``<stem>.<backend>.json`` beside it for several."""
    path = pathlib.Path(path)
    if len(backends) == 1:
        return [path]
    return [path.with_name(f"{path.stem}.{name}{path.suffix or '.json'}") for name in backends]


def write_node_data(result: CheckReport | ConvertReport, path: str | os.PathLike) -> list[pathlib.Path]:
    """Write the node-data file(s) of *result* (recorded under ``nodegraph.recording()``); returns the paths."""
    model = model_io.read_proto(result.model)
    subjects = _subjects(result)
    written = []
    for report, target in zip(subjects, node_data_paths(path, [r.backend for r in subjects]), strict=True):
        data = graph_node_data(node_labels(report, model), f"mobile-ep {report.backend}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with model_io.atomic_path(target) as tmp:
            tmp.write_text(data.to_json_string(indent=2) + "\n", encoding="utf-8")
        written.append(target)
    return written
