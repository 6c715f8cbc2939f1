/*
 * UART driver: CMSDK APB UART (the MPS2 boards' serial 0 under QEMU). Registers at EM_UART_BASE: DATA,
 * STATE (bit0 TX full, bit1 RX full), CTRL (bit0 TX enable, bit1 RX enable), BAUDDIV.
 * Board file: kind = "cmsdk" in [qemu.uart].
 */
#include "em_runtime.h"

#include <stdint.h>

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define UART_DATA EM_REG(EM_UART_BASE + 0x00u)
#define UART_STATE EM_REG(EM_UART_BASE + 0x04u)
#define UART_CTRL EM_REG(EM_UART_BASE + 0x08u)
#define UART_BAUDDIV EM_REG(EM_UART_BASE + 0x10u)

void em_uart_init(void)
{
    UART_BAUDDIV = 16u; /* the smallest legal divider */
    UART_CTRL = 0x3u;
}

void em_uart_putc(char c)
{
    while ((UART_STATE & 1u) != 0u) {
    }
    UART_DATA = (uint32_t)(uint8_t)c;
}

int32_t em_uart_getc(void)
{
    while ((UART_STATE & 2u) == 0u) {
    }
    return (int32_t)(UART_DATA & 0xFFu);
}
