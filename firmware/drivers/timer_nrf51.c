/*
 * Timer driver: nRF51 TIMER0 (EM_TIMER_BASE) in 32-bit timer mode at 16 MHz (prescaler 0), read through a
 * CAPTURE task. The count wraps every 268 s (2.7e11 instructions under -icount shift=0); em_extend32 counts
 * the wraps. Board file: [qemu.timer] kind = "nrf51".
 */
#include "em_runtime.h"

#include <stdint.h>

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define NRF_TIMER_TASKS_START 0x000u
#define NRF_TIMER_TASKS_STOP 0x004u
#define NRF_TIMER_TASKS_CLEAR 0x00Cu
#define NRF_TIMER_TASKS_CAPTURE0 0x040u
#define NRF_TIMER_MODE 0x504u
#define NRF_TIMER_BITMODE 0x508u
#define NRF_TIMER_PRESCALER 0x510u
#define NRF_TIMER_CC0 0x540u

static struct em_wrap em_wrap;

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
    em_wrap.last = 0u;
    em_wrap.count = 0u;
}

uint64_t em_timer_ticks(void)
{
    return em_extend32(&em_wrap, em_nrf_capture() - em_nrf_origin);
}
