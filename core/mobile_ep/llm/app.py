"""What an app runs next to the graphs: a Kotlin and a Swift generation loop in the graphs' own names.

The loops do what :mod:`mobile_ep.llm.generate` does (and what the verification runs): prefill the prompt,
then one decode step per token, writing each step's new key and value into one slot of a cache that never
moves.  They are written with the graphs' real input and output names, shapes and sizes.
"""

from __future__ import annotations

import pathlib

from mobile_ep.llm.decoder import Interface

__all__ = ["write", "kotlin", "swift", "KOTLIN_FILE", "SWIFT_FILE"]

KOTLIN_FILE = "Generate.kt"
SWIFT_FILE = "Generate.swift"


def _quoted(names) -> str:
    return ", ".join(f'"{name}"' for name in names)


def kotlin(face: Interface, context: int, prefill: int) -> str:
    """The loop for onnxruntime-android (``ai.onnxruntime``)."""
    past_keys = [k for k, _ in face.past]
    past_values = [v for _, v in face.past]
    present_keys = [k for k, _ in face.present]
    present_values = [v for _, v in face.present]
    position = (f'            "{face.position_ids}" to ids(LongArray(PREFILL) {{ it.toLong() }}),\n'
                if face.position_ids else "")
    position_step = (f'            "{face.position_ids}" to ids(longArrayOf(filled.toLong())),\n'
                     if face.position_ids else "")
    return f'''// Greedy generation with prefill.onnx and decode.onnx (written by mobile-ep llm): onnxruntime-android.
// The KV cache has CONTEXT - 1 slots per layer; slot i holds token i's key and value, the mask says which are
// filled.  Create the sessions with the QNN EP (or NNAPI) as the app's other sessions.
import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import java.nio.FloatBuffer
import java.nio.LongBuffer

const val CONTEXT = {context}
const val PREFILL = {prefill}
const val KV_HEADS = {face.kv_heads}
const val HEAD_DIM = {face.head_dim}
val PAST_KEYS = arrayOf({_quoted(past_keys)})
val PAST_VALUES = arrayOf({_quoted(past_values)})
val PRESENT_KEYS = arrayOf({_quoted(present_keys)})
val PRESENT_VALUES = arrayOf({_quoted(present_values)})

class Generator(private val env: OrtEnvironment, private val prefillSession: OrtSession,
                private val decodeSession: OrtSession) {{
    private val slot = KV_HEADS * HEAD_DIM
    // cache[layer]: [1, KV_HEADS, CONTEXT - 1, HEAD_DIM], keys then values
    private val keys = Array(PAST_KEYS.size) {{ FloatArray(KV_HEADS * (CONTEXT - 1) * HEAD_DIM) }}
    private val values = Array(PAST_VALUES.size) {{ FloatArray(KV_HEADS * (CONTEXT - 1) * HEAD_DIM) }}
    private var filled = 0

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

    /** The first new token after [prompt] (at most PREFILL tokens). */
    fun prefill(prompt: LongArray): Int {{
        val padded = LongArray(PREFILL).also {{ prompt.copyInto(it) }}
        val mask = LongArray(CONTEXT).also {{ it.fill(1, CONTEXT - PREFILL, CONTEXT - PREFILL + prompt.size) }}
        val past = FloatArray(KV_HEADS * (CONTEXT - PREFILL) * HEAD_DIM)
        val inputs = mutableMapOf(
            "{face.input_ids}" to ids(padded),
            "{face.attention_mask}" to ids(mask),
{position}        )
        for (i in PAST_KEYS.indices) {{
            inputs[PAST_KEYS[i]] = cache(past, CONTEXT - PREFILL)
            inputs[PAST_VALUES[i]] = cache(past, CONTEXT - PREFILL)
        }}
        prefillSession.run(inputs).use {{ result ->
            for (i in PRESENT_KEYS.indices) {{
                store(floats(result.get(PRESENT_KEYS[i]).get()), PREFILL, keys[i], prompt.size, 0)
                store(floats(result.get(PRESENT_VALUES[i]).get()), PREFILL, values[i], prompt.size, 0)
            }}
            filled = prompt.size
            val logits = floats(result.get("{face.logits}").get())
            return argmax(logits, prompt.size - 1, logits.size / PREFILL)
        }}
    }}

    /** The token after [token], which goes in at position `filled`. */
    fun decode(token: Int): Int {{
        check(filled < CONTEXT - 1) {{ "the context of $CONTEXT tokens is full" }}
        val mask = LongArray(CONTEXT).also {{ it.fill(1, 0, filled); it[CONTEXT - 1] = 1 }}
        val inputs = mutableMapOf(
            "{face.input_ids}" to ids(longArrayOf(token.toLong())),
            "{face.attention_mask}" to ids(mask),
{position_step}        )
        for (i in PAST_KEYS.indices) {{
            inputs[PAST_KEYS[i]] = cache(keys[i], CONTEXT - 1)
            inputs[PAST_VALUES[i]] = cache(values[i], CONTEXT - 1)
        }}
        decodeSession.run(inputs).use {{ result ->
            for (i in PRESENT_KEYS.indices) {{  // the new token's key and value (the present's one slot)
                store(floats(result.get(PRESENT_KEYS[i]).get()), 1, keys[i], 1, filled)
                store(floats(result.get(PRESENT_VALUES[i]).get()), 1, values[i], 1, filled)
            }}
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


def swift(face: Interface, context: int, prefill: int) -> str:
    """The loop for onnxruntime-objc (``onnxruntime_objc``, CocoaPods/SwiftPM)."""
    position = (f'        inputs["{face.position_ids}"] = try ids((0..<Int64(prefill)).map {{ $0 }})\n'
                if face.position_ids else "")
    position_step = f'        inputs["{face.position_ids}"] = try ids([Int64(filled)])\n' if face.position_ids else ""
    return f'''// Greedy generation with prefill.onnx and decode.onnx (written by mobile-ep llm): onnxruntime-objc.
// The KV cache has context - 1 slots per layer; slot i holds token i's key and value, the mask says which are
// filled.  Create the sessions with the Core ML EP as the app's other sessions.
import Foundation
import onnxruntime_objc

let context = {context}
let prefill = {prefill}
let kvHeads = {face.kv_heads}
let headDim = {face.head_dim}
let pastKeys = [{_quoted(k for k, _ in face.past)}]
let pastValues = [{_quoted(v for _, v in face.past)}]
let presentKeys = [{_quoted(k for k, _ in face.present)}]
let presentValues = [{_quoted(v for _, v in face.present)}]

final class Generator {{
    let prefillSession: ORTSession
    let decodeSession: ORTSession
    var keys = Array(repeating: [Float](repeating: 0, count: kvHeads * (context - 1) * headDim), count: pastKeys.count)
    var values = Array(repeating: [Float](repeating: 0, count: kvHeads * (context - 1) * headDim), count: pastKeys.count)
    var filled = 0

    init(prefillSession: ORTSession, decodeSession: ORTSession) {{
        self.prefillSession = prefillSession
        self.decodeSession = decodeSession
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

    /// The first new token after `prompt` (at most `prefill` tokens).
    func prefill(_ prompt: [Int64]) throws -> Int {{
        var mask = [Int64](repeating: 0, count: context)
        for i in (context - prefill)..<(context - prefill + prompt.count) {{ mask[i] = 1 }}
        let past = [Float](repeating: 0, count: kvHeads * (context - prefill) * headDim)
        var inputs: [String: ORTValue] = [:]
        inputs["{face.input_ids}"] = try ids(prompt + [Int64](repeating: 0, count: prefill - prompt.count))
        inputs["{face.attention_mask}"] = try ids(mask)
{position}        for i in 0..<pastKeys.count {{
            inputs[pastKeys[i]] = try cache(past, context - prefill)
            inputs[pastValues[i]] = try cache(past, context - prefill)
        }}
        let names = Set(["{face.logits}"] + presentKeys + presentValues)
        let result = try prefillSession.run(withInputs: inputs, outputNames: names, runOptions: nil)
        for i in 0..<presentKeys.count {{
            store(try floats(result[presentKeys[i]]!), length: prefill, &keys[i], count: prompt.count, to: 0)
            store(try floats(result[presentValues[i]]!), length: prefill, &values[i], count: prompt.count, to: 0)
        }}
        filled = prompt.count
        let logits = try floats(result["{face.logits}"]!)
        return argmax(logits, row: prompt.count - 1, vocab: logits.count / prefill)
    }}

    /// The token after `token`, which goes in at position `filled`.
    func decode(_ token: Int) throws -> Int {{
        precondition(filled < context - 1, "the context of \\(context) tokens is full")
        var mask = [Int64](repeating: 0, count: context)
        for i in 0..<filled {{ mask[i] = 1 }}
        mask[context - 1] = 1
        var inputs: [String: ORTValue] = [:]
        inputs["{face.input_ids}"] = try ids([Int64(token)])
        inputs["{face.attention_mask}"] = try ids(mask)
{position_step}        for i in 0..<pastKeys.count {{
            inputs[pastKeys[i]] = try cache(keys[i], context - 1)
            inputs[pastValues[i]] = try cache(values[i], context - 1)
        }}
        let names = Set(["{face.logits}"] + presentKeys + presentValues)
        let result = try decodeSession.run(withInputs: inputs, outputNames: names, runOptions: nil)
        for i in 0..<presentKeys.count {{  // the new token's key and value (the present's one slot)
            store(try floats(result[presentKeys[i]]!), length: 1, &keys[i], count: 1, to: filled)
            store(try floats(result[presentValues[i]]!), length: 1, &values[i], count: 1, to: filled)
        }}
        filled += 1
        let logits = try floats(result["{face.logits}"]!)
        return argmax(logits, row: 0, vocab: logits.count)
    }}

    func generate(_ prompt: [Int64], steps: Int) throws -> [Int] {{
        var tokens = [try prefill(prompt)]
        while tokens.count < steps {{ tokens.append(try decode(tokens.last!)) }}
        return tokens
    }}
}}
'''


def write(folder: pathlib.Path, face: Interface, context: int, prefill: int) -> dict[str, str]:
    """Write the Kotlin and Swift loops into *folder*; their names by language."""
    (folder / KOTLIN_FILE).write_text(kotlin(face, context, prefill))
    (folder / SWIFT_FILE).write_text(swift(face, context, prefill))
    return {"kotlin": KOTLIN_FILE, "swift": SWIFT_FILE}
