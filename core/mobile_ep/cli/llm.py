"""``mobile-ep llm``: a decoder export to the prefill and decode graphs an app ships (:mod:`mobile_ep.llm`)."""

from __future__ import annotations

import json
import pathlib

import click

from mobile_ep.textsafe import escape

__all__ = ["llm"]


@click.command()
@click.argument("model", type=click.Path(path_type=pathlib.Path))
@click.option("--ep", "ep", metavar="NAME[,NAME...]",
              help="Backend(s) each graph is checked with, comma-separated (default: all installed).")
@click.option("--context", type=click.IntRange(min=2), default=512, show_default=True,
              help="Tokens the KV cache holds: prompt and generated tokens together.")
@click.option("--prefill", type=click.IntRange(min=1), default=128, show_default=True,
              help="Tokens the prefill graph takes at once (a longer prompt runs it several times).")
@click.option("-o", "--output", type=click.Path(path_type=pathlib.Path), default=pathlib.Path("out"),
              show_default=True, help="Folder for the graphs, weights.data, the app files and report.json.")
@click.option("-O", "--option", "option_values", multiple=True, metavar="KEY=VALUE",
              help="Backend option BACKEND.KEY=VALUE, repeatable, as for check.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Greedy-decode fixed prompts through the written graphs and through the export (CPU EP): "
                   "the tokens must be equal.")
@click.option("--steps", type=click.IntRange(min=1), default=32, show_default=True,
              help="Tokens generated per prompt by --verify.")
@click.option("--max-part-mb", type=click.FloatRange(min=0, min_open=True), default=1024, show_default=True,
              help="Split the graphs into parts of whole layers, each with at most this many MB of weights "
                   "(what one HTP session is given; docs/llm.md), chained by hidden states.")
@click.option("--compile", "compile_", is_flag=True,
              help="Compile the graphs for the one --ep backend. qnn (with onnxruntime-qnn): both graphs into "
                   "EPContext models sharing one context binary, in <ep>/ (each graph also compiled alone and run on "
                   "the HTP simulator); others: each graph through `convert --compile`, in <ep>/<graph>/.")
@click.option("--quantize", type=click.Choice(["w8a16", "w4a16"]),
              help="Also write the graphs quantized (16-bit activations; 8-bit weights, or 4-bit in blocks of 32), "
                   "which are then checked and compiled; needs --calibration or --random.")
@click.option("--calibration", type=click.Path(path_type=pathlib.Path), metavar="FOLDER",
              help="Calibration prompts for --quantize: token-id files (.npy, .json or .txt), one prompt each.")
@click.option("--random", "random_prompts", type=click.IntRange(min=1), default=None, metavar="N",
              help="Calibrate --quantize on N random prompts instead: a smoke test, not an accuracy measure.")
@click.option("--cost-model/--no-cost-model", default=True, show_default=True,
              help="Judge partitions by estimated compute saved versus bytes copied (as convert does).")
@click.option("--json", "as_json", is_flag=True, help="Print report.json's content on stdout.")
@click.pass_context
def llm(ctx: click.Context, model: pathlib.Path, ep: str | None, context: int, prefill: int, output: pathlib.Path,
        option_values: tuple[str, ...], verify: bool, steps: int, max_part_mb: float, compile_: bool,
        quantize: str | None, calibration: pathlib.Path | None, random_prompts: int | None, cost_model: bool,
        as_json: bool) -> None:
    """Turn a decoder export with a KV cache into the fixed-shape graphs an app runs on an NPU.

    MODEL is an ONNX decoder with inputs input_ids, attention_mask, position_ids and
    past_key_values.N.key/value, outputs logits and present.N.key/value (see docs/llm.md for the
    torch.onnx export of a transformers model: mobile_ep.llm.torch_export).

    \b
    Writes into the output folder (atomically: an old complete set or the new one):
      prefill.onnx    --prefill new tokens over a KV cache of (context - prefill) slots
      decode.onnx     one new token over a KV cache of (context - 1) slots
      weights.data    the weights of both graphs, each tensor stored once
      Generate.kt     the prefill/decode loop with the KV-cache update for onnxruntime-android,
      Generate.swift  and for onnxruntime-objc, in the graphs' own input and output names
      report.json     partitions of each graph per backend, weights, verification
    Weights over --max-part-mb split the model into parts of whole layers: partN.prefill.onnx,
    partN.decode.onnx, partN.weights.data, the hidden states passed from part to part (the loops
    run the parts in order).
    The mask (context long) says which cache slots hold tokens; the presents hold the new tokens'
    keys and values only, which the app writes into its cache (the loops show how).
    Shapes are fixed, so onnxruntime folds the shape and mask-index arithmetic; each graph is then checked
    as `mobile-ep check` does (as it is, and after convert's rewrites).

    \b
    Examples:
      mobile-ep llm decoder.onnx --ep qnn --context 512 --prefill 128 -o out/
      mobile-ep llm decoder.onnx --ep coreml,nnapi --context 1024 --prefill 64 --json
      mobile-ep llm decoder.onnx --ep coreml --compile -o out/
      mobile-ep llm decoder.onnx --ep qnn --quantize w8a16 --calibration prompts/ --compile -o out/
    """
    from mobile_ep import progress
    from mobile_ep.llm.build import build
    from mobile_ep.options import Options

    state = ctx.obj
    options = Options.build(ep, options=option_values, strict=state.strict, cost_model=cost_model)
    reporter = progress.TerminalProgress(plan=["graphs", "check_prefill", "check_decode"]
                                         + (["verify"] if verify else []) + ["app"]) \
        if progress.wants_progress(quiet=state.quiet) else None
    with progress.reporting(reporter):
        result = build(model, ep, context=context, prefill=prefill, output=output, verify=verify, steps=steps,
                       max_part_mb=max_part_mb, compile=compile_, quantize=quantize, calibration=calibration,
                       random_prompts=random_prompts or 0, plugins=state.plugins, options=options)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    elif not state.quiet:
        click.echo(escape(text(result)), nl=False)


def text(result) -> str:
    """The report in a few lines: the files, each graph's partitions per backend, the verification."""
    lines = [f"{result.model}: context {result.context}, prefill {result.prefill}, {result.interface.layers} layers, "
             f"KV cache [1, {result.interface.kv_heads}, *, {result.interface.head_dim}] {result.interface.kv_dtype}"]
    if len(result.weights) > 1:
        lines.append(f"  split into {len(result.weights)} parts of at most {result.max_part_mb:g} MB of weights, "
                     "chained by hidden states")
    for weights in result.weights:
        lines.append(f"  {weights.file}: {weights.bytes / 2**20:.1f} MB, {weights.tensors} tensors shared by both "
                     f"graphs ({weights.unshared_bytes / 2**20:.1f} MB if stored per graph)")
    for graph in result.graphs.values():
        lines.append(f"  {graph.file}: seq {graph.seq}, past {graph.past}, {graph.nodes} nodes")
        for backend, report in graph.backends.items():
            after = graph.after_convert.get(backend)
            line = (f"    {backend}: {report.supported_nodes}/{report.nodes} nodes in {len(report.partitions)} "
                    f"partition(s)")
            if after is not None:
                line += f"; after convert: {after.supported_nodes}/{after.nodes} in {len(after.partitions)}"
                left = sorted({r.op for r in after.unsupported})
                if left:
                    line += f" (CPU: {', '.join(left)})"
            lines.append(line)
        if graph.compiled is not None:
            c = graph.compiled
            lines.append(f"    compiled for {c['backend']}: {c['compiled_nodes']}/{c['nodes']} nodes in "
                         f"{c['compiled_partitions']} partition(s), verified within {c['max_abs_error']:.2g} "
                         + (f"({c['folder']}/)" if c["folder"] else "(compiled alone, to run it here)"))
    if result.quantized is not None:
        lines.extend("  " + line for line in result.quantized.text().splitlines())
    for shared in result.shared:
        lines.extend("  " + line for line in shared.text().splitlines())
    for functions in result.functions:
        lines.append("  " + functions.text())
    if result.generations:
        worst = max((max(g.logits_error, default=0.0) for g in result.generations), default=0.0)
        equal = sum(g.tokens == g.reference for g in result.generations)
        lines.append(f"  verified: {equal}/{len(result.generations)} prompts, {result.steps} greedy tokens each, "
                     f"equal to the export's on the CPU EP (logits within {worst:.2g})")
    for what, file in result.app.items():
        lines.append(f"  {what}: {file}")
    lines.append(f"wrote {result.output}/report.json\n")
    return "\n".join(lines)
