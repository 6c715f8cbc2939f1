/*
 * Host link of a real board's image: no debugger to talk to. It reports over the UART (EM_CONSOLE_UART) with
 * its inputs in flash (EM_INPUTS_EMBEDDED), says how it ended, and idles. Chosen for every board image
 * (edgemem/target/image.py, device_image).
 */
#include "em_runtime.h"

#include <stdint.h>

#if !defined(EM_CONSOLE_UART) || !defined(EM_INPUTS_EMBEDDED)
#error "a board image reports over the UART with its inputs in flash: EM_CONSOLE_UART and EM_INPUTS_EMBEDDED"
#endif

void em_exit(int32_t code)
{
    em_puts("EDGEMEM exit ");
    em_put_i32(code);
    em_puts("\n");
    em_flush();
    for (;;) {
        __asm__ volatile("wfi");
    }
}
