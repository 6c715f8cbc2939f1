/*
 * Fake model for the firmware tests. The 16-byte input selects what edgemem_run does:
 *   in[0]     mode: 0 normal, 1 stack overflow (unbounded recursion), 2 store to the address in[4..7],
 *             3 return status 7, 4 nondeterministic output, 5 busy loop of in[4..7] iterations then normal
 *   in[4..7]  u32 little-endian parameter (address / iterations)
 *   in[8..11] u32 "sram" pool high-water target: bytes [672, target) are written, the last one is 0xA5
 *   in[12..15] seed: out[k] = in[12 + k % 4] ^ (uint8_t)(3 * k + 1) for k < 640
 * Pool "sram" (4096 B): input at 0..15, output at 32..671, scratch above. Pool "sram2" (256 B): the first
 * 100 bytes are written (the name selects board RAM region "sram2" where the board has one).
 */
#include "model.h"

#define IN_OFF 0u
#define IN_BYTES 16u
#define OUT_OFF 32u
#define OUT_BYTES 640u
#define SRAM_BYTES 4096u
#define SRAM2_BYTES 256u
#define SRAM2_USED 100u

static uint8_t pool_sram[SRAM_BYTES] __attribute__((section(".edgemem_arena.sram"), aligned(16)));
static uint8_t pool_sram2[SRAM2_BYTES] __attribute__((section(".edgemem_arena.sram2"), aligned(16)));

uint8_t *const edgemem_pool_base[EDGEMEM_NUM_POOLS] = {pool_sram, pool_sram2};
const uint32_t edgemem_pool_size[EDGEMEM_NUM_POOLS] = {SRAM_BYTES, SRAM2_BYTES};
const char *const edgemem_pool_name[EDGEMEM_NUM_POOLS] = {"sram", "sram2"};

static uint32_t run_count;

void *edgemem_input(uint32_t i)
{
    return i == 0u ? &pool_sram[IN_OFF] : (void *)0;
}

uint32_t edgemem_input_bytes(uint32_t i)
{
    return i == 0u ? IN_BYTES : 0u;
}

void *edgemem_output(uint32_t i)
{
    return i == 0u ? &pool_sram[OUT_OFF] : (void *)0;
}

uint32_t edgemem_output_bytes(uint32_t i)
{
    return i == 0u ? OUT_BYTES : 0u;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

__attribute__((noinline)) static uint32_t recurse(uint32_t depth)
{
    volatile uint8_t frame[256];
    uint32_t i;
    for (i = 0; i < sizeof(frame); i++) {
        frame[i] = (uint8_t)(depth + i);
    }
    if (depth == 0u) {
        return frame[0];
    }
    return recurse(depth - 1u) + frame[depth & 0xFFu];
}

void edgemem_reset(void)
{
}

int32_t edgemem_run(void)
{
    const uint8_t *in = &pool_sram[IN_OFF];
    uint8_t *out = &pool_sram[OUT_OFF];
    uint32_t mode = in[0];
    uint32_t param = le32(&in[4]);
    uint32_t target = le32(&in[8]);
    uint32_t k;

    run_count++;
    if (mode == 1u) {
        out[0] = (uint8_t)recurse(param);
        return 0;
    }
    if (mode == 2u) {
        *(volatile uint32_t *)(uintptr_t)param = 0x12345678u;
        return 0;
    }
    if (mode == 5u) {
        uint32_t acc = 0;
        for (k = 0; k < param; k++) {
            acc += k;
            __asm__ volatile("" : "+r"(acc));
        }
        pool_sram[16] = (uint8_t)acc; /* inside the input..output gap: keeps acc alive, below high-water */
    }
    for (k = 0; k < OUT_BYTES; k++) {
        out[k] = (uint8_t)(in[12u + (k & 3u)] ^ (uint8_t)(3u * k + 1u));
    }
    if (mode == 4u) {
        out[0] = (uint8_t)run_count;
    }
    if (target > SRAM_BYTES) {
        target = SRAM_BYTES;
    }
    for (k = OUT_OFF + OUT_BYTES; k < target; k++) {
        pool_sram[k] = (k + 1u == target) ? 0xA5u : (uint8_t)(13u * k + 5u);
    }
    for (k = 0; k < SRAM2_USED; k++) {
        pool_sram2[k] = (uint8_t)(k ^ 0x3Cu);
    }
    return mode == 3u ? 7 : 0;
}
