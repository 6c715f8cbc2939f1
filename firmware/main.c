/*
 * edgemem profiling main. Protocol (one line each, on the semihosting console):
 *   EDGEMEM begin board=<name>
 *   EDGEMEM stat tick_cycles=1          board images only: ticks are core clock cycles (DWT), not timer ticks
 *   EDGEMEM output <i> <hex>            per output, lowercase hex of all bytes
 *   EDGEMEM stat <key>=<int>            stack_peak_bytes, stack_size_bytes, stack_at_run_bytes (stack in use
 *                                       when edgemem_run is called), pool_<name>_high_water_bytes,
 *                                       pool_<name>_size_bytes, arena_high_water_bytes, data_bytes, bss_bytes,
 *                                       ticks, instructions, run_status
 *   EDGEMEM step <s> ticks=<t> stack=<b> hw=<b0>,<b1>,...   profiling builds only (EDGEMEM_PROFILE), per step
 *                                       of the schedule: its ticks, and the stack and per-pool arena high-water
 *                                       marks reached by the end of that step
 *   EDGEMEM invocation <k> output <i> <hex>   built with -DEM_SEQUENCE (semihosting builds; device_run.run_sequence):
 *   EDGEMEM invocation <k> status=<s>          after the report's own runs, N invocations in a row from the initial
 *                                             state (no reset between them: a stateful model carries its state),
 *                                             invocation k's inputs from the host files s<k>_<i>.bin, N from the
 *                                             file invocations.bin (4 bytes, little-endian, N < 10^6)
 *   EDGEMEM end
 * or EDGEMEM error <what> / EDGEMEM fault <name> ... and a non-zero exit code.
 *
 * Profiling builds (edgemem build --profile) talk over the UART (EM_CONSOLE_UART): they print
 * "EDGEMEM ready" and wait for one byte from the host before they start, and carry their inputs in the
 * image (EM_INPUTS_EMBEDDED) so that a board without a debugger runs them too.
 *
 * The model runs twice: pools (and the free stack) painted with 0xA5, then with 0x5A, so a byte that
 * happens to equal one paint value cannot hide the high-water mark. Inputs are read from the host files
 * input<i>.bin (semihosting, relative to QEMU's working directory) straight into the arena.
 */
#include <stdint.h>

#include "em_runtime.h"
#include "model.h"

static const uint8_t em_paints[2] = {EM_STACK_PAINT, 0x5Au};

/* FNV-1a 64 over every output's length and bytes: compares the two passes without keeping a copy. */
static uint64_t em_outputs_hash(void)
{
    uint64_t h = 0xCBF29CE484222325u;
    uint32_t i;
    uint32_t j;
    for (i = 0; i < (uint32_t)EDGEMEM_NUM_OUTPUTS; i++) {
        const uint8_t *p = (const uint8_t *)edgemem_output(i);
        uint32_t n = edgemem_output_bytes(i);
        for (j = 0; j < 4u; j++) {
            h = (h ^ ((n >> (8u * j)) & 0xFFu)) * 0x100000001B3u;
        }
        for (j = 0; j < n; j++) {
            h = (h ^ p[j]) * 0x100000001B3u;
        }
    }
    return h;
}

/* "EDGEMEM output <i> <hex>" for every output */
static void em_print_outputs(void)
{
    uint32_t p;
    for (p = 0; p < (uint32_t)EDGEMEM_NUM_OUTPUTS; p++) {
        em_puts("EDGEMEM output ");
        em_put_u64(p);
        em_puts(" ");
        em_put_hex_bytes((const uint8_t *)edgemem_output(p), edgemem_output_bytes(p));
        em_puts("\n");
    }
}

#if defined(EDGEMEM_INPUT_OUTSIDE)
/* Built with --input outside: the model reads its inputs from the caller's buffers (edgemem_run_from_inputs),
 * not from the arena. The caller here is this harness: its own buffers, outside the painted pools, so the
 * measured arena high-water mark is the plan without the input. */
static uint8_t em_outside_input[EDGEMEM_NUM_INPUTS][EDGEMEM_INPUT_MAX_BYTES] __attribute__((aligned(EDGEMEM_ARENA_ALIGN)));
static const void *em_outside_ptrs[EDGEMEM_NUM_INPUTS];

static uint8_t *em_input_dst(uint32_t i)
{
    return em_outside_input[i];
}

static int32_t em_run(void)
{
    uint32_t i;
    for (i = 0; i < (uint32_t)EDGEMEM_NUM_INPUTS; i++) {
        em_outside_ptrs[i] = em_outside_input[i];
    }
    return edgemem_run_from_inputs(em_outside_ptrs);
}
#else
static uint8_t *em_input_dst(uint32_t i)
{
    return (uint8_t *)edgemem_input(i);
}

static int32_t em_run(void)
{
    return edgemem_run();
}
#endif

#if defined(EM_INPUTS_EMBEDDED)
/* profile_inputs.c (generated): the input bytes the host will compare against */
extern const uint8_t *const em_embedded_input[EDGEMEM_NUM_INPUTS];
extern const uint32_t em_embedded_input_bytes[EDGEMEM_NUM_INPUTS];

static void em_read_inputs(void)
{
    uint32_t i;
    uint32_t j;
    for (i = 0; i < (uint32_t)EDGEMEM_NUM_INPUTS; i++) {
        uint8_t *dst = em_input_dst(i);
        if (em_embedded_input_bytes[i] != edgemem_input_bytes(i)) {
            em_puts("EDGEMEM error input embedded input has the wrong size\n");
            em_exit(EM_EXIT_INPUT);
        }
        for (j = 0; j < em_embedded_input_bytes[i]; j++) {
            dst[j] = em_embedded_input[i][j];
        }
    }
}
#else
static void em_input_name(char *buf, uint32_t i)
{
    static const char prefix[] = "input";
    char digits[10];
    uint32_t n = 0;
    uint32_t k = 0;
    while (prefix[k] != '\0') {
        buf[k] = prefix[k];
        k++;
    }
    do {
        digits[n++] = (char)('0' + i % 10u);
        i /= 10u;
    } while (i != 0u);
    while (n != 0u) {
        buf[k++] = digits[--n];
    }
    buf[k++] = '.';
    buf[k++] = 'b';
    buf[k++] = 'i';
    buf[k++] = 'n';
    buf[k] = '\0';
}

static void em_read_inputs(void)
{
    uint32_t i;
    char name[24];
    for (i = 0; i < (uint32_t)EDGEMEM_NUM_INPUTS; i++) {
        int32_t rc;
        em_input_name(name, i);
        rc = em_read_file(name, em_input_dst(i), edgemem_input_bytes(i));
        if (rc != 0) {
            em_puts("EDGEMEM error input ");
            em_put_u64(i);
            em_puts(rc == -1 ? " cannot open " : (rc == -2 ? " wrong size " : " short read "));
            em_puts(name);
            em_puts(" expected_bytes=");
            em_put_u64(edgemem_input_bytes(i));
            em_puts("\n");
            em_exit(EM_EXIT_INPUT);
        }
    }
}
#endif

#if defined(EM_SEQUENCE) && !defined(EM_INPUTS_EMBEDDED)
/* Only in a build for device_run.run_sequence: its code (and stack) stays out of every other firmware. */

/* "s<k>_<i>.bin": input i of invocation k (k < 10^6, so the name fits 24 bytes). */
static void em_sequence_input_name(char *buf, uint32_t k, uint32_t i)
{
    char digits[10];
    uint32_t n = 0;
    uint32_t at = 1;
    uint32_t pass;
    buf[0] = 's';
    for (pass = 0; pass < 2u; pass++) {
        uint32_t v = pass == 0u ? k : i;
        do {
            digits[n++] = (char)('0' + v % 10u);
            v /= 10u;
        } while (v != 0u);
        while (n != 0u) {
            buf[at++] = digits[--n];
        }
        buf[at++] = pass == 0u ? '_' : '.';
    }
    buf[at++] = 'b';
    buf[at++] = 'i';
    buf[at++] = 'n';
    buf[at] = '\0';
}

static void em_sequence_inputs(uint32_t k)
{
    uint32_t i;
    char name[24];
    for (i = 0; i < (uint32_t)EDGEMEM_NUM_INPUTS; i++) {
        em_sequence_input_name(name, k, i);
        if (em_read_file(name, em_input_dst(i), edgemem_input_bytes(i)) != 0) {
            em_puts("EDGEMEM error input cannot read ");
            em_puts(name);
            em_puts(" expected_bytes=");
            em_put_u64(edgemem_input_bytes(i));
            em_puts("\n");
            em_exit(EM_EXIT_INPUT);
        }
    }
}

/* N invocations in a row from the initial state, as one TFLM interpreter invoked N times: each one's outputs. */
static void em_run_sequence(void)
{
    uint8_t count[4];
    uint32_t n;
    uint32_t k;
    uint32_t p;
    if (em_read_file("invocations.bin", count, 4u) != 0) {
        em_puts("EDGEMEM error input cannot read invocations.bin (a sequence build needs it)\n");
        em_exit(EM_EXIT_INPUT);
    }
    n = (uint32_t)count[0] | ((uint32_t)count[1] << 8) | ((uint32_t)count[2] << 16) | ((uint32_t)count[3] << 24);
    if (n >= 1000000u) {
        em_puts("EDGEMEM error input invocations.bin asks for a million invocations or more\n");
        em_exit(EM_EXIT_INPUT);
    }
    edgemem_reset();
    for (k = 0; k < n; k++) {
        int32_t st;
        em_sequence_inputs(k);
        st = em_run();
        for (p = 0; p < (uint32_t)EDGEMEM_NUM_OUTPUTS; p++) {
            em_puts("EDGEMEM invocation ");
            em_put_u64(k);
            em_puts(" output ");
            em_put_u64(p);
            em_puts(" ");
            em_put_hex_bytes((const uint8_t *)edgemem_output(p), edgemem_output_bytes(p));
            em_puts("\n");
        }
        em_puts("EDGEMEM invocation ");
        em_put_u64(k);
        em_puts(" status=");
        em_put_i32(st);
        em_puts("\n");
    }
}
#endif

/* Bytes of stack in use at the caller (the top of the stack minus SP). */
static inline uint32_t em_stack_in_use(void)
{
    uint32_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    return (uint32_t)(uintptr_t)__em_stack_end - sp;
}

static void em_stat_pool(const char *name, const char *suffix, uint64_t value)
{
    em_puts("EDGEMEM stat pool_");
    em_puts(name);
    em_puts(suffix);
    em_put_u64(value);
    em_puts("\n");
}

#if defined(EDGEMEM_PROFILE)
/* Per-step measurements. The time spent measuring (scanning the pools and the stack) is excluded from the
 * next step's ticks by restarting the step clock after the scan. */
static uint64_t em_step_ticks[EDGEMEM_NUM_STEPS + 1u];
static uint32_t em_step_stack[EDGEMEM_NUM_STEPS + 1u];
static uint32_t em_step_hw[EDGEMEM_NUM_STEPS + 1u][EDGEMEM_NUM_POOLS];
static uint8_t em_step_paint;
static uint32_t em_step_pass;
static uint64_t em_step_t0;

void edgemem_profile_step(uint32_t step)
{
    uint64_t t = em_timer_ticks();
    uint32_t p;
    uint32_t v;
    if (step >= (uint32_t)EDGEMEM_NUM_STEPS) {
        return;
    }
    if (em_step_pass == 0u) {
        em_step_ticks[step] = t - em_step_t0;
    }
    for (p = 0; p < (uint32_t)EDGEMEM_NUM_POOLS; p++) {
        v = em_high_water(edgemem_pool_base[p], edgemem_pool_size[p], em_step_paint);
        if (v > em_step_hw[step][p]) {
            em_step_hw[step][p] = v;
        }
    }
    v = em_stack_peak(em_step_paint);
    if (v > em_step_stack[step]) {
        em_step_stack[step] = v;
    }
    em_step_t0 = em_timer_ticks();
}

static void em_print_steps(void)
{
    uint32_t s;
    uint32_t p;
    for (s = 0; s < (uint32_t)EDGEMEM_NUM_STEPS; s++) {
        em_puts("EDGEMEM step ");
        em_put_u64(s);
        em_puts(" ticks=");
        em_put_u64(em_step_ticks[s]);
        em_puts(" stack=");
        em_put_u64(em_step_stack[s]);
        em_puts(" hw=");
        for (p = 0; p < (uint32_t)EDGEMEM_NUM_POOLS; p++) {
            if (p != 0u) {
                em_puts(",");
            }
            em_put_u64(em_step_hw[s][p]);
        }
        em_puts("\n");
    }
}
#endif

#if defined(EM_CONSOLE_UART)
/* After its report a UART build serves inference requests (`edgemem validate --port`):
 *   host:   'R', the hex of every input's bytes (inputs in order, lowercase or uppercase), ' ', two hex digits
 *           of the XOR of those bytes, '\n'
 *   device: "EDGEMEM output <i> <hex>" per output, then "EDGEMEM done status=<s>"; or "EDGEMEM error request
 *           <why>" for a malformed request (bad digit, short or long, checksum), and nothing is run
 *   host:   'Q': the device leaves the loop (QEMU exits; a board says "EDGEMEM exit" and idles).
 * Other bytes between requests (e.g. repeated start bytes) are ignored. Each request runs from the model's
 * initial state (edgemem_reset), like one `edgemem run`. */
static int32_t em_hex_digit(int32_t c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* One byte as two hex digits; -1 (and the offending character in *last) if either is not a digit. */
static int32_t em_get_hex_byte(int32_t *last)
{
    int32_t hi = em_hex_digit(*last = em_console_getc());
    int32_t lo;
    if (hi < 0) {
        return -1;
    }
    lo = em_hex_digit(*last = em_console_getc());
    return lo < 0 ? -1 : (hi << 4) | lo;
}

static const char *em_read_request(void)
{
    uint32_t i;
    uint32_t j;
    uint8_t x = 0u;
    int32_t last = 0;
    int32_t b;
    for (i = 0; i < (uint32_t)EDGEMEM_NUM_INPUTS; i++) {
        uint8_t *dst = em_input_dst(i);
        for (j = 0; j < edgemem_input_bytes(i); j++) {
            b = em_get_hex_byte(&last);
            if (b < 0) {
                return last == '\n' ? "short" : "digit";
            }
            dst[j] = (uint8_t)b;
            x ^= (uint8_t)b;
        }
    }
    last = em_console_getc();
    if (last != ' ') {
        return "long";
    }
    b = em_get_hex_byte(&last);
    if (b < 0) {
        return last == '\n' ? "short" : "digit";
    }
    last = em_console_getc();
    if (last != '\n') {
        return "long";
    }
    return (uint8_t)b == x ? (const char *)0 : "checksum";
}

static void em_serve(void)
{
    for (;;) {
        int32_t c = em_console_getc();
        const char *why;
        int32_t st;
        if (c == 'Q') {
            return;
        }
        if (c != 'R') {
            continue;
        }
        why = em_read_request();
        if (why != (const char *)0) {
            em_puts("EDGEMEM error request ");
            em_puts(why);
            em_puts("\n");
            em_flush();
            continue; /* the host resends; a partial line is skipped as bytes that are not 'R' */
        }
        edgemem_reset();
        st = em_run();
        em_print_outputs();
        em_puts("EDGEMEM done status=");
        em_put_i32(st);
        em_puts("\n");
        em_flush();
    }
}
#endif

int main(void)
{
    uint32_t pool_hw[EDGEMEM_NUM_POOLS];
    uint32_t stack_peak = 0;
    uint32_t stack_at_run = 0;
    uint64_t ticks = 0;
    uint64_t hash0 = 0;
    int32_t status = 0;
    uint32_t arena_hw = 0;
    uint32_t pass;
    uint32_t p;

#if defined(EM_CONSOLE_UART)
    em_puts("EDGEMEM ready\n");
    (void)em_console_getc(); /* the host is listening: start */
#endif
    em_puts("EDGEMEM begin board=" EM_BOARD_NAME "\n");
#if defined(EM_TICK_CYCLES)
    em_stat("tick_cycles", 1u); /* ticks are core clock cycles (a board image's DWT counter) */
#endif
    for (p = 0; p < (uint32_t)EDGEMEM_NUM_POOLS; p++) {
        pool_hw[p] = 0;
    }

    for (pass = 0; pass < 2u; pass++) {
        uint8_t paint = em_paints[pass];
        uint64_t t0;
        uint64_t t1;
        uint64_t h;
        uint32_t peak;
        int32_t st;
        if (pass != 0u) {
            em_stack_paint(paint); /* the reset handler painted the stack for pass 0 */
        }
        for (p = 0; p < (uint32_t)EDGEMEM_NUM_POOLS; p++) {
            em_fill(edgemem_pool_base[p], paint, edgemem_pool_size[p]);
        }
        edgemem_reset(); /* every pass from the initial state: a stateful model (LSTM) repeats its outputs */
        em_read_inputs();
        stack_at_run = em_stack_in_use();
#if defined(EDGEMEM_PROFILE)
        em_step_paint = paint;
        em_step_pass = pass;
        em_step_t0 = em_timer_ticks();
#endif
        t0 = em_timer_ticks();
        st = em_run();
        t1 = em_timer_ticks();
        for (p = 0; p < (uint32_t)EDGEMEM_NUM_POOLS; p++) {
            uint32_t hw = em_high_water(edgemem_pool_base[p], edgemem_pool_size[p], paint);
            if (hw > pool_hw[p]) {
                pool_hw[p] = hw;
            }
        }
        peak = em_stack_peak(paint);
        if (peak > stack_peak) {
            stack_peak = peak;
        }
        h = em_outputs_hash();
        if (pass == 0u) {
            ticks = t1 - t0;
            status = st;
            hash0 = h;
        } else if (h != hash0 || st != status) {
            em_puts("EDGEMEM error nondeterministic: the two runs gave different outputs or status\n");
            em_exit(EM_EXIT_NONDETERMINISTIC);
        }
    }

    em_print_outputs();
#if defined(EDGEMEM_PROFILE)
    em_print_steps();
#endif
    em_stat("stack_peak_bytes", stack_peak);
    em_stat("stack_size_bytes", em_stack_size());
    em_stat("stack_at_run_bytes", stack_at_run);
    for (p = 0; p < (uint32_t)EDGEMEM_NUM_POOLS; p++) {
        em_stat_pool(edgemem_pool_name[p], "_high_water_bytes=", pool_hw[p]);
        em_stat_pool(edgemem_pool_name[p], "_size_bytes=", edgemem_pool_size[p]);
        arena_hw += pool_hw[p];
    }
    em_stat("arena_high_water_bytes", arena_hw);
    em_stat("data_bytes", em_data_bytes());
    em_stat("bss_bytes", em_bss_bytes());
    em_stat("ticks", ticks);
    em_stat("instructions", em_ticks_to_instructions(ticks));
    em_stat_i32("run_status", status);
#if defined(EM_SEQUENCE) && !defined(EM_INPUTS_EMBEDDED)
    em_run_sequence();
#endif
    em_puts("EDGEMEM end\n");
    em_flush();
#if defined(EM_CONSOLE_UART)
    em_serve();
#endif
    if (status != 0 && (status & 0xFF) == 0) {
        return 1; /* keep a failure visible through the 8-bit exit code */
    }
    return status;
}
