/* Embeds the images built from drv_kernels.cu into each driver-API program
 * (paths come from CMake as DRV_FATBIN_PATH / DRV_PTX_PATH), so every program
 * is a single file. The PTX gets a terminating NUL for cuLinkAddData. */
#ifndef DRV_FATBIN_PATH
#error "DRV_FATBIN_PATH must name the fatbin built from drv_kernels.cu"
#endif
__asm__(".section .rodata\n"
        ".global drv_fatbin\n"
        ".balign 16\n"
        "drv_fatbin:\n"
        ".incbin \"" DRV_FATBIN_PATH "\"\n"
        ".global drv_ptx\n"
        ".balign 16\n"
        "drv_ptx:\n"
        ".incbin \"" DRV_PTX_PATH "\"\n"
        ".byte 0\n"
        ".previous\n");
