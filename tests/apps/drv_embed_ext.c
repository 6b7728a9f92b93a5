/* Embeds the fatbin built from drv_kernels_ext.cu (path from CMake as
 * DRV_EXT_FATBIN_PATH) into the programs that use those kernels. */
#ifndef DRV_EXT_FATBIN_PATH
#error "DRV_EXT_FATBIN_PATH must name the fatbin built from drv_kernels_ext.cu"
#endif
__asm__(".section .rodata\n"
        ".global drv_ext_fatbin\n"
        ".balign 16\n"
        "drv_ext_fatbin:\n"
        ".incbin \"" DRV_EXT_FATBIN_PATH "\"\n"
        ".previous\n");
