/*
 * Host link of a QEMU image: ARM semihosting (the debugger, here QEMU, serves it) for the console, the input
 * files and the exit code. Chosen for every QEMU stand-in image (edgemem/target/image.py).
 */
#include "em_runtime.h"

#include <stdint.h>

#if defined(EM_DEVICE)
#error "host_semihosting.c is the QEMU image's host link; a board image (EM_DEVICE) uses host_serial.c"
#endif

#define SYS_OPEN 0x01u
#define SYS_CLOSE 0x02u
#define SYS_WRITE0 0x04u
#define SYS_READ 0x06u
#define SYS_FLEN 0x0Cu
#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

int32_t em_semihost(uint32_t op, void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return (int32_t)r0;
}

static uint32_t em_strlen(const char *s)
{
    uint32_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

int32_t em_sys_open(const char *path, uint32_t mode)
{
    uint32_t args[3];
    args[0] = (uint32_t)(uintptr_t)path;
    args[1] = mode;
    args[2] = em_strlen(path);
    return em_semihost(SYS_OPEN, args);
}

int32_t em_sys_close(int32_t handle)
{
    uint32_t args[1];
    args[0] = (uint32_t)handle;
    return em_semihost(SYS_CLOSE, args);
}

int32_t em_sys_read(int32_t handle, void *buf, uint32_t len)
{
    uint32_t args[3];
    args[0] = (uint32_t)handle;
    args[1] = (uint32_t)(uintptr_t)buf;
    args[2] = len;
    return em_semihost(SYS_READ, args);
}

int32_t em_sys_flen(int32_t handle)
{
    uint32_t args[1];
    args[0] = (uint32_t)handle;
    return em_semihost(SYS_FLEN, args);
}

void em_sys_write0(const char *s)
{
    (void)em_semihost(SYS_WRITE0, (void *)(uintptr_t)s);
}

void em_exit(int32_t code)
{
    uint32_t args[2];
    em_flush();
    args[0] = ADP_STOPPED_APPLICATION_EXIT;
    args[1] = (uint32_t)code;
    for (;;) {
        (void)em_semihost(SYS_EXIT_EXTENDED, args);
    }
}

int32_t em_read_file(const char *path, void *dst, uint32_t len)
{
    int32_t h = em_sys_open(path, 1u /* "rb" */);
    int32_t flen;
    int32_t left;
    if (h < 0) {
        return -1;
    }
    flen = em_sys_flen(h);
    if (flen < 0 || (uint32_t)flen != len) {
        (void)em_sys_close(h);
        return -2;
    }
    left = len ? em_sys_read(h, dst, len) : 0;
    (void)em_sys_close(h);
    return left == 0 ? 0 : -3;
}
