/*
 * edgemem firmware runtime, the board-independent part: output channel, tick conversion, memory painting,
 * fault reports. The platform (host link, timer, UART) is one driver file each in drivers/, picked by the
 * board file (edgemem/target/image.py); board-specific values come from -D macros (see em_runtime.h).
 */
#include "em_runtime.h"

#include <stddef.h>
#include <stdint.h>

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

/* ==== output channel ===================================================================== */
/* Semihosting (SYS_WRITE0) by default; with EM_CONSOLE_UART the board's serial port 0 (profiling builds:
 * the host reads it with pyserial, from a real board's USB serial or from QEMU's serial socket). On the
 * UART every line ends in " *hh", the XOR of its bytes, so the host can drop lines damaged in transit. */

#define EM_OUT_BUF 192u
static char em_out_buf[EM_OUT_BUF];
static uint32_t em_out_len;

#if defined(EM_CONSOLE_UART)
void em_console_init(void)
{
    em_uart_init();
}

int32_t em_console_getc(void)
{
    return em_uart_getc();
}

static uint8_t em_line_xor;

static void em_console_write(const char *s, uint32_t n)
{
    static const char hex[16] = {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
    uint32_t i;
    for (i = 0; i < n; i++) {
        if (s[i] == '\n') {
            em_uart_putc(' ');
            em_uart_putc('*');
            em_uart_putc(hex[em_line_xor >> 4]);
            em_uart_putc(hex[em_line_xor & 0xFu]);
            em_line_xor = 0u;
        } else {
            em_line_xor ^= (uint8_t)s[i];
        }
        em_uart_putc(s[i]);
    }
}
#else
void em_console_init(void)
{
}

static void em_console_write(const char *s, uint32_t n)
{
    (void)n;
    em_sys_write0(s);
}
#endif

void em_flush(void)
{
    if (em_out_len != 0u) {
        em_out_buf[em_out_len] = '\0';
        em_console_write(em_out_buf, em_out_len);
        em_out_len = 0u;
    }
}

static void em_putc(char c)
{
    em_out_buf[em_out_len++] = c;
    if (em_out_len >= EM_OUT_BUF - 1u || c == '\n') {
        em_flush();
    }
}

void em_puts(const char *s)
{
    while (*s != '\0') {
        em_putc(*s++);
    }
}

void em_put_u64(uint64_t v)
{
    char tmp[21];
    uint32_t n = 0;
    do {
        tmp[n++] = (char)('0' + (uint32_t)(v % 10u));
        v /= 10u;
    } while (v != 0u);
    while (n != 0u) {
        em_putc(tmp[--n]);
    }
}

void em_put_i32(int32_t v)
{
    if (v < 0) {
        em_putc('-');
        em_put_u64((uint64_t)(-(int64_t)v));
    } else {
        em_put_u64((uint64_t)v);
    }
}

static const char em_hex_digits[16] = {'0', '1', '2', '3', '4', '5', '6', '7',
                                       '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};

void em_put_hex32(uint32_t v)
{
    int32_t shift;
    em_putc('0');
    em_putc('x');
    for (shift = 28; shift >= 0; shift -= 4) {
        em_putc(em_hex_digits[(v >> (uint32_t)shift) & 0xFu]);
    }
}

void em_put_hex_bytes(const uint8_t *p, uint32_t n)
{
    uint32_t i;
    for (i = 0; i < n; i++) {
        em_putc(em_hex_digits[p[i] >> 4]);
        em_putc(em_hex_digits[p[i] & 0xFu]);
    }
}

void em_stat(const char *key, uint64_t value)
{
    em_puts("EDGEMEM stat ");
    em_puts(key);
    em_putc('=');
    em_put_u64(value);
    em_putc('\n');
}

void em_stat_i32(const char *key, int32_t value)
{
    em_puts("EDGEMEM stat ");
    em_puts(key);
    em_putc('=');
    em_put_i32(value);
    em_putc('\n');
}

/* ==== timer ============================================================================== */

uint64_t em_ticks_to_instructions(uint64_t ticks)
{
    return ticks * (uint64_t)(EM_TICK_NUM) / (uint64_t)(EM_TICK_DEN);
}

__attribute__((weak)) void em_board_init(void)
{
}

/* ==== memory measurement ================================================================= */

void em_fill(uint8_t *p, uint8_t value, uint32_t n)
{
    uint32_t i;
    for (i = 0; i < n; i++) {
        p[i] = value;
    }
}

uint32_t em_high_water(const uint8_t *p, uint32_t n, uint8_t paint)
{
    while (n != 0u && p[n - 1u] == paint) {
        n--;
    }
    return n;
}

/* Must not call anything: it overwrites the stack below its own frame. */
__attribute__((noinline)) void em_stack_paint(uint8_t paint)
{
    uint32_t sp;
    uint32_t word = (uint32_t)paint * 0x01010101u;
    volatile uint32_t *p = __em_stack_start;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    sp = (sp - 16u) & ~3u; /* keep clear of our own frame */
    while ((uint32_t)(uintptr_t)p < sp) {
        *p++ = word;
    }
}

__attribute__((noinline)) uint32_t em_stack_peak(uint8_t paint)
{
    const volatile uint8_t *p = (const volatile uint8_t *)__em_stack_start;
    const volatile uint8_t *end = (const volatile uint8_t *)__em_stack_end;
    while (p < end && *p == paint) {
        p++;
    }
    return (uint32_t)(end - p);
}

uint32_t em_stack_size(void)
{
    return (uint32_t)((uintptr_t)__em_stack_end - (uintptr_t)__em_stack_start);
}

uint32_t em_data_bytes(void)
{
    return (uint32_t)((uintptr_t)__em_data_end - (uintptr_t)__em_data_start);
}

uint32_t em_bss_bytes(void)
{
    return (uint32_t)((uintptr_t)__em_bss_end - (uintptr_t)__em_bss_start);
}

/* ==== fault reports ====================================================================== */

#define SCB_ICSR 0xE000ED04u
#define SCB_CFSR 0xE000ED28u
#define SCB_HFSR 0xE000ED2Cu
#define SCB_MMFAR 0xE000ED34u
#define SCB_BFAR 0xE000ED38u

static const char *const em_fault_names[] = {"hardfault", "memmanage", "busfault", "usagefault", "nmi", "irq"};

/* The faulting code's pc and lr (when the exception frame is readable) and the stack pointer. */
static void em_put_frame(const uint32_t *frame, uint32_t frame_ok, uint32_t fp)
{
    if (frame_ok) {
        em_puts(" pc=");
        em_put_hex32(frame[6]);
        em_puts(" lr=");
        em_put_hex32(frame[5]);
    }
    em_puts(" sp=");
    em_put_hex32(fp);
}

#if defined(__ARM_ARCH_6M__)
/* ARMv6-M (Cortex-M0/M0+): every fault is a HardFault and there are no fault status registers. */
void em_fault(uint32_t *frame, uint32_t exc_return, uint32_t kind)
{
    uint32_t stack_lo = (uint32_t)(uintptr_t)__em_stack_start;
    uint32_t stack_hi = (uint32_t)(uintptr_t)__em_stack_end;
    uint32_t fp = (uint32_t)(uintptr_t)frame;
    em_flush();
    em_puts("\nEDGEMEM fault ");
    em_puts(em_fault_names[kind < 6u ? kind : 5u]);
    if (fp < stack_lo) {
        em_puts(" stack_overflow");
    }
    em_put_frame(frame, fp >= stack_lo && fp + 32u <= stack_hi && (fp & 3u) == 0u, fp);
    em_puts(" exc_return=");
    em_put_hex32(exc_return);
    em_putc('\n');
    em_exit(EM_EXIT_FAULT);
}
#else
struct em_cfsr_bit {
    uint32_t mask;
    const char *name;
};

static const struct em_cfsr_bit em_cfsr_bits[] = {
    {1u << 0, "instruction_access_violation"}, {1u << 1, "data_access_violation"},
    {1u << 3, "unstacking_error"},             {1u << 4, "stacking_error"},
    {1u << 5, "fp_lazy_stacking_error"},       {1u << 8, "instruction_bus_error"},
    {1u << 9, "precise_bus_error"},            {1u << 10, "imprecise_bus_error"},
    {1u << 11, "unstacking_bus_error"},        {1u << 12, "stacking_bus_error"},
    {1u << 13, "fp_lazy_stacking_bus_error"},  {1u << 16, "undefined_instruction"},
    {1u << 17, "invalid_state"},               {1u << 18, "invalid_pc"},
    {1u << 19, "no_coprocessor"},              {1u << 20, "stack_limit"},
    {1u << 24, "unaligned_access"},
    {1u << 25, "divide_by_zero"},
};

void em_fault(uint32_t *frame, uint32_t exc_return, uint32_t kind)
{
    uint32_t cfsr = EM_REG(SCB_CFSR);
    uint32_t hfsr = EM_REG(SCB_HFSR);
    uint32_t mmfar = EM_REG(SCB_MMFAR);
    uint32_t bfar = EM_REG(SCB_BFAR);
    uint32_t stack_lo = (uint32_t)(uintptr_t)__em_stack_start;
    uint32_t stack_hi = (uint32_t)(uintptr_t)__em_stack_end;
    uint32_t fp = (uint32_t)(uintptr_t)frame;
    uint32_t stacking = cfsr & ((1u << 4) | (1u << 12));
    uint32_t mm_valid = cfsr & (1u << 7);
    uint32_t bf_valid = cfsr & (1u << 15);
    uint32_t frame_ok = (stacking == 0u && fp >= stack_lo && fp + 32u <= stack_hi && (fp & 3u) == 0u);
    /* the stack sits at the bottom of RAM: overflowing it moves SP out of the MPU-allowed RAM, so the
     * exception entry itself cannot push its frame (stacking error); on Armv8-M the push below MSPLIM
     * faults first (STKOF, "stack_limit") */
    uint32_t overflow = stacking != 0u || fp < stack_lo || (cfsr & (1u << 20)) != 0u;
    uint32_t i;

    em_flush();
    em_puts("\nEDGEMEM fault ");
    em_puts(em_fault_names[kind < 6u ? kind : 5u]);
    if (kind == 5u) {
        em_puts(" exception=");
        em_put_u64(EM_REG(SCB_ICSR) & 0x1FFu);
    }
    if (overflow) {
        em_puts(" stack_overflow");
    }
    for (i = 0; i < sizeof(em_cfsr_bits) / sizeof(em_cfsr_bits[0]); i++) {
        if ((cfsr & em_cfsr_bits[i].mask) != 0u) {
            em_putc(' ');
            em_puts(em_cfsr_bits[i].name);
        }
    }
    if ((hfsr & (1u << 30)) != 0u) {
        em_puts(" escalated");
    }
    if (mm_valid != 0u) {
        em_puts(" addr=");
        em_put_hex32(mmfar);
    } else if (bf_valid != 0u) {
        em_puts(" addr=");
        em_put_hex32(bfar);
    }
    em_put_frame(frame, frame_ok, fp);
    em_puts(" stack=[");
    em_put_hex32(stack_lo);
    em_putc(',');
    em_put_hex32(stack_hi);
    em_puts(") cfsr=");
    em_put_hex32(cfsr);
    em_puts(" hfsr=");
    em_put_hex32(hfsr);
    em_puts(" exc_return=");
    em_put_hex32(exc_return);
    em_putc('\n');
    em_exit(EM_EXIT_FAULT);
}
#endif /* __ARM_ARCH_6M__ */
