/*
 * edgemem firmware runtime: output channel, host link, timer, memory painting, faults.
 *
 * The platform layer is three drivers, one file each in firmware/drivers/, behind the interfaces below; the
 * board file picks them (edgemem/target/image.py copies only those into the project):
 *   host link  host_semihosting.c (QEMU images) | host_serial.c (real-board images)
 *   timer      timer_<kind>.c: cmsdk, stm32_tim_pair, nrf51, sse_counter ([qemu.timer] kind) | dwt ([device] ticks)
 *   UART       uart_<kind>.c: cmsdk, stm32_usart, stm32_usart_v2, nrf51 ([qemu.uart] kind, [device] uart)
 * A new board peripheral is a new driver file, not a new #ifdef branch.
 *
 * Board-specific values come in as -D macros generated from the board's TOML (see the Makefile):
 *   EM_BOARD_NAME, EM_HAS_FPU, EM_TIMER_BASE, EM_TIMER_IRQ (cmsdk), EM_TIMER_COARSE_BASE / EM_TIMER_COARSE_PSC
 *   (stm32_tim_pair), EM_UART_BASE, EM_UART_BRR (STM32 board images), EM_TICK_NUM / EM_TICK_DEN (instructions
 *   per tick), EM_TICK_CYCLES (ticks are core cycles), EM_DEVICE (a real-board image), EM_NUM_IRQS,
 *   EM_MPU_NREGIONS, EM_MPU_RBAR_<i> / EM_MPU_RASR_<i>.
 * Optional: EM_TIMER_PRELOAD_TICKS (start the counter that many ticks before it wraps; tests use it),
 * EM_TIMER_FINE_BITS (stm32_tim_pair: treat the fine counter as this many bits wide; tests use 20).
 */
#ifndef EM_RUNTIME_H
#define EM_RUNTIME_H

#include <stdint.h>

#ifndef EM_BOARD_NAME
#error "EM_BOARD_NAME must be defined (-DEM_BOARD_NAME=\"...\"); build with the generated Makefile"
#endif

/* Exit codes (besides a non-zero edgemem_run status, which is passed through). */
#define EM_EXIT_OK 0
#define EM_EXIT_NONDETERMINISTIC 3
#define EM_EXIT_INPUT 4
#define EM_EXIT_FAULT 5

/* Paint values. The stack is painted with EM_STACK_PAINT at reset. */
#define EM_STACK_PAINT 0xA5u
#define EM_STACK_PAINT_WORD 0xA5A5A5A5u

/* ---- linker symbols (templates/linker.ld.j2) ---------------------------------------------- */
extern uint32_t __em_stack_start[]; /* lowest stack address (bottom of the default RAM region) */
extern uint32_t __em_stack_end[];   /* initial SP */
extern uint32_t __em_data_load[];
extern uint32_t __em_data_start[];
extern uint32_t __em_data_end[];
extern uint32_t __em_bss_start[];
extern uint32_t __em_bss_end[];

/* ---- output channel (semihosting SYS_WRITE0, or the UART with EM_CONSOLE_UART; buffered) ---- */
void em_puts(const char *s);
void em_put_u64(uint64_t v);
void em_put_i32(int32_t v);
void em_put_hex32(uint32_t v);                      /* 0x%08x */
void em_put_hex_bytes(const uint8_t *p, uint32_t n); /* lowercase, no separators */
void em_flush(void);
void em_console_init(void);   /* set up the UART (EM_CONSOLE_UART builds); nothing for semihosting */
int32_t em_console_getc(void); /* EM_CONSOLE_UART builds only: wait for one received byte */
/* "EDGEMEM stat <key>=<value>\n" */
void em_stat(const char *key, uint64_t value);
void em_stat_i32(const char *key, int32_t value);

/* ---- host link (drivers/host_*.c) --------------------------------------------------------- */
/* Both: em_exit. host_semihosting.c (QEMU images) also gives the semihosting calls and em_read_file. */
int32_t em_semihost(uint32_t op, void *arg);
int32_t em_sys_open(const char *path, uint32_t mode); /* mode 1 = "rb"; returns handle or -1 */
int32_t em_sys_close(int32_t handle);
int32_t em_sys_read(int32_t handle, void *buf, uint32_t len); /* returns bytes NOT read */
int32_t em_sys_flen(int32_t handle);
void em_sys_write0(const char *s);
__attribute__((noreturn)) void em_exit(int32_t code); /* SYS_EXIT_EXTENDED */

/* Read exactly `len` bytes of host file `path` into dst. 0 ok, -1 cannot open, -2 wrong size, -3 short read. */
int32_t em_read_file(const char *path, void *dst, uint32_t len);

/* ---- timer (drivers/timer_*.c) ------------------------------------------------------------ */
void em_timer_start(void);
uint64_t em_timer_ticks(void); /* monotonic 64-bit ticks since em_timer_start */
void em_timer_irq_handler(void); /* the vector of EM_TIMER_IRQ; empty for timers without an interrupt */
/* For timer drivers: a free-running 32-bit up counter read as 64 bits. A value below the previous read has
 * wrapped once, which holds while the counter is read at least once per wrap (the profiling main reads it
 * after every step). The driver owns the state (no .bss in images whose timer does not need it). */
struct em_wrap {
    uint32_t last;
    uint32_t count;
};

static inline uint64_t em_extend32(struct em_wrap *w, uint32_t v)
{
    if (v < w->last) {
        w->count++;
    }
    w->last = v;
    return ((uint64_t)w->count << 32) | v;
}
uint64_t em_ticks_to_instructions(uint64_t ticks);

/* ---- UART (drivers/uart_*.c; used by EM_CONSOLE_UART builds) ------------------------------- */
void em_uart_init(void);
void em_uart_putc(char c); /* waits until the transmitter takes it */
int32_t em_uart_getc(void); /* waits for one received byte */

/* ---- memory measurement ------------------------------------------------------------------ */
void em_fill(uint8_t *p, uint8_t value, uint32_t n);
/* 1 + highest offset whose byte differs from `paint`, 0 if none */
uint32_t em_high_water(const uint8_t *p, uint32_t n, uint8_t paint);
/* Repaint the unused part of the stack (below the caller's frame) with `paint`. */
void em_stack_paint(uint8_t paint);
/* Bytes of stack used since the last paint with `paint` (scan from the bottom for the first changed byte). */
uint32_t em_stack_peak(uint8_t paint);
uint32_t em_stack_size(void);
uint32_t em_data_bytes(void);
uint32_t em_bss_bytes(void);

/* ---- board bring-up ----------------------------------------------------------------------- */
/* Register writes a board image makes before its UART starts (clocks, pins, baud); a QEMU image has none.
 * board_init.c, generated from the board file's [device] init table, replaces this weak empty one. */
void em_board_init(void);

/* ---- startup / faults (startup.c) -------------------------------------------------------- */
void em_fault(uint32_t *frame, uint32_t exc_return, uint32_t kind);

#endif /* EM_RUNTIME_H */
