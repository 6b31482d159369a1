/*
 * ENPU runtime adapter: loads and runs mobile-ep-example-npu payloads (format "enpu/1") on the device.
 *
 * The app gets a payload from the compiled model (the bytes of a CompiledPartition's data), loads it
 * once, and runs it for each inference with float32 NCHW buffers in the payload's input order.  The
 * vendor's driver executes the ops: link an implementation of enpu_driver_execute(), or build with
 * -DENPU_STUB_DRIVER for the recording stub used in tests.
 *
 * The format is documented in mobile_ep_example/enpu.py; this parser checks every count, index and
 * size against the payload's length before using it.
 */
#ifndef ENPU_RUNTIME_H
#define ENPU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ENPU_FORMAT_VERSION 1
#define ENPU_MAX_RANK 8

enum enpu_status {
    ENPU_OK = 0,
    ENPU_E_FORMAT = 1,  /* malformed or truncated payload */
    ENPU_E_VERSION = 2, /* a format version this adapter cannot read */
    ENPU_E_NOMEM = 3,
    ENPU_E_ARG = 4,     /* bad arguments to enpu_program_run */
    ENPU_E_DRIVER = 5   /* the driver failed to execute an op */
};

enum enpu_opcode { ENPU_RELU = 1, ENPU_ADD = 2, ENPU_MUL = 3, ENPU_CONV2D = 4, ENPU_MAXPOOL2D = 5 };

typedef struct {
    uint8_t constant;            /* 1: weights stored in the payload */
    uint16_t rank;
    uint32_t dims[ENPU_MAX_RANK];
    size_t count;                /* number of float32 elements */
    float* data;                 /* constants: a copy of the weights; activations: NULL until run */
} enpu_tensor;

typedef struct {
    uint16_t opcode;
    uint8_t n_in, n_out;
    uint16_t n_params;
    uint32_t in[3];
    uint32_t out[1];
    int32_t params[10];
} enpu_op;

typedef struct {
    uint32_t n_tensors, n_ops, n_inputs, n_outputs;
    enpu_tensor* tensors;
    enpu_op* ops;
    uint32_t* inputs;
    uint32_t* outputs;
} enpu_program;

/* Parse and validate a payload; on success *out owns a copy of everything it needs. */
int enpu_program_load(const uint8_t* data, size_t size, enpu_program** out);
void enpu_program_free(enpu_program* program);

/* Run the program: inputs[i] and outputs[i] hold tensors program->inputs[i] / program->outputs[i]. */
int enpu_program_run(enpu_program* program, const float* const* inputs, float* const* outputs);

/* Implemented by the vendor's driver: execute one op; buffers[i] is tensor i's float32 data. */
int enpu_driver_execute(const enpu_program* program, const enpu_op* op, float* const* buffers);

#ifdef __cplusplus
}
#endif

#endif /* ENPU_RUNTIME_H */
