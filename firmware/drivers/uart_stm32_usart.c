/*
 * UART driver: STM32 USART, F1/F2/F4 register layout. Registers at EM_UART_BASE: SR (bit7 TXE, bit5 RXNE),
 * DR, BRR, CR1 (UE, TE, RE). Board file: kind = "stm32_usart" in [qemu.uart], or uart = "stm32_usart" in
 * [device] (with uart_brr for the clock after reset).
 */
#include "em_runtime.h"

#include <stdint.h>

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define UART_SR EM_REG(EM_UART_BASE + 0x00u)
#define UART_DR EM_REG(EM_UART_BASE + 0x04u)
#define UART_BRR EM_REG(EM_UART_BASE + 0x08u)
#define UART_CR1 EM_REG(EM_UART_BASE + 0x0Cu)
#ifndef EM_UART_BRR
#define EM_UART_BRR 0x16Du /* 115200 baud at 42 MHz APB (QEMU ignores it) */
#endif

void em_uart_init(void)
{
    UART_BRR = EM_UART_BRR;
    UART_CR1 = (1u << 13) | (1u << 3) | (1u << 2);
}

void em_uart_putc(char c)
{
    while ((UART_SR & (1u << 7)) == 0u) {
    }
    UART_DR = (uint32_t)(uint8_t)c;
}

int32_t em_uart_getc(void)
{
    while ((UART_SR & (1u << 5)) == 0u) {
    }
    return (int32_t)(UART_DR & 0xFFu);
}
