/*
 * Timer driver: the core's cycle counter (DWT CYCCNT) of a Cortex-M3/M4/M7 board: ticks are core clock
 * cycles. It wraps every 2^32 cycles (20 s at 216 MHz); em_extend32 counts the wraps.
 * Board file: ticks = "dwt" in [device].
 */
#include "em_runtime.h"

#include <stdint.h>

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define DEMCR 0xE000EDFCu
#define DWT_CTRL 0xE0001000u
#define DWT_CYCCNT 0xE0001004u
#define DWT_LAR 0xE0001FB0u

static struct em_wrap em_wrap;

void em_timer_irq_handler(void)
{
}

void em_timer_start(void)
{
    EM_REG(DEMCR) |= 1u << 24;     /* TRCENA: power the DWT */
    EM_REG(DWT_LAR) = 0xC5ACCE55u; /* software unlock (Cortex-M7; no effect where there is no lock) */
    EM_REG(DWT_CYCCNT) = 0u;
    EM_REG(DWT_CTRL) |= 1u; /* CYCCNTENA */
    em_wrap.last = 0u;
    em_wrap.count = 0u;
}

uint64_t em_timer_ticks(void)
{
    return em_extend32(&em_wrap, EM_REG(DWT_CYCCNT));
}
