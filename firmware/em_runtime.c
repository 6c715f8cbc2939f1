/*
 * edgemem firmware runtime: output channel, semihosting, timer, memory painting, fault reports.
 * Board-specific values come from -D macros (see em_runtime.h).
 */
#include "em_runtime.h"

#include <stddef.h>
#include <stdint.h>

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

/* ==== semihosting (QEMU images) / end of run (board images) =============================== */

#if defined(EM_DEVICE)
/* A board image has no debugger to talk to: it reports over the UART, says how it ended, and idles. */
#if !defined(EM_CONSOLE_UART) || !defined(EM_INPUTS_EMBEDDED)
#error "a board image (EM_DEVICE) reports over the UART with its inputs in flash: EM_CONSOLE_UART and EM_INPUTS_EMBEDDED"
#endif
void em_exit(int32_t code)
{
    em_puts("EDGEMEM exit ");
    em_put_i32(code);
    em_puts("\n");
    em_flush();
    for (;;) {
        __asm__ volatile("wfi");
    }
}
#else

#define SYS_OPEN 0x01u
#define SYS_CLOSE 0x02u
#define SYS_WRITE0 0x04u
#define SYS_READ 0x06u
#define SYS_FLEN 0x0Cu
#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

int32_t em_semihost(uint32_t op, void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return (int32_t)r0;
}

static uint32_t em_strlen(const char *s)
{
    uint32_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

int32_t em_sys_open(const char *path, uint32_t mode)
{
    uint32_t args[3];
    args[0] = (uint32_t)(uintptr_t)path;
    args[1] = mode;
    args[2] = em_strlen(path);
    return em_semihost(SYS_OPEN, args);
}

int32_t em_sys_close(int32_t handle)
{
    uint32_t args[1];
    args[0] = (uint32_t)handle;
    return em_semihost(SYS_CLOSE, args);
}

int32_t em_sys_read(int32_t handle, void *buf, uint32_t len)
{
    uint32_t args[3];
    args[0] = (uint32_t)handle;
    args[1] = (uint32_t)(uintptr_t)buf;
    args[2] = len;
    return em_semihost(SYS_READ, args);
}

int32_t em_sys_flen(int32_t handle)
{
    uint32_t args[1];
    args[0] = (uint32_t)handle;
    return em_semihost(SYS_FLEN, args);
}

void em_sys_write0(const char *s)
{
    (void)em_semihost(SYS_WRITE0, (void *)(uintptr_t)s);
}

void em_exit(int32_t code)
{
    uint32_t args[2];
    em_flush();
    args[0] = ADP_STOPPED_APPLICATION_EXIT;
    args[1] = (uint32_t)code;
    for (;;) {
        (void)em_semihost(SYS_EXIT_EXTENDED, args);
    }
}

int32_t em_read_file(const char *path, void *dst, uint32_t len)
{
    int32_t h = em_sys_open(path, 1u /* "rb" */);
    int32_t flen;
    int32_t left;
    if (h < 0) {
        return -1;
    }
    flen = em_sys_flen(h);
    if (flen < 0 || (uint32_t)flen != len) {
        (void)em_sys_close(h);
        return -2;
    }
    left = len ? em_sys_read(h, dst, len) : 0;
    (void)em_sys_close(h);
    return left == 0 ? 0 : -3;
}
#endif /* EM_DEVICE */

/* ==== output channel ===================================================================== */
/* Semihosting (SYS_WRITE0) by default; with EM_CONSOLE_UART the board's serial port 0 (profiling builds:
 * the host reads it with pyserial, from a real board's USB serial or from QEMU's serial socket). On the
 * UART every line ends in " *hh", the XOR of its bytes, so the host can drop lines damaged in transit. */

#define EM_OUT_BUF 192u
static char em_out_buf[EM_OUT_BUF];
static uint32_t em_out_len;

#if defined(EM_CONSOLE_UART)
#if defined(EM_UART_CMSDK)
/* CMSDK APB UART: DATA, STATE (bit0 TX full, bit1 RX full), CTRL (bit0 TX enable, bit1 RX enable), BAUDDIV */
#define UART_DATA EM_REG(EM_UART_BASE + 0x00u)
#define UART_STATE EM_REG(EM_UART_BASE + 0x04u)
#define UART_CTRL EM_REG(EM_UART_BASE + 0x08u)
#define UART_BAUDDIV EM_REG(EM_UART_BASE + 0x10u)
#define UART_TX_READY() ((UART_STATE & 1u) == 0u)
#define UART_RX_READY() ((UART_STATE & 2u) != 0u)
#define UART_TX UART_DATA
#define UART_RX UART_DATA

void em_console_init(void)
{
    UART_BAUDDIV = 16u; /* the smallest legal divider */
    UART_CTRL = 0x3u;
}
#elif defined(EM_UART_STM32_USART)
/* STM32 USART (F2/F4 register layout): SR (bit7 TXE, bit5 RXNE), DR, BRR, CR1 (UE, TE, RE) */
#define UART_SR EM_REG(EM_UART_BASE + 0x00u)
#define UART_DATA EM_REG(EM_UART_BASE + 0x04u)
#define UART_BRR EM_REG(EM_UART_BASE + 0x08u)
#define UART_CR1 EM_REG(EM_UART_BASE + 0x0Cu)
#define UART_TX_READY() ((UART_SR & (1u << 7)) != 0u)
#define UART_RX_READY() ((UART_SR & (1u << 5)) != 0u)
#define UART_TX UART_DATA
#define UART_RX UART_DATA
#ifndef EM_UART_BRR
#define EM_UART_BRR 0x16Du /* 115200 baud at 42 MHz APB (QEMU ignores it) */
#endif

void em_console_init(void)
{
    UART_BRR = EM_UART_BRR;
    UART_CR1 = (1u << 13) | (1u << 3) | (1u << 2);
}
#elif defined(EM_UART_STM32_USART_V2)
/* STM32 USART, F0/F3/F7/H7/L4 register layout: CR1 (bit0 UE, bit2 RE, bit3 TE), BRR, ISR (bit7 TXE, bit5 RXNE),
 * RDR, TDR. BRR = kernel clock / baud (16x oversampling); the board file gives it for the clock after reset. */
#define UART_CR1 EM_REG(EM_UART_BASE + 0x00u)
#define UART_BRR EM_REG(EM_UART_BASE + 0x0Cu)
#define UART_ISR EM_REG(EM_UART_BASE + 0x1Cu)
#define UART_RX EM_REG(EM_UART_BASE + 0x24u)
#define UART_TX EM_REG(EM_UART_BASE + 0x28u)
#define UART_TX_READY() ((UART_ISR & (1u << 7)) != 0u)
#define UART_RX_READY() ((UART_ISR & (1u << 5)) != 0u)
#ifndef EM_UART_BRR
#error "EM_UART_STM32_USART_V2 needs EM_UART_BRR (the board file's [device] uart_brr)"
#endif

void em_console_init(void)
{
    UART_CR1 = 0u;
    UART_BRR = EM_UART_BRR;
    UART_CR1 = (1u << 3) | (1u << 2) | 1u;
}
#elif defined(EM_UART_NRF51)
/* nRF51 UART: tasks STARTRX/STARTTX, events RXDRDY/TXDRDY, ENABLE (4 = on), RXD, TXD */
#define NRF_UART_STARTRX EM_REG(EM_UART_BASE + 0x000u)
#define NRF_UART_STARTTX EM_REG(EM_UART_BASE + 0x008u)
#define NRF_UART_RXDRDY EM_REG(EM_UART_BASE + 0x108u)
#define NRF_UART_TXDRDY EM_REG(EM_UART_BASE + 0x11Cu)
#define NRF_UART_ENABLE EM_REG(EM_UART_BASE + 0x500u)
#define NRF_UART_RXD EM_REG(EM_UART_BASE + 0x518u)
#define NRF_UART_TXD EM_REG(EM_UART_BASE + 0x51Cu)

void em_console_init(void)
{
    NRF_UART_ENABLE = 4u;
    NRF_UART_STARTTX = 1u;
    NRF_UART_STARTRX = 1u;
}

static void em_uart_putc(char c)
{
    NRF_UART_TXDRDY = 0u;
    NRF_UART_TXD = (uint32_t)(uint8_t)c;
    while (NRF_UART_TXDRDY == 0u) {
    }
}

int32_t em_console_getc(void)
{
    while (NRF_UART_RXDRDY == 0u) {
    }
    NRF_UART_RXDRDY = 0u;
    return (int32_t)(NRF_UART_RXD & 0xFFu);
}
#else
#error "EM_CONSOLE_UART needs a UART kind: EM_UART_CMSDK, EM_UART_STM32_USART, EM_UART_STM32_USART_V2 or EM_UART_NRF51"
#endif

#if defined(UART_TX_READY)
static void em_uart_putc(char c)
{
    while (!UART_TX_READY()) {
    }
    UART_TX = (uint32_t)(uint8_t)c;
}

int32_t em_console_getc(void)
{
    while (!UART_RX_READY()) {
    }
    return (int32_t)(UART_RX & 0xFFu);
}
#endif

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

#define NVIC_ISER0 0xE000E100u

#if defined(EM_TIMER_NRF51) || defined(EM_TIMER_DWT)
/* A free-running 32-bit up counter read as 64 bits: a value below the previous read has wrapped once. Holds
 * while the counter is read at least once per wrap (the profiling main reads it after every step). */
static uint32_t em_wrap_last;
static uint32_t em_wrap_count;

static void em_wrap_reset(void)
{
    em_wrap_last = 0u;
    em_wrap_count = 0u;
}

static uint64_t em_extend32(uint32_t v)
{
    if (v < em_wrap_last) {
        em_wrap_count++;
    }
    em_wrap_last = v;
    return ((uint64_t)em_wrap_count << 32) | v;
}
#endif

#if defined(EM_TIMER_CMSDK)
/* CMSDK APB timer: 32-bit down counter; every wrap (RELOAD=0xFFFFFFFF -> period 2^32) raises its IRQ,
 * which extends the count to 64 bits. At 25 MHz a wrap happens every ~172 s of virtual time, so the
 * interrupt practically never lands inside a measurement, but a long run is still counted exactly. */
#define CMSDK_CTRL EM_REG(EM_TIMER_BASE + 0x00u)
#define CMSDK_VALUE EM_REG(EM_TIMER_BASE + 0x04u)
#define CMSDK_RELOAD EM_REG(EM_TIMER_BASE + 0x08u)
#define CMSDK_INTCLEAR EM_REG(EM_TIMER_BASE + 0x0Cu)

static volatile uint32_t em_timer_wraps;
static uint64_t em_timer_origin;

void em_timer_irq_handler(void)
{
    CMSDK_INTCLEAR = 1u;
    em_timer_wraps = em_timer_wraps + 1u;
    __asm__ volatile("dsb" ::: "memory");
}

static uint64_t em_timer_raw(void)
{
    uint32_t w;
    uint32_t v;
    do {
        w = em_timer_wraps;
        v = CMSDK_VALUE;
    } while (w != em_timer_wraps);
    return ((uint64_t)w << 32) + (uint64_t)(0xFFFFFFFFu - v);
}

void em_timer_start(void)
{
    CMSDK_CTRL = 0u;
    CMSDK_INTCLEAR = 1u;
    CMSDK_RELOAD = 0xFFFFFFFFu;
#ifdef EM_TIMER_PRELOAD_TICKS
    CMSDK_VALUE = (uint32_t)(EM_TIMER_PRELOAD_TICKS);
#else
    CMSDK_VALUE = 0xFFFFFFFFu;
#endif
    em_timer_wraps = 0u;
    EM_REG(NVIC_ISER0 + 4u * ((uint32_t)(EM_TIMER_IRQ) / 32u)) = 1u << ((uint32_t)(EM_TIMER_IRQ) % 32u);
    CMSDK_CTRL = 0x1u | 0x8u; /* enable, interrupt enable */
    em_timer_origin = em_timer_raw();
}

uint64_t em_timer_ticks(void)
{
    return em_timer_raw() - em_timer_origin;
}

#elif defined(EM_TIMER_STM32_PAIR)
/* Two 32-bit STM32 general-purpose timers (e.g. TIM2 + TIM5) on the same clock: the fine one counts every
 * tick, the coarse one every (PSC+1) ticks. The fine delta is exact modulo 2^32, the coarse delta tells how
 * many times the fine counter wrapped (its error, a few coarse ticks, is far below 2^31). No interrupt. */
#define TIM_CR1 0x00u
#define TIM_SR 0x10u
#define TIM_EGR 0x14u
#define TIM_CNT 0x24u
#define TIM_PSC 0x28u
#define TIM_ARR 0x2Cu

static uint32_t em_fine0;
static uint32_t em_coarse0;

static void em_tim_setup(uint32_t base, uint32_t psc, uint32_t cnt)
{
    EM_REG(base + TIM_CR1) = 0u;
    EM_REG(base + TIM_PSC) = psc;
    EM_REG(base + TIM_ARR) = 0xFFFFFFFFu;
    EM_REG(base + TIM_EGR) = 1u; /* UG: load the prescaler, counter = 0 */
    EM_REG(base + TIM_SR) = 0u;
    EM_REG(base + TIM_CNT) = cnt;
}

void em_timer_irq_handler(void)
{
}

void em_timer_start(void)
{
#ifdef EM_TIMER_PRELOAD_TICKS
    em_tim_setup(EM_TIMER_BASE, 0u, 0u - (uint32_t)(EM_TIMER_PRELOAD_TICKS));
#else
    em_tim_setup(EM_TIMER_BASE, 0u, 0u);
#endif
    em_tim_setup(EM_TIMER_COARSE_BASE, EM_TIMER_COARSE_PSC, 0u);
    EM_REG(EM_TIMER_COARSE_BASE + TIM_CR1) = 1u;
    EM_REG(EM_TIMER_BASE + TIM_CR1) = 1u;
    em_fine0 = EM_REG(EM_TIMER_BASE + TIM_CNT);
    em_coarse0 = EM_REG(EM_TIMER_COARSE_BASE + TIM_CNT);
}

/* Width of the fine counter; tests set it lower to make the coarse counter resolve frequent wraps. */
#ifndef EM_TIMER_FINE_BITS
#define EM_TIMER_FINE_BITS 32
#endif
#define EM_FINE_MOD ((uint64_t)1 << (EM_TIMER_FINE_BITS))

uint64_t em_timer_ticks(void)
{
    uint32_t fine = (EM_REG(EM_TIMER_BASE + TIM_CNT) - em_fine0) & (uint32_t)(EM_FINE_MOD - 1u);
    uint32_t coarse = EM_REG(EM_TIMER_COARSE_BASE + TIM_CNT) - em_coarse0;
    uint64_t approx = (uint64_t)coarse * ((uint64_t)(EM_TIMER_COARSE_PSC) + 1u);
    /* approx - fine = k * 2^bits + error, |error| <= a few coarse ticks << 2^(bits-1): round to the nearest k */
    uint64_t k = (approx + EM_FINE_MOD / 2u - (uint64_t)fine) >> (EM_TIMER_FINE_BITS);
    return (k << (EM_TIMER_FINE_BITS)) + fine;
}

#elif defined(EM_TIMER_NRF51)
/* nRF51 TIMER0 in 32-bit timer mode at 16 MHz (prescaler 0), read through a CAPTURE task. The count wraps
 * every 268 s (2.7e11 instructions under -icount shift=0); reads extend it to 64 bits, which holds as long as
 * the counter is read at least once per wrap. */
#define NRF_TIMER_TASKS_START 0x000u
#define NRF_TIMER_TASKS_STOP 0x004u
#define NRF_TIMER_TASKS_CLEAR 0x00Cu
#define NRF_TIMER_TASKS_CAPTURE0 0x040u
#define NRF_TIMER_MODE 0x504u
#define NRF_TIMER_BITMODE 0x508u
#define NRF_TIMER_PRESCALER 0x510u
#define NRF_TIMER_CC0 0x540u

static uint32_t em_nrf_origin;

static uint32_t em_nrf_capture(void)
{
    EM_REG(EM_TIMER_BASE + NRF_TIMER_TASKS_CAPTURE0) = 1u;
    return EM_REG(EM_TIMER_BASE + NRF_TIMER_CC0);
}

void em_timer_irq_handler(void)
{
}

void em_timer_start(void)
{
    EM_REG(EM_TIMER_BASE + NRF_TIMER_TASKS_STOP) = 1u;
    EM_REG(EM_TIMER_BASE + NRF_TIMER_MODE) = 0u;    /* timer */
    EM_REG(EM_TIMER_BASE + NRF_TIMER_BITMODE) = 3u; /* 32 bit */
    EM_REG(EM_TIMER_BASE + NRF_TIMER_PRESCALER) = 0u;
    EM_REG(EM_TIMER_BASE + NRF_TIMER_TASKS_CLEAR) = 1u;
    EM_REG(EM_TIMER_BASE + NRF_TIMER_TASKS_START) = 1u;
    em_nrf_origin = em_nrf_capture();
    em_wrap_reset();
}

uint64_t em_timer_ticks(void)
{
    return em_extend32(em_nrf_capture() - em_nrf_origin);
}

#elif defined(EM_TIMER_DWT)
/* The core's cycle counter (DWT CYCCNT) of a Cortex-M3/M4/M7 board: ticks are core clock cycles. It wraps
 * every 2^32 cycles (20 s at 216 MHz); em_extend32 counts the wraps. */
#define DEMCR 0xE000EDFCu
#define DWT_CTRL 0xE0001000u
#define DWT_CYCCNT 0xE0001004u
#define DWT_LAR 0xE0001FB0u

void em_timer_irq_handler(void)
{
}

void em_timer_start(void)
{
    EM_REG(DEMCR) |= 1u << 24;     /* TRCENA: power the DWT */
    EM_REG(DWT_LAR) = 0xC5ACCE55u; /* software unlock (Cortex-M7; no effect where there is no lock) */
    EM_REG(DWT_CYCCNT) = 0u;
    EM_REG(DWT_CTRL) |= 1u; /* CYCCNTENA */
    em_wrap_reset();
}

uint64_t em_timer_ticks(void)
{
    return em_extend32(EM_REG(DWT_CYCCNT));
}

#else
#error "no timer kind: define EM_TIMER_CMSDK, EM_TIMER_STM32_PAIR, EM_TIMER_NRF51 or EM_TIMER_DWT"
#endif

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
    {1u << 19, "no_coprocessor"},              {1u << 24, "unaligned_access"},
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
     * exception entry itself cannot push its frame (stacking error) */
    uint32_t overflow = stacking != 0u || fp < stack_lo;
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
