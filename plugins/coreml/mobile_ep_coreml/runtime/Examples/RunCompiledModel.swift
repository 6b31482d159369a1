// How an iOS app runs a model converted with
//
//     mobile-ep convert model.onnx --ep coreml --compile -o out/
//
// next to ONNX Runtime. Add to the app target:
//   - out/model.coreml.compiled/   (plan.json, segment_*.onnx, coreml_*.mlpackage) as a folder reference,
//   - this package (MobileEPCoreML) and ONNX Runtime's Swift package.
//
// Two ways to run it:
//   A. CompiledModelRunner: the partitions mobile-ep compiled run on Core ML as written (.mlpackage), the
//      nodes between them on ONNX Runtime's CPU EP. Nothing is decided on the device.
//   B. Plain ONNX Runtime with its CoreML EP on out/model.coreml.ort (the EP-aware model): ORT builds
//      the Core ML model on the device at session creation, from the nodes its EP claims.

import CoreML
import Foundation
import MobileEPCoreML
import onnxruntime_objc

func classify(pixels: [Float]) throws -> [Float] {
    // A. The compiled partitions (Core ML compute units as chosen at compile time, or override them).
    guard let bundle = Bundle.main.url(forResource: "model.coreml.compiled", withExtension: nil) else {
        throw MobileEPError.invalidBundle("model.coreml.compiled is not in the app bundle")
    }
    let runner = try CompiledModelRunner(bundle: bundle, computeUnits: .all)
    let input = Tensor.float32(pixels, shape: [1, 3, 224, 224])
    let outputs = try runner.run([runner.plan.inputs[0].name: input])
    return outputs[runner.plan.outputs[0].name]!.floats()
}

func classifyWithOrtCoreMLEP(pixels: [Float]) throws -> [Float] {
    // B. The EP-aware model through ORT's own CoreML execution provider (for comparison).
    guard let path = Bundle.main.path(forResource: "model.coreml", ofType: "ort") else {
        throw MobileEPError.invalidBundle("model.coreml.ort is not in the app bundle")
    }
    let env = try ORTEnv(loggingLevel: .warning)
    let options = try ORTSessionOptions()
    let coreml = ORTCoreMLExecutionProviderOptions()
    coreml.createMLProgram = true
    try options.appendCoreMLExecutionProvider(with: coreml)
    let session = try ORTSession(env: env, modelPath: path, sessionOptions: options)
    let input = try ORTValue(tensorData: NSMutableData(data: pixels.withUnsafeBufferPointer { Data(buffer: $0) }),
                             elementType: .float, shape: [1, 3, 224, 224])
    let inputName = try session.inputNames()[0]
    let outputName = try session.outputNames()[0]
    let outputs = try session.run(withInputs: [inputName: input], outputNames: [outputName], runOptions: nil)
    return try Tensor(ortValue: outputs[outputName]!).floats()
}
