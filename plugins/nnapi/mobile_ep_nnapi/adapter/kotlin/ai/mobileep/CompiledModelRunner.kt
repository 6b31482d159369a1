package ai.mobileep

import ai.mobileep.nnapi.NnapiPartition
import ai.onnxruntime.OnnxJavaType
import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import org.json.JSONArray
import org.json.JSONObject
import java.io.File
import java.nio.ByteBuffer

/**
 * Runs a compiled model next to ONNX Runtime: the `<model>.nnapi.compiled/` bundle written by
 * `mobile-ep convert --ep nnapi --compile`.  Its `plan.json` lists the steps in order; a CPU segment
 * (`segment_<k>.onnx`) runs in an ORT session (CPU EP), a partition (`nnapi_<n>.nnapi`) runs with NNAPI
 * through [NnapiPartition].  Values pass between steps by their ONNX names, as in the original model.
 *
 *     val runner = CompiledModelRunner(File(context.filesDir, "{{mobile_ep:bundle}}"))
 *     val outputs = runner.run(mapOf("{{mobile_ep:input}}" to OnnxTensor.createTensor(env, floats, longArrayOf({{mobile_ep:input_shape}}))))
 *     val result = outputs.getValue("{{mobile_ep:output}}")
 *
 * The map holds one tensor per input of the written model: {{mobile_ep:inputs}}.
 *
 * `mobile_ep.runtime.run_compiled` executes the same plan on a workstation (with the NNAPI emulator).
 */
class CompiledModelRunner(
    bundle: File,
    private val env: OrtEnvironment = OrtEnvironment.getEnvironment(),
    sessionOptions: OrtSession.SessionOptions = OrtSession.SessionOptions(),
) : AutoCloseable {
    private sealed class Step(val inputs: List<String>, val outputs: List<String>)
    private class Segment(val session: OrtSession, inputs: List<String>, outputs: List<String>) : Step(inputs, outputs)
    private class Partition(
        val partition: NnapiPartition,
        inputs: List<String>,
        outputs: List<String>,
        val outputTypes: Map<String, Pair<OnnxJavaType, LongArray>>,
    ) : Step(inputs, outputs)

    private val steps: List<Step>
    val outputNames: List<String>

    init {
        val plan = JSONObject(File(bundle, "plan.json").readText())
        require(plan.getString("format") == "mobile-ep-plan/1") { "unsupported plan ${plan.getString("format")}" }
        outputNames = names(plan.getJSONArray("outputs"))
        val entries = plan.getJSONArray("steps")
        steps = (0 until entries.length()).map { i ->
            val step = entries.getJSONObject(i)
            val file = File(bundle, step.getString("file"))
            when (step.getString("kind")) {
                "onnx" -> Segment(
                    env.createSession(file.readBytes(), sessionOptions),
                    strings(step.getJSONArray("inputs")),
                    strings(step.getJSONArray("outputs")),
                )
                "partition" -> {
                    require(step.getString("backend") == "nnapi") { "not an NNAPI partition: ${step.getString("backend")}" }
                    val outputs = step.getJSONArray("outputs")
                    val types = (0 until outputs.length()).associate { k ->
                        val spec = outputs.getJSONObject(k)
                        spec.getString("name") to Pair(javaType(spec.getString("dtype")), shape(spec.getJSONArray("shape")))
                    }
                    Partition(NnapiPartition(file.readBytes()), names(step.getJSONArray("inputs")), names(outputs), types)
                }
                else -> throw IllegalArgumentException("unknown step kind ${step.getString("kind")}")
            }
        }
    }

    /** Runs every step; returns the model's outputs (the caller closes them). */
    fun run(inputs: Map<String, OnnxTensor>): Map<String, OnnxTensor> {
        val values = HashMap<String, OnnxTensor>(inputs)
        val owned = ArrayList<AutoCloseable>()
        try {
            for (step in steps) {
                when (step) {
                    is Segment -> {
                        val result = step.session.run(step.inputs.associateWith { values.getValue(it) })
                        owned.add(result)
                        for (name in step.outputs) values[name] = result.get(name).get() as OnnxTensor
                    }
                    is Partition -> {
                        val buffers = step.inputs.filter { it in values }.associateWith { values.getValue(it).byteBuffer }
                        val results = step.partition.run(buffers)
                        for (name in step.outputs) {
                            val (type, dims) = step.outputTypes.getValue(name)
                            // an output with no elements is not part of the NNAPI model
                            val buffer = results[name] ?: ByteBuffer.allocateDirect(0)
                            val tensor = OnnxTensor.createTensor(env, buffer, dims, type)
                            owned.add(tensor)
                            values[name] = tensor
                        }
                    }
                }
            }
            // Hand the outputs over as tensors of their own, then release the intermediates.
            return outputNames.associateWith { name ->
                val tensor = values.getValue(name)
                OnnxTensor.createTensor(env, tensor.byteBuffer, tensor.info.shape, tensor.info.type)
            }
        } finally {
            owned.forEach { it.close() }
        }
    }

    override fun close() {
        for (step in steps) {
            when (step) {
                is Segment -> step.session.close()
                is Partition -> step.partition.close()
            }
        }
    }

    private companion object {
        fun strings(array: JSONArray) = (0 until array.length()).map { array.getString(it) }
        fun names(specs: JSONArray) = (0 until specs.length()).map { specs.getJSONObject(it).getString("name") }
        fun shape(dims: JSONArray) = LongArray(dims.length()) { dims.getLong(it) }
        fun javaType(dtype: String) = when (dtype) {
            "FLOAT" -> OnnxJavaType.FLOAT
            "UINT8" -> OnnxJavaType.UINT8
            "INT8" -> OnnxJavaType.INT8
            "INT32" -> OnnxJavaType.INT32
            "INT64" -> OnnxJavaType.INT64
            "BOOL" -> OnnxJavaType.BOOL
            "FLOAT16" -> OnnxJavaType.FLOAT16
            else -> throw IllegalArgumentException("unsupported tensor type $dtype")
        }
    }
}
