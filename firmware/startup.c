/*
 * edgemem startup for Cortex-M0/M0+ (ARMv6-M), M3/M4/M7 (ARMv7-M) and M33 (Armv8-M Mainline): vector table and
 * reset handler.
 *
 * Reset: paint the whole stack (before anything is pushed), enable the FPU if the board has one, copy .data,
 * zero .bss, program the MPU (only the flash image, the board's RAM and the used peripherals are accessible;
 * no background map, so anything else -- including the space below the stack, which sits at the bottom of
 * RAM -- faults), enable the configurable fault handlers, start the timer, call main, exit via semihosting.
 * ARMv6-M has no MPU on the boards we know (EM_MPU_NREGIONS 0), no configurable faults and, on Cortex-M0,
 * no VTOR: the vector table stays at the image's start (address 0).
 * Armv8-M (EM_STACK_LIMIT): runs in the Secure state it resets in (SAU off: all memory Secure), programs its
 * PMSAv8 MPU (base/limit regions, attributes from MAIR0) and sets MSPLIM to the stack's bottom, so the first
 * push below the stack is a UsageFault (STKOF) rather than a store the MPU has to catch.
 */
#include <stdint.h>

#include "em_runtime.h"

#ifndef EM_MPU_NREGIONS
#error "EM_MPU_NREGIONS must be defined (generated from the board TOML)"
#endif
#if EM_MPU_NREGIONS < 0 || EM_MPU_NREGIONS > 8
#error "EM_MPU_NREGIONS must be 0..8"
#endif
#ifndef EM_TIMER_IRQ
#define EM_TIMER_IRQ (-1)
#endif
#if EM_TIMER_IRQ >= 96 || (defined(EM_NUM_IRQS) && EM_NUM_IRQS > 96)
#error "the vector table has 96 external interrupts"
#endif

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define SCB_VTOR 0xE000ED08u
#define SCB_CCR 0xE000ED14u
#define SCB_SHCSR 0xE000ED24u
#define MPU_TYPE 0xE000ED90u
#define MPU_CTRL 0xE000ED94u
#define MPU_RNR 0xE000ED98u
#define MPU_RBAR 0xE000ED9Cu
#define MPU_RASR 0xE000EDA0u /* PMSAv8: MPU_RLAR at the same address */
#define MPU_MAIR0 0xE000EDC0u

int main(void);
void em_reset_c(void);
void Reset_Handler(void);
void em_nmi_handler(void);
void em_hardfault_handler(void);
void em_memmanage_handler(void);
void em_busfault_handler(void);
void em_usagefault_handler(void);
void em_default_handler(void);

/* ---- handlers ---------------------------------------------------------------------------- */

#if defined(__ARM_ARCH_6M__)
__attribute__((naked, noreturn)) void Reset_Handler(void)
{
    /* GCC writes Thumb-1 code in divided syntax: switch to unified for this block and back */
    __asm__ volatile(
        ".syntax unified\n"
        "ldr r0, =__em_stack_start\n"
        "ldr r1, =__em_stack_end\n"
        "ldr r2, =0xA5A5A5A5\n" /* EM_STACK_PAINT_WORD */
        "1: cmp r0, r1\n"
        "bhs 2f\n"
        "str r2, [r0]\n"
        "adds r0, r0, #4\n"
        "b 1b\n"
        "2: msr msp, r1\n"
        "ldr r0, =em_reset_c\n"
        "bx r0\n"
        ".syntax divided\n");
}
#else
__attribute__((naked, noreturn)) void Reset_Handler(void)
{
    __asm__ volatile(
        "ldr r0, =__em_stack_start\n"
        "ldr r1, =__em_stack_end\n"
        "ldr r2, =0xA5A5A5A5\n" /* EM_STACK_PAINT_WORD */
        "1: cmp r0, r1\n"
        "bhs 2f\n"
        "str r2, [r0], #4\n"
        "b 1b\n"
        "2: msr msp, r1\n"
#if defined(EM_STACK_LIMIT)
        "ldr r0, =__em_stack_start\n"
        "msr msplim, r0\n"
#endif
#if EM_HAS_FPU
        "ldr r0, =0xE000ED88\n" /* CPACR: full access to CP10/CP11 */
        "ldr r1, [r0]\n"
        "orr r1, r1, #0xF00000\n"
        "str r1, [r0]\n"
        "dsb\n"
        "isb\n"
#endif
        "b em_reset_c\n");
}
#endif

/* Fault entry: find the exception frame, move MSP back to the top of the stack (the fault may be a stack
 * overflow, and we only print and exit), then report in C. */
#if defined(__ARM_ARCH_6M__)
#define EM_FAULT_ENTRY(fn, kind)                                                                                   \
    __attribute__((naked, noreturn)) void fn(void)                                                                 \
    {                                                                                                              \
        __asm__ volatile(".syntax unified\n"                                                                      \
                         "movs r0, #4\n"                                                                           \
                         "mov r1, lr\n"                                                                            \
                         "tst r0, r1\n"                                                                            \
                         "bne 1f\n"                                                                                \
                         "mrs r0, msp\n"                                                                           \
                         "b 2f\n"                                                                                  \
                         "1: mrs r0, psp\n"                                                                        \
                         "2: ldr r2, =__em_stack_end\n"                                                            \
                         "msr msp, r2\n"                                                                           \
                         "movs r2, %0\n"                                                                           \
                         "ldr r3, =em_fault\n"                                                                     \
                         "bx r3\n"                                                                                 \
                         ".syntax divided\n" ::"i"(kind));                                                         \
    }
#else
#define EM_FAULT_ENTRY(fn, kind)                                                                                   \
    __attribute__((naked, noreturn)) void fn(void)                                                                 \
    {                                                                                                              \
        __asm__ volatile("tst lr, #4\n"                                                                            \
                         "ite eq\n"                                                                                \
                         "mrseq r0, msp\n"                                                                         \
                         "mrsne r0, psp\n"                                                                         \
                         "mov r1, lr\n"                                                                            \
                         "ldr r2, =__em_stack_end\n"                                                               \
                         "msr msp, r2\n"                                                                           \
                         "movs r2, %0\n"                                                                           \
                         "b em_fault\n" ::"i"(kind));                                                              \
    }

#endif

EM_FAULT_ENTRY(em_hardfault_handler, 0)
EM_FAULT_ENTRY(em_memmanage_handler, 1)
EM_FAULT_ENTRY(em_busfault_handler, 2)
EM_FAULT_ENTRY(em_usagefault_handler, 3)
EM_FAULT_ENTRY(em_nmi_handler, 4)
EM_FAULT_ENTRY(em_default_handler, 5)

/* ---- vector table ------------------------------------------------------------------------ */

typedef void (*em_handler_t)(void);

struct em_vector_table {
    uint32_t *initial_sp;
    em_handler_t handlers[15 + 96];
};

#define EM_IRQ(n) ((n) == (EM_TIMER_IRQ) ? em_timer_irq_handler : em_default_handler)
#define EM_IRQ8(b)                                                                                                 \
    EM_IRQ((b) + 0), EM_IRQ((b) + 1), EM_IRQ((b) + 2), EM_IRQ((b) + 3), EM_IRQ((b) + 4), EM_IRQ((b) + 5),          \
        EM_IRQ((b) + 6), EM_IRQ((b) + 7)

__attribute__((section(".isr_vector"), used)) const struct em_vector_table em_vectors = {
    __em_stack_end,
    {
        Reset_Handler,         /* 1 reset */
        em_nmi_handler,        /* 2 NMI */
        em_hardfault_handler,  /* 3 HardFault */
        em_memmanage_handler,  /* 4 MemManage */
        em_busfault_handler,   /* 5 BusFault */
        em_usagefault_handler, /* 6 UsageFault */
        em_default_handler,    /* 7 reserved */
        em_default_handler,    /* 8 reserved */
        em_default_handler,    /* 9 reserved */
        em_default_handler,    /* 10 reserved */
        em_default_handler,    /* 11 SVCall */
        em_default_handler,    /* 12 DebugMonitor */
        em_default_handler,    /* 13 reserved */
        em_default_handler,    /* 14 PendSV */
        em_default_handler,    /* 15 SysTick */
        EM_IRQ8(0), EM_IRQ8(8), EM_IRQ8(16), EM_IRQ8(24), EM_IRQ8(32), EM_IRQ8(40), EM_IRQ8(48), EM_IRQ8(56),
        EM_IRQ8(64), EM_IRQ8(72), EM_IRQ8(80), EM_IRQ8(88),
    },
};

/* ---- MPU --------------------------------------------------------------------------------- */

#if EM_MPU_NREGIONS > 0

/* each region's second word: MPU_RASR (PMSAv7: size, attributes, enable) or MPU_RLAR (PMSAv8: limit,
 * attribute index, enable), written to the same register address */
#if defined(EM_MPU_MAIR0)
#define EM_MPU_WORD2_0 EM_MPU_RLAR_0
#define EM_MPU_WORD2_1 EM_MPU_RLAR_1
#define EM_MPU_WORD2_2 EM_MPU_RLAR_2
#define EM_MPU_WORD2_3 EM_MPU_RLAR_3
#define EM_MPU_WORD2_4 EM_MPU_RLAR_4
#define EM_MPU_WORD2_5 EM_MPU_RLAR_5
#define EM_MPU_WORD2_6 EM_MPU_RLAR_6
#define EM_MPU_WORD2_7 EM_MPU_RLAR_7
#else
#define EM_MPU_WORD2_0 EM_MPU_RASR_0
#define EM_MPU_WORD2_1 EM_MPU_RASR_1
#define EM_MPU_WORD2_2 EM_MPU_RASR_2
#define EM_MPU_WORD2_3 EM_MPU_RASR_3
#define EM_MPU_WORD2_4 EM_MPU_RASR_4
#define EM_MPU_WORD2_5 EM_MPU_RASR_5
#define EM_MPU_WORD2_6 EM_MPU_RASR_6
#define EM_MPU_WORD2_7 EM_MPU_RASR_7
#endif

static const uint32_t em_mpu_table[EM_MPU_NREGIONS][2] = {
    {EM_MPU_RBAR_0, EM_MPU_WORD2_0},
#if EM_MPU_NREGIONS > 1
    {EM_MPU_RBAR_1, EM_MPU_WORD2_1},
#endif
#if EM_MPU_NREGIONS > 2
    {EM_MPU_RBAR_2, EM_MPU_WORD2_2},
#endif
#if EM_MPU_NREGIONS > 3
    {EM_MPU_RBAR_3, EM_MPU_WORD2_3},
#endif
#if EM_MPU_NREGIONS > 4
    {EM_MPU_RBAR_4, EM_MPU_WORD2_4},
#endif
#if EM_MPU_NREGIONS > 5
    {EM_MPU_RBAR_5, EM_MPU_WORD2_5},
#endif
#if EM_MPU_NREGIONS > 6
    {EM_MPU_RBAR_6, EM_MPU_WORD2_6},
#endif
#if EM_MPU_NREGIONS > 7
    {EM_MPU_RBAR_7, EM_MPU_WORD2_7},
#endif
};

static void em_mpu_init(void)
{
    uint32_t dregion = (EM_REG(MPU_TYPE) >> 8) & 0xFFu;
    uint32_t i;
    if (dregion < (uint32_t)EM_MPU_NREGIONS) {
        em_puts("EDGEMEM error mpu: the core has fewer MPU regions than the board needs\n");
        em_exit(EM_EXIT_FAULT);
    }
    EM_REG(MPU_CTRL) = 0u;
    for (i = 0; i < dregion; i++) {
        EM_REG(MPU_RNR) = i;
        EM_REG(MPU_RASR) = 0u; /* PMSAv8: RLAR, ENABLE cleared */
    }
#if defined(EM_MPU_MAIR0)
    EM_REG(MPU_MAIR0) = EM_MPU_MAIR0;
    for (i = 0; i < (uint32_t)EM_MPU_NREGIONS; i++) {
        EM_REG(MPU_RNR) = i; /* PMSAv8's RBAR has no VALID/REGION fields */
        EM_REG(MPU_RBAR) = em_mpu_table[i][0];
        EM_REG(MPU_RASR) = em_mpu_table[i][1];
    }
#else
    for (i = 0; i < (uint32_t)EM_MPU_NREGIONS; i++) {
        EM_REG(MPU_RBAR) = em_mpu_table[i][0]; /* VALID bit set: also selects region i */
        EM_REG(MPU_RASR) = em_mpu_table[i][1];
    }
#endif
    /* ENABLE only: no PRIVDEFENA (no background map), MPU off in HardFault/NMI so reports still work */
    EM_REG(MPU_CTRL) = 1u;
    __asm__ volatile("dsb\nisb" ::: "memory");
}
#else
static void em_mpu_init(void)
{
}
#endif

/* ---- reset, continued in C --------------------------------------------------------------- */

__attribute__((noreturn, used)) void em_reset_c(void)
{
    const uint32_t *src = __em_data_load;
    uint32_t *dst = __em_data_start;
    while (dst < __em_data_end) {
        *dst++ = *src++;
    }
    for (dst = __em_bss_start; dst < __em_bss_end; dst++) {
        *dst = 0u;
    }
#if !defined(__ARM_ARCH_6M__)
    EM_REG(SCB_VTOR) = (uint32_t)(uintptr_t)&em_vectors;
    em_mpu_init();
    EM_REG(SCB_SHCSR) |= (1u << 16) | (1u << 17) | (1u << 18); /* MemManage, BusFault, UsageFault */
    EM_REG(SCB_CCR) |= (1u << 4);                              /* trap integer divide by zero */
#else
    em_mpu_init();
#endif
    __asm__ volatile("dsb\nisb" ::: "memory");
    em_board_init();
    em_console_init();
    em_timer_start();
    em_exit(main());
}
