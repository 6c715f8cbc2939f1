/* Minimal Cortex-M startup of the test application: copy .data, zero .bss, enable the FPU, call main. */
#include <stdint.h>

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[], __stack_top[];
int main(void);
void reset_handler(void);

__attribute__((section(".vectors"), used)) static void (*const vectors[2])(void) = {
    (void (*)(void))__stack_top, reset_handler,
};

void reset_handler(void)
{
    uint32_t *src = __data_load;
    uint32_t *dst;
    for (dst = __data_start; dst < __data_end; dst++) {
        *dst = *src++;
    }
    for (dst = __bss_start; dst < __bss_end; dst++) {
        *dst = 0u;
    }
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10 and CP11 full access (the FPU) */
    __asm volatile("dsb\n\tisb");
    (void)main();
    for (;;) {
    }
}
