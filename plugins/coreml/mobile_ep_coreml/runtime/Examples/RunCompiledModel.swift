// How an iOS app runs a model converted with
//
//     mobile-ep convert model.onnx --ep coreml --compile -o out/
//
// next to ONNX Runtime. Add to the app target:
//   - out/{{mobile_ep:bundle}}/   (plan.json, segment_*.onnx, coreml_*.mlpackage) as a folder reference,
//   - this package (MobileEPCoreML) and ONNX Runtime's Swift package.
//
// Two ways to run it:
//   A. CompiledModelRunner: the partitions mobile-ep compiled run on Core ML as written (.mlpackage), the
//      nodes between them on ONNX Runtime's CPU EP. Nothing is decided on the device.
//   B. Plain ONNX Runtime with its CoreML EP on out/{{mobile_ep:ort}} (the EP-aware model): ORT builds
//      the Core ML model on the device at session creation, from the nodes its EP claims.
// Feed every input of the written model: {{mobile_ep:inputs}}.

import CoreML
import Foundation
import MobileEPCoreML
import onnxruntime_objc

func predict(data: [Float]) throws -> [Float] {
    // A. The compiled partitions (Core ML compute units as chosen at compile time, or override them).
    guard let bundle = Bundle.main.url(forResource: "{{mobile_ep:bundle}}", withExtension: nil) else {
        throw MobileEPError.invalidBundle("{{mobile_ep:bundle}} is not in the app bundle")
    }
    let runner = try CompiledModelRunner(bundle: bundle, computeUnits: .all)
    let input = Tensor.float32(data, shape: [{{mobile_ep:input_shape}}])
    let outputs = try runner.run(["{{mobile_ep:input}}": input])
    return outputs["{{mobile_ep:output}}"]!.floats()
}

func predictWithOrtCoreMLEP(data: [Float]) throws -> [Float] {
    // B. The EP-aware model through ORT's own CoreML execution provider (for comparison).
    guard let path = Bundle.main.path(forResource: "{{mobile_ep:ort}}", ofType: nil) else {
        throw MobileEPError.invalidBundle("{{mobile_ep:ort}} is not in the app bundle")
    }
    let env = try ORTEnv(loggingLevel: .warning)
    let options = try ORTSessionOptions()
    let coreml = ORTCoreMLExecutionProviderOptions()
    coreml.createMLProgram = true
    try options.appendCoreMLExecutionProvider(with: coreml)
    let session = try ORTSession(env: env, modelPath: path, sessionOptions: options)
    let input = try ORTValue(tensorData: NSMutableData(data: data.withUnsafeBufferPointer { Data(buffer: $0) }),
                             elementType: .float, shape: [{{mobile_ep:input_shape}}])
    let outputs = try session.run(withInputs: ["{{mobile_ep:input}}": input], outputNames: ["{{mobile_ep:output}}"],
                                  runOptions: nil)
    return try Tensor(ortValue: outputs["{{mobile_ep:output}}"]!).floats()
}
