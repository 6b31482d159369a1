// swift-tools-version:5.7
// The mobile-ep Core ML runtime adapter: runs the partitions `mobile-ep convert --compile --ep coreml`
// wrote (.mlpackage files) with Core ML, and the rest of the model with ONNX Runtime.
import PackageDescription

let package = Package(
    name: "MobileEPCoreML",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "MobileEPCoreML", targets: ["MobileEPCoreML"]),
    ],
    dependencies: [
        // ONNX Runtime's Objective-C API (module onnxruntime_objc) for the CPU segments.
        .package(url: "https://github.com/microsoft/onnxruntime-swift-package-manager", from: "1.20.0"),
    ],
    targets: [
        .target(
            name: "MobileEPCoreML",
            dependencies: [.product(name: "onnxruntime", package: "onnxruntime-swift-package-manager")],
            path: "Sources/MobileEPCoreML"
        ),
    ]
)
