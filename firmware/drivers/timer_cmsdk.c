/*
 * Timer driver: CMSDK APB timer (MPS2 boards under QEMU), a 32-bit down counter at EM_TIMER_BASE. Every wrap
 * (RELOAD=0xFFFFFFFF -> period 2^32) raises IRQ EM_TIMER_IRQ, which extends the count to 64 bits. At 25 MHz a
 * wrap happens every ~172 s of virtual time, so the interrupt practically never lands inside a measurement,
 * but a long run is still counted exactly. Board file: [qemu.timer] kind = "cmsdk" (base, hz, irq).
 */
#include "em_runtime.h"

#include <stdint.h>

#ifndef EM_TIMER_IRQ
#error "the cmsdk timer driver needs EM_TIMER_IRQ (the board file's [qemu.timer] irq)"
#endif

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define NVIC_ISER0 0xE000E100u
#define CMSDK_CTRL EM_REG(EM_TIMER_BASE + 0x00u)
#define CMSDK_VALUE EM_REG(EM_TIMER_BASE + 0x04u)
#define CMSDK_RELOAD EM_REG(EM_TIMER_BASE + 0x08u)
#define CMSDK_INTCLEAR EM_REG(EM_TIMER_BASE + 0x0Cu)

static volatile uint32_t em_timer_wraps;
static uint32_t em_timer_origin; /* read right after the start, before any wrap: 32 bits hold it */

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
    em_timer_origin = (uint32_t)em_timer_raw();
}

uint64_t em_timer_ticks(void)
{
    return em_timer_raw() - (uint64_t)em_timer_origin;
}
