/* Hand-written stand-in for a generated model (same API as edgemem's codegen), used by tests/test_firmware.py. */
#ifndef EDGEMEM_MODEL_H
#define EDGEMEM_MODEL_H

#include <stdint.h>

#define EDGEMEM_NUM_INPUTS 1
#define EDGEMEM_NUM_OUTPUTS 1
#define EDGEMEM_NUM_POOLS 2

extern uint8_t *const edgemem_pool_base[EDGEMEM_NUM_POOLS];
extern const uint32_t edgemem_pool_size[EDGEMEM_NUM_POOLS];
extern const char *const edgemem_pool_name[EDGEMEM_NUM_POOLS];

void *edgemem_input(uint32_t i);
uint32_t edgemem_input_bytes(uint32_t i);
void *edgemem_output(uint32_t i);
uint32_t edgemem_output_bytes(uint32_t i);
int32_t edgemem_run(void);
void edgemem_reset(void);

#endif
