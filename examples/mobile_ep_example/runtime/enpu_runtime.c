/* ENPU runtime adapter: payload parser and the run loop (see enpu_runtime.h). */
#include "enpu_runtime.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t* data;
    size_t size, pos;
    int failed;
} reader;

static uint32_t take(reader* r, size_t width) {
    uint32_t value = 0;
    size_t i;
    if (r->failed || width > r->size - r->pos) {
        r->failed = 1;
        return 0;
    }
    for (i = 0; i < width; i++) value |= (uint32_t)r->data[r->pos + i] << (8 * i);
    r->pos += width;
    return value;
}

static const int expected_params[6] = {0, 0, 0, 0, 9, 10};

int enpu_program_load(const uint8_t* data, size_t size, enpu_program** out) {
    reader r = {data, size, 0, 0};
    enpu_program* p;
    uint32_t i, j, weights_size;
    size_t* offsets;
    size_t* nbytes;
    *out = NULL;
    if (size < 4 || memcmp(data, "ENPU", 4) != 0) return ENPU_E_FORMAT;
    r.pos = 4;
    if (take(&r, 2) != ENPU_FORMAT_VERSION) return r.failed ? ENPU_E_FORMAT : ENPU_E_VERSION;
    take(&r, 2); /* flags */
    p = calloc(1, sizeof *p);
    if (!p) return ENPU_E_NOMEM;
    p->n_tensors = take(&r, 4);
    p->n_ops = take(&r, 4);
    p->n_inputs = take(&r, 4);
    p->n_outputs = take(&r, 4);
    /* Every entry takes at least 4 bytes: counts larger than the payload are lies. */
    if (r.failed || p->n_tensors > size / 4 || p->n_ops > size / 4 || p->n_inputs > size / 4 ||
        p->n_outputs > size / 4) {
        free(p);
        return ENPU_E_FORMAT;
    }
    p->tensors = calloc(p->n_tensors + 1, sizeof *p->tensors);
    p->ops = calloc(p->n_ops + 1, sizeof *p->ops);
    p->inputs = calloc(p->n_inputs + 1, sizeof *p->inputs);
    p->outputs = calloc(p->n_outputs + 1, sizeof *p->outputs);
    offsets = calloc(p->n_tensors + 1, sizeof *offsets);
    nbytes = calloc(p->n_tensors + 1, sizeof *nbytes);
    if (!p->tensors || !p->ops || !p->inputs || !p->outputs || !offsets || !nbytes) goto nomem;
    for (i = 0; i < p->n_tensors && !r.failed; i++) {
        enpu_tensor* t = &p->tensors[i];
        uint32_t kind = take(&r, 1), dtype = take(&r, 1);
        t->rank = (uint16_t)take(&r, 2);
        if (kind > 1 || dtype != 1 || t->rank > ENPU_MAX_RANK) goto bad;
        t->constant = (uint8_t)kind;
        t->count = 1;
        for (j = 0; j < t->rank; j++) {
            t->dims[j] = take(&r, 4);
            t->count *= t->dims[j];
        }
        if (kind == 1) {
            offsets[i] = take(&r, 4);
            nbytes[i] = take(&r, 4);
            if (nbytes[i] != 4 * t->count) goto bad;
        }
    }
    for (i = 0; i < p->n_ops && !r.failed; i++) {
        enpu_op* op = &p->ops[i];
        op->opcode = (uint16_t)take(&r, 2);
        op->n_in = (uint8_t)take(&r, 1);
        op->n_out = (uint8_t)take(&r, 1);
        op->n_params = (uint16_t)take(&r, 2);
        take(&r, 2);
        if (op->opcode < ENPU_RELU || op->opcode > ENPU_MAXPOOL2D || op->n_in < 1 || op->n_in > 3 ||
            op->n_out != 1 || op->n_params != expected_params[op->opcode])
            goto bad;
        for (j = 0; j < op->n_in; j++) op->in[j] = take(&r, 4);
        op->out[0] = take(&r, 4);
        for (j = 0; j < op->n_params; j++) op->params[j] = (int32_t)take(&r, 4);
        for (j = 0; j < op->n_in; j++)
            if (op->in[j] >= p->n_tensors) goto bad;
        if (op->out[0] >= p->n_tensors || p->tensors[op->out[0]].constant) goto bad;
    }
    for (i = 0; i < p->n_inputs; i++)
        if ((p->inputs[i] = take(&r, 4)) >= p->n_tensors) goto bad;
    for (i = 0; i < p->n_outputs; i++)
        if ((p->outputs[i] = take(&r, 4)) >= p->n_tensors) goto bad;
    weights_size = take(&r, 4);
    if (r.failed || weights_size != size - r.pos) goto bad;
    for (i = 0; i < p->n_tensors; i++) {
        enpu_tensor* t = &p->tensors[i];
        if (!t->constant) continue;
        if (offsets[i] > weights_size || nbytes[i] > weights_size - offsets[i]) goto bad;
        t->data = malloc(nbytes[i] ? nbytes[i] : 1);
        if (!t->data) goto nomem;
        memcpy(t->data, data + r.pos + offsets[i], nbytes[i]); /* little-endian hosts */
    }
    free(offsets);
    free(nbytes);
    *out = p;
    return ENPU_OK;
bad:
    free(offsets);
    free(nbytes);
    enpu_program_free(p);
    return ENPU_E_FORMAT;
nomem:
    free(offsets);
    free(nbytes);
    enpu_program_free(p);
    return ENPU_E_NOMEM;
}

void enpu_program_free(enpu_program* p) {
    uint32_t i;
    if (!p) return;
    for (i = 0; p->tensors && i < p->n_tensors; i++)
        if (p->tensors[i].constant) free(p->tensors[i].data);
    free(p->tensors);
    free(p->ops);
    free(p->inputs);
    free(p->outputs);
    free(p);
}

int enpu_program_run(enpu_program* p, const float* const* inputs, float* const* outputs) {
    float** buffers;
    uint32_t i;
    int status = ENPU_OK;
    if (!p || (p->n_inputs && !inputs) || (p->n_outputs && !outputs)) return ENPU_E_ARG;
    buffers = calloc(p->n_tensors + 1, sizeof *buffers);
    if (!buffers) return ENPU_E_NOMEM;
    for (i = 0; i < p->n_tensors; i++) buffers[i] = p->tensors[i].data;
    for (i = 0; i < p->n_inputs; i++) buffers[p->inputs[i]] = (float*)inputs[i];
    for (i = 0; i < p->n_outputs; i++) buffers[p->outputs[i]] = outputs[i];
    for (i = 0; i < p->n_tensors && status == ENPU_OK; i++) {
        if (!buffers[i]) {
            buffers[i] = calloc(p->tensors[i].count + 1, sizeof(float));
            if (!buffers[i]) status = ENPU_E_NOMEM;
        }
    }
    for (i = 0; i < p->n_ops && status == ENPU_OK; i++)
        if (enpu_driver_execute(p, &p->ops[i], buffers) != 0) status = ENPU_E_DRIVER;
    for (i = 0; i < p->n_tensors; i++) {
        int owned = !p->tensors[i].constant;
        uint32_t j;
        for (j = 0; j < p->n_inputs; j++) owned &= buffers[i] != inputs[j];
        for (j = 0; j < p->n_outputs; j++) owned &= buffers[i] != outputs[j];
        if (owned) free(buffers[i]);
    }
    free(buffers);
    return status;
}

#ifdef ENPU_STUB_DRIVER
/* The recording stub: remembers the opcodes it was asked to run (tests read enpu_stub_log). */
uint16_t enpu_stub_log[256];
size_t enpu_stub_count;

int enpu_driver_execute(const enpu_program* program, const enpu_op* op, float* const* buffers) {
    (void)program;
    (void)buffers;
    if (enpu_stub_count < sizeof enpu_stub_log / sizeof enpu_stub_log[0]) enpu_stub_log[enpu_stub_count] = op->opcode;
    enpu_stub_count++;
    return 0;
}
#endif
