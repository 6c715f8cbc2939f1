/*
 * UART driver: nRF51/nRF52 UART. Registers at EM_UART_BASE: tasks STARTRX/STARTTX, events RXDRDY/TXDRDY,
 * ENABLE (4 = on), RXD, TXD. Board file: kind = "nrf51" in [qemu.uart], or uart = "nrf51" in [device].
 */
#include "em_runtime.h"

#include <stdint.h>

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define NRF_UART_STARTRX EM_REG(EM_UART_BASE + 0x000u)
#define NRF_UART_STARTTX EM_REG(EM_UART_BASE + 0x008u)
#define NRF_UART_RXDRDY EM_REG(EM_UART_BASE + 0x108u)
#define NRF_UART_TXDRDY EM_REG(EM_UART_BASE + 0x11Cu)
#define NRF_UART_ENABLE EM_REG(EM_UART_BASE + 0x500u)
#define NRF_UART_RXD EM_REG(EM_UART_BASE + 0x518u)
#define NRF_UART_TXD EM_REG(EM_UART_BASE + 0x51Cu)

void em_uart_init(void)
{
    NRF_UART_ENABLE = 4u;
    NRF_UART_STARTTX = 1u;
    NRF_UART_STARTRX = 1u;
}

void em_uart_putc(char c)
{
    NRF_UART_TXDRDY = 0u;
    NRF_UART_TXD = (uint32_t)(uint8_t)c;
    while (NRF_UART_TXDRDY == 0u) {
    }
}

int32_t em_uart_getc(void)
{
    while (NRF_UART_RXDRDY == 0u) {
    }
    NRF_UART_RXDRDY = 0u;
    return (int32_t)(NRF_UART_RXD & 0xFFu);
}
