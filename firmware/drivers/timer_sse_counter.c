/*
 * Timer driver: the system counter of Arm's SSE-300 subsystem (MPS3 AN547 under QEMU), a 64-bit up counter
 * clocked by the subsystem's main clock. EM_TIMER_BASE is its control frame (Secure only): CNTCR (enable) and
 * the count CNTCV as two 32-bit halves. No interrupt: 64 bits never wrap in a run. The AN547 has no CMSDK
 * APB timer at the main clock (its only one counts the 32 kHz clock), hence this counter.
 * Board file: [qemu.timer] kind = "sse_counter" (base, hz).
 */
#include "em_runtime.h"

#include <stdint.h>

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define CNT_CR EM_REG(EM_TIMER_BASE + 0x00u)
#define CNT_CV_LO EM_REG(EM_TIMER_BASE + 0x08u)
#define CNT_CV_HI EM_REG(EM_TIMER_BASE + 0x0Cu)

static uint64_t em_timer_origin;

void em_timer_irq_handler(void)
{
}

static uint64_t em_timer_raw(void)
{
    uint32_t hi;
    uint32_t lo;
    do { /* the low half may carry between the two reads */
        hi = CNT_CV_HI;
        lo = CNT_CV_LO;
    } while (hi != CNT_CV_HI);
    return ((uint64_t)hi << 32) | lo;
}

void em_timer_start(void)
{
    CNT_CR = 0u;
#ifdef EM_TIMER_PRELOAD_TICKS /* tests: the low half wraps that many ticks after the start */
    CNT_CV_HI = 0u;
    CNT_CV_LO = 0u - (uint32_t)(EM_TIMER_PRELOAD_TICKS);
#endif
    CNT_CR = 1u; /* EN; scaling (SCEN) off: one count per clock */
    em_timer_origin = em_timer_raw();
}

uint64_t em_timer_ticks(void)
{
    return em_timer_raw() - em_timer_origin;
}
