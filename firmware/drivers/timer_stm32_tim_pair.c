/*
 * Timer driver: two 32-bit STM32 general-purpose timers (e.g. TIM2 + TIM5) on the same clock. The fine one
 * (EM_TIMER_BASE) counts every tick, the coarse one (EM_TIMER_COARSE_BASE) every EM_TIMER_COARSE_PSC+1 ticks.
 * The fine delta is exact modulo 2^32, the coarse delta tells how many times the fine counter wrapped (its
 * error, a few coarse ticks, is far below 2^31). No interrupt.
 * Board file: [qemu.timer] kind = "stm32_tim_pair" (base, hz, coarse_base, coarse_prescaler).
 */
#include "em_runtime.h"

#include <stdint.h>

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define TIM_CR1 0x00u
#define TIM_SR 0x10u
#define TIM_EGR 0x14u
#define TIM_CNT 0x24u
#define TIM_PSC 0x28u
#define TIM_ARR 0x2Cu

/* Width of the fine counter; tests set it lower to make the coarse counter resolve frequent wraps. */
#ifndef EM_TIMER_FINE_BITS
#define EM_TIMER_FINE_BITS 32
#endif
#define EM_FINE_MOD ((uint64_t)1 << (EM_TIMER_FINE_BITS))

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

uint64_t em_timer_ticks(void)
{
    uint32_t fine = (EM_REG(EM_TIMER_BASE + TIM_CNT) - em_fine0) & (uint32_t)(EM_FINE_MOD - 1u);
    uint32_t coarse = EM_REG(EM_TIMER_COARSE_BASE + TIM_CNT) - em_coarse0;
    uint64_t approx = (uint64_t)coarse * ((uint64_t)(EM_TIMER_COARSE_PSC) + 1u);
    /* approx - fine = k * 2^bits + error, |error| <= a few coarse ticks << 2^(bits-1): round to the nearest k */
    uint64_t k = (approx + EM_FINE_MOD / 2u - (uint64_t)fine) >> (EM_TIMER_FINE_BITS);
    return (k << (EM_TIMER_FINE_BITS)) + fine;
}
