// Runs a QNN EPContext model (written by `mobile-ep convert --ep qnn --compile`) with ONNX Runtime Mobile's
// QNN execution provider on a Snapdragon phone.
//
// Gradle: implementation("com.microsoft.onnxruntime:onnxruntime-android-qnn:<version>") - a version whose QNN
// SDK has the major version recorded in the EPContext node's ep_sdk_version attribute.
// Files: copy model.qnn.compiled.onnx and model.qnn.compiled_qnn.bin into one folder (e.g. filesDir); the
// model refers to the .bin by a path relative to itself.
package ai.mobileep.qnn

import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import java.io.File
import java.nio.FloatBuffer

class QnnEpContextRunner(modelFile: File) : AutoCloseable {
    private val env: OrtEnvironment = OrtEnvironment.getEnvironment()
    private val session: OrtSession

    init {
        require(modelFile.exists()) { "missing ${modelFile.path}" }
        val options = OrtSession.SessionOptions()
        // The binary was compiled for one SoC (soc_model) and HTP architecture; on the device the HTP backend
        // loads it as it is. Without the QNN EP nothing of the EPContext node can run: fail instead of
        // falling back to the CPU.
        options.addConfigEntry("session.disable_cpu_ep_fallback", "1")
        options.addQnn(mapOf("backend_type" to "htp"))
        session = env.createSession(modelFile.path, options)
    }

    /** Runs the model on one float input; returns the first output as floats. */
    fun run(input: FloatArray, shape: LongArray): FloatArray {
        val name = session.inputNames.first()
        OnnxTensor.createTensor(env, FloatBuffer.wrap(input), shape).use { tensor ->
            session.run(mapOf(name to tensor)).use { result ->
                @Suppress("UNCHECKED_CAST")
                val output = result[0] as OnnxTensor
                val buffer = output.floatBuffer
                return FloatArray(buffer.remaining()).also { buffer.get(it) }
            }
        }
    }

    override fun close() {
        session.close()
    }
}
