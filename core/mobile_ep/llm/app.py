"""What an app runs next to the graphs: a Kotlin and a Swift generation loop in the graphs' own names.

The loops do what :mod:`mobile_ep.llm.generate` does (and what the verification runs): prefill the prompt,
then one decode step per token, writing each step's new key and value into one slot of a cache that never
moves.  A graph is run as its parts in order (one part when the model is not split: ``prefill.onnx`` and
``decode.onnx``), one session per part and graph: the first part takes ``input_ids``, each later one the hidden
state the part before it returns (``hidden_states.N``), the last returns the logits; each part takes the mask,
the positions and its own layers' cache, and its presents are written into those layers' slots before the next
part runs.  Every name, shape and size in the loops is read from the written graphs (:func:`read`).
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping, Sequence

import onnx_ir as ir

from mobile_ep.errors import ModelError
from mobile_ep.llm.decoder import Interface

__all__ = ["Loop", "LoopPart", "read", "write", "kotlin", "swift", "KOTLIN_FILE", "SWIFT_FILE"]

KOTLIN_FILE = "Generate.kt"
SWIFT_FILE = "Generate.swift"


@dataclasses.dataclass(frozen=True)
class LoopPart:
    """One part of the model as the loops run it."""

    #: The file names of the part's prefill and decode graphs.
    prefill: str
    decode: str
    #: The layers (first, end) whose cache the part reads and writes.
    layers: tuple[int, int]
    #: What the part takes besides its layers' cache, in order: ``input_ids`` (the first part) or the hidden state
    #: the part before it hands on, then the mask and the positions (those its graphs take).
    inputs: tuple[str, ...]
    #: The hidden state it hands to the next part; ``None`` for the last part, which returns the logits.
    hands_on: str | None


@dataclasses.dataclass(frozen=True)
class Loop:
    """What the loops are written from: the decoder's names and the sizes of its written graphs."""

    face: Interface
    context: int
    prefill: int
    kv_heads: int
    head_dim: int
    parts: tuple[LoopPart, ...]

    @property
    def fed(self) -> tuple[str, ...]:
        """The inputs the loops make (the token ids, the mask, the positions): those some part takes."""
        taken = {name for part in self.parts for name in part.inputs}
        face = self.face
        return tuple(n for n in (face.input_ids, face.attention_mask, face.position_ids) if n and n in taken)


def _dims(value: ir.Value) -> list[int | None]:
    return [d if isinstance(d, int) else None for d in value.shape] if value.shape is not None else []


def _graph(face: Interface, path: pathlib.Path, seq: int, context: int) -> tuple[tuple[int, int], tuple[str, ...], str,
                                                                                  tuple[int, int]]:
    """The layers (first, end), the inputs besides the cache, the output besides the presents and the cache's
    (kv_heads, head_dim) of the graph at *path* (*seq* new tokens over a cache of ``context - seq`` slots)."""
    graph = ir.load(path).graph  # (the weights are not read)
    inputs = {v.name: _dims(v) for v in graph.inputs if not v.is_initializer()}
    outputs = {v.name: _dims(v) for v in graph.outputs}
    layers = [i for i, pair in enumerate(face.past) if any(name in inputs for name in pair)]
    if not layers or layers != list(range(layers[0], layers[-1] + 1)):
        raise ModelError(f"{path}: its cache inputs are not those of a run of layers: {sorted(inputs)}")
    first, end = layers[0], layers[-1] + 1
    cache = [name for pair in face.past[first:end] for name in pair]
    presents = [name for pair in face.present[first:end] for name in pair]
    missing = [n for n in cache if n not in inputs] + [n for n in presents if n not in outputs]
    if missing:
        raise ModelError(f"{path}: no cache input or present {missing[0]!r} of its layers {first}..{end - 1}")
    geometry = set()
    for name, dims, slots in [*((n, inputs[n], context - seq) for n in cache), *((n, outputs[n], seq) for n in presents)]:
        if len(dims) != 4 or dims[0] != 1 or dims[2] != slots or None in dims:
            raise ModelError(f"{path}: {name!r} is {dims}, not [1, kv_heads, {slots}, head_dim]")
        geometry.add((dims[1], dims[3]))
    if len(geometry) != 1:
        raise ModelError(f"{path}: its layers' caches differ in heads or head size: {sorted(geometry)}")
    (kv_heads, head_dim), = geometry
    rest = [n for n in inputs if n not in cache]
    roles = [n for n in (face.input_ids, face.attention_mask, face.position_ids) if n and n in rest]
    hidden = [n for n in rest if n not in roles]
    if len(hidden) + (face.input_ids in roles) != 1:
        raise ModelError(f"{path}: it takes neither {face.input_ids!r} nor one hidden state alone: {sorted(rest)}")
    sizes = {face.input_ids: [1, seq], face.attention_mask: [1, context], face.position_ids: [1, seq]}
    wrong = [n for n in roles if inputs[n] != sizes[n]]
    if wrong:
        raise ModelError(f"{path}: input {wrong[0]!r} is {inputs[wrong[0]]}, not {sizes[wrong[0]]}")
    out = [n for n in outputs if n not in presents]
    if len(out) != 1:
        raise ModelError(f"{path}: outputs besides the presents are not one (the logits or a hidden state): {out}")
    return (first, end), tuple(hidden + roles), out[0], (kv_heads, head_dim)


def read(face: Interface, written: Sequence[Mapping[str, pathlib.Path]], context: int, prefill: int) -> Loop:
    """The :class:`Loop` of the written graphs (per part in order: its ``prefill`` and ``decode`` paths), each
    checked against *context* and *prefill*: its cache and presents, its inputs, the hidden state handed on."""
    parts, geometry = [], set()
    for paths in written:
        seen = {}
        for name, seq in (("prefill", prefill), ("decode", 1)):
            layers, inputs, out, cache = _graph(face, pathlib.Path(paths[name]), seq, context)
            seen[name] = (layers, inputs, out)
            geometry.add(cache)
        if seen["prefill"] != seen["decode"]:
            raise ModelError(f"{paths['decode']}: its layers, inputs or outputs {seen['decode']} are not its prefill "
                             f"graph's {seen['prefill']}")
        layers, inputs, out = seen["prefill"]
        parts.append(LoopPart(pathlib.Path(paths["prefill"]).name, pathlib.Path(paths["decode"]).name, layers, inputs,
                              None if out == face.logits else out))
    for k, part in enumerate(parts):
        before = parts[k - 1] if k else None
        starts = face.input_ids if before is None else before.hands_on
        layer = before.layers[1] if before else 0
        if part.inputs[0] != starts or part.layers[0] != layer:
            raise ModelError(f"{written[k]['prefill']}: part {k + 1} does not take {starts!r} and the cache from layer "
                             f"{layer} on (it takes {part.inputs[0]!r} and layers {part.layers[0]}..{part.layers[1] - 1})")
    if parts[-1].hands_on is not None or parts[-1].layers[1] != face.layers or len(geometry) != 1:
        raise ModelError(f"{written[-1]['prefill']}: the last part does not end at the logits after layer "
                         f"{face.layers - 1}, or the parts' caches differ in shape")
    (kv_heads, head_dim), = geometry
    return Loop(face, context, prefill, kv_heads, head_dim, tuple(parts))


def _quoted(names) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _header(loop: Loop, runtime: str) -> str:
    files = [f for part in loop.parts for f in (part.prefill, part.decode)]
    if len(loop.parts) == 1:
        return f"// Greedy generation with {files[0]} and {files[1]} (written by mobile-ep llm): {runtime}."
    return (f"// Greedy generation with the model's {len(loop.parts)} parts, {files[0]} .. {files[-1]} (written by "
            f"mobile-ep llm):\n// {runtime}.  Each graph runs as its parts in order, one session each: the first part "
            "takes the token ids,\n// each later one the hidden state the part before it hands on, the last returns "
            "the logits; each part\n// reads and writes its own layers' cache.")


def _kotlin_part(part: LoopPart) -> str:
    hands_on = f'"{part.hands_on}"' if part.hands_on else "null"
    return (f'    ModelPart("{part.prefill}", "{part.decode}", {part.layers[0]} until {part.layers[1]},\n'
            f'              arrayOf({_quoted(part.inputs)}), {hands_on})')


def kotlin(loop: Loop) -> str:
    """The loop for onnxruntime-android (``ai.onnxruntime``)."""
    face = loop.face
    feed = {face.input_ids: ("ids(padded)", "ids(longArrayOf(token.toLong()))"),
            face.attention_mask: ("ids(mask)", "ids(mask)"),
            face.position_ids: ("ids(LongArray(PREFILL) { it.toLong() })", "ids(longArrayOf(filled.toLong()))")}
    prefill_feed = ",\n".join(f'            "{n}" to {feed[n][0]}' for n in loop.fed)
    decode_feed = ",\n".join(f'            "{n}" to {feed[n][1]}' for n in loop.fed)
    table = ",\n".join(_kotlin_part(p) for p in loop.parts)
    return f'''{_header(loop, "onnxruntime-android")}
// The KV cache has CONTEXT - 1 slots per layer; slot i holds token i's key and value, the mask says which are
// filled.  Create the sessions with the QNN EP (or NNAPI) as the app's other sessions.
import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import java.nio.FloatBuffer
import java.nio.LongBuffer

const val CONTEXT = {loop.context}
const val PREFILL = {loop.prefill}
const val KV_HEADS = {loop.kv_heads}
const val HEAD_DIM = {loop.head_dim}
val PAST_KEYS = arrayOf({_quoted(k for k, _ in face.past)})
val PAST_VALUES = arrayOf({_quoted(v for _, v in face.past)})
val PRESENT_KEYS = arrayOf({_quoted(k for k, _ in face.present)})
val PRESENT_VALUES = arrayOf({_quoted(v for _, v in face.present)})

/** A part of the model: its prefill and decode graph, the layers whose cache it reads and writes (indices into
 *  PAST_KEYS and the others), what it takes besides them (the token ids, or the hidden state the part before it
 *  hands on; the mask, the positions) and the hidden state it hands on (null: the last part, giving the logits). */
class ModelPart(val prefillGraph: String, val decodeGraph: String, val layers: IntRange, val inputs: Array<String>,
                val handsOn: String?)

val PARTS = arrayOf(
{table}
)

/** [prefillSessions] and [decodeSessions]: one session per part, in the order of PARTS (its prefillGraph and
 *  decodeGraph). */
class Generator(private val env: OrtEnvironment, private val prefillSessions: List<OrtSession>,
                private val decodeSessions: List<OrtSession>) {{
    // cache[layer]: [1, KV_HEADS, CONTEXT - 1, HEAD_DIM], keys then values
    private val keys = Array(PAST_KEYS.size) {{ FloatArray(KV_HEADS * (CONTEXT - 1) * HEAD_DIM) }}
    private val values = Array(PAST_VALUES.size) {{ FloatArray(KV_HEADS * (CONTEXT - 1) * HEAD_DIM) }}
    private var filled = 0

    init {{
        require(prefillSessions.size == PARTS.size && decodeSessions.size == PARTS.size) {{
            "one prefill and one decode session per part: ${{PARTS.size}} of each"
        }}
    }}

    private fun ids(v: LongArray) = OnnxTensor.createTensor(env, LongBuffer.wrap(v), longArrayOf(1, v.size.toLong()))
    private fun cache(data: FloatArray, length: Int) =
        OnnxTensor.createTensor(env, FloatBuffer.wrap(data, 0, KV_HEADS * length * HEAD_DIM),
                                longArrayOf(1, KV_HEADS.toLong(), length.toLong(), HEAD_DIM.toLong()))

    /** Copies the first [count] slots of a present [1, KV_HEADS, length, HEAD_DIM] into the cache at slot [to]. */
    private fun store(present: FloatArray, length: Int, into: FloatArray, count: Int, to: Int) {{
        for (h in 0 until KV_HEADS) {{
            System.arraycopy(present, h * length * HEAD_DIM, into, (h * (CONTEXT - 1) + to) * HEAD_DIM, count * HEAD_DIM)
        }}
    }}

    private fun argmax(logits: FloatArray, row: Int, vocab: Int): Int {{
        var best = row * vocab
        for (i in row * vocab until (row + 1) * vocab) if (logits[i] > logits[best]) best = i
        return best - row * vocab
    }}

    /** Runs one graph's [sessions] in the order of PARTS: each part is fed the inputs it names (from [feed], or the
     *  hidden state the part before it returned) and its layers' cache ([past]: a layer's key and value); [keep]
     *  takes each of its layers' presents before the next part runs.  Returns the last part's result (the logits),
     *  for the caller to close; the tensors of [feed] are closed. */
    private fun chain(sessions: List<OrtSession>, feed: Map<String, OnnxTensor>,
                      past: (Int) -> Pair<OnnxTensor, OnnxTensor>, keep: (OrtSession.Result, Int) -> Unit): OrtSession.Result {{
        var previous: OrtSession.Result? = null
        try {{
            for ((k, part) in PARTS.withIndex()) {{
                val inputs = HashMap<String, OnnxTensor>()
                for (name in part.inputs) inputs[name] = feed[name] ?: previous!!.get(name).get() as OnnxTensor
                val caches = part.layers.map {{ past(it) }}
                for ((j, i) in part.layers.withIndex()) {{
                    inputs[PAST_KEYS[i]] = caches[j].first
                    inputs[PAST_VALUES[i]] = caches[j].second
                }}
                val result = try {{ sessions[k].run(inputs) }} finally {{ caches.forEach {{ it.first.close(); it.second.close() }} }}
                previous?.close()  // (the part before: its hidden state was fed to this part)
                previous = result
                for (i in part.layers) keep(result, i)
            }}
            return previous!!
        }} catch (e: Exception) {{
            previous?.close()
            throw e
        }} finally {{
            feed.values.forEach {{ it.close() }}
        }}
    }}

    /** The first new token after [prompt] (1 to PREFILL tokens). */
    fun prefill(prompt: LongArray): Int {{
        require(prompt.size in 1..PREFILL) {{ "a prompt of 1 to $PREFILL tokens" }}
        val padded = LongArray(PREFILL).also {{ prompt.copyInto(it) }}
        val mask = LongArray(CONTEXT).also {{ it.fill(1, CONTEXT - PREFILL, CONTEXT - PREFILL + prompt.size) }}
        val past = FloatArray(KV_HEADS * (CONTEXT - PREFILL) * HEAD_DIM)  // (zeros, masked out)
        val feed = mapOf(
{prefill_feed}
        )
        chain(prefillSessions, feed, {{ cache(past, CONTEXT - PREFILL) to cache(past, CONTEXT - PREFILL) }}) {{ result, i ->
            // the prompt's keys and values (the present's first prompt.size slots) into slots 0 until prompt.size
            store(floats(result.get(PRESENT_KEYS[i]).get()), PREFILL, keys[i], prompt.size, 0)
            store(floats(result.get(PRESENT_VALUES[i]).get()), PREFILL, values[i], prompt.size, 0)
        }}.use {{ result ->
            filled = prompt.size
            val logits = floats(result.get("{face.logits}").get())
            return argmax(logits, prompt.size - 1, logits.size / PREFILL)
        }}
    }}

    /** The token after [token], which goes in at position `filled`. */
    fun decode(token: Int): Int {{
        check(filled < CONTEXT - 1) {{ "the context of $CONTEXT tokens is full" }}
        val mask = LongArray(CONTEXT).also {{ it.fill(1, 0, filled); it[CONTEXT - 1] = 1 }}
        val feed = mapOf(
{decode_feed}
        )
        chain(decodeSessions, feed, {{ cache(keys[it], CONTEXT - 1) to cache(values[it], CONTEXT - 1) }}) {{ result, i ->
            // the new token's key and value (the present's one slot) into slot `filled`
            store(floats(result.get(PRESENT_KEYS[i]).get()), 1, keys[i], 1, filled)
            store(floats(result.get(PRESENT_VALUES[i]).get()), 1, values[i], 1, filled)
        }}.use {{ result ->
            filled += 1
            val logits = floats(result.get("{face.logits}").get())
            return argmax(logits, 0, logits.size)
        }}
    }}

    fun generate(prompt: LongArray, steps: Int): List<Int> {{
        val tokens = mutableListOf(prefill(prompt))
        while (tokens.size < steps) tokens.add(decode(tokens.last()))
        return tokens
    }}

    private fun floats(value: ai.onnxruntime.OnnxValue): FloatArray {{
        val buffer = (value as OnnxTensor).floatBuffer
        return FloatArray(buffer.remaining()).also {{ buffer.get(it) }}
    }}
}}
'''


def _swift_part(part: LoopPart) -> str:
    hands_on = f'"{part.hands_on}"' if part.hands_on else "nil"
    return (f'    ModelPart(prefillGraph: "{part.prefill}", decodeGraph: "{part.decode}", '
            f'layers: {part.layers[0]}..<{part.layers[1]},\n'
            f'              inputs: [{_quoted(part.inputs)}], handsOn: {hands_on}),\n')


def swift(loop: Loop) -> str:
    """The loop for onnxruntime-objc (``onnxruntime_objc``, CocoaPods/SwiftPM)."""
    face = loop.face
    feed = {face.input_ids: ("try ids(prompt + [Int64](repeating: 0, count: prefill - prompt.count))",
                             "try ids([Int64(token)])"),
            face.attention_mask: ("try ids(mask)", "try ids(mask)"),
            face.position_ids: ("try ids((0..<Int64(prefill)).map { $0 })", "try ids([Int64(filled)])")}
    prefill_feed = "".join(f'        inputs["{n}"] = {feed[n][0]}\n' for n in loop.fed)
    decode_feed = "".join(f'        inputs["{n}"] = {feed[n][1]}\n' for n in loop.fed)
    return f'''{_header(loop, "onnxruntime-objc")}
// The KV cache has context - 1 slots per layer; slot i holds token i's key and value, the mask says which are
// filled.  Create the sessions with the Core ML EP as the app's other sessions.
import Foundation
import onnxruntime_objc

let context = {loop.context}
let prefill = {loop.prefill}
let kvHeads = {loop.kv_heads}
let headDim = {loop.head_dim}
let pastKeys = [{_quoted(k for k, _ in face.past)}]
let pastValues = [{_quoted(v for _, v in face.past)}]
let presentKeys = [{_quoted(k for k, _ in face.present)}]
let presentValues = [{_quoted(v for _, v in face.present)}]

/// A part of the model: its prefill and decode graph, the layers whose cache it reads and writes (indices into
/// `pastKeys` and the others), what it takes besides them (the token ids, or the hidden state the part before it
/// hands on; the mask, the positions) and the hidden state it hands on (nil: the last part, giving the logits).
struct ModelPart {{
    let prefillGraph: String
    let decodeGraph: String
    let layers: Range<Int>
    let inputs: [String]
    let handsOn: String?
}}

let parts = [
{"".join(_swift_part(p) for p in loop.parts)}]

final class Generator {{
    let prefillSessions: [ORTSession]
    let decodeSessions: [ORTSession]
    var keys = Array(repeating: [Float](repeating: 0, count: kvHeads * (context - 1) * headDim), count: pastKeys.count)
    var values = Array(repeating: [Float](repeating: 0, count: kvHeads * (context - 1) * headDim), count: pastKeys.count)
    var filled = 0

    /// `prefillSessions` and `decodeSessions`: one session per part, in the order of `parts` (its prefillGraph and
    /// decodeGraph).
    init(prefillSessions: [ORTSession], decodeSessions: [ORTSession]) {{
        precondition(prefillSessions.count == parts.count && decodeSessions.count == parts.count,
                     "one prefill and one decode session per part: \\(parts.count) of each")
        self.prefillSessions = prefillSessions
        self.decodeSessions = decodeSessions
    }}

    func ids(_ v: [Int64]) throws -> ORTValue {{
        try ORTValue(tensorData: NSMutableData(data: v.withUnsafeBufferPointer {{ Data(buffer: $0) }}),
                     elementType: .int64, shape: [1, NSNumber(value: v.count)])
    }}

    func cache(_ data: [Float], _ length: Int) throws -> ORTValue {{
        let used = Array(data[0..<(kvHeads * length * headDim)])
        return try ORTValue(tensorData: NSMutableData(data: used.withUnsafeBufferPointer {{ Data(buffer: $0) }}),
                            elementType: .float,
                            shape: [1, NSNumber(value: kvHeads), NSNumber(value: length), NSNumber(value: headDim)])
    }}

    func floats(_ value: ORTValue) throws -> [Float] {{
        let data = try value.tensorData() as Data
        return data.withUnsafeBytes {{ Array($0.bindMemory(to: Float.self)) }}
    }}

    /// Copies the first `count` slots of a present [1, kvHeads, length, headDim] into a cache at slot `to`.
    func store(_ present: [Float], length: Int, _ into: inout [Float], count: Int, to: Int) {{
        for h in 0..<kvHeads {{
            let source = h * length * headDim
            let target = (h * (context - 1) + to) * headDim
            into.replaceSubrange(target..<(target + count * headDim), with: present[source..<(source + count * headDim)])
        }}
    }}

    func argmax(_ logits: [Float], row: Int, vocab: Int) -> Int {{
        let slice = logits[(row * vocab)..<((row + 1) * vocab)]
        return slice.indices.max {{ slice[$0] < slice[$1] }}! - row * vocab
    }}

    /// Runs one graph's `sessions` in the order of `parts`: each part is fed the inputs it names (from `feed`, or
    /// the hidden state the part before it returned) and its layers' cache (`past`: a layer's key and value);
    /// `keep` takes each of its layers' presents before the next part runs.  Returns the last part's outputs.
    func chain(_ sessions: [ORTSession], _ feed: [String: ORTValue], past: (Int) throws -> (ORTValue, ORTValue),
               keep: ([String: ORTValue], Int) throws -> Void) throws -> [String: ORTValue] {{
        var previous: [String: ORTValue] = [:]
        for (k, part) in parts.enumerated() {{
            var fed: [String: ORTValue] = [:]
            for name in part.inputs {{ fed[name] = feed[name] ?? previous[name]! }}
            for i in part.layers {{
                let (key, value) = try past(i)
                fed[pastKeys[i]] = key
                fed[pastValues[i]] = value
            }}
            let names = Set([part.handsOn ?? "{face.logits}"] + Array(presentKeys[part.layers]) + Array(presentValues[part.layers]))
            let result = try sessions[k].run(withInputs: fed, outputNames: names, runOptions: nil)
            for i in part.layers {{ try keep(result, i) }}
            previous = result
        }}
        return previous
    }}

    /// The first new token after `prompt` (1 to `prefill` tokens).
    func prefillPrompt(_ prompt: [Int64]) throws -> Int {{
        precondition(1 <= prompt.count && prompt.count <= prefill, "a prompt of 1 to \\(prefill) tokens")
        var mask = [Int64](repeating: 0, count: context)
        for i in (context - prefill)..<(context - prefill + prompt.count) {{ mask[i] = 1 }}
        let past = [Float](repeating: 0, count: kvHeads * (context - prefill) * headDim)  // (zeros, masked out)
        var inputs: [String: ORTValue] = [:]
{prefill_feed}        let result = try chain(prefillSessions, inputs,
                               past: {{ _ in try (cache(past, context - prefill), cache(past, context - prefill)) }}) {{ out, i in
            // the prompt's keys and values (the present's first prompt.count slots) into slots 0..<prompt.count
            store(try floats(out[presentKeys[i]]!), length: prefill, &keys[i], count: prompt.count, to: 0)
            store(try floats(out[presentValues[i]]!), length: prefill, &values[i], count: prompt.count, to: 0)
        }}
        filled = prompt.count
        let logits = try floats(result["{face.logits}"]!)
        return argmax(logits, row: prompt.count - 1, vocab: logits.count / prefill)
    }}

    /// The token after `token`, which goes in at position `filled`.
    func decodeToken(_ token: Int) throws -> Int {{
        precondition(filled < context - 1, "the context of \\(context) tokens is full")
        var mask = [Int64](repeating: 0, count: context)
        for i in 0..<filled {{ mask[i] = 1 }}
        mask[context - 1] = 1
        var inputs: [String: ORTValue] = [:]
{decode_feed}        let result = try chain(decodeSessions, inputs,
                               past: {{ i in try (cache(keys[i], context - 1), cache(values[i], context - 1)) }}) {{ out, i in
            // the new token's key and value (the present's one slot) into slot `filled`
            store(try floats(out[presentKeys[i]]!), length: 1, &keys[i], count: 1, to: filled)
            store(try floats(out[presentValues[i]]!), length: 1, &values[i], count: 1, to: filled)
        }}
        filled += 1
        let logits = try floats(result["{face.logits}"]!)
        return argmax(logits, row: 0, vocab: logits.count)
    }}

    func generate(_ prompt: [Int64], steps: Int) throws -> [Int] {{
        var tokens = [try prefillPrompt(prompt)]
        while tokens.count < steps {{ tokens.append(try decodeToken(tokens.last!)) }}
        return tokens
    }}
}}
'''


def write(folder: pathlib.Path, face: Interface, written: Sequence[Mapping[str, pathlib.Path]], context: int,
          prefill: int) -> dict[str, str]:
    """Write the Kotlin and Swift loops of the *written* graphs (per part in order: its ``prefill`` and ``decode``
    paths) into *folder*; their names by language."""
    loop = read(face, written, context, prefill)
    (folder / KOTLIN_FILE).write_text(kotlin(loop))
    (folder / SWIFT_FILE).write_text(swift(loop))
    return {"kotlin": KOTLIN_FILE, "swift": SWIFT_FILE}
