package ai.mobileep.nnapi

import java.nio.ByteBuffer
import java.nio.ByteOrder

/**
 * One partition compiled by mobile-ep (`mobile-ep convert --ep nnapi --compile`): a serialized NNAPI
 * model, e.g. the `nnapi_0.nnapi` file of the `<model>.nnapi.compiled/` bundle, built and compiled with the
 * NNAPI C API by libmobile_ep_nnapi.so (the C++ adapter) once, then run as often as needed.
 *
 * Inputs and outputs are raw tensors in ONNX layout (NCHW), native byte order, by the ONNX names the
 * partition has in the original model ([inputNames], [outputNames]).
 */
class NnapiPartition(blob: ByteArray) : AutoCloseable {
    private var handle: Long = nativeCreate(blob)

    val inputNames: List<String> = nativeNames(handle, false).toList()
    val outputNames: List<String> = nativeNames(handle, true).toList()
    val inputBytes: LongArray = nativeSizes(handle, false)
    val outputBytes: LongArray = nativeSizes(handle, true)

    /** One inference: every input by name (any ByteBuffer; copied to a direct one if needed). */
    fun run(inputs: Map<String, ByteBuffer>): Map<String, ByteBuffer> {
        check(handle != 0L) { "the partition is closed" }
        val ins = Array(inputNames.size) { i ->
            direct(inputs[inputNames[i]] ?: throw IllegalArgumentException("missing input ${inputNames[i]}"))
        }
        val outs = Array(outputNames.size) { i ->
            ByteBuffer.allocateDirect(outputBytes[i].toInt()).order(ByteOrder.nativeOrder())
        }
        nativeRun(handle, ins, outs)
        return outputNames.zip(outs).toMap()
    }

    override fun close() {
        if (handle != 0L) {
            nativeClose(handle)
            handle = 0L
        }
    }

    private fun direct(buffer: ByteBuffer): ByteBuffer {
        if (buffer.isDirect) return buffer
        val copy = ByteBuffer.allocateDirect(buffer.remaining()).order(ByteOrder.nativeOrder())
        copy.put(buffer.duplicate())
        copy.rewind()
        return copy
    }

    companion object {
        init {
            System.loadLibrary("mobile_ep_nnapi")
        }

        @JvmStatic private external fun nativeCreate(blob: ByteArray): Long
        @JvmStatic private external fun nativeClose(handle: Long)
        @JvmStatic private external fun nativeNames(handle: Long, outputs: Boolean): Array<String>
        @JvmStatic private external fun nativeSizes(handle: Long, outputs: Boolean): LongArray
        @JvmStatic private external fun nativeRun(handle: Long, inputs: Array<ByteBuffer>, outputs: Array<ByteBuffer>)
    }
}
