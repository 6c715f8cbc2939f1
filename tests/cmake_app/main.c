/* The test application's own main: the model's input from input.h (written by the test), the arena in a buffer of
   its own (edgemem_set_arena), the output printed as hex over semihosting, then exit. */
#include <stdint.h>

#include "input.h"
#include "model.h"

static uint8_t arena[EDGEMEM_EXTERNAL_ARENA_BYTES + 16u] __attribute__((aligned(16)));

static int32_t semihost(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return (int32_t)r0;
}

static void print(const char *s)
{
    (void)semihost(0x04u, s); /* SYS_WRITE0 */
}

static void finish(void)
{
    /* SYS_EXIT with ADP_Stopped_ApplicationExit (on 32-bit Arm the reason itself, not a block): QEMU exits 0 */
    (void)semihost(0x18u, (const void *)0x20026u);
}

static void print_i32(const char *key, int32_t v)
{
    char buf[16];
    uint32_t n = 0u, u = v < 0 ? (uint32_t)(-v) : (uint32_t)v;
    char digits[12];
    print(key);
    if (v < 0) {
        buf[n++] = '-';
    }
    uint32_t k = 0u;
    do {
        digits[k++] = (char)('0' + u % 10u);
        u /= 10u;
    } while (u != 0u);
    while (k != 0u) {
        buf[n++] = digits[--k];
    }
    buf[n++] = '\n';
    buf[n] = '\0';
    print(buf);
}

int main(void)
{
    static const char hex[] = "0123456789abcdef";
    char pair[3] = {0, 0, 0};
    uint32_t i;
    print_i32("run_before_arena ", edgemem_run());
    print_i32("misaligned ", edgemem_set_arena(arena + 1, sizeof arena - 1u));
    print_i32("too_small ", edgemem_set_arena(arena, EDGEMEM_EXTERNAL_ARENA_BYTES - 1u));
    print_i32("set_arena ", edgemem_set_arena(arena, EDGEMEM_EXTERNAL_ARENA_BYTES));
    for (i = 0; i < EDGEMEM_INPUT_0_BYTES; i++) {
        ((uint8_t *)edgemem_input(0))[i] = app_input[i];
    }
    print_i32("run ", edgemem_run());
    print("output ");
    for (i = 0; i < EDGEMEM_OUTPUT_0_BYTES; i++) {
        pair[0] = hex[((const uint8_t *)edgemem_output(0))[i] >> 4];
        pair[1] = hex[((const uint8_t *)edgemem_output(0))[i] & 15u];
        print(pair);
    }
    print("\n");
    finish();
    return 0;
}
