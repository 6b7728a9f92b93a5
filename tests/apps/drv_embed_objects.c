/* Embeds the fatbin built from drv_kernels_objects.cu (path from CMake as
 * DRV_OBJ_FATBIN_PATH) into drv_attrs and drv_texture as drv_obj_fatbin
 * (declared in drv_common.h; read-only, valid for the program's lifetime). */
#ifndef DRV_OBJ_FATBIN_PATH
#error "DRV_OBJ_FATBIN_PATH must name the fatbin built from drv_kernels_objects.cu"
#endif
__asm__(".section .rodata\n"
        ".global drv_obj_fatbin\n"
        ".balign 16\n"
        "drv_obj_fatbin:\n"
        ".incbin \"" DRV_OBJ_FATBIN_PATH "\"\n"
        ".previous\n");
