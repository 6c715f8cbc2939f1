/*
 * UART driver: STM32 USART, F0/F3/F7/H7/L4 register layout. Registers at EM_UART_BASE: CR1 (bit0 UE, bit2 RE,
 * bit3 TE), BRR, ISR (bit7 TXE, bit5 RXNE), RDR, TDR. BRR = kernel clock / baud (16x oversampling); the board
 * file gives it for the clock after reset. Board file: uart = "stm32_usart_v2" in [device].
 */
#include "em_runtime.h"

#include <stdint.h>

#ifndef EM_UART_BRR
#error "the stm32_usart_v2 driver needs EM_UART_BRR (the board file's [device] uart_brr)"
#endif

#define EM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define UART_CR1 EM_REG(EM_UART_BASE + 0x00u)
#define UART_BRR EM_REG(EM_UART_BASE + 0x0Cu)
#define UART_ISR EM_REG(EM_UART_BASE + 0x1Cu)
#define UART_RDR EM_REG(EM_UART_BASE + 0x24u)
#define UART_TDR EM_REG(EM_UART_BASE + 0x28u)

void em_uart_init(void)
{
    UART_CR1 = 0u;
    UART_BRR = EM_UART_BRR;
    UART_CR1 = (1u << 3) | (1u << 2) | 1u;
}

void em_uart_putc(char c)
{
    while ((UART_ISR & (1u << 7)) == 0u) {
    }
    UART_TDR = (uint32_t)(uint8_t)c;
}

int32_t em_uart_getc(void)
{
    while ((UART_ISR & (1u << 5)) == 0u) {
    }
    return (int32_t)(UART_RDR & 0xFFu);
}
